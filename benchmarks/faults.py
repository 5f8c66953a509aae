"""Kill -9 at random moments of `jurist evaluate-batch`, then rerun: do the store and the files agree?

Each trial gives a batch a new store and output folder, starts `jurist
evaluate-batch` as a subprocess against the benchmarks' judge server
(``python -m jurist.testing.provider_server``, on 127.0.0.1, answering after
50 ms), kills it with SIGKILL at a random moment (from start-up, through the
store's first migration, to the end of the batch: up to the time one whole
run took at the start), does so again on the rerun, and then reruns it to the
end. It prints the trials, the kills, the
sessions, the store's rows against the result files after each final rerun,
and the calls answered twice (an answer on record more than once, not from the
call cache: must be 0).

Then more figures, from the scripts that measure them in full: the seconds a
batch of ``--dead-sessions`` sessions takes to give up against a refused port,
a dropped connection, a judge that never answers and one that answers 500,
and the sessions with a result after a poison session among as many good
ones (``benchmarks/dead_endpoint.py``, its second part), and the peak RSS of
``jurist serve`` under one unauthenticated POST of ``--post-mb`` MiB
(``benchmarks/server_bounds.py``, its first case). ``0`` skips either.

    python benchmarks/faults.py                          # 10 trials on SQLite, 200 dead-endpoint sessions, 400 MiB
    python benchmarks/faults.py --trials 20 --seed 7
    python benchmarks/faults.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harness is shared with tests/faults
sys.path.insert(0, str(ROOT / "benchmarks"))

import dead_endpoint  # noqa: E402
import server_bounds  # noqa: E402
from tests.faults.harness import Workspace, kill_trial  # noqa: E402

from jurist.testing.provider_server import spawn  # noqa: E402


@contextmanager
def new_store(folder: Path, postgres: str | None, trial: int) -> Iterator[str]:
    """A new SQLite file, or a new PostgreSQL database (dropped afterwards)."""
    if postgres is None:
        yield f"sqlite:///{folder}/trial{trial}.db"
        return
    from sqlalchemy import create_engine, text

    name = f"jurist_faults_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgres, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield postgres.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--kills", type=int, default=2, help="killed runs per trial before the final rerun")
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the judge takes per call")
    parser.add_argument("--seed", type=int, default=None, help="replays the kill moments of a run")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL admin URL: new databases there, not SQLite")
    parser.add_argument("--workdir", default=".", help="where the trials' folders go (default: here)")
    parser.add_argument("--dead-sessions", type=int, default=200,
                        help="sessions against each failing judge, and good ones beside a poison session (0: skip)")
    parser.add_argument("--post-mb", type=int, default=400, help="MiB of one unauthenticated POST (0: skip)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    rng = random.Random(seed)

    server, base_url = spawn(latency=args.latency)
    kills = unmigrated = twice = 0
    agreements: list[str] = []
    disagreements = 0
    try:
        with tempfile.TemporaryDirectory(prefix="jurist-faults-", dir=args.workdir) as tmp:
            # One run to the end on a new store: the kill moments are drawn from its span.
            with new_store(Path(tmp), args.postgres, -1) as url:
                started = time.monotonic()
                Workspace(Path(tmp) / "whole", url, base_url, sessions=args.sessions).run()
                span = time.monotonic() - started
            for trial in range(args.trials):
                with new_store(Path(tmp), args.postgres, trial) as url:
                    ws = Workspace(Path(tmp) / f"trial{trial}", url, base_url, sessions=args.sessions)
                    outcome = kill_trial(ws, [rng.uniform(0.05, span) for _ in range(args.kills)])
                kills += outcome.kills
                unmigrated += outcome.unmigrated
                state = outcome.state
                twice += state.calls_made_twice
                agreements.append(f"{state.rows}/{state.files}" if state.opens else "store-unusable")
                if outcome.final.returncode != 0 or not state.agree or state.files != args.sessions:
                    disagreements += 1
                    print(f"trial {trial}: exit {outcome.final.returncode}, {state}", file=sys.stderr)
    finally:
        server.kill()
        server.wait()
    store = "PostgreSQL" if args.postgres else "SQLite"
    print(f"trials:           {args.trials} ({store} store, seed {seed}; each: {args.kills} runs killed, "
          "then one to the end)")
    print(f"kills:            {kills} at moments up to {span:.2f} s, a whole run ({unmigrated} before the store's "
          "schema was complete: start-up or first migration)")
    print(f"sessions:         {args.sessions} per trial x 2 rubrics, judge at {args.latency * 1000:g} ms")
    print(f"rows vs files:    {' '.join(agreements)} (after each final rerun; {disagreements} trials disagree)")
    print(f"calls made twice: {twice} (must be 0)")
    if args.dead_sessions:
        dead_endpoint.print_failing_judges(args.dead_sessions, 5, args.workdir)
    if args.post_mb:
        before, peak, status = server_bounds.unauthenticated_post(args.post_mb)
        print(f"{args.post_mb} MiB POST:".ljust(18) + f"peak RSS {peak / 1024:.0f} MiB (before {before / 1024:.0f} "
              f"MiB) of jurist serve under one unauthenticated POST; answer {status}")
    return 1 if disagreements or twice else 0


if __name__ == "__main__":
    raise SystemExit(main())
