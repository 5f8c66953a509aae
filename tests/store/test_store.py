"""The store on SQLite and on the machine's PostgreSQL."""

import asyncio
import time
import uuid
from datetime import datetime, timezone

import pytest
from pydantic import ValidationError
from sqlalchemy import event, insert, inspect

from jurist.errors import ConfigError, StoreError
from jurist.models.base import CallRecord
from jurist.models.messages import openai_messages
from jurist.store import Store, normalise_url, queries
from jurist.store.tables import llm_calls


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/s.db"
    else:
        url = request.getfixturevalue("pg_url")
    s = Store(url)
    with s.engine.begin() as conn:  # the PostgreSQL database is shared by the test run
        for table in ("scores", "evaluations", "llm_calls"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    yield s
    s.close()


def call(**kw):
    base = dict(
        id=uuid.uuid4().hex, trace_id="t", purpose="rubric_judge", model="scripted/x", endpoint="e",
        messages=[{"role": "user", "content": "héllo"}], params={"temperature": 0.0}, request_hash="h1",
        response_text="SCORE: 4", input_tokens=3, output_tokens=2, latency_ms=1.5, attempts=1, status="ok",
    )
    base.update(kw)
    return CallRecord(**base)


def test_migrations_create_the_tables(store):
    names = set(inspect(store.engine).get_table_names())
    assert {"llm_calls", "evaluations", "scores", "alembic_version"} <= names
    Store(store.url).close()  # opening again is a no-op migration


def test_calls_round_trip_and_filters(store):
    store.record_call(call())
    store.record_call(call(status="error", error="boom", purpose="other", response_text=None))
    store.flush()
    assert len(store.calls(limit=None)) == 2
    [row] = store.calls(purpose="other")
    assert row["status"] == "error" and row["error"] == "boom"
    [row] = store.calls(status="ok")
    assert row["messages"] == [{"role": "user", "content": "héllo"}]
    assert store.calls(trace_id="nope") == []


def test_whether_usage_was_reported_is_stored_with_each_call(store):
    store.record_call(call(id="known"))
    store.record_call(call(id="unknown", usage_known=False, input_tokens=0, output_tokens=0))
    store.flush()
    rows = {r["id"]: r for r in store.calls(limit=None)}
    assert rows["known"]["usage_known"] is True and rows["unknown"]["usage_known"] is False
    assert "usage" not in rows["unknown"]["params"]  # a field of its own, not a word in the params


def test_a_call_record_is_typed_and_frozen():
    record = call(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert [m.role for m in record.messages] == ["system", "user"] and not record.failed
    assert call(status="parse_error").failed and call(status="error").failed
    with pytest.raises(ValidationError):
        call(status="failed")  # not a status
    with pytest.raises(ValidationError, match="did you mean 'content'"):
        call(messages=[{"role": "user", "contnet": "x"}])
    with pytest.raises(ValidationError):
        record.status = "error"


def test_cached_reply_is_the_latest_ok_answer(store):
    store.record_call(call(status="error", response_text=None, request_hash="h2"))
    store.flush()
    assert asyncio.run(store.cached_reply("h2")) is None
    store.record_call(call(request_hash="h2", response_text="answer"))
    store.flush()
    assert asyncio.run(store.cached_reply("h2"))["text"] == "answer"


def test_evaluations_with_scores(store):
    ev = dict(id=uuid.uuid4().hex, kind="rubric", subject_id="s1", trace_id="t", status="partial", score=4.0,
              max_score=5.0, percentage=80.0, judge_model="m", rubrics_version="1.0", source="f",
              payload={"session_id": "s1"})
    store.save_evaluation(ev, [
        dict(key="a", name="A", score=4.0, max_score=5.0, weight=1.0, status="scored", reason="r",
             judge_model="m", template_hash="x", input_tokens=1, output_tokens=1, latency_ms=1.0, call_id="c"),
        dict(key="b", name="B", score=None, max_score=5.0, weight=1.0, status="evaluation_failed",
             reason="timed out", judge_model="m", template_hash="x", input_tokens=0, output_tokens=0,
             latency_ms=0.0, call_id=None),
    ])
    store.flush()
    [row] = store.evaluations(kind="rubric")
    assert row["payload"] == {"session_id": "s1"} and row["status"] == "partial"
    scores = store.scores_of(row["id"])
    assert [s.status for s in scores] == ["scored", "evaluation_failed"] and scores[1].score is None


def test_typed_rows_and_plain_rows_share_one_batch(store):
    """A typed row (payload a model with kind and version) and a dict of columns are written alike."""
    from jurist.checklist import ChecklistTurn
    from jurist.store import EvaluationRow, evaluation_values

    turn = ChecklistTurn(id="t1", session_id="cs", message_seq=1, status="ok", recalled={"p": 0.9})
    typed = EvaluationRow(id="typed", subject_id="cs", status="scored", score=0.5, max_score=1.0, payload=turn)
    values = evaluation_values(typed)
    assert values["kind"] == "checklist" and values["payload"] == turn.to_json() and "created_at" not in values
    assert values["passed"] is None and values["iterations"] == 1
    store.save_evaluation(typed, [])
    store.save_evaluation(dict(id="plain", kind="rubric", subject_id="s", status="scored", payload={"x": 1}), [])
    store.save_evaluation_once(EvaluationRow(id="once", subject_id="cs", status="scored", payload=turn), [])
    store.flush()
    rows = {r["id"]: r for r in store.evaluations(limit=None)}
    assert rows["typed"]["kind"] == rows["once"]["kind"] == "checklist"
    assert rows["typed"]["payload"] == {**turn.to_json()} and rows["typed"]["payload"]["version"] == "1.0"
    assert rows["plain"]["payload"] == {"x": 1} and rows["plain"]["iterations"] == 1


def test_an_evaluation_id_that_is_not_a_string_is_refused_when_saved(tmp_path):
    """Its score rows would carry the id as their evaluation_id: a number is refused, not stored."""
    from jurist.store import Store

    store = Store(f"sqlite:///{tmp_path / 'ids.db'}")
    try:
        with pytest.raises(TypeError, match="evaluation's id is a string"):
            store.save_evaluation(dict(id=5, kind="rubric", subject_id="s", status="scored", payload={}),
                                  [{"key": "a", "status": "scored", "score": 1.0}])
        store.flush()
        assert store.evaluations(limit=None) == []
    finally:
        store.close()


def _once(eid, subject, reason, **extra):
    ev = dict(id=eid, kind="rubric", subject_id=subject, trace_id="t", status="scored", score=4.0, max_score=5.0,
              percentage=80.0, judge_model="m", rubrics_version="1.0", payload={"subject": subject}, **extra)
    score = dict(key="a", name="A", score=4.0, max_score=5.0, weight=1.0, status="scored", reason=reason,
                 judge_model="m", template_hash="x", input_tokens=1, output_tokens=1, latency_ms=1.0, call_id=None)
    return ev, [score]


def test_save_evaluation_once_writes_each_id_once_with_its_first_scores(store):
    store.save_evaluation_once(*_once("e1", "s1", "first"))
    store.flush()
    # One batch: e1 again (already stored), e2 twice, e3 with a column the others lack.
    store.save_evaluation_once(*_once("e1", "s1", "again"))
    store.save_evaluation_once(*_once("e2", "s2", "first"))
    store.save_evaluation_once(*_once("e2", "s2", "again"))
    store.save_evaluation_once(*_once("e3", "s3", "first", source="f.jsonl"))
    store.flush()
    rows = {r["id"]: r for r in store.evaluations(limit=None)}
    assert sorted(rows) == ["e1", "e2", "e3"] and rows["e3"]["source"] == "f.jsonl"
    for eid in rows:
        assert [s.reason for s in store.scores_of(eid)] == ["first"]


def test_evaluations_written_at_once_share_one_statement_and_one_transaction(store):
    """Several new evaluations in one batch are one multi-row INSERT ... RETURNING, whose values come
    to the NUL check as one flat sequence: the batch is written as it is, not retried row by row."""
    commits = []
    event.listen(store.engine, "commit", lambda conn: commits.append(1))
    store._queue.linger = 5.0  # the three rows and the flush are taken in one batch
    for i in range(3):
        store.save_evaluation_once(*_once(f"m{i}", f"s{i}", "first"))
    store.flush()
    assert len(commits) == 1
    assert sorted(r["id"] for r in store.evaluations(limit=None)) == ["m0", "m1", "m2"]
    store.save_evaluation_once(*_once("n0", "s0", "first"))
    store.save_evaluation_once(*_once("n1", "s\x001", "first"))  # a NUL in one row: that row alone is changed
    store.flush()
    subjects = {r["id"]: r["subject_id"] for r in store.evaluations(limit=None)}
    assert (subjects["n0"], subjects["n1"]) == ("s0", "s\ufffd1")


def test_a_failed_write_is_reported_on_flush_and_the_store_keeps_working(store):
    dup = call()
    store.record_call(dup)
    store.flush()
    store.record_call(call())
    store.record_call(dup)  # same primary key: only this row is lost
    with pytest.raises(StoreError, match="could not write"):
        store.flush()
    store.record_call(call())
    store.flush()
    assert len(store.calls(limit=None)) == 3


def test_url_normalisation_and_bad_urls(tmp_path):
    assert normalise_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalise_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    with pytest.raises(ConfigError, match="JURIST_DATABASE_URL"):
        Store("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with pytest.raises(ConfigError):
        Store("notadb://x")


def test_cached_reply_lookups_search_by_request_hash(tmp_path):
    """The lookup must not read every successful call (it did, through the status index)."""
    from jurist.store.queries import cached_replies_query

    s = Store(f"sqlite:///{tmp_path}/plan.db")
    try:
        with s.engine.connect() as conn:
            sql = str(cached_replies_query({"a", "b"}).compile(conn, compile_kwargs={"literal_binds": True}))
            plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    finally:
        s.close()
    assert "ix_llm_calls_request_hash_status (request_hash=? AND status=?)" in plan


def test_schema_head_matches_the_migrations():
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from jurist.store.migrate import MIGRATIONS, SCHEMA_HEAD

    cfg = Config()
    cfg.set_main_option("script_location", MIGRATIONS)
    assert ScriptDirectory.from_config(cfg).get_current_head() == SCHEMA_HEAD


def test_work_queue_gathers_what_arrives_during_the_linger_and_urgent_items_end_it():
    import threading
    import time

    from jurist.store.store import WorkQueue

    q = WorkQueue(linger=0.3)
    q.put("a")
    threading.Timer(0.05, q.put, args=("b",)).start()  # arrives while the taker lingers
    t0 = time.monotonic()
    assert q.take() == ["a", "b"]
    assert time.monotonic() - t0 >= 0.25  # a plain item does not cut the linger short

    q.put("c")
    threading.Timer(0.05, lambda: q.put("flush", urgent=True)).start()
    t0 = time.monotonic()
    assert q.take() == ["c", "flush"]
    assert time.monotonic() - t0 < 0.25  # an urgent item ends the wait at once

    q.put("stop", urgent=True)  # urgent first item: no wait at all
    t0 = time.monotonic()
    assert q.take() == ["stop"]
    assert time.monotonic() - t0 < 0.1


def test_flush_returns_without_waiting_for_the_write_linger(store):
    import time

    store._queue.linger = 5.0  # the writer waits this long for more rows, unless asked to flush
    store.record_call(call())
    time.sleep(0.05)  # the writer has the row and lingers
    t0 = time.monotonic()
    store.flush()
    assert time.monotonic() - t0 < 2.0
    assert len(store.calls()) == 1


def test_cache_lookups_within_the_linger_share_one_query(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/s.db", lookup_linger=0.2)
    store.record_call(call(request_hash="b", response_text="cached"))
    store.flush()
    queries = []
    lookup = store._found
    store._found = lambda query, hashes: (queries.append(set(hashes)), lookup(query, hashes))[1]

    async def main():
        return await asyncio.gather(store.cached_reply("a"), store.cached_reply("b"), store.cached_reply("c"))

    try:
        a, b, c = asyncio.run(main())
    finally:
        store.close()
    assert a is None and c is None and b["text"] == "cached"
    assert queries == [{"a", "b", "c"}]


def test_an_interactive_lookup_in_a_sqlite_file_is_read_at_once_without_the_reader_thread(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/s.db")  # the interactive linger
    store.record_call(call(request_hash="b", response_text="cached"))
    store.flush()

    def not_queued(*args, **kwargs):
        raise AssertionError("the lookup went to the reader thread")

    store._lookups.put = not_queued
    try:
        a, b = asyncio.run(_lookups(store, "a", "b"))
    finally:
        del store._lookups.put  # the queue's own again: close() stops the reader through it
        store.close()
    assert a is None and b["text"] == "cached"


def test_a_lookup_read_at_once_finds_the_latest_answer_as_a_batch_lookup_does(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/s.db")
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for n, (text, status) in enumerate([("old", "ok"), ("new", "ok"), (None, "ok"), ("failed", "error")]):
        store.record_call(call(request_hash="h", response_text=text, status=status,
                               created_at=at.replace(minute=n)))
    store.flush()
    try:
        [inline] = asyncio.run(_lookups(store, "h"))
        batched = store._found(queries.cached_replies, {"h"})
    finally:
        store.close()
    assert inline == batched["h"] and inline["text"] == "new"


def test_a_failed_lookup_is_a_cache_miss_said_on_stderr(tmp_path, capsys):
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.record_call(call(request_hash="b", response_text="cached"))
    store.flush()
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE llm_calls RENAME TO llm_calls_moved")
    try:
        assert asyncio.run(_lookups(store, "b")) == [None]
    finally:
        with store.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE llm_calls_moved RENAME TO llm_calls")
        store.close()
    assert "cache lookup failed, calling the model instead" in capsys.readouterr().err


async def _lookups(store, *hashes):
    return list(await asyncio.gather(*(store.cached_reply(h) for h in hashes)))


def test_asave_evaluation_returns_once_the_row_is_committed(store):
    store._queue.linger = 5.0  # queued writes would wait this long; a durable save does not
    other = Store(store.url)  # another connection sees the row as soon as the save returns
    try:
        ev, scores = _once("durable", "s1", "first")
        store.record_call(call(id="c-durable"))
        t0 = time.monotonic()
        asyncio.run(store.asave_evaluation(ev, scores))
        assert time.monotonic() - t0 < 2.0
        assert other.evaluation("durable").subject_id == "s1"
        assert [c["id"] for c in other.calls()] == ["c-durable"]  # what was queued before it, too
        asyncio.run(store.asave_evaluation(*_once("durable", "s1", "again")))  # the same id: written once
        assert [s.reason for s in other.scores_of("durable")] == ["first"]
    finally:
        other.close()


def _insert_call(record):
    """A queued write: ``record`` inserted as the writer inserts calls."""
    row = dict(vars(record), messages=openai_messages(record.messages),
               created_at=record.created_at or datetime.now(timezone.utc))
    return lambda conn: conn.execute(insert(llm_calls), [row])


def test_queued_writes_share_a_transaction_run_in_order_and_return_once_committed(store):
    commits, order = [], []
    event.listen(store.engine, "commit", lambda conn: commits.append(1))
    store._queue.linger = 0.2
    other = Store(store.url)

    def write(name):
        def fn(conn):
            order.append(name)
            _insert_call(call(id=name))(conn)
        return fn

    async def main():
        await asyncio.gather(*(store.aqueue_write(write(n)) for n in ("w1", "w2", "w3")))
        return sorted(c["id"] for c in other.calls(limit=None))

    try:
        assert asyncio.run(main()) == ["w1", "w2", "w3"]  # committed when the writes return
    finally:
        other.close()
    assert order == ["w1", "w2", "w3"] and len(commits) == 1


def test_a_failing_queued_write_fails_alone(store):
    def bad(conn):
        _insert_call(call(id="bad"))(conn)
        raise ValueError("no")

    async def main():
        return await asyncio.gather(store.aqueue_write(_insert_call(call(id="a"))), store.aqueue_write(bad),
                                    store.aqueue_write(_insert_call(call(id="b"))), return_exceptions=True)

    a, b, c = asyncio.run(main())
    assert a is None and c is None
    assert isinstance(b, StoreError) and "ValueError: no" in str(b)
    assert sorted(c["id"] for c in store.calls(limit=None)) == ["a", "b"]


def test_what_follows_an_evaluation_is_written_with_it_or_not_at_all(store):
    async def main():
        await store.asave_evaluation(*_once("with", "s1", "r"), then=_insert_call(call(id="after")), urgent=False)

        def bad(conn):
            raise ValueError("no")

        # both awaited to the end (a gather that raised at the first error would leave "other" in flight)
        return await asyncio.gather(store.asave_evaluation(*_once("without", "s2", "r"), then=bad, urgent=False),
                                    store.asave_evaluation(*_once("other", "s3", "r"), urgent=False),
                                    return_exceptions=True)

    failed, other = asyncio.run(main())
    assert isinstance(failed, StoreError) and "ValueError: no" in str(failed)
    assert other is None
    assert [c["id"] for c in store.calls(limit=None)] == ["after"]
    assert store.evaluation("with") is not None and store.evaluation("other") is not None
    assert store.evaluation("without") is None  # its follower failed: neither is written


def test_non_finite_numbers_are_refused_on_every_database(store):
    """PostgreSQL refuses NaN in JSON; SQLite stored it, and the API then served invalid JSON."""
    ev, scores = _once("nan", "s1", "r")
    ev["payload"] = {"total_score": float("nan")}
    with pytest.raises(StoreError, match="could not write"):
        asyncio.run(store.asave_evaluation(ev, scores))
    store.record_call(call(parsed={"score": float("inf")}))
    with pytest.raises(StoreError, match="could not write"):
        store.flush()
    assert store.evaluation("nan") is None and store.calls() == []
    asyncio.run(store.asave_evaluation(*_once("fine", "s1", "r")))  # the store keeps working
    assert store.evaluation("fine") is not None


def test_the_explorer_lists_gate_and_research_rows_by_their_question_on_every_database(store):
    """The title is read from the payload by the database (the payload is not fetched): a gate's
    question, a research run's query, on one line and at most 200 characters; None otherwise."""
    from jurist.store import dashboard as q

    long_query = "Which   sources\n discuss " + "tidal energy " * 40
    payloads = {"gate": {"question": "How tall is\nthe tower?"}, "research": {"userQuery": long_query},
                "rubric": {"session_id": "s1", "question": "not a title"}, "checklist": {"message_seq": 1}}
    for kind, payload in payloads.items():
        store.save_evaluation(dict(id=f"ev-{kind}", kind=kind, subject_id=f"sub-{kind}", trace_id="t",
                                   status="completed", payload=payload), [])
    store.flush()
    titles = {e.kind: e.title for e in store.read(q.list_page, q.EvaluationFilter()).items}
    assert titles["gate"] == "How tall is the tower?"
    assert titles["research"].startswith("Which sources discuss tidal energy tidal")
    assert len(titles["research"]) == 200 and titles["research"].endswith("…")
    assert titles["rubric"] is None and titles["checklist"] is None
