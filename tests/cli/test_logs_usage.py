"""`jurist logs` shows n/a for the tokens of a call whose endpoint reported no usage, old rows included."""

from __future__ import annotations

import json

from rich.console import Console

from jurist.cli.logs import calls_table
from jurist.models.base import CallRecord
from jurist.store import Store

from tests.conftest import run_cli


def _call(cid: str, usage_known: bool) -> CallRecord:
    return CallRecord(id=cid, trace_id="t", purpose="generation", model="openai/m", endpoint="http://e/v1",
                      messages=[{"role": "user", "content": "hi"}], params={"stream": True}, request_hash="h",
                      response_text="Paris.", input_tokens=0 if not usage_known else 7,
                      output_tokens=0 if not usage_known else 2, latency_ms=12.0, attempts=1, status="ok",
                      usage_known=usage_known)


def test_a_call_without_reported_usage_shows_na_tokens(tmp_path):
    db = f"sqlite:///{tmp_path}/j.db"
    store = Store(db)
    try:
        store.record_call(_call("known", True))
        store.record_call(_call("unknown", False))
        store.flush()
        rows = {r["id"]: r for r in store.calls(limit=None)}
    finally:
        store.close()
    console = Console(width=120, record=True)
    console.print(calls_table([rows["unknown"]], 120))
    assert "n/a" in console.export_text() and "0/0" not in console.export_text()
    console = Console(width=120, record=True)
    console.print(calls_table([rows["known"]], 120))
    assert "7/2" in console.export_text() and "n/a" not in console.export_text()
    out = run_cli("logs", "--json", "--db", db, cwd=tmp_path).stdout
    assert {json.loads(line)["id"]: json.loads(line)["usage_known"] for line in out.splitlines()} == {
        "known": True, "unknown": False}
