"""Migrations complete or leave nothing, and run one process at a time (SQLite and PostgreSQL)."""

import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from sqlalchemy import create_engine, inspect

from jurist.errors import ConfigError
from jurist.store import Store
from jurist.store.migrate import SCHEMA_HEAD, schema_version
from jurist.store.tables import llm_calls, metadata

from tests.conftest import fresh_database

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]

# Opens a store, killing itself (SIGKILL) just before the N-th CREATE statement of the migration.
KILL_AT_CREATE = """
import os, signal, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
url, n = sys.argv[1], int(sys.argv[2])
seen = []
@event.listens_for(Engine, "before_cursor_execute")
def count(conn, cursor, statement, *args):
    if statement.lstrip().upper().startswith("CREATE"):
        seen.append(statement)
        if len(seen) == n:
            os.kill(os.getpid(), signal.SIGKILL)
from jurist.store import Store
Store(url).close()
print("migrated without reaching that statement")
"""

# Opens a store when told to (so that several processes start their first run together).
OPEN_ON_GO = """
import sys
from jurist.store import Store
print("ready", flush=True)
sys.stdin.readline()
Store(sys.argv[1]).close()
"""


@pytest.fixture(params=BACKENDS)
def new_url(request, tmp_path):
    with fresh_database(request.param, tmp_path, "jurist_migrate") as url:
        yield url


def tables(url):
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.parametrize("create", [1, 2, 8, 20])
def test_a_migration_killed_halfway_leaves_nothing_and_the_next_run_completes_it(new_url, create):
    run = subprocess.run([sys.executable, "-c", KILL_AT_CREATE, new_url, str(create)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == -9, run.stdout + run.stderr
    assert tables(new_url) <= {"alembic_version"}  # nothing of the schema survived the kill
    Store(new_url).close()  # before: "table llm_calls already exists", on every later run
    assert set(metadata.tables) <= tables(new_url)
    engine = create_engine(new_url)
    try:
        assert schema_version(engine) == SCHEMA_HEAD
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_first_runs_all_succeed(backend, tmp_path):
    """Three processes opening one new store at the same moment, twice over."""
    for trial in range(2):
        with fresh_database(backend, tmp_path, f"jurist_first{trial}") as url:
            procs = [subprocess.Popen([sys.executable, "-c", OPEN_ON_GO, url], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
            for p in procs:
                assert p.stdout.readline() == "ready\n"
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            outcomes = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
            assert [code for code, _ in outcomes] == [0, 0, 0], outcomes
            assert set(metadata.tables) <= tables(url)
    if backend == "sqlite":  # the lock file goes when the migration is done
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".lock")]


def test_a_store_left_half_migrated_by_an_earlier_version_is_repaired(tmp_path):
    """Earlier versions ran SQLite's DDL outside a transaction: a kill left tables but no version."""
    url = f"sqlite:///{tmp_path}/old.db"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        metadata.create_all(conn, tables=[llm_calls])
    engine.dispose()
    Store(url).close()
    assert set(metadata.tables) <= tables(url)


def test_tables_with_rows_but_no_version_are_not_dropped(tmp_path):
    url = f"sqlite:///{tmp_path}/odd.db"
    engine = create_engine(url)
    with engine.begin() as conn:
        metadata.create_all(conn, tables=[llm_calls])
        conn.execute(llm_calls.insert(), [dict(id="c1", purpose="p", model="m", endpoint="e", request_hash="h",
                                               messages=[], params={}, input_tokens=0, output_tokens=0,
                                               latency_ms=0.0, attempts=1, status="ok", cached=False,
                                               created_at=datetime.now(timezone.utc))])
    engine.dispose()
    with pytest.raises(ConfigError, match="llm_calls"):
        Store(url)
    assert os.path.exists(f"{tmp_path}/odd.db") and "llm_calls" in tables(url)


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_0006_fills_max_attempts_hit_from_the_stored_payloads(backend, tmp_path):
    """Rows stored before the column: a gate record stopped at its regeneration cap after more than
    one attempt, a research plan loop whose last allowed attempt failed; nothing else."""
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    from jurist.store.migrate import MIGRATIONS

    def gate(reason, attempts):
        return {"accept_reason": reason, "attempts": [{"number": n} for n in range(1, attempts + 1)]}

    def research(limit, passed):
        attempts = [{"attemptNumber": n, "passed": p} for n, p in enumerate(passed, 1)]
        return {"planEvaluation": {"maxAttempts": limit, "attempts": attempts}}

    rows = {  # id: (kind, iterations, payload, hit)
        "g-hit": ("gate", 2, gate("max_regenerations", 2), True),
        "g-pass": ("gate", 2, gate("passed", 2), False),
        "g-one": ("gate", 1, gate("max_regenerations", 1), False),
        "r-hit": ("research", 3, research(3, [False, False, False]), True),
        "r-pass": ("research", 2, research(3, [False, True]), False),
        "r-short": ("research", 2, research(3, [False, False]), False),  # stopped before the limit
        "rubric": ("rubric", 1, {"rubric_scores": []}, False),
    }
    with fresh_database(backend, tmp_path, "jurist_m6") as url:
        engine = create_engine(url)
        try:
            cfg = Config()
            cfg.set_main_option("script_location", MIGRATIONS)
            old = sa.table("evaluations", sa.column("id"), sa.column("kind"), sa.column("subject_id"),
                           sa.column("status"), sa.column("payload", sa.JSON), sa.column("created_at", sa.DateTime),
                           sa.column("iterations"))
            with engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "0005")
                now = datetime.now(timezone.utc)
                conn.execute(sa.insert(old), [
                    {"id": eid, "kind": kind, "subject_id": eid, "status": "scored", "payload": payload,
                     "created_at": now, "iterations": iterations}
                    for eid, (kind, iterations, payload, _) in rows.items()])
        finally:
            engine.dispose()
        store = Store(url)  # migrates to the head
        try:
            got = {r["id"]: r["max_attempts_hit"] for r in store.evaluations(limit=None)}
        finally:
            store.close()
        assert got == {eid: hit for eid, (_, _, _, hit) in rows.items()}


def _at_revision(url, revision, *, down=False):
    """The schema as migration ``revision`` left it (what an earlier jurist created); ``down``:
    downgraded to it from a newer one."""
    from alembic import command
    from alembic.config import Config

    from jurist.store.migrate import MIGRATIONS

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            cfg = Config()
            cfg.set_main_option("script_location", MIGRATIONS)
            cfg.attributes["connection"] = conn
            (command.downgrade if down else command.upgrade)(cfg, revision)
    finally:
        engine.dispose()


def test_0007_upgrades_a_0006_store_keeping_its_rows(new_url):
    from jurist.store.calibrations import JudgeKey, StoredCalibration, latest_calibrations, save_calibrations
    from jurist.store.tables import labels

    _at_revision(new_url, "0006")
    engine = create_engine(new_url)
    at = datetime.now(timezone.utc)
    try:
        assert schema_version(engine) == "0006" and "calibrations" not in tables(new_url)
        with engine.begin() as conn:
            conn.execute(labels.insert(), [dict(item="s1", rubric="safety", passed=True, annotator="ana",
                                                created_at=at, updated_at=at)])
    finally:
        engine.dispose()
    store = Store(new_url)
    try:
        assert schema_version(store.engine) == SCHEMA_HEAD
        assert [r["item"] for r in store.read(lambda conn: [dict(x._mapping) for x in conn.execute(
            labels.select())])] == ["s1"]
        row = StoredCalibration(
                   id="c1", kind="gate", judge_model="openai/m", template_name="gate_quality", template_hash="abc",
                   rubric="quality", rubric_hash=None, scale="pass/fail", items=4, n=4, kappa=0.7, kappa_low=0.2,
                   kappa_high=1.0, agreement=0.9, agreement_low=0.7, agreement_high=1.0, pass_at=0.4, threshold=0.5,
                   threshold_fit="agreement", threshold_agreement=1.0, threshold_agreement_low=0.8,
                   threshold_agreement_high=1.0, labels="labels.jsonl", figures={"n": 4}, created_at=at)
        store.write(save_calibrations, [row])
        key = JudgeKey("openai/m", "abc", "quality", None)
        found = store.read(latest_calibrations, [key, JudgeKey("openai/m", "other", "quality", None)])
        assert list(found) == [key] and found[key].kappa == 0.7 and found[key].figures == {"n": 4}
    finally:
        store.close()


def test_the_0007_upgrade_killed_halfway_leaves_the_store_at_0006(new_url):
    """The kill lands on the upgrade's first CREATE (the calibrations table): nothing of it stays."""
    _at_revision(new_url, "0006")
    run = subprocess.run([sys.executable, "-c", KILL_AT_CREATE, new_url, "1"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == -9, run.stdout + run.stderr
    engine = create_engine(new_url)
    try:
        assert schema_version(engine) == "0006" and "calibrations" not in tables(new_url)
    finally:
        engine.dispose()
    Store(new_url).close()
    assert "calibrations" in tables(new_url)


def test_0008_reads_the_old_usage_word_into_usage_known(new_url):
    """A call stored before the column, its usage "not reported" in its params, reads back unknown."""
    import sqlalchemy as sa

    _at_revision(new_url, "0007")
    old = sa.table("llm_calls", *(sa.column(c) for c in ("id", "purpose", "model", "endpoint", "request_hash",
                                                          "status", "input_tokens", "output_tokens", "latency_ms",
                                                          "attempts", "cached")),
                   sa.column("messages", sa.JSON), sa.column("params", sa.JSON), sa.column("created_at", sa.DateTime))
    engine = create_engine(new_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.insert(old), [
                dict(id=cid, purpose="generation", model="openai/m", endpoint="http://e/v1", request_hash="h",
                     status="ok", input_tokens=0, output_tokens=0, latency_ms=1.0, attempts=1, cached=False,
                     messages=[{"role": "user", "content": "hi"}], params=params,
                     created_at=datetime.now(timezone.utc))
                for cid, params in (("streamed", {"stream": True, "usage": "not reported"}),
                                    ("plain", {"temperature": 0.0}))])
    finally:
        engine.dispose()
    store = Store(new_url)
    try:
        got = {r["id"]: (r["usage_known"], r["params"]) for r in store.calls(limit=None)}
    finally:
        store.close()
    assert got == {"streamed": (False, {"stream": True, "usage": "not reported"}),
                   "plain": (True, {"temperature": 0.0})}


def test_0010_adds_the_dataset_and_experiment_tables_and_goes_back_to_0009(new_url):
    from jurist.experiments.records import DatasetItem

    new = {"dataset_versions", "dataset_items", "experiments", "experiment_items"}
    _at_revision(new_url, "0009")
    assert not new & tables(new_url)
    with Store(new_url) as store:
        assert schema_version(store.engine) == SCHEMA_HEAD
        version, added = store.add_dataset_version("qa", "abc123", [DatasetItem(id="q1", input="Hi?")], "qa.jsonl")
        assert added and version.number == 1 and store.dataset_items("qa", "abc123")[0].input == "Hi?"
    assert new <= tables(new_url)
    _at_revision(new_url, "0009", down=True)
    engine = create_engine(new_url)
    try:
        assert schema_version(engine) == "0009"
    finally:
        engine.dispose()
    assert not new & tables(new_url)


def test_0011_gives_the_turns_stored_before_it_no_undecided_points_and_goes_back_to_0010(new_url):
    """A checklist turn stored by an earlier version reads back with ``undecided == []``; a new
    turn keeps its undecided points; the downgrade drops the column and keeps the rows."""
    import asyncio

    import sqlalchemy as sa

    from jurist.store.checklist_rows import ChecklistEvaluationRow

    at = datetime(2026, 11, 27, tzinfo=timezone.utc)
    _at_revision(new_url, "0010")
    engine = create_engine(new_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO checklist_sessions (id, learner, title, points, mode, status, "
                                 "created_at, updated_at) VALUES ('cs1', 'ana', 'T', '[]', 'recall', 'active', "
                                 ":at, :at)"), {"at": at})
            conn.execute(sa.text("INSERT INTO checklist_evaluations (id, session_id, message_seq, mode, status, "
                                 "unchecked, recalled, observations, feedback, dropped_ids, dropped_count, call_ids, "
                                 "input_tokens, output_tokens, created_at) VALUES ('old', 'cs1', 1, 'recall', 'ok', "
                                 "'[\"p1\"]', '{}', '{}', '', '[]', 0, '[]', 0, 0, :at)"), {"at": at})
    finally:
        engine.dispose()
    with Store(new_url) as store:
        assert schema_version(store.engine) == SCHEMA_HEAD
        new = ChecklistEvaluationRow(id="new", session_id="cs1", message_seq=2, mode="recall", status="ok",
                                     judge_model="local/minilm", unchecked=["p1"], recalled={}, observations={},
                                     feedback="", dropped_ids=[], dropped_count=0, undecided=["p1"],
                                     reason="uncertain: p1", call_ids=[], input_tokens=0, output_tokens=0,
                                     created_at=at)
        asyncio.run(store.record_checklist_evaluation(new, {}, at))
        rows = asyncio.run(store.checklist_evaluations("cs1"))
        assert [(r.id, r.undecided) for r in rows] == [("old", []), ("new", ["p1"])]
    _at_revision(new_url, "0010", down=True)
    engine = create_engine(new_url)
    try:
        assert schema_version(engine) == "0010"
        assert "undecided" not in {c["name"] for c in inspect(engine).get_columns("checklist_evaluations")}
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM checklist_evaluations")).scalar() == 2
    finally:
        engine.dispose()
