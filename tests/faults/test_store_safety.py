"""Stores that are never harmed and never hang: a silent server is an error within the connect
time-out, another application's database is left as it was, a NUL is refused the same way on
SQLite and PostgreSQL, and a closed store says so at once. On SQLite and the machine's PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from jurist.errors import ConfigError, InputError, StoreError
from jurist.judges.templates import builtin
from jurist.models import script
from jurist.models.base import CallRecord
from jurist.models.messages import UserMessage
from jurist.store import Store

from tests.conftest import fresh_database, run_cli
from tests.server.conftest import checklist_dir  # noqa: F401  (a fixture)
from tests.server.test_real_session import WS, make_client, verdict

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (as Redis does to a PostgreSQL client)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


# -- a server that never answers ---------------------------------------------------------------

@pytest.mark.parametrize("query, limit", [("", 30), ("?connect_timeout=1", 8)])
def test_db_on_a_silent_server_is_a_clear_error_within_the_connect_timeout(silent_port, tmp_path, query, limit):
    """The command hung until it was killed (150 s); now the default 10 s, or the URL's connect_timeout."""
    url = f"postgresql://jurist:s3cret@127.0.0.1:{silent_port}/x{query}"
    began = time.monotonic()
    run = run_cli("prompts", "list", "--db", url, env={"JURIST_HOME": str(tmp_path / ".jurist")}, timeout=60)
    took = time.monotonic() - began
    assert run.returncode == 2, run.stdout + run.stderr  # a setting to correct
    said = " ".join(run.stderr.split())
    assert f"error: cannot connect to the database postgresql+psycopg://jurist:***@127.0.0.1:{silent_port}/x" in said
    assert "timeout expired" in said and "?connect_timeout=SECONDS" in said and "Check --db" in said
    assert "s3cret" not in run.stderr and "Traceback" not in run.stderr
    assert took < limit, took


ALEMBIC_UPGRADE = """
import sys
from alembic import command
from alembic.config import Config
from jurist.store.migrate import MIGRATIONS
cfg = Config()
cfg.set_main_option("script_location", MIGRATIONS)
cfg.set_main_option("sqlalchemy.url", sys.argv[1])
command.upgrade(cfg, "head")
"""


def test_the_migration_environment_gives_up_on_a_silent_server_too(silent_port):
    """Its own engine had no connect time-out either: the default one, not a hang."""
    url = f"postgresql+psycopg://jurist@127.0.0.1:{silent_port}/x"
    began = time.monotonic()
    run = subprocess.run([sys.executable, "-c", ALEMBIC_UPGRADE, url], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "timeout expired" in run.stderr
    assert time.monotonic() - began < 30


# -- another application's database ------------------------------------------------------------

FOREIGN = ["CREATE TABLE labels (id INTEGER PRIMARY KEY, color TEXT, hex TEXT)",
           "CREATE TABLE scores (id INTEGER PRIMARY KEY, player TEXT, points INTEGER)"]


def _tables(url: str) -> dict[str, list[str]]:
    engine = create_engine(url)
    try:
        found = inspect(engine)
        return {t: [c["name"] for c in found.get_columns(t)] for t in found.get_table_names()}
    finally:
        engine.dispose()


def _create(url: str, statements: list[str]) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    engine.dispose()


def test_db_on_another_applications_sqlite_file_is_exit_2_and_leaves_it_as_it_was(tmp_path):
    """jurist dropped the file's empty labels and scores tables, made them its own, and added 15 tables."""
    url = f"sqlite:///{tmp_path}/app.db"
    _create(url, FOREIGN)
    before = hashlib.sha256((tmp_path / "app.db").read_bytes()).hexdigest()
    run = run_cli("prompts", "list", "--db", url, env={"JURIST_HOME": str(tmp_path / ".jurist")}, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    said = " ".join(run.stderr.split())
    assert "the database is not jurist's" in said and "labels, scores" in said and "Traceback" not in said
    assert hashlib.sha256((tmp_path / "app.db").read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no lock, journal or WAL file left


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_database_with_other_tables_is_refused_naming_them(backend, tmp_path):
    with fresh_database(backend, tmp_path, "jurist_foreign") as url:
        _create(url, [*FOREIGN, "CREATE TABLE orders (id INTEGER PRIMARY KEY)"])
        before = _tables(url)
        with pytest.raises(ConfigError, match="holds the tables labels, orders, scores"):
            Store(url)
        assert _tables(url) == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_another_applications_alembic_version_is_refused(backend, tmp_path):
    with fresh_database(backend, tmp_path, "jurist_alembic") as url:
        _create(url, ["CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
                      "INSERT INTO alembic_version VALUES ('ae1027a6acf')", FOREIGN[0]])
        before = _tables(url)
        with pytest.raises(ConfigError, match="schema version .* is 'ae1027a6acf', not one of jurist's"):
            Store(url)
        assert _tables(url) == before


# -- NUL: refused, the same on both databases --------------------------------------------------

@pytest.fixture(params=BACKENDS)
def database(request, tmp_path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path, "jurist_nul") as url:
        yield url


def test_a_nul_in_jurist_prompts_add_is_exit_2(database, tmp_path):
    """PostgreSQL: a traceback; SQLite: stored."""
    (tmp_path / "judge.txt").write_text(builtin("gate_quality").text + "\x00")
    env = {"JURIST_HOME": str(tmp_path / ".jurist")}
    run = run_cli("prompts", "add", "gate_quality", str(tmp_path / "judge.txt"), "--db", database, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "NUL character" in run.stderr and "Traceback" not in run.stderr
    shown = run_cli("prompts", "show", "gate_quality", "2", "--db", database, env=env)  # nothing was stored
    assert shown.returncode == 2 and "has no version 2" in shown.stderr


def test_a_nul_in_a_tutor_message_is_refused_with_a_clear_error(database, checklist_dir):  # noqa: F811
    """PostgreSQL failed the turn with "internal error"; SQLite stored it."""
    script("judge", default=verdict("adenosine"))
    script("tutor", default="Right about adenosine.")
    store = Store(database)
    try:
        with make_client(checklist_dir, store) as client, client.websocket_connect(WS) as ws:
            [ws.receive_json() for _ in range(3)]
            ws.send_json({"type": "message", "content": "It blocks\x00 adenosine."})
            refused = ws.receive_json()
            assert refused["type"] == "error" and "NUL character" in refused["message"], refused
            ws.send_json({"type": "message", "content": "It blocks adenosine."})  # the session goes on
            assert ws.receive_json()["type"] == "assistant_message"
        messages = [json.dumps(r["messages"]) for r in store.calls(purpose=None, limit=None)]
        assert not any("\\u0000" in m for m in messages)
    finally:
        store.close()


def _call(text: str) -> CallRecord:
    return CallRecord(id=f"c-{len(text)}", trace_id=None, purpose="judge", model="scripted/j", endpoint="scripted",
                      messages=(UserMessage(content=text),), params={}, request_hash="h", response_text="ok",
                      input_tokens=1, output_tokens=1, latency_ms=1.0, attempts=1, status="ok")


def test_a_nul_in_any_stored_value_is_an_input_error_on_both_databases(database, capfd):
    """The store's one check on a direct write; a queued record of what happened (a call whose
    message or reply held a NUL) is kept, each NUL stored as U+FFFD and said, never lost."""
    from jurist.analysis.prompts import create_prompt_version
    import asyncio

    store = Store(database)
    try:
        with pytest.raises(InputError, match="NUL character"):
            asyncio.run(create_prompt_version(store, "gate_quality", builtin("gate_quality").text, note="a\x00b"))
        store.record_call(_call("fine"))
        store.record_call(_call("a NUL \x00 in a message"))
        store.flush()
        calls = {c["id"]: c for c in store.calls(limit=None)}
        assert sorted(calls) == ["c-20", "c-4"]
        assert calls["c-20"]["messages"][0]["content"] == "a NUL \ufffd in a message"
        assert "a NUL character in a call record was stored as U+FFFD" in capfd.readouterr().err
    finally:
        store.close()


# -- a closed store ----------------------------------------------------------------------------

def test_a_closed_store_refuses_at_once(tmp_path):
    """flush() on a closed store waited for ever for a writer that had stopped."""
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.close()
    outcome: list[BaseException | None] = []

    def flush() -> None:
        try:
            store.flush()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - what it raised is the point
            outcome.append(exc)

    thread = threading.Thread(target=flush, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "flush() on a closed store hangs"
    assert isinstance(outcome[0], StoreError) and "is closed" in str(outcome[0])
    with pytest.raises(StoreError, match="is closed"):
        store.record_call(_call("late"))
    store.close()  # closing twice is harmless


RESEARCH_ON_A_CLOSED_STORE = """
import asyncio, logging, sys
from jurist.research import ResearchEvaluation, research_config
from jurist.research import stages as st
from jurist.errors import StoreError
from jurist.store import Store
from tests.research.fakes import GOOD_ANSWER, GOOD_PLAN, GOOD_RETRIEVAL, FakeEvaluator, Planner, Synthesiser
from tests.server.test_research_live import QUERY, Search
logging.basicConfig(level=logging.ERROR, stream=sys.stdout, format="%(message)s")
store = Store(sys.argv[1])
store.close()
async def main():
    evaluators = {st.PLAN: FakeEvaluator(st.PLAN, GOOD_PLAN), st.RETRIEVAL: FakeEvaluator(st.RETRIEVAL, GOOD_RETRIEVAL),
                  st.ANSWER: FakeEvaluator(st.ANSWER, GOOD_ANSWER)}
    try:
        async with ResearchEvaluation(research_config({}), store=store, evaluators=evaluators) as ev:
            await ev.run(QUERY, Planner(), Search(), Synthesiser())
    except StoreError as exc:
        print("refused:", exc)
    else:
        print("finished")
asyncio.run(main())
"""


def test_a_research_run_on_a_closed_store_fails_fast_with_a_clear_error(tmp_path):
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", RESEARCH_ON_A_CLOSED_STORE, f"sqlite:///{tmp_path}/r.db"],
                         capture_output=True, text=True, timeout=60, cwd=root)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "could not persist research evaluation" in run.stdout  # the record: logged, as every store failure
    assert f"refused: the store sqlite:///{tmp_path}/r.db is closed" in run.stdout  # and the run ends with it


def test_an_option_the_sqlite_driver_would_ignore_is_refused(tmp_path):
    """?connect_timeout= on a SQLite URL was dropped with nothing but a library warning."""
    url = f"sqlite:///{tmp_path}/opts.db?connect_timeout=3"
    with pytest.raises(ConfigError, match="'connect_timeout' are not accepted by the pysqlite driver; remove it"):
        Store(url)
    assert not (tmp_path / "opts.db").exists()
