"""Batches against judges that fail, a poison session, and Redis permits after a kill -9.

1. Starts the benchmarks' judge server (``python -m jurist.testing.provider_server``)
   in its own process with a latency of an hour: it accepts every request and
   never answers. Scores ``--sessions`` sessions against it with the library
   call behind ``jurist evaluate-batch`` (circuit breaker on, with its default
   threshold and cool-down unless told otherwise) and prints the seconds the
   batch took, how many sessions failed at once with ``EndpointDown``, and what
   the same batch would cost with timeouts alone (computed from the settings,
   not run: every call waits its timeouts and backoffs, up to the rubric
   timeout, ``--parallel`` sessions at a time).
2. Runs ``jurist evaluate-batch`` (a subprocess, its default settings: the
   per-attempt timeout, ``rubric_timeout``, retries and breaker of a new
   ``jurist.yaml``) over ``--sessions`` sessions x 2 rubrics, 5 at once, against
   judges that fail each their own way (a ``ProviderServer`` on 127.0.0.1 in this
   process): a refused port, a server that accepts and closes the connection, one
   that accepts and never answers, one that answers 500 to everything. For each it
   prints the seconds to give up, the exit code, the sessions with a result, why
   their rubrics failed (the reasons' error types, counted) and the requests that
   reached the judge. Then it puts one poison session (its text holds a lone
   surrogate, ``"a\\ud800b"`` as written in the file) among ``--sessions`` good
   ones, judged by a server that answers, and prints how many sessions have a
   result, whether ``summary.json`` was written and the exit code.
3. Starts a process that takes every permit of an endpoint from the Redis
   limiter (the default lease), kills it with SIGKILL and prints the seconds
   until another limiter gets a permit. It uses Redis database 14 by default
   (the tests empty database 15 when they start, which would free the permits early).

    python benchmarks/dead_endpoint.py                     # 200 sessions, 10 s timeout, Redis on 127.0.0.1 (db 14)
    python benchmarks/dead_endpoint.py --redis-url ''      # without the Redis part
    python benchmarks/dead_endpoint.py --judges-only       # only part 2
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the batch harness is shared with tests/faults

from jurist.testing import ProviderServer, Reply  # noqa: E402
from jurist.testing.provider_server import spawn  # noqa: E402
from tests.faults.harness import RUBRICS, Workspace  # noqa: E402

HOLDER = """
import asyncio, sys
from jurist.models.redis_limiter import RedisLimiter

async def main():
    lim = RedisLimiter(sys.argv[1], sys.argv[2], max_in_flight=int(sys.argv[3]))
    for _ in range(int(sys.argv[3])):
        await lim._acquire(0)
    print("held", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def make_sessions(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        lines = [{"session_id": f"dead-{i:04d}", "role": "user", "content": f"Question {i}: how do I reset my password?"},
                 {"role": "assistant", "content": f"Answer {i}: open Settings, then Security."}]
        (folder / f"dead-{i:04d}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def timeouts_alone(sessions: int, parallel: int, timeout: float, max_retries: int, backoff_base: float,
                   backoff_max: float, rubric_timeout: float) -> float:
    """Seconds a batch of one-rubric sessions takes against a dead endpoint without a breaker:
    each call waits ``max_retries + 1`` timeouts and the mean backoffs between them (jitter
    0.5-1.0: 0.75 of the capped exponential), cut at ``rubric_timeout``; ``parallel`` at a time."""
    backoffs = sum(min(backoff_max, backoff_base * 2 ** (k - 1)) * 0.75 for k in range(1, max_retries + 1))
    per_session = min(rubric_timeout, (max_retries + 1) * timeout + backoffs)
    return math.ceil(sessions / parallel) * per_session


def dead_batch(args: argparse.Namespace) -> dict:
    from jurist.config import Settings
    from jurist.rubrics import evaluate_batch
    from jurist.rubrics.models import Rubric, RubricSet

    proc, base_url = spawn(latency=3600.0)  # accepts requests, never answers
    try:
        with tempfile.TemporaryDirectory(dir=args.workdir, prefix=".dead-endpoint-") as tmp:
            tmpdir = Path(tmp)
            make_sessions(tmpdir / "sessions", args.sessions)
            rubric_set = RubricSet(rubrics=[Rubric(id="helpful", name="Helpful", scoring_criteria="1-5")])
            explicit = {"breaker_threshold": args.threshold, "breaker_cooldown": args.cooldown}
            settings = Settings.load(
                providers={"dead": {"type": "openai", "base_url": base_url, "api_key": "bench"}},
                home=str(tmpdir / ".jurist"), timeout=args.timeout, rubric_timeout=args.rubric_timeout,
                **{k: v for k, v in explicit.items() if v is not None},
            )
            started = time.perf_counter()
            report = asyncio.run(evaluate_batch(rubric_set, tmpdir / "sessions", tmpdir / "out",
                                                parallel=args.parallel, judge="dead/judge", settings=settings))
            wall = time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()
    s = settings
    return {
        "sessions": args.sessions, "wall_s": round(wall, 2), "failed": report.evaluations_failed,
        "endpoint_down": report.endpoint_down, "note": report.endpoint_note,
        "settings": {"timeout": s.timeout, "max_retries": s.max_retries, "rubric_timeout": s.rubric_timeout,
                     "breaker_threshold": s.breaker_threshold, "breaker_cooldown": s.breaker_cooldown,
                     "parallel": args.parallel},
        "timeouts_alone_s": round(timeouts_alone(args.sessions, args.parallel, s.timeout, s.max_retries,
                                                 s.backoff_base, s.backoff_max, s.rubric_timeout), 1),
        "defaults": {"timeout": Settings().timeout, "rubric_timeout": Settings().rubric_timeout},
        "timeouts_alone_defaults_s": round(timeouts_alone(args.sessions, args.parallel, Settings().timeout,
                                                          Settings().max_retries, Settings().backoff_base,
                                                          Settings().backoff_max, Settings().rubric_timeout), 1),
    }


# The judges that fail, each its own way: a Reply for a ProviderServer, or None for a port nobody listens on.
FAILING_JUDGES: dict[str, Reply | None] = {
    "refused port": None,
    "dropped": Reply(drop=True),
    "hung judge": Reply(hang=True),
    "always 500": Reply(status=500, message="internal error"),
}
POISON = json.dumps({"role": "user", "content": "a\ud800b"}) + "\n"  # a lone surrogate, as a JSON escape


@dataclass
class BatchRun:
    """One `jurist evaluate-batch` run and what it left: result files, why their rubrics failed."""

    seconds: float
    exit_code: int
    results: int  # sessions with a result file
    failed: int  # of them, sessions with a failed rubric
    reasons: dict[str, int]  # a failed rubric's error type (its reason up to the first colon) -> rubrics
    requests: int  # requests that reached the judge
    summary: bool  # summary.json was written
    input_errors: int  # sessions summary.json lists as input errors (a file that could not be read)
    tail: str  # the end of what the run printed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(ws: Workspace, server: ProviderServer | None, timeout: float) -> BatchRun:
    started = time.monotonic()
    done = subprocess.run(ws.command(), env=ws.env(), capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - started
    reasons: collections.Counter[str] = collections.Counter()
    results = failed = 0
    for p in ws.out.glob("*_result.json"):
        data = json.loads(p.read_text(encoding="utf-8"))
        results += 1
        bad = [rs["reasoning"] or "" for rs in data["rubric_scores"] if rs["status"] != "scored"]
        failed += bool(bad)
        reasons.update(r.split(":", 1)[0] if ":" in r[:40] else r[:40] for r in bad)
    summary = ws.out / "summary.json"
    input_errors = len(json.loads(summary.read_text(encoding="utf-8"))["failures"]["input_errors"]) \
        if summary.is_file() else 0
    return BatchRun(seconds, done.returncode, results, failed, dict(reasons.most_common()),
                    len(server.requests) if server is not None else 0, summary.is_file(), input_errors,
                    (done.stdout + done.stderr)[-600:])


def failing_judge(name: str, sessions: int, parallel: int, workdir: str, timeout: float = 600) -> BatchRun:
    """A batch of ``sessions`` against the judge ``FAILING_JUDGES[name]``, jurist's default settings."""
    reply = FAILING_JUDGES[name]
    server = ProviderServer(reply).start() if reply is not None else None
    try:
        base_url = server.base_url if server is not None else f"http://127.0.0.1:{_free_port()}/v1"
        with tempfile.TemporaryDirectory(dir=workdir, prefix=".failing-judge-") as tmp:
            ws = Workspace(Path(tmp), f"sqlite:///{tmp}/j.db", base_url, sessions=sessions, parallel=parallel)
            return _run(ws, server, timeout)
    finally:
        if server is not None:
            server.stop()


def poison_batch(sessions: int, parallel: int, workdir: str, timeout: float = 600) -> BatchRun:
    """``sessions`` good sessions and one poison session (in the middle of the folder's order),
    judged by a server that answers at once."""
    server = ProviderServer().start()
    try:
        with tempfile.TemporaryDirectory(dir=workdir, prefix=".poison-session-") as tmp:
            ws = Workspace(Path(tmp), f"sqlite:///{tmp}/j.db", server.base_url, sessions=sessions, parallel=parallel)
            (ws.sessions_dir / f"s{sessions // 2:04d}-poison.jsonl").write_text(POISON)
            return _run(ws, server, timeout)
    finally:
        server.stop()


def print_failing_judges(sessions: int, parallel: int, workdir: str) -> None:
    """Part 2, printed as it runs."""
    from jurist.config import Settings

    s = Settings()
    print(f"failing judges:   {sessions} sessions x {len(RUBRICS['rubrics'])} rubrics, {parallel} at once, "
          f"`jurist evaluate-batch` with the default settings (timeout {s.timeout:g} s, rubric_timeout "
          f"{s.rubric_timeout:g} s, {s.max_retries} retries, breaker {s.breaker_threshold} in a row / "
          f"{s.breaker_cooldown:g} s)", flush=True)
    for name in FAILING_JUDGES:
        r = failing_judge(name, sessions, parallel, workdir)
        why = ", ".join(f"{k} {n}" for k, n in r.reasons.items()) or "none"
        print(f"{name + ':':<18}{r.seconds:.2f} s to give up, exit {r.exit_code}; {r.results} sessions with a "
              f"result, {r.failed} failed (rubrics: {why}); {r.requests} requests reached the judge", flush=True)
    r = poison_batch(sessions, parallel, workdir)
    print(f"{'poison session:':<18}{r.results} of {sessions + 1} sessions have a result ({r.failed} failed), "
          f"summary.json {'written' if r.summary else 'missing'} ({r.input_errors} input errors listed), "
          f"exit {r.exit_code}, {r.seconds:.2f} s", flush=True)
    if not r.summary:
        print(f"                  the run ended: {r.tail.strip().splitlines()[-1] if r.tail.strip() else ''}")


def redis_recovery(url: str, permits: int) -> dict:
    from jurist.models.redis_limiter import DEFAULT_LEASE, KEY_PREFIX, RedisLimiter, import_redis

    endpoint = f"bench-dead-{uuid.uuid4().hex[:8]}"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, url, endpoint, str(permits)], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline().strip()
        if line != "held":
            raise RuntimeError(f"the permit holder did not start: {line!r}")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()

    async def next_permit() -> float:
        lim = RedisLimiter(url, endpoint, max_in_flight=permits)
        started = time.perf_counter()
        try:
            async with lim.slot():
                return time.perf_counter() - started
        finally:
            client = import_redis().from_url(url)
            await client.delete(f"{KEY_PREFIX}{endpoint}:permits", f"{KEY_PREFIX}{endpoint}:starts")
            await client.aclose()
            await lim.aclose()

    return {"lease_s": DEFAULT_LEASE, "permits": permits, "recovered_s": round(asyncio.run(next_permit()), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--parallel", type=int, default=5, help="sessions at once (evaluate-batch's default)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per attempt")
    ap.add_argument("--rubric-timeout", type=float, default=120.0)
    ap.add_argument("--threshold", type=int, default=None, help="breaker_threshold (default: the setting's)")
    ap.add_argument("--cooldown", type=float, default=None, help="breaker_cooldown (default: the setting's)")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="'' to skip the Redis part")
    ap.add_argument("--permits", type=int, default=16, help="permits the killed process holds")
    ap.add_argument("--workdir", default=".", help="where the sessions, results and store go for the run")
    ap.add_argument("--judges-only", action="store_true", help="only the failing judges and the poison session")
    args = ap.parse_args()

    if args.judges_only:
        print_failing_judges(args.sessions, args.parallel, args.workdir)
        return
    f = dead_batch(args)
    st = f["settings"]
    print(f"dead endpoint:    {f['sessions']} sessions x 1 rubric, {st['parallel']} at once, timeout "
          f"{st['timeout']:g} s, {st['max_retries']} retries, rubric_timeout {st['rubric_timeout']:g} s, "
          f"breaker {st['breaker_threshold']} in a row / {st['breaker_cooldown']:g} s")
    print(f"with the breaker: {f['wall_s']:.2f} s for the batch; {f['failed']} evaluations failed, "
          f"{f['endpoint_down']} sessions at once with EndpointDown")
    print(f"batch report:     {f['note']}")
    print(f"timeouts alone:   {f['timeouts_alone_s']:,.0f} s with these settings (computed: "
          f"{math.ceil(f['sessions'] / st['parallel'])} rounds of {st['max_retries'] + 1} timeouts and backoffs, "
          f"at most rubric_timeout each); {f['timeouts_alone_defaults_s']:,.0f} s with the default settings "
          f"(timeout {f['defaults']['timeout']:g} s, rubric_timeout {f['defaults']['rubric_timeout']:g} s)")
    print_failing_judges(args.sessions, args.parallel, args.workdir)
    if args.redis_url:
        r = redis_recovery(args.redis_url, args.permits)
        print(f"redis permits:    a process holding all {r['permits']} permits killed with SIGKILL; the next "
              f"permit came after {r['recovered_s']:.2f} s (at most the lease: {r['lease_s']:g} s)")


if __name__ == "__main__":
    main()
