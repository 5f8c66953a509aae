"""Batch scoring on a local Ray cluster (two worker processes) against the scripted judge server."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from jurist.config import Settings
from jurist.rubrics import evaluate_batch
from jurist.rubrics.models import Rubric, RubricSet
from jurist.store import Store
from jurist.testing import Reply

from tests.conftest import run_cli
from tests.rubrics.test_batch import make_sessions
from tests.quoting import prompt_text

ray = pytest.importorskip("ray")

from jurist.rubrics.ray_engine import RayBatch, RayOptions, evaluation_id  # noqa: E402

RUBRICS = RubricSet(rubrics=[Rubric(id="a", name="A", scoring_criteria="c", weight=1),
                             Rubric(id="b", name="B", scoring_criteria="c", weight=3)])
VOLATILE = ("evaluated_at", "trace_id")  # differ between any two runs, whatever the engine


@pytest.fixture(scope="module")
def cluster():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, namespace="jurist", log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    if started:
        ray.shutdown()


def by_question(delay=0.0):
    """A judge whose score depends on the session and the rubric."""

    def answer(req):
        text = prompt_text(req["messages"])
        n = int(text.split("question ")[1].split()[0])
        bump = 1 if "## Rubric: B" in text else 0
        return Reply(text=f'{{"score": {1 + (n + bump) % 5}, "reasoning": "r{n}"}}', delay=delay)

    return answer


async def run(batch, limit=60):
    """Run a batch; a hang fails the test instead of the whole suite."""
    return await asyncio.wait_for(batch.run(), limit)


def settings_for(server, home, **kw):
    return Settings.load(providers={"fake": {"type": "openai", "base_url": server.base_url, "api_key": "k"}},
                         home=str(home), backoff_base=0.05, backoff_max=0.2, **kw)


def stable(result):
    out = {k: v for k, v in result.items() if k not in VOLATILE}
    out["rubric_scores"] = [{k: v for k, v in r.items() if k != "latency_ms"} for r in result["rubric_scores"]]
    return out


def results(folder):
    return {p.name: stable(json.loads(p.read_text())) for p in sorted(folder.glob("*_result.json"))}


def stored(settings):
    with Store(settings.database) as store:
        evaluations = store.evaluations(limit=None, kind="rubric")
        scores = {e["id"]: len(store.scores_of(e["id"])) for e in evaluations}
    return evaluations, scores


async def test_same_results_and_summary_as_the_local_engine(cluster, provider, tmp_path):
    provider.default = by_question()
    sessions = make_sessions(tmp_path / "s", 24)
    local_settings = settings_for(provider, tmp_path / "local")
    local = await evaluate_batch(RUBRICS, sessions, tmp_path / "out-local", parallel=4, judge="fake/judge",
                                 settings=local_settings)
    calls_local = len(provider.requests)
    ray_settings = settings_for(provider, tmp_path / "ray")
    batch = RayBatch(RUBRICS, sessions, tmp_path / "out-ray", settings=ray_settings, judge="fake/judge", parallel=4,
                     options=RayOptions(workers=2, shard_size=5))
    report = await run(batch)
    assert len(provider.requests) == 2 * calls_local == 2 * 24 * 2
    assert report.scored == local.scored == 24 and report.exit_code == local.exit_code == 0
    assert results(tmp_path / "out-ray") == results(tmp_path / "out-local")
    # The same summary, but for the cost block: a batch in this process counts its calls' cost, a Ray batch's
    # calls are made in its workers and it writes none (docs/scaling.md).
    local_summary = json.loads((tmp_path / "out-local" / "summary.json").read_bytes())
    assert local_summary.pop("cost")["calls"] == calls_local
    assert json.loads((tmp_path / "out-ray" / "summary.json").read_bytes()) == local_summary
    assert all(r["scored"] == 24 for r in report.summary["per_rubric_summary"].values())
    evaluations, scores = stored(ray_settings)
    assert sorted(e["subject_id"] for e in evaluations) == [f"sess{i:03d}" for i in range(24)]
    assert set(scores.values()) == {2}
    e = evaluations[0]
    assert e["id"] == evaluation_id(e["subject_id"], RUBRICS.version, e["judge_model"]) and e["judge_model"]
    assert all(w.scored > 0 for w in batch.worker_stats)  # both workers scored sessions
    assert sum(w.scored for w in batch.worker_stats) == 24


async def test_cluster_wide_in_flight_bound(cluster, provider, tmp_path):
    provider.default = by_question(delay=0.05)
    sessions = make_sessions(tmp_path / "s", 30)
    settings = settings_for(provider, tmp_path / "home")
    # two workers x 6 sessions x 2 rubrics could send 24 requests at once; the bound is 5 for the cluster
    batch = RayBatch(RUBRICS, sessions, tmp_path / "out", settings=settings, judge="fake/judge", parallel=6,
                     max_concurrency=5, options=RayOptions(workers=2, shard_size=3))
    report = await run(batch)
    assert report.scored == 30
    assert provider.peak_in_flight == 5  # reached, never passed
    stats = ray.get(batch.limiter.stats.remote())
    assert stats.peak_in_flight == 5 and stats.in_flight == 0
    assert all(w.peak_in_flight <= 5 for w in batch.worker_stats)
    assert sum(w.peak_in_flight for w in batch.worker_stats) > 5  # both workers had requests out


async def test_an_in_process_limiter_url_still_bounds_the_whole_cluster(cluster, provider, tmp_path):
    provider.default = by_question(delay=0.05)
    sessions = make_sessions(tmp_path / "s", 12)
    settings = settings_for(provider, tmp_path / "home", limiter_url="memory://")
    batch = RayBatch(RUBRICS, sessions, tmp_path / "out", settings=settings, judge="fake/judge", parallel=6,
                     max_concurrency=3, options=RayOptions(workers=2, shard_size=3))
    report = await run(batch)
    assert report.scored == 12 and batch.limiter is not None  # memory:// is one process: the job's actor bounds
    assert provider.peak_in_flight == 3
    assert all(w.actor_calls > 0 for w in batch.worker_stats)  # each worker's Model was born with the ray:// limiter


def _kill_a_worker_once(batch, done):
    def kill():
        pid = ray.get(batch.workers[0].info.remote()).pid
        os.kill(pid, signal.SIGKILL)
        done.killed_pid = pid
        done.set()

    def on_progress(name, status):
        if not done.is_set() and not getattr(on_progress, "fired", False):
            on_progress.fired = True
            threading.Thread(target=kill, daemon=True).start()

    return on_progress


def redis_batch(provider, tmp_path, redis_url, max_concurrency, **options):
    """20 sessions on two workers whose Model limiters meet in Redis."""
    provider.default = by_question(delay=0.05)
    sessions = make_sessions(tmp_path / "s", 20)
    settings = settings_for(provider, tmp_path / "home", limiter_url=redis_url)
    return RayBatch(RUBRICS, sessions, tmp_path / "out", settings=settings, judge="fake/judge", parallel=6,
                    max_concurrency=max_concurrency, options=RayOptions(workers=2, shard_size=3, **options))


@pytest.mark.postgres
async def test_with_limiter_url_the_cluster_bound_lives_in_redis(cluster, provider, tmp_path, redis_url):
    batch = redis_batch(provider, tmp_path, redis_url, 4)
    report = await run(batch)
    assert report.scored == 20 and batch.limiter is None  # no limiter actor
    assert provider.peak_in_flight == 4  # the workers' Redis limiter held --max-concurrency, reached


@pytest.mark.postgres
async def test_with_limiter_url_worker_concurrency_caps_each_worker(cluster, provider, tmp_path, redis_url):
    batch = redis_batch(provider, tmp_path, redis_url, 8, worker_concurrency=2)
    report = await run(batch)
    assert report.scored == 20
    assert [w.peak_in_flight for w in batch.worker_stats] == [2, 2]  # each worker held at most 2 permits
    assert provider.peak_in_flight <= 4


async def test_a_killed_worker_is_restarted_and_every_session_is_scored_once(cluster, provider, tmp_path, pg_url):
    provider.default = by_question(delay=0.03)
    sessions = make_sessions(tmp_path / "s", 48)
    settings = settings_for(provider, tmp_path / "home", database_url=pg_url)
    killed = threading.Event()
    batch = RayBatch(RUBRICS, sessions, tmp_path / "out", settings=settings, judge="fake/judge", parallel=4,
                     options=RayOptions(workers=2, shard_size=4))
    batch.on_progress = _kill_a_worker_once(batch, killed)
    report = await run(batch)
    assert killed.is_set()
    restarted = batch.worker_stats[0]
    assert restarted.pid != killed.killed_pid and restarted.scored > 0  # a new process took the shards
    assert report.exit_code == 0 and report.scored + report.skipped == 48
    assert report.summary["batch_summary"]["total_sessions"] == 48
    assert sorted(p.name for p in (tmp_path / "out").glob("*_result.json")) == [
        f"sess{i:03d}_result.json" for i in range(48)]
    evaluations, scores = stored(settings)
    assert sorted(e["subject_id"] for e in evaluations) == [f"sess{i:03d}" for i in range(48)]  # once each
    assert set(scores.values()) == {2}
    for e in evaluations:  # the stored evaluation agrees with its result file
        on_disk = json.loads((tmp_path / "out" / f"{e['subject_id']}_result.json").read_text())
        assert on_disk["summary"]["total_score"] == e["score"]


async def test_resume_after_the_driver_is_interrupted(cluster, provider, tmp_path):
    provider.default = by_question(delay=0.02)
    sessions = make_sessions(tmp_path / "s", 40)
    settings = settings_for(provider, tmp_path / "home")
    seen = []

    def stop_after_eight(name, status):
        seen.append(name)
        if len(seen) == 8:
            raise RuntimeError("driver stopped")  # as if the driver process died mid-batch

    first = RayBatch(RUBRICS, sessions, tmp_path / "out", settings=settings, judge="fake/judge", parallel=2,
                     options=RayOptions(workers=2, shard_size=4), on_progress=stop_after_eight)
    with pytest.raises(RuntimeError, match="driver stopped"):
        await run(first)
    done = {p.name for p in (tmp_path / "out").glob("*_result.json")}
    assert 8 <= len(done) < 40
    assert not (tmp_path / "out" / "summary.json").exists()
    assert ray.get(first.limiter.stats.remote()).in_flight == 0  # stopped workers keep no permits
    calls = len(provider.requests)
    again = RayBatch(RUBRICS, sessions, tmp_path / "out", settings=settings, judge="fake/judge", parallel=2,
                     options=RayOptions(workers=2, shard_size=4))
    report = await run(again)
    assert report.skipped == len(done) and report.scored == 40 - len(done)
    assert len(provider.requests) - calls == 2 * report.scored  # only what had no result
    evaluations, _ = stored(settings)
    assert sorted(e["subject_id"] for e in evaluations) == [f"sess{i:03d}" for i in range(40)]
    assert report.summary["batch_summary"]["total_sessions"] == 40


def test_cli_runs_a_batch_on_the_cluster(cluster, provider, tmp_path):
    provider.default = by_question()
    sessions = make_sessions(tmp_path / "s", 6)
    rubrics = tmp_path / "r.json"
    rubrics.write_text(RUBRICS.model_dump_json())
    (tmp_path / "jurist.yaml").write_text(
        f"providers:\n  fake:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: k\n")
    proc = run_cli("evaluate-batch", "--rubrics", str(rubrics), "--sessions-dir", str(sessions), "--output-dir",
                   str(tmp_path / "out"), "--judge", "fake/judge", "--engine", "ray", "--ray-address", cluster,
                   "--workers", "2", cwd=tmp_path, env={"JURIST_HOME": str(tmp_path / ".jurist")}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "6 sessions (6 scored now, 0 already done)" in proc.stdout
    assert len(list((tmp_path / "out").glob("*_result.json"))) == 6


def test_without_the_ray_engine_ray_is_never_imported(tmp_path):
    sessions = make_sessions(tmp_path / "s", 2)
    code = (
        "import asyncio, sys\n"
        "import jurist.cli.main\n"
        "from jurist.models import script\n"
        "from jurist.rubrics import evaluate_batch\n"
        "from jurist.rubrics.models import Rubric, RubricSet\n"
        "script('j', default='SCORE: 3')\n"
        "rs = RubricSet(rubrics=[Rubric(id='a', name='A', scoring_criteria='c')])\n"
        f"r = asyncio.run(evaluate_batch(rs, {str(sessions)!r}, {str(tmp_path / 'out')!r}, judge='scripted/j'))\n"
        "assert r.scored == 2\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith(('ray.', 'jurist.rubrics.ray'))))\n"
    )
    env = {**os.environ, "JURIST_HOME": str(tmp_path / ".jurist")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_cli_says_how_to_install_ray_when_it_is_missing(tmp_path):
    sessions = make_sessions(tmp_path / "s", 1)
    rubrics = tmp_path / "r.json"
    rubrics.write_text(RUBRICS.model_dump_json())
    code = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if the extra were not installed\n"
        "from jurist.cli.main import main\n"
        "sys.argv = ['jurist', 'evaluate-batch', '--rubrics', sys.argv[1], '--sessions-dir', sys.argv[2],\n"
        "            '--output-dir', sys.argv[3], '--judge', 'scripted/j', '--engine', 'ray']\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(rubrics), str(sessions), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JURIST_HOME": str(tmp_path / ".jurist"), "COLUMNS": "200"})
    assert proc.returncode == 2
    assert 'pip install "jurist[ray]"' in proc.stderr


@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_an_evaluation_written_twice_by_two_processes_is_stored_once(db, tmp_path, request):
    url = request.getfixturevalue("pg_url") if db == "postgres" else f"sqlite:///{tmp_path / 'j.db'}"
    key = evaluation_id("sess-x", "1.0", "fake/judge")
    evaluation = {"id": key, "kind": "rubric", "subject_id": "sess-x", "status": "scored", "score": 3.0,
                  "rubrics_version": "1.0", "judge_model": "fake/judge", "payload": {"session_id": "sess-x"}}
    rows = [{"key": "a", "status": "scored", "score": 3.0}, {"key": "b", "status": "scored", "score": 4.0}]
    Store(url).close()  # migrated once, as the driver does
    first, second = Store(url), Store(url)  # two workers' stores
    try:
        for store in (first, second, first):
            store.save_evaluation_once(evaluation, rows)
        first.flush()
        second.flush()
        second.save_evaluation_once(dict(evaluation, score=1.0), rows)  # a retried session's second result
        second.flush()
        stored_rows = first.evaluations(limit=None, subject_id="sess-x")
        assert [(e["id"], e["score"]) for e in stored_rows] == [(key, 3.0)]
        assert sorted(r.key for r in first.scores_of(key)) == ["a", "b"]
    finally:
        first.close()
        second.close()
    assert evaluation_id("sess-x", "1.0", "fake/judge", "run-2") != key  # a --force run writes new rows
