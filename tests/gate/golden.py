"""The gate's stored records, its events and the proxy's responses, as text to compare across versions.

``python -m tests.gate.golden --write`` runs a fixed set of gated requests and
writes what they produced to ``tests/gate/data/golden.json``; the test
(``test_golden.py``) runs them again and compares the text. The cases go
through the scripted provider (``scripted/gen``, ``scripted/judge``) and, for
the proxy, the scripted HTTP upstream (:class:`jurist.testing.ProviderServer`):

- ``gate.*``: a request gated in Python: every event as ``event: <type>`` and
  its ``data`` as JSON, after an event that carries the record its
  ``gate_payload`` (``result:``), then the stored ``evaluations`` row with its ``scores`` rows;
- ``proxy.*``: the raw body of ``POST /v1/chat/completions`` (the JSON of a
  non-streamed answer, the SSE text of a streamed one) and its status.

Volatile values are replaced in the text itself, so everything else (the
keys, their order, the spacing) is compared byte for byte: 32-hex ids
(``call_id``, row ids) by ``<id>``, the scripted upstream's port by
``<port>``, ``latency_ms``, ``created`` and ``ts`` by 0, the upstream's
``date``, ``server`` and ``content-length`` headers by ``<header>``, and the row columns that
hold times (``created_at`` ...) are left out.
Nothing else varies: trace ids are fixed per case.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator

DATA = Path(__file__).parent / "data" / "golden.json"

QUESTION = [{"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "When was the Eiffel Tower built and how tall is it?"}]
GOOD = json.dumps({"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": None})
BAD = json.dumps({"quality_score": 0.2, "confidence_score": 0.8, "issues": ["misses the height"],
                  "improvement_hint": "Give the height too."})
# Row columns that hold times or depend on the clock.
_CLOCK = {"created_at", "updated_at", "started_at", "finished_at"}

_VOLATILE = [
    (re.compile(r'"[0-9a-f]{32}"'), '"<id>"'),
    (re.compile(r"127\.0\.0\.1:[0-9]+"), "127.0.0.1:<port>"),
    (re.compile(r'("(?:latency_ms|created|ts)":\s*)-?[0-9][0-9.e+-]*'), r"\g<1>0"),
    # The upstream's response headers in call entries: its clock, its Python version, and the length of a
    # body that holds the scripted server's running reply number.
    (re.compile(r'("(?:date|server|content-length)":\s*)"[^"]*"'), r'\g<1>"<header>"'),
]


def normalise(text: str) -> str:
    """``text`` with its volatile values replaced (see the module doc)."""
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return text


def _dump(value: Any) -> str:
    return json.dumps(value, default=str)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in _CLOCK}


async def _gate_case(home: Path, name: str, config: dict[str, Any], gen: list[Any], judge: list[Any],
                     generate: Any = "scripted/gen", evaluator: Any = None) -> str:
    from jurist.config import Settings
    from jurist.gate import Gate, GateConfig
    from jurist.gate.records import gate_payload
    from jurist.models import script
    from jurist.models.scripted import forget_scripted

    forget_scripted()
    script("gen", *gen)
    script("judge", *judge)
    trace = f"golden-{name}"
    gate = Gate(GateConfig(**config), settings=Settings(home=str(home / name)), judge="scripted/judge",
                evaluator=evaluator)
    lines: list[str] = []
    try:
        async for ev in gate.stream(QUESTION, generate, trace_id=trace):
            lines.append(f"event: {ev.type}\ndata: {_dump(ev.data)}")
            if ev.result is not None:
                lines.append(f"result: {_dump(gate_payload(ev.result))}")
        store = gate.store
        store.flush()
        for row in store.evaluations(kind="gate"):
            lines.append(f"row: {_dump(_row(row))}")
            for score in store.scores_of(row["id"]):
                lines.append(f"score: {_dump(_row(score.model_dump()))}")
    finally:
        await gate.aclose()
    return normalise("\n".join(lines))


async def _words(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
    for word in ("Built ", "in ", "1889."):
        yield word


async def _function_judge(messages: list[dict[str, Any]], answer: str) -> float:
    return 0.9 if "1889" in answer else 0.1


async def gate_cases(home: Path) -> dict[str, str]:
    blocking = {"evaluate_feedback_enabled": True, "strategy": "blocking"}
    return {
        "gate.regenerated": await _gate_case(home, "regenerated", blocking, ["first", "second"], [BAD, GOOD]),
        "gate.revision": await _gate_case(home, "revision", {**blocking, "strategy": "revision"},
                                          ["first answer", "second answer"], [BAD, GOOD]),
        "gate.comprehensiveness": await _gate_case(
            home, "comprehensiveness", {**blocking, "evaluator": "comprehensiveness"}, ["1889.", "1889, 330 m."],
            [json.dumps({"comprehensive": False, "reason": "height missing"}),
             json.dumps({"comprehensive": True, "reason": "both parts"})]),
        "gate.skipped": await _gate_case(home, "skipped", blocking, ["an answer"], ["not json", "still not json"]),
        "gate.max_regenerations": await _gate_case(home, "max_regenerations", blocking, ["one", "two"], [BAD, BAD]),
        "gate.regeneration_failed": await _gate_case(home, "regeneration_failed", blocking,
                                                     ["first", RuntimeError("no capacity")], [BAD]),
        "gate.error": await _gate_case(home, "error", blocking, [RuntimeError("the generator is down")], []),
        "gate.feedback_off": await _gate_case(home, "feedback_off", {}, ["Built in 1889."], [GOOD]),
        "gate.functions": await _gate_case(home, "functions", blocking, [], [], generate=_words,
                                           evaluator=_function_judge),
    }


def proxy_cases(home: Path) -> dict[str, str]:
    import httpx

    from jurist.config import Settings
    from jurist.models import script
    from jurist.models.scripted import forget_scripted
    from jurist.server import create_app
    from jurist.testing import ProviderServer, Reply
    from jurist.testing.replies import tool_call, tool_reply
    from tests.server.live import running

    config = {"evaluate_feedback_enabled": True, "judge": "scripted/judge"}
    ask = [{"role": "user", "content": "What is the capital of France?"}]
    base_chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-test"}
    broken = "".join(f"data: {json.dumps({**base_chunk, 'choices': [{'index': 0, 'delta': {'content': w}, 'finish_reason': None}]})}\n\n"
                     for w in ("Paris", "is"))
    broken += f"data: {json.dumps({'error': {'message': 'upstream exploded', 'type': 'server_error', 'code': 500}})}\n\n"
    cases: list[tuple[str, list[Any], list[Any], dict[str, Any]]] = [
        ("passed", [Reply(text="Paris is the capital of France.", input_tokens=11, output_tokens=4)], [GOOD], {}),
        ("regenerated", [Reply(text="Paris."), Reply(text="Paris, on the Seine.")], [BAD, GOOD], {}),
        ("skipped", [Reply(text="Paris.")], ["not json", "still not json"], {}),
        ("broken", [Reply(body=broken)], [], {}),
        ("refused", [Reply(status=500)], [], {}),
        ("tool_call", [tool_reply(tool_call("lookup", {"city": "Paris"}))], [],
         {"tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]}),
    ]
    out: dict[str, str] = {}
    for stream in (False, True):
        for name, replies, verdicts, extra in cases:
            forget_scripted()
            script("judge", *verdicts)
            with ProviderServer() as provider:
                provider.script(*replies)
                app = create_app(Settings(home=str(home / f"proxy-{name}-{stream}")), upstream=provider.base_url,
                                 gate_config=config)
                with running(app) as base:
                    r = httpx.post(f"{base}/v1/chat/completions", timeout=30,
                                   json={"model": "gpt-test", "messages": ask, "stream": stream, **extra},
                                   headers={"x-jurist-trace-id": f"golden-proxy-{name}-{stream}",
                                            "authorization": "Bearer sk-caller"})
                    store = app.state.proxy.runtime.store
                    store.flush()
                    rows = [_dump(r_["payload"]) for r_ in store.evaluations(kind="gate")]
            kind = "sse" if stream else "json"
            out[f"proxy.{kind}.{name}"] = normalise(
                f"status: {r.status_code}\n{r.text}" + "".join(f"\nstored: {row}" for row in rows))
    return out


def produce() -> dict[str, str]:
    """Every case's normalised text, by case name."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        out = asyncio.run(gate_cases(home))
        out.update(proxy_cases(home))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {DATA}")
    args = parser.parse_args(argv)
    out = produce()
    if args.write:
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    else:
        print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
