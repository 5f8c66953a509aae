"""An experiment comparison as a markdown summary (``--summary FILE``, ``$GITHUB_STEP_SUMMARY``).

Everything the runs wrote (item ids, answers, names) is text in the summary, never markup:
``|``, ``*``, ``_``, ``~``, ``#``, backquotes and brackets are escaped for markdown, ``<``, ``>`` and ``&``
for the HTML a markdown renderer passes through, and line breaks become spaces.
"""

from __future__ import annotations

import re

from jurist.experiments.compare import ExperimentComparison, MetricComparison, Test

ANSWER_CHARS = 160  # of each answer shown beside a regression
LISTED = 50  # item ids listed per group
_MARKUP = re.compile(r"([\\`*_\[\]|~#])")  # what marks text up inline (`<` and `>` become entities)


def md(text: object) -> str:
    """``text`` shown as itself in markdown (and in the HTML markdown lets through)."""
    s = " ".join(str(text).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKUP.sub(r"\\\1", s)


def number(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "—"
    if x == 0:
        return "0"  # not +0 or -0
    return f"{x:+.3g}" if signed else f"{x:.3g}"


def p_plain(t: Test) -> str:
    """``0.0123 (adj. 0.0246)``, or why there is no p-value ("not enough pairs: 4 ...")."""
    if t.p_value is None:
        return t.note or "no test"
    adjusted = "" if t.p_adjusted is None else f" (adj. {t.p_adjusted:.3g})"
    return f"{t.p_value:.3g}{adjusted}"


def p_text(t: Test) -> str:
    return md(p_plain(t)) if t.p_value is None else p_plain(t)


def interval(m: MetricComparison) -> str:
    if m.difference is None:
        return "—"
    if m.ci_low is None or m.ci_high is None:
        return number(m.difference, signed=True)
    return f"{number(m.difference, signed=True)} [{number(m.ci_low, True)}, {number(m.ci_high, True)}]"


def cost(x: float | None, note: str | None) -> str:
    if x is None:
        return "unknown" + (f" ({md(note)})" if note else "")
    return f"${x:,.4f}" + (f" ({md(note)})" if note else "")


def _short(text: str | None) -> str:
    if text is None:
        return "—"
    flat = " ".join(text.split())
    return md(flat if len(flat) <= ANSWER_CHARS else flat[:ANSWER_CHARS] + "…")


def _ids(ids: list[str]) -> str:
    shown = ", ".join(f"`{i.replace('`', '')}`" for i in ids[:LISTED])
    return shown + (f" and {len(ids) - LISTED} more" if len(ids) > LISTED else "")


def summary_markdown(c: ExperimentComparison, gate_reasons: list[str] | None = None) -> str:
    """The comparison as markdown; ``gate_reasons`` (given with ``--fail-on-regression``: empty
    when the gate passes) adds the gate's verdict."""
    a, b = c.a, c.b
    lines = [f"## jurist experiment compare: {md(a.name)} → {md(b.name)}", ""]
    if c.allowed_different:
        lines += [f"> **Not like with like** (compared with --allow-different): {md('; '.join(c.different))}", ""]
    lines += [
        f"A (baseline) **{md(a.name)}**: target {md(a.target)}, dataset {md(a.dataset)}@{md(a.dataset_version)}, "
        f"judge {md(', '.join(a.judge_models) or 'none recorded')}, {a.status}, cost {cost(a.cost_usd, a.cost_note)}",
        "",
        f"B (candidate) **{md(b.name)}**: target {md(b.target)}, dataset {md(b.dataset)}@{md(b.dataset_version)}, "
        f"judge {md(', '.join(b.judge_models) or 'none recorded')}, {b.status}, cost {cost(b.cost_usd, b.cost_note)}",
        ""]
    for note in c.notes:
        if not (c.allowed_different and note.startswith("compared although")):
            lines.append(f"- {md(note)}")
    if c.notes:
        lines.append("")
    if gate_reasons is not None:
        lines += ([f"**Gate: failed.** {md(r)}" for r in gate_reasons] if gate_reasons else ["**Gate: passed.**"])
        lines.append("")
    lines += ["| score | pairs | mean A | mean B | B − A [95% CI] | Wilcoxon p | pass → fail | fail → pass "
              "| sign test p | significant drop |",
              "|---|---:|---:|---:|---|---|---:|---:|---|---|"]
    for m in c.metrics:
        lines.append(f"| {md(m.name)} | {m.pairs} | {number(m.mean_a)} | {number(m.mean_b)} | {interval(m)} | "
                     f"{p_text(m.scores)} | {m.regressions} | {m.improvements} | {p_text(m.flips)} | "
                     f"{'**yes**' if m.significant_drop else 'no'} |")
    lines += ["", f"Tests at alpha {c.alpha:g}, Benjamini–Hochberg adjusted across the scores; bootstrap "
              f"intervals from {c.resamples} resamples (seed {c.seed}).", ""]
    rows = {r.item_id: r for r in c.items}
    if c.regressions:
        lines += [f"### Regressions (pass → fail): {len(c.regressions)}", "",
                  "| item | score A | score B | answer A | answer B |", "|---|---:|---:|---|---|"]
        for iid in c.regressions[:LISTED]:
            r = rows[iid]
            lines.append(f"| {md(iid)} | {number(r.score_a)} | {number(r.score_b)} | {_short(r.answer_a)} | "
                         f"{_short(r.answer_b if r.answer_b is not None else r.error_b)} |")
        if len(c.regressions) > LISTED:
            lines.append(f"\n{len(c.regressions) - LISTED} more regressions are in the JSON report.")
        lines.append("")
    else:
        lines += ["No item went from pass to fail.", ""]
    for title, ids in (("Improvements (fail → pass)", c.improvements), ("Only in A", c.only_in_a),
                       ("Only in B", c.only_in_b)):
        if ids:
            lines += [f"**{title}: {len(ids)}**: {_ids(ids)}", ""]
    unpaired = {k: v for k, v in c.not_paired.items() if k not in set(c.only_in_a) | set(c.only_in_b)}
    if unpaired:
        lines += [f"**Not compared: {len(unpaired)}**", ""]
        lines += [f"- `{k.replace('`', '')}`: {md(v)}" for k, v in list(unpaired.items())[:LISTED]]
        lines.append("")
    for label, ids in (("A", c.rubrics_only_in_a), ("B", c.rubrics_only_in_b)):
        if ids:
            lines += [f"Rubrics judged only in {label} (not compared): {md(', '.join(ids))}", ""]
    return "\n".join(lines)


__all__ = ["summary_markdown"]
