"""The gate demo: a small generator answering from a bundled knowledge file,
gated by a judge's comprehensiveness check (offline by default).

The generator (:class:`KnowledgeGenerator`) answers from the single best
matching fact of ``examples/gate/knowledge.json``; asked again with note 004's
encouragement, it answers from every matching fact. The gate judges with
``local/minilm`` unless given another judge: an answer is comprehensive when
every part of the question is covered. With the local judge the first question
passes at once and the second (two questions in one) is regenerated once and
then accepted; another judge decides for itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from jurist.config import Settings
from jurist.demo import examples_dir
from jurist.errors import UNDECIDED
from jurist.gate.config import GateConfig
from jurist.gate.gate import Gate
from jurist.gate.records import GateRecord
from jurist.gate.types import ENCOURAGEMENT
from jurist.models.messages import Message, messages_from_openai
from jurist.models.registry import LOCAL_JUDGE

_WORD = re.compile(r"[a-z]+")


class Fact(BaseModel):
    """One fact of the knowledge file: the words that find it, and its text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    keywords: frozenset[str]
    text: str


class KnowledgeGenerator:
    """An example generator: keyword matching over facts, no model."""

    def __init__(self, facts: Sequence[Fact]) -> None:
        self.facts = list(facts)

    @staticmethod
    def _question(messages: Sequence[Message]) -> str:
        for m in reversed(messages):
            if m.role == "user" and m.text != ENCOURAGEMENT:
                return m.text
        return ""

    async def __call__(self, asked: list[dict[str, Any]]) -> str:
        """The best fact; every matching fact when asked to be more thorough (``asked``: the
        messages, as the gate passes them to a generator function)."""
        messages = messages_from_openai(asked)
        words = set(_WORD.findall(self._question(messages).lower()))
        ranked = sorted(self.facts, key=lambda f: -len(words & f.keywords))
        thorough = messages[-1].text == ENCOURAGEMENT
        chosen = [f for f in ranked if len(words & f.keywords) >= 2] if thorough else ranked[:1]
        return " ".join(f.text for f in chosen or ranked[:1])


async def run_gate_demo(console: Console, settings: Settings, output_dir: Path, judge: str = LOCAL_JUDGE) -> int:
    """Gate the bundled questions with ``judge``; print each answer and its evaluations. 0 when
    every answer was judged and, with the local judge, the first was accepted at once and the
    second after one regeneration."""
    data = json.loads((examples_dir() / "gate" / "knowledge.json").read_text(encoding="utf-8"))
    generator = KnowledgeGenerator([Fact.model_validate(f) for f in data["facts"]])
    config = GateConfig(strategy="blocking", evaluator="comprehensiveness", evaluate_feedback_enabled=True)
    gate = Gate(config, settings=settings, judge=judge)
    results: list[GateRecord] = []
    by = "the offline local judge (local/minilm)" if judge == LOCAL_JUDGE else f"the judge {judge}"
    try:
        console.print(f"[bold]Response gate[/]: comprehensiveness checked by {escape(by)}", highlight=False)
        for question in data["questions"]:
            result = await gate.run([{"role": "user", "content": question}], generator)
            results.append(result)
            _show(console, question, result)
    finally:
        await gate.aclose()
    output_dir.mkdir(parents=True, exist_ok=True)
    out = output_dir / "gate_demo.json"
    out.write_text(json.dumps([r.to_json() for r in results], indent=2, ensure_ascii=False), encoding="utf-8")
    console.print(f"Results written to {escape(str(out))}")
    undecided = [ev.reason or ev.skipped_reason for r in results for a in r.attempts if (ev := a.evaluation)
                 and UNDECIDED in f"{ev.reason or ''} {ev.skipped_reason or ''}"]
    if undecided:  # the offline judge said it could not decide: a result the demo shows, not a fault of the run
        console.print(f"The judge could not decide {len(undecided)} evaluation(s) and said so (uncertain).",
                      highlight=False)
        return 0
    skipped = [r.skip_reason or r.error or str(r.accept_reason) for r in results if r.status != "ok"]
    if skipped:
        console.print(f"[red]Not every answer was judged: {escape('; '.join(skipped))}[/]", highlight=False)
        return 1
    if judge == LOCAL_JUDGE and not ([len(r.attempts) for r in results] == [1, 2]
                                     and all(r.accept_reason == "passed" for r in results)):
        console.print("[red]The demo did not go as expected (one accepted, one regenerated answer).[/]")
        return 1
    return 0


def _show(console: Console, question: str, result: GateRecord) -> None:
    verdict = "accepted at once" if len(result.attempts) == 1 else f"regenerated {len(result.attempts) - 1}x"
    console.print(f"\n[bold]Q:[/] {escape(question)}  [dim]({verdict}, {result.accept_reason})[/]")
    table = Table("attempt", "kind", "comprehensive", "reason", "answer")
    for a in result.attempts:
        ev = a.evaluation
        table.add_row(str(a.number), a.kind, "-" if ev is None else str(ev.comprehensive),
                      escape((ev.reason or ev.skipped_reason or "") if ev else ""), escape(a.text))
    console.print(table)
    console.print(f"[bold]A:[/] {escape(result.answer)}")
