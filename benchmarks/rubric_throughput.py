"""Throughput, CPU and memory of batch rubric scoring against a scripted server.

Starts the scripted OpenAI-protocol server (jurist.testing.provider_server) in
its own process with a fixed latency, generates sessions, runs the same
library call as `jurist evaluate-batch`, and prints: calls, wall seconds,
ideal wall (calls x latency / concurrency), their ratio, CPU milliseconds per
call (this process: client, parsing and store writes) and peak RSS.

    python benchmarks/rubric_throughput.py                       # 1,000 calls, 200 ms, 64 in flight
    python benchmarks/rubric_throughput.py --memory 1000 10000   # peak RSS for 1,000 vs 10,000 sessions

Targets on a 2-core machine: ratio <= 1.15, CPU <= 3 ms per call, and peak
RSS for 10,000 sessions <= 1.5 x that for 1,000.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jurist.testing.provider_server import spawn

RUBRICS = {
    "version": "1.0",
    "rubrics": [
        {"id": f"r{i}", "name": f"Rubric {i}", "description": "How well the assistant answers.",
         "scoring_criteria": "1 = poor, 5 = excellent", "weight": 1}
        for i in range(8)
    ],
}


WORKDIR_HELP = ("where the sessions, results and store go for the run (default: here). The project's 2-core "
                "machine keeps its disk on ext4 without a journal, where creating a file costs more kernel "
                "CPU the more files were deleted in the last hours (0.03 to 0.1 ms a file, up to 0.5 ms under /tmp); "
                "/dev/shm (memory) keeps that out of the figures")


def machine_check() -> float:
    """CPU seconds of a fixed pure-Python loop: how fast this machine's CPU is right now.

    The project's machine shares its CPUs; the same loop took from 0.18 to 0.65 s
    on different days, and every CPU-bound figure moves with it.
    """
    t = time.process_time()
    sum(i * i for i in range(5 * 10**6))
    return round(time.process_time() - t, 3)


def make_sessions(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        lines = [
            {"session_id": f"bench-{i:06d}", "role": "user", "content": f"Question {i}: how do I reset my password?"},
            {"role": "assistant", "content": f"Answer {i}: open Settings, choose Security, then Reset password. " * 3},
        ]
        (folder / f"bench-{i:06d}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def run(sessions: int, rubrics: int, latency: float, concurrency: int, parallel: int | None,
        workdir: str | None = None) -> dict:
    warm0 = time.perf_counter()
    import jurist.models.openai
    from jurist.config import Settings
    from jurist.rubrics import evaluate_batch
    from jurist.rubrics.models import RubricSet
    from jurist.store import Store

    startup = time.perf_counter() - warm0

    proc, base_url = spawn(latency)
    try:
        with tempfile.TemporaryDirectory(dir=workdir, prefix=".rubric-throughput-") as tmp:
            tmpdir = Path(tmp)
            make_sessions(tmpdir / "sessions", sessions)
            rubric_set = RubricSet(**{**RUBRICS, "rubrics": RUBRICS["rubrics"][:rubrics]})
            settings = Settings.load(
                providers={"bench": {"type": "openai", "base_url": base_url, "api_key": "bench"}},
                home=str(tmpdir / ".jurist"), max_retries=0, timeout=30,
            )
            # One-time costs of a process, paid before the first batch and not
            # per batch: imports, the TLS trust store, creating the database.
            warm1 = time.perf_counter()
            jurist.models.openai.tls_context()
            Store(settings.database).close()
            startup += time.perf_counter() - warm1
            cpu0, wall0 = os.times(), time.perf_counter()
            report = asyncio.run(evaluate_batch(
                rubric_set, tmpdir / "sessions", tmpdir / "out", parallel=parallel or concurrency + 16,
                max_concurrency=concurrency, judge="bench/judge", settings=settings,
            ))
            wall = time.perf_counter() - wall0
            cpu1 = os.times()
    finally:
        proc.kill()
        proc.wait()
    calls = sessions * rubrics
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    ideal = calls * latency / concurrency
    return {
        "sessions": sessions,
        "calls": calls,
        "scored": report.scored,
        "failed_evaluations": report.evaluations_failed,
        "wall_s": round(wall, 3),
        "ideal_wall_s": round(ideal, 3),
        "ratio": round(wall / ideal, 3),
        "cpu_ms_per_call": round(cpu * 1000 / calls, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "startup_s": round(startup, 3),
    }


def baseline(calls: int, latency: float, concurrency: int) -> dict:
    """The bare openai SDK (same transport, same server) sending ``calls``
    requests ``concurrency`` at a time: the floor jurist's figures sit on."""
    import openai

    proc, base_url = spawn(latency)

    async def go() -> float:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0, http_client=openai.DefaultAioHttpClient())
        todo = iter(range(calls))

        async def worker() -> None:
            for i in todo:
                await client.post("/chat/completions", cast_to=object, body={
                    "model": "judge", "messages": [{"role": "user", "content": f"Question {i}"}]})

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - start
        await client.close()
        return wall

    try:
        cpu0 = os.times()
        wall = asyncio.run(go())
        cpu1 = os.times()
    finally:
        proc.kill()
        proc.wait()
    ideal = calls * latency / concurrency
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {"calls": calls, "wall_s": round(wall, 3), "ideal_wall_s": round(ideal, 3), "ratio": round(wall / ideal, 3),
            "cpu_ms_per_call": round(cpu * 1000 / calls, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=500)
    ap.add_argument("--rubrics", type=int, default=2, help="rubrics per session (calls = sessions x rubrics)")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=None, help="sessions at once (default: concurrency + 16)")
    ap.add_argument("--memory", type=int, nargs=2, metavar=("SMALL", "LARGE"),
                    help="compare peak RSS of two batch sizes, each in a fresh process")
    ap.add_argument("--baseline", action="store_true",
                    help="also time the bare openai SDK on the same server, for comparison")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--workdir", default=".", help=WORKDIR_HELP)
    args = ap.parse_args()

    if args.memory:
        small, large = args.memory
        figures = []
        for n in (small, large):
            out = subprocess.run(
                [sys.executable, __file__, "--sessions", str(n), "--rubrics", "1", "--latency", "0.02",
                 "--concurrency", str(args.concurrency), "--workdir", args.workdir, "--json"],
                capture_output=True, text=True, check=True,
            )
            figures.append(json.loads(out.stdout.strip().splitlines()[-1]))
        for f in figures:
            print(f"sessions={f['sessions']:>6}  calls={f['calls']:>6}  wall={f['wall_s']:.1f}s  "
                  f"peak RSS={f['peak_rss_mib']:.1f} MiB")
        ratio = figures[1]["peak_rss_mib"] / figures[0]["peak_rss_mib"]
        print(f"peak RSS ratio {large}/{small} sessions: {ratio:.3f} (target <= 1.5)")
        return

    check = machine_check()
    f = run(args.sessions, args.rubrics, args.latency, args.concurrency, args.parallel, args.workdir)
    f["machine_check_s"] = check
    if args.json:
        print(json.dumps(f))
        return
    print(f"machine check:    {check:.3f} s of CPU for a fixed loop (lower is a faster CPU)")
    print(f"calls:            {f['calls']} ({f['sessions']} sessions x {args.rubrics} rubrics, "
          f"{f['failed_evaluations']} failed)")
    print(f"latency:          {args.latency * 1000:.0f} ms per call, {args.concurrency} in flight")
    print(f"wall:             {f['wall_s']:.2f} s (after {f['startup_s']:.2f} s of one-time process start-up: "
          "imports, TLS trust store, database creation)")
    print(f"ideal wall:       {f['ideal_wall_s']:.2f} s")
    print(f"ratio:            {f['ratio']:.3f} (target <= 1.15)")
    print(f"CPU per call:     {f['cpu_ms_per_call']:.2f} ms (target <= 3)")
    print(f"peak RSS:         {f['peak_rss_mib']:.1f} MiB")
    if args.baseline:
        b = baseline(f["calls"], args.latency, args.concurrency)
        print(f"bare SDK loop:    wall {b['wall_s']:.2f} s, ratio {b['ratio']:.3f}, "
              f"CPU {b['cpu_ms_per_call']:.2f} ms per call (no jurist: no prompts, parsing, store or files)")


if __name__ == "__main__":
    main()
