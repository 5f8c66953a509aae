"""Wall time of one batch on the local engine and on Ray, against a scripted judge server.

Starts the scripted OpenAI-protocol server (jurist.testing.provider_server) in
its own process with a fixed latency, writes sessions, then scores them

* with the local engine, ``--local-concurrency`` requests in flight, and
* on a local Ray cluster, ``--workers`` worker processes of
  ``--worker-concurrency`` requests each, under a cluster-wide limit of
  ``--cluster-limit`` requests in flight (the shared limiter actor),

and prints for each: calls, wall seconds, the ideal wall (calls x latency /
requests in flight) and their ratio. It first prints ``machine_check_s``, the
CPU seconds of a fixed pure-Python loop, since the figures move with the
speed of the machine's (shared) CPUs. The Ray cluster is started before the
clock runs (its start-up time is printed apart); starting the workers, opening
their stores and joining the limiter are inside the wall time.

    python benchmarks/ray_scaling.py                 # 20,000 calls at 100 ms: 10,000 sessions x 2 rubrics
    python benchmarks/ray_scaling.py --sessions 2000 # a shorter run

Target on a 2-core machine: Ray within 1.3 x its ideal wall.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from jurist.testing.provider_server import spawn

# The same rubrics and sessions as the single-process throughput benchmark (this folder).
from rubric_throughput import RUBRICS, WORKDIR_HELP, machine_check, make_sessions  # noqa: E402


def figures(name: str, calls: int, wall: float, latency: float, in_flight: int, report: object) -> dict:
    ideal = calls * latency / in_flight
    return {"engine": name, "calls": calls, "requests_in_flight": in_flight,
            "scored": getattr(report, "scored"), "failed_evaluations": getattr(report, "evaluations_failed"),
            "wall_s": round(wall, 2), "ideal_wall_s": round(ideal, 2), "ratio": round(wall / ideal, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--rubrics", type=int, default=2, help="rubrics per session (calls = sessions x rubrics)")
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--local-concurrency", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-concurrency", type=int, default=64)
    ap.add_argument("--cluster-limit", type=int, default=128)
    ap.add_argument("--shard-size", type=int, default=250)
    ap.add_argument("--parallel", type=int, default=None,
                    help="sessions at once per worker on Ray (default: the worker concurrency)")
    ap.add_argument("--skip-local", action="store_true")
    ap.add_argument("--workdir", default=".", help=WORKDIR_HELP)
    args = ap.parse_args()

    import ray

    from jurist.config import Settings
    from jurist.rubrics import evaluate_batch
    from jurist.rubrics.models import RubricSet
    from jurist.rubrics.ray_engine import RayBatch, RayOptions

    print(json.dumps({"machine_check_s": machine_check(), "cpus": os.cpu_count()}), flush=True)
    calls = args.sessions * args.rubrics
    rubric_set = RubricSet(**{**RUBRICS, "rubrics": RUBRICS["rubrics"][:args.rubrics]})
    proc, base_url = spawn(args.latency)
    rows = []
    try:
        with tempfile.TemporaryDirectory(dir=args.workdir, prefix=".ray-scaling-") as tmp:
            tmpdir = Path(tmp)
            make_sessions(tmpdir / "sessions", args.sessions)

            def settings(home: str) -> Settings:
                return Settings.load(providers={"bench": {"type": "openai", "base_url": base_url, "api_key": "b"}},
                                     home=str(tmpdir / home), max_retries=0, timeout=30)

            if not args.skip_local:
                s = settings("local")
                n = args.local_concurrency
                t0, cpu0 = time.perf_counter(), os.times()
                report = asyncio.run(evaluate_batch(rubric_set, tmpdir / "sessions", tmpdir / "out-local",
                                                    parallel=n + 16, max_concurrency=n,
                                                    judge="bench/judge", settings=s))
                rows.append(figures("local", calls, time.perf_counter() - t0, args.latency, n, report))
                cpu1 = os.times()
                rows[-1]["cpu_ms_per_call"] = round(
                    ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) * 1000 / calls, 3)
                print(json.dumps(rows[-1]), flush=True)

            t0 = time.perf_counter()
            ray.init(num_cpus=args.workers, include_dashboard=False, namespace="jurist", log_to_driver=False)
            print(json.dumps({"ray_cluster_start_s": round(time.perf_counter() - t0, 2)}), flush=True)
            in_flight = min(args.cluster_limit, args.workers * args.worker_concurrency)
            batch = RayBatch(rubric_set, tmpdir / "sessions", tmpdir / "out-ray", settings=settings("ray"),
                             judge="bench/judge", parallel=args.parallel or args.worker_concurrency,
                             max_concurrency=args.cluster_limit,
                             options=RayOptions(workers=args.workers, shard_size=args.shard_size,
                                                worker_concurrency=args.worker_concurrency))
            t0 = time.perf_counter()
            report = asyncio.run(batch.run())
            wall = time.perf_counter() - t0
            peak = ray.get(batch.limiter.stats.remote()).peak_in_flight
            row = figures(f"ray {args.workers}x{args.worker_concurrency}, limit {args.cluster_limit}", calls, wall,
                          args.latency, in_flight, report)
            row["cluster_peak_in_flight"] = peak
            row["limiter_calls_per_worker"] = [w.actor_calls for w in batch.worker_stats]
            row["cpu_ms_per_call_workers"] = round(sum(w.cpu_s for w in batch.worker_stats) * 1000 / calls, 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
            ray.shutdown()
    finally:
        proc.kill()
        proc.wait()
    if len(rows) == 2:
        print(json.dumps({"speedup_ray_over_local": round(rows[0]["wall_s"] / rows[1]["wall_s"], 2)}))


if __name__ == "__main__":
    main()
