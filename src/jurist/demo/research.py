"""The research demo: a tiny research pipeline over a bundled corpus, judged offline.

``examples/research/`` holds a dozen short documents on ocean acidification
(``corpus.json``), a three-part question (``question.txt``), a deliberately
incomplete first plan (``first_plan.json``: one search query, for the causes
only) and the configuration (``research.yaml``). :func:`run_research_demo`
runs a keyword planner, a keyword search and an extractive synthesiser over
them, judged by the local embedding judge (or, given another judge, by panels
of that judge with its plan critic): the plan loop finds the uncovered parts of
the question and the planner adds queries for them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from jurist.config import Settings
from jurist.demo import examples_dir
from jurist.errors import UNDECIDED
from jurist.models.registry import LOCAL_JUDGE
from jurist.research.config import ResearchConfig, load_research_config
from jurist.research.evaluation import ResearchEvaluation
from jurist.research.export import write_export
from jurist.research.plan import plan_queries
from jurist.research.records import AnswerEvaluation, EvaluationRecord, IterationDecision
from jurist.runtime import Runtime

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("""a an and are as at be by can do does done for from how in is it its of on or that the
to was what when which who why will with""".split())
_FIX_PREFIX = "add a query about "


def words(text: str) -> set[str]:
    """Lower-case content words of ``text``."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class Document(BaseModel):
    """A document of the demo's corpus (``corpus.json``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    title: str
    url: str
    content: str

    @property
    def words(self) -> set[str]:
        return words(self.title + " " + self.content)


class DemoPlan(BaseModel):
    """A plan of the demo's planner (``first_plan.json``): what the pipeline is given, as JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: str
    search_queries: tuple[str, ...]


class KeywordPipeline:
    """Planner, search and synthesiser of the demo: keywords and extraction, no model."""

    def __init__(self, corpus: list[Document], first_plan: DemoPlan) -> None:
        self.corpus = corpus
        self.first_plan = first_plan
        self.calls: list[tuple[str | None, bool]] = []  # (mode, had feedback) per planner call

    async def planner(self, query: str, feedback: IterationDecision | None, mode: str | None) -> dict[str, object]:
        """Attempt 1: the bundled plan. targeted_fix: add the queries the critic asks
        for. full_regeneration / alternative_approach: one query per question sentence."""
        self.calls.append((mode, feedback is not None))
        if feedback is None:
            return self.first_plan.model_dump(mode="json")
        if mode == "targeted_fix":
            queries = list(self.first_plan.search_queries)
            for issue in feedback.specific_issues:
                fix = issue.fix.strip()
                added = fix[len(_FIX_PREFIX):] if fix.lower().startswith(_FIX_PREFIX) else fix
                if added and added not in queries:
                    queries.append(added)
            self.first_plan = self.first_plan.model_copy(update={"search_queries": tuple(queries)})
            return self.first_plan.model_dump(mode="json")
        parts = [p.strip() for p in re.split(r"(?<=\?)\s+", query) if p.strip()]
        return DemoPlan(objective=query, search_queries=tuple(parts)).model_dump(mode="json")

    async def search(self, query: str, plan: Any, per_query: int = 2) -> list[dict[str, object]]:
        """The ``per_query`` documents sharing most words with each search query, as the pipeline's sources."""
        found: dict[str, Document] = {}
        for q in plan_queries(plan):
            qw = words(q)
            ranked = sorted(self.corpus, key=lambda d: -len(qw & d.words))
            for doc in ranked[:per_query]:
                if qw & doc.words:
                    found.setdefault(doc.id, doc)
        return [doc.model_dump() for doc in found.values()]

    async def synthesiser(self, query: str, sources: list[Any], feedback: str | None) -> str:
        """For each sentence of the question, the source sentence(s) sharing most words
        with it (two each when regenerating with feedback)."""
        sentences = [s for d in sources for s in re.split(r"(?<=[.!?])\s+", d["content"]) if s]
        picked: list[str] = []
        for part in [p for p in re.split(r"(?<=\?)\s+", query) if p.strip()]:
            pw = words(part)
            ranked = sorted(sentences, key=lambda s: -len(pw & words(s)))
            for s in ranked[: 2 if feedback else 1]:
                if s not in picked and pw & words(s):
                    picked.append(s)
        return " ".join(picked)


def _bar(score: float | None) -> str:
    if score is None:
        return "[dim]n/a[/]"
    colour = "green" if score >= 0.7 else "yellow" if score >= 0.5 else "red"
    return f"[{colour}]{score:.2f}[/]"


def print_record(console: Console, rec: EvaluationRecord) -> None:
    """The note's runtime summary: stage scores, attempts, critiques, skipped notices."""
    plan, ret, ans = rec.plan_evaluation, rec.retrieval_evaluation, rec.answer_evaluation
    if plan is not None:
        console.rule("Stage 1: Planning")
        for a in plan.attempts:
            state = "skipped" if a.evaluation_skipped else "[green]passed[/]" if a.passed else "[red]failed[/]"
            console.print(f"Attempt {a.attempt_number}/{plan.max_attempts or len(plan.attempts)} ({a.mode or 'first plan'}): {state}")
            for key, value in a.aggregated_scores.items():
                console.print(f"  {key:<24} {_bar(value)}")
            for r in a.evaluator_results:
                console.print(escape(f"  critique: {r.critique}"), highlight=False)
            if a.iteration_decision:
                console.print(escape(f"  -> iterating with {a.iteration_decision.mode}"), highlight=False)
        chosen = f" (attempt {plan.chosen_attempt})" if plan.chosen_attempt is not None else ""
        console.print(f"Final plan score: {_bar(plan.overall)}{chosen}")
    for title, sec in (("Stage 2: Retrieval", ret), ("Stage 3: Answer", ans)):
        if sec is None:
            continue
        console.rule(title)
        scores = sec.final_scores if isinstance(sec, AnswerEvaluation) else sec.aggregated_scores
        for key, value in scores.items():
            console.print(f"  {key:<24} {_bar(value)}")
        console.print(f"{title.split(': ')[1]} score: {_bar(sec.overall)}")
        if getattr(sec, "regenerated", False):
            console.print("  the answer was regenerated once with the evaluation's feedback")
    for sec_name, stage in (("plan", plan), ("retrieval", ret), ("answer", ans)):
        if stage is not None and stage.evaluation_skipped:
            console.print(f"[yellow]{sec_name.capitalize()} evaluation skipped ({escape(str(stage.skip_reason))}); "
                          "research continued without quality validation[/]", highlight=False)
        if stage is not None and stage.scoring_note:
            console.print(f"[dim]{sec_name}: {escape(stage.scoring_note)}[/]", highlight=False)
    for w in rec.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    table = Table(title="research evaluation", title_justify="left")
    for col in ("plan", "retrieval", "answer", "overall", "iterations"):
        table.add_column(col)
    plan, retrieval, answer = rec.plan_evaluation, rec.retrieval_evaluation, rec.answer_evaluation
    table.add_row(_bar(plan.overall if plan else None), _bar(retrieval.overall if retrieval else None),
                  _bar(answer.overall if answer else None), _bar(rec.overall_score),
                  str(plan.total_iterations if plan else 0))
    console.print(table)


def judged_by(config: ResearchConfig, judge: str) -> ResearchConfig:
    """``config`` with every role, the plan critic and the escalation on ``judge``."""
    roles = {role: e.model_copy(update={"model": judge}) for role, e in config.evaluators.items()}
    return config.model_copy(update={"model": judge, "evaluators": roles, "critic_model": judge,
                                     "escalation_model": judge})


async def run_research_demo(console: Console, settings: Settings, output_dir: Path,
                            judge: str = LOCAL_JUDGE) -> int:
    """Run the demo with ``judge``; persist and export the record. Exit code: 0, or 1 when a stage
    was skipped."""
    ex = examples_dir() / "research"
    corpus = [Document.model_validate(d) for d in json.loads((ex / "corpus.json").read_text(encoding="utf-8"))]
    question = (ex / "question.txt").read_text(encoding="utf-8").strip()
    first_plan = DemoPlan.model_validate_json((ex / "first_plan.json").read_text(encoding="utf-8"))
    pipeline = KeywordPipeline(corpus, first_plan)
    config: ResearchConfig = load_research_config(ex / "research.yaml")
    offline = " (offline)" if judge == LOCAL_JUDGE else ""
    console.print(f"Research question: [bold]{escape(question)}[/]\n"
                  + escape(f"corpus: {len(corpus)} documents in {ex}; judge: {judge}{offline}"), highlight=False)
    async with Runtime(settings) as runtime:
        ev = (ResearchEvaluation.local(config, runtime=runtime) if judge == LOCAL_JUDGE
              else ResearchEvaluation(judged_by(config, judge), runtime=runtime))
        async with ev:
            result = await ev.run(question, pipeline.planner, pipeline.search, pipeline.synthesiser)
    rec = result.record
    print_record(console, rec)
    console.print(escape(f"\nAnswer: {result.answer}"), highlight=False)
    folder = write_export(rec.to_json(), Path(output_dir) / "evaluations")
    console.print(escape(f"\nrecord {rec.log_id} saved in {settings.database} (kind 'research'); exported to "
                         f"{folder} (again with `jurist export {rec.log_id}`)"), highlight=False)
    # a stage the offline judge could not decide is shown as such (the reason says "uncertain: ..."), not a fault
    return 1 if rec.evaluation_skipped and UNDECIDED not in (rec.skip_reason or "") else 0
