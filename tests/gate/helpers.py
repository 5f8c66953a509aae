"""Shared helpers for the gate tests: scripted verdicts and generators."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from jurist.config import Settings
from jurist.gate import Gate, GateConfig, GateEvent

QUESTION = [{"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "When was the Eiffel Tower built and how tall is it?"}]


def good(score: float = 0.9) -> str:
    return json.dumps({"quality_score": score, "confidence_score": 0.9, "issues": [], "improvement_hint": None})


def bad(score: float = 0.2, hint: str = "Give the height too.") -> str:
    return json.dumps({"quality_score": score, "confidence_score": 0.8, "issues": ["misses the height"],
                       "improvement_hint": hint})


def comp(ok: bool, reason: str = "") -> str:
    return json.dumps({"comprehensive": ok, "reason": reason or ("all parts answered" if ok else "height missing")})


def gate(**cfg: Any) -> Gate:
    """A gate with feedback on, judged by ``scripted/judge``."""
    cfg.setdefault("evaluate_feedback_enabled", True)
    return Gate(GateConfig(**cfg), settings=Settings.load(), judge="scripted/judge")


async def collect(g: Gate, messages: list[dict[str, Any]] = QUESTION, generate: Any = "scripted/gen",
                  **kw: Any) -> list[GateEvent]:
    return [ev async for ev in g.stream(messages, generate, **kw)]


def kinds(events: list[GateEvent]) -> list[str]:
    """Event types with runs of deltas folded into one."""
    out: list[str] = []
    for ev in events:
        if not (ev.type == "delta" and out and out[-1] == "delta"):
            out.append(ev.type)
    return out


def slow_words(text: str, seconds: float) -> Any:
    """A generator function streaming ``text`` word by word over ``seconds``."""
    async def generate(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        words = text.split(" ")
        for w in words:
            await asyncio.sleep(seconds / len(words))
            yield w + " "
    return generate
