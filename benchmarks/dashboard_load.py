"""Dashboard load time with 100,000 stored evaluations (SQLite).

    python benchmarks/dashboard_load.py [--evaluations 100000] [--repeat 15]

Writes N synthetic evaluations (with their scores and one judge call each;
``jurist.testing.synthetic``) to a fresh SQLite file, starts ``jurist serve``
on it in its own process, and times, over real HTTP from this process:

  overview page       GET /evaluation                      (the HTML page, charts included; the last 30 days,
                      then all time, then all time for one kind)
  overview API        GET /api/evaluation/metrics
  explorer page       GET /evaluation/explorer?<filters>   (one filtered page of rows)
  explorer API        GET /api/evaluation/sessions?<filters>

Each URL is fetched 3 times to warm up, then ``--repeat`` times; the median
and the slowest are printed. Target: under 300 ms each for the overview and
the filtered explorer page.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILTERS = "kind=research&escalated=true&min_score=0.2&max_score=0.6&page=3"
URLS = [
    ("overview page", "/evaluation"),  # the last 30 days
    ("overview page (all time)", "/evaluation?period=all"),
    ("overview page (one kind)", "/evaluation?period=all&kind=research"),  # the calls of that kind's traces
    ("overview API", "/api/evaluation/metrics"),
    ("explorer page (filtered)", f"/evaluation/explorer?{FILTERS}"),
    ("explorer API (filtered)", f"/api/evaluation/sessions?{FILTERS}"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str) -> tuple[float, int, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
        status = r.status
    return (time.perf_counter() - start) * 1000.0, status, len(body)


def main() -> int:
    ap = argparse.ArgumentParser(description="Dashboard load time on a large SQLite store.")
    ap.add_argument("--evaluations", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()

    from jurist.store import Store
    from jurist.testing.synthetic import seed_history

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'jurist.db'}"
        t0 = time.perf_counter()
        with Store(url) as store:
            seed_history(store, args.evaluations)
        print(f"stored {args.evaluations:,} evaluations (+ {args.evaluations:,} calls) in "
              f"{time.perf_counter() - t0:.1f} s: {url}")

        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("JURIST_")}
        env.update(JURIST_DATABASE_URL=url, JURIST_HOME=str(Path(tmp) / ".jurist"))
        server = subprocess.Popen([sys.executable, "-m", "jurist", "serve", "--port", str(port)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    fetch(base + "/api/health")
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        print("the server did not start", file=sys.stderr)
                        return 1
                    time.sleep(0.2)
            print(f"{'view':32} {'median ms':>10} {'max ms':>8} {'status':>7} {'bytes':>9}")
            worst = 0.0
            for name, path in URLS:
                for _ in range(3):
                    fetch(base + path)
                runs = [fetch(base + path) for _ in range(args.repeat)]
                times = [r[0] for r in runs]
                median = statistics.median(times)
                if "page" in name:
                    worst = max(worst, median)
                print(f"{name:32} {median:10.1f} {max(times):8.1f} {runs[-1][1]:7d} {runs[-1][2]:9,d}")
            verdict = "met" if worst < 300 else "MISSED"
            print(f"target: overview and filtered explorer pages under 300 ms (median): {verdict}")
        finally:
            server.terminate()
            server.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
