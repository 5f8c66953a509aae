"""The text the pattern detector mines for each evaluation: what the user asked.

* rubric: the user turns of the scored session, from the transcript the store
  keeps with the evaluation (sessions from files, posted to the API or built
  in memory alike); for evaluations stored before transcripts were kept, from
  the session's JSONL file (the evaluation's ``source``) when it is still there;
* research: the record's ``userQuery``;
* gate: the last user message of the request (the record's ``continue_context``,
  read through :class:`~jurist.gate.records.GateRecord`, else the recorded
  generation call's messages);
* checklist: the checklist's title.

Evaluations without a text still count for the judge-model and prompt-version
features.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from jurist.errors import InputError, PayloadError
from jurist.gate.records import GateRecord
from jurist.payloads import read_payload
from jurist.rubrics.sessions import load_session
from jurist.store import Store
from jurist.store import analysis as q
from jurist.store.analysis import AnalysedEvaluation

MAX_TEXT = 20_000  # characters kept per evaluation
MAX_SESSION_BYTES = 5_000_000


def last_user_message(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict)) or None
    return None


def session_user_text(source: str | None) -> str | None:
    """The user turns of a session file, or None when it is gone or unreadable."""
    if not source or not source.endswith(".jsonl"):
        return None
    path = Path(source)
    try:
        if not path.is_file() or path.stat().st_size > MAX_SESSION_BYTES:
            return None
        return load_session(path).text_of("user") or None
    except (OSError, InputError):
        return None


def _payload_text(kind: str, payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return None
    if kind == "research":
        query = payload.get("userQuery") or payload.get("user_query")
        return query if isinstance(query, str) else None
    if kind == "gate":
        try:
            record = read_payload("gate", payload)
        except PayloadError:
            return None
        return last_user_message(record.continue_context) if isinstance(record, GateRecord) else None
    return None


def transcript_user_text(transcript: Any) -> str | None:
    """The user turns of a stored transcript (``{"turns": [{"role", "content"}, ...]}``), or None."""
    if not isinstance(transcript, dict) or not isinstance(transcript.get("turns"), list):
        return None
    users = [t["content"] for t in transcript["turns"]
             if isinstance(t, dict) and t.get("role") == "user" and isinstance(t.get("content"), str)]
    return "\n".join(users) or None


def _texts_sync(rows: list[AnalysedEvaluation], payloads: dict[str, JsonValue], generations: dict[str, JsonValue],
                transcripts: dict[str, JsonValue]) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in rows:
        kind = r.kind
        text: str | None = None
        if kind == "rubric":
            text = transcript_user_text(transcripts.get(r.id)) or session_user_text(r.source)
        elif kind == "checklist":
            text = r.source
        elif kind in ("research", "gate"):
            text = _payload_text(kind, payloads.get(r.id))
            if text is None and kind == "gate" and r.trace_id:
                text = last_user_message(generations.get(r.trace_id))
        if text and text.strip():
            out[r.id] = text[:MAX_TEXT]
    return out


async def texts_of(store: Store, rows: list[AnalysedEvaluation]) -> dict[str, str]:
    """evaluation id -> its text, for the evaluations that have one (reads off the event loop)."""
    payload_ids = [r.id for r in rows if r.kind in ("research", "gate")]
    payloads = await store.aread(q.payloads_of, payload_ids) if payload_ids else {}
    missing = [r.trace_id for r in rows
               if r.kind == "gate" and r.trace_id and _payload_text("gate", payloads.get(r.id)) is None]
    generations = await store.aread(q.generation_messages, missing) if missing else {}
    rubric_ids = [r.id for r in rows if r.kind == "rubric"]
    transcripts = await store.aread(q.transcripts_of, rubric_ids) if rubric_ids else {}
    return await asyncio.to_thread(_texts_sync, rows, payloads, generations, transcripts)
