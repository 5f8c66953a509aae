"""Throughput and CPU of `jurist experiment run` against fixed-latency servers.

Starts two fixed-latency OpenAI-protocol servers (``python -m
jurist.testing.provider_server --port 0 --latency 0.2``), one the target and one
the judge, adds a dataset of ``--items`` items, and runs the same library call as
`jurist experiment run` with ``--parallel`` items in flight: each item is one
generation, then its rubrics judged at once. Prints the wall time, the ideal, their
ratio and the CPU seconds per item (this process: clients, parsing, store writes,
result files), from the first item to the end (the run's start-up is printed apart).

The ideal: an item takes two sequential calls (the generation, then the judge calls in
parallel), and ``parallel`` items are in flight, so

    ideal = ceil(items / parallel) x 2 x latency      (1,000 items, 64, 0.2 s: 16 x 0.4 s = 6.4 s)

The target's endpoint is allowed ``parallel`` calls in flight and the judge's
``parallel x rubrics``, so neither limiter is what bounds the run.

    python benchmarks/experiment_throughput.py                  # 1,000 items x 3 rubrics, 200 ms, 64 in flight
    python benchmarks/experiment_throughput.py --items 200

Target: ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rubric_throughput import WORKDIR_HELP, machine_check  # noqa: E402

from jurist.testing.provider_server import spawn  # noqa: E402


def rubrics(n: int) -> dict:
    return {"version": "1.0", "rubrics": [
        {"id": f"r{i}", "name": f"Rubric {i}", "description": "How well the assistant answers.",
         "scoring_criteria": "1 = poor, 5 = excellent"} for i in range(n)]}


def run(items: int, n_rubrics: int, latency: float, parallel: int, workdir: str | None) -> dict:
    from jurist.config import Settings
    from jurist.experiments.datasets import read_dataset
    from jurist.experiments.run import ExperimentSpec, run_experiment
    from jurist.models.openai import tls_context
    from jurist.rubrics.models import RubricSet
    from jurist.store import Store

    target_proc, target_url = spawn(latency, text="Open Settings, choose Security, then Reset password.")
    judge_proc, judge_url = spawn(latency)
    try:
        with tempfile.TemporaryDirectory(dir=workdir, prefix=".experiment-throughput-") as tmp:
            folder = Path(tmp)
            data = folder / "questions.jsonl"
            data.write_text("".join(json.dumps({"id": f"q{i:05d}", "input": f"Question {i}: how do I reset my "
                                                "password?", "expected": "Settings, Security, Reset password"})
                                    + "\n" for i in range(items)))
            settings = Settings.load(
                providers={"app": {"type": "openai", "base_url": target_url, "api_key": "bench",
                                   "max_in_flight": parallel},
                           "bench": {"type": "openai", "base_url": judge_url, "api_key": "bench",
                                     "max_in_flight": parallel * n_rubrics}},
                home=str(folder / ".jurist"), max_retries=0, timeout=30,
            )
            dataset = read_dataset(data)
            tls_context()  # one-time costs of a process, not of a run: the TLS trust store, the database
            with Store(settings.database) as store:
                store.add_dataset_version("bench", dataset.version, dataset.items, str(data))
            spec = ExperimentSpec(name="bench", dataset="bench", target="app/model",
                                  rubrics=RubricSet(**rubrics(n_rubrics)), judge="bench/judge", parallel=parallel,
                                  output_dir=folder / "out")
            marks: dict[str, object] = {}

            def on_start(record: object, todo: int) -> None:  # the items begin: what came before is start-up
                marks["cpu"], marks["wall"] = os.times(), time.perf_counter()

            wall0 = time.perf_counter()
            report = asyncio.run(run_experiment(spec, settings=settings, on_start=on_start))
            wall1 = time.perf_counter()
            cpu1 = os.times()
            cpu0 = marks["cpu"]
            startup = marks["wall"] - wall0  # type: ignore[operator]
            wall = wall1 - marks["wall"]  # type: ignore[operator]
    finally:
        for proc in (target_proc, judge_proc):
            proc.kill()
            proc.wait()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)  # type: ignore[attr-defined]
    ideal = math.ceil(items / parallel) * 2 * latency
    return {"items": items, "rubrics": n_rubrics, "calls": items * (1 + n_rubrics),
            "scored": report.record.items_scored, "failed": report.record.items_failed,
            "wall_s": round(wall, 3), "startup_s": round(startup, 3), "ideal_wall_s": round(ideal, 3), "ratio": round(wall / ideal, 3),
            "cpu_s_per_item": round(cpu / items, 5), "cpu_ms_per_call": round(cpu * 1000 / (items * (1 + n_rubrics)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--rubrics", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--parallel", type=int, default=64, help="items in flight")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--workdir", default=".", help=WORKDIR_HELP)
    args = ap.parse_args()
    check = machine_check()
    f = run(args.items, args.rubrics, args.latency, args.parallel, args.workdir)
    f["machine_check_s"] = check
    if args.json:
        print(json.dumps(f))
        return
    print(f"machine check:    {check:.3f} s of CPU for a fixed loop (lower is a faster CPU)")
    print(f"items:            {f['items']} x {f['rubrics']} rubrics: {f['calls']} calls "
          f"({f['scored']} items scored, {f['failed']} failed)")
    print(f"latency:          {args.latency * 1000:.0f} ms per call, {args.parallel} items in flight")
    print(f"wall:             {f['wall_s']:.2f} s from the first item to the end (after {f['startup_s']:.2f} s of "
          "start-up: the judge, the target, the git commit, the store's lock and record), summary.json included")
    print(f"ideal:            {f['ideal_wall_s']:.2f} s = ceil({f['items']} / {args.parallel}) x 2 sequential calls "
          f"x {args.latency:g} s")
    print(f"ratio:            {f['ratio']:.3f} (target <= 1.2)")
    print(f"CPU per item:     {f['cpu_s_per_item'] * 1000:.2f} ms ({f['cpu_ms_per_call']:.2f} ms per call)")


if __name__ == "__main__":
    main()
