"""`jurist experiment compare A B`: which answers got worse between two experiments, and is the drop real.

Exit codes: 0 compared (and, with ``--fail-on-regression``, the gate passed); 1 the gate
failed (a significant drop, or more than ``--max-regressions`` items went from pass to fail);
2 refused (the runs are not like with like: different judges or dataset versions, unless
``--allow-different``), an experiment not found, or a bad option.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, EXIT_FAILURES, EXIT_OK, JsonOpt, OutputOpt, ResamplesOpt, SeedOpt,
                               console, err_console, handle_errors, load_settings, show_report)

if TYPE_CHECKING:  # pragma: no cover
    from jurist.experiments.compare import ExperimentComparison
    from jurist.store import Store

ANSWER_CHARS = 60  # of each answer in the terminal's item table (--json has them whole)


def _cut(text: str | None, n: int = ANSWER_CHARS) -> str:
    if text is None:
        return "—"
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def print_comparison(c: "ExperimentComparison", gate_reasons: list[str] | None) -> None:
    from rich.table import Table

    from jurist.experiments.compare_summary import cost, interval, number, p_plain as p_cell

    if c.allowed_different:
        console.print(f"[bold yellow]NOT LIKE WITH LIKE[/] (compared with --allow-different): "
                      f"{escape('; '.join(c.different))}", highlight=False)
    for label, s in (("A (baseline)", c.a), ("B (candidate)", c.b)):
        console.print(escape(f"{label} {s.name}: target {s.target}, dataset {s.dataset}@{s.dataset_version}, judge "
                             f"{', '.join(s.judge_models) or 'none recorded'}, {s.status}, "
                             f"cost {cost(s.cost_usd, s.cost_note)}"), highlight=False)
    for note in c.notes:
        if not (c.allowed_different and note.startswith("compared although")):
            console.print(escape(f"note: {note}"), highlight=False)
    table = Table(title=f"B − A per score (Benjamini–Hochberg across the scores, alpha {c.alpha:g}; "
                        f"bootstrap 95% intervals, {c.resamples} resamples, seed {c.seed})", title_justify="left")
    for col in ("score", "pairs", "mean A", "mean B", "B − A [95% CI]", "Wilcoxon p", "pass→fail", "fail→pass",
                "sign test p", "significant drop"):
        table.add_column(col, overflow="fold")
    for m in c.metrics:
        table.add_row(escape(m.name), str(m.pairs), number(m.mean_a), number(m.mean_b), interval(m),
                      escape(p_cell(m.scores)), str(m.regressions), str(m.improvements), escape(p_cell(m.flips)),
                      "[bold red]yes[/]" if m.significant_drop else "no")
    console.print(table)
    changed = [r for r in c.items if r.change in ("regression", "improvement") or r.not_paired
               or (r.difference is not None and r.difference != 0)]
    if changed:
        items = Table(title="Items that changed, or could not be compared", title_justify="left")
        for col in ("item", "answer A", "answer B", "A", "B", "B − A", "change"):
            items.add_column(col, overflow="fold")
        for r in changed:
            what = r.change if r.change in ("regression", "improvement") else (r.not_paired or "score changed")
            style = "red" if r.change == "regression" else "green" if r.change == "improvement" else ""
            items.add_row(escape(r.item_id), escape(_cut(r.answer_a if r.answer_a is not None else r.error_a)),
                          escape(_cut(r.answer_b if r.answer_b is not None else r.error_b)), number(r.score_a),
                          number(r.score_b), number(r.difference, signed=True),
                          f"[{style}]{escape(what)}[/]" if style else escape(what))
        console.print(items)
    unchanged = len(c.items) - len(changed)
    console.print(escape(f"{len(c.regressions)} regression(s) (pass → fail), {len(c.improvements)} improvement(s) "
                         f"(fail → pass); {unchanged} item(s) scored the same in both (--json lists every item)"),
                  highlight=False)
    for label, ids in (("A", c.rubrics_only_in_a), ("B", c.rubrics_only_in_b)):
        if ids:
            console.print(escape(f"rubrics judged only in {label} (not compared): {', '.join(ids)}"), highlight=False)
    if gate_reasons is not None:
        if gate_reasons:
            for reason in gate_reasons:
                console.print(f"[bold red]gate failed:[/] {escape(reason)}", highlight=False)
        else:
            console.print("[bold green]gate passed[/]: no significant drop, no more regressions than allowed",
                          highlight=False)


def write_summary(markdown: str, summary: Path | None) -> list[Path]:
    """The markdown to ``summary`` (replaced) and appended to ``$GITHUB_STEP_SUMMARY`` when set."""
    written = []
    if summary is not None:
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(markdown + "\n", encoding="utf-8")
        written.append(summary)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as f:
            f.write(markdown + "\n")
        written.append(Path(step))
    return written


def load_and_compare(store: "Store", a: str, b: str, *, allow_different: bool, alpha: float, resamples: int,
                     seed: int) -> "ExperimentComparison":
    """Read experiments ``a`` and ``b`` (and their dataset's inputs) from the store and compare them."""
    from jurist.experiments.compare import compare_experiments
    from jurist.experiments.compare_store import stored_runs

    runs = store.read(stored_runs, a, b)
    return compare_experiments(runs.a, runs.items_a, runs.b, runs.items_b, inputs=runs.inputs,
                               allow_different=allow_different, alpha=alpha, resamples=resamples, seed=seed)


def register(app: typer.Typer) -> None:
    @app.command("compare")
    @handle_errors
    def compare_cmd(
        a: str = typer.Argument(..., metavar="A", help="The baseline experiment's name."),
        b: str = typer.Argument(..., metavar="B", help="The candidate experiment's name (differences are B − A)."),
        allow_different: bool = typer.Option(False, "--allow-different", help="Compare experiments judged by "
                                             "different judges or run on different dataset versions (the report "
                                             "says so at the top)."),
        fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 when a score's drop "
                                                "is significant or more than --max-regressions items went from "
                                                "pass to fail."),
        alpha: float = typer.Option(0.05, "--alpha", min=0.0, max=1.0, help="Significance level of the "
                                    "Benjamini–Hochberg adjusted tests."),
        max_regressions: int = typer.Option(0, "--max-regressions", min=0, help="Items allowed to go from pass "
                                            "to fail under --fail-on-regression."),
        summary: Optional[Path] = typer.Option(None, "--summary", help="Write a markdown summary here (it is "
                                               "also appended to $GITHUB_STEP_SUMMARY when that is set)."),
        resamples: int = ResamplesOpt,
        seed: int = SeedOpt,
        as_json: bool = JsonOpt,
        output: Optional[Path] = OutputOpt,
        config: Optional[str] = ConfigOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Compare two experiments item by item: both answers and scores side by side, the mean difference
        per rubric with a bootstrap interval, Wilcoxon and sign tests (Benjamini–Hochberg), the items that
        went from pass to fail."""
        from jurist.experiments.compare import gate
        from jurist.experiments.compare_summary import summary_markdown
        from jurist.extras import require_extra
        from jurist.store import Store

        require_extra("analysis", "jurist experiment compare")
        settings = load_settings(config, db=db)
        store = Store(settings.database)
        try:
            comparison = load_and_compare(store, a, b, allow_different=allow_different, alpha=alpha,
                                          resamples=resamples, seed=seed)
        finally:
            store.close()
        reasons = gate(comparison, max_regressions) if fail_on_regression else None
        data = comparison.model_dump(mode="json")
        data["gate"] = None if reasons is None else {"passed": not reasons, "reasons": reasons,
                                                     "max_regressions": max_regressions}
        show_report(data, lambda _: print_comparison(comparison, reasons), as_json=as_json, output=output)
        for path in write_summary(summary_markdown(comparison, reasons), summary):
            if not as_json:
                console.print(escape(f"summary written to {path}"), highlight=False)
        if reasons:
            if as_json:  # the tables said it already
                err_console.print(escape(f"gate failed: {'; '.join(reasons)}"), highlight=False)
            raise typer.Exit(EXIT_FAILURES)
        raise typer.Exit(EXIT_OK)


__all__ = ["register"]
