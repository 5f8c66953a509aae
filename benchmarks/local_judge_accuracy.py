"""Accuracy, calibration and speed of the offline local/minilm judge, on held-out public data.

    python benchmarks/local_judge_accuracy.py                 # every held-out set in full
    python benchmarks/local_judge_accuracy.py --quick         # a seeded sample of each set
    python benchmarks/local_judge_accuracy.py --json out.json # also write every figure as JSON

The data are the public, human-labelled sets of ``training/judge_data.py`` (read
from ``../shared/data``, or ``JURIST_DATA_DIR``; described in
docs/local-judge.md), and only their *test* splits are measured: the model was
trained on other splits, and its temperatures, thresholds and band were fitted on
the development splits (``judge.json``). Nothing here is fitted on a test split.

* Short-answer grading (SemEval-2013 Beetle and SciEntsBank, questions held out
  from training): the student answer is the learner's text, the first reference
  answer the statement, asked through ``LocalJudge.expresses`` one answer at a
  time, as a checklist asks it; "correct" is the positive class. AUC of the
  judge's probability, macro-F1 and accuracy of its decision (probability >= the
  threshold), against a word-overlap baseline (the share of the reference's
  content words found in the answer) whose threshold is fitted, per corpus, on
  that corpus's *development* split. Contradictions: the share of
  ``contradictory`` answers rejected and of ``correct`` answers rejected. A small
  sample also goes through ``ChecklistEvaluator(judge="local/minilm")``.
* NLI (SNLI test with the counterfactual SNLI test set; SICK test, never
  trained on): 3-way accuracy of the cross-encoder's probabilities
  (:mod:`jurist.models.minilm.cross`), against the development split's
  majority class.
* Answers the question (TREC-QA test; WikiQA test, never trained on): AUC, MAP
  and MRR of the answers probability (MAP and MRR over the questions with at
  least one correct sentence), against word overlap with the question.
* Calibration: the expected calibration error (10 equal-width bins) of each
  set's yes/no decisions, whose confidence is the calibrated probability of the
  side chosen.
* The band of uncertainty: how often the judge says it cannot decide, and its
  accuracy outside the band.
* Speed (this machine's cores): judgements per second, the first judgement in a
  fresh process, a checklist turn (10 unchecked points, the last 10 messages),
  a rubric item over a 20-turn transcript.
* The README's pairwise example (``examples/pairwise``): the Bradley-Terry
  ranking of thorough, brief and offtopic, met only where its order is
  established (every rank settled, not a range).
* Items about what the assistant does: the project's speech acts held out from
  training (``training/speech_acts.json``, its test acts), against a word-overlap
  baseline fitted on the development acts; the item of ``examples/labels/support``
  on its 30 sessions, against the annotators' majority; the good and bad 20-turn
  support transcripts below (the item met on the good one, not on the bad one).
* The project's own hand-written pairs (tests/data/local_judge_pairs.jsonl,
  local_judge_coverage.jsonl): the held-out half of each (``judge_data.own_halves``),
  as the pairs were measured before the thresholds moved to the training script.

Each figure the targets name is printed with its target, MET or MISSED, and listed again at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]
try:
    import jurist
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))
    import jurist
sys.path.insert(0, str(ROOT / "training"))

import judge_data  # noqa: E402  (training/judge_data.py: the fixed splits)
from fitting import roc_auc  # noqa: E402  (training/fitting.py)
from jurist.errors import Uncertain  # noqa: E402
from jurist.models.local import LocalJudge, get_local_judge  # noqa: E402

SEED = 7
QUICK = {"sag": 250, "nli": 600, "qa_questions": 40, "speed": 60}
BINS = 10

# The figures to reach (held-out data only).
AUC_MIN, MACRO_F1_MIN, BASELINE_GAP_MIN = 0.85, 0.80, 0.10
NLI_ACCURACY_MIN = 0.80
CONTRADICTIONS_REJECTED_MIN, CORRECT_REJECTED_MAX = 0.80, 0.05
ECE_MAX = 0.05
JUDGEMENTS_PER_S_MIN, FIRST_JUDGEMENT_MAX_S, TURN_MAX_S = 50.0, 1.0, 0.5

# --- metrics ---------------------------------------------------------------------


def f1(predicted: Sequence[bool], labels: Sequence[bool], positive: bool = True) -> float:
    tp = sum(p == positive and y == positive for p, y in zip(predicted, labels))
    fp = sum(p == positive and y != positive for p, y in zip(predicted, labels))
    fn = sum(p != positive and y == positive for p, y in zip(predicted, labels))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def macro_f1(predicted: Sequence[bool], labels: Sequence[bool]) -> float:
    """The mean of the F1 of both classes."""
    return (f1(predicted, labels, True) + f1(predicted, labels, False)) / 2


def accuracy(predicted: Sequence[Any], labels: Sequence[Any]) -> float:
    return sum(p == y for p, y in zip(predicted, labels)) / len(labels) if labels else float("nan")


def fit_threshold(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """The threshold (score >= t is yes) with the best macro-F1 on these scores; of equally good
    ones, the middle one. Candidates: every distinct score, and one above the highest."""
    candidates = sorted(set(scores)) + [max(scores) + 1.0]
    results = [(macro_f1([s >= t for s in scores], labels), t) for t in candidates]
    best = max(r for r, _ in results)
    ties = [t for r, t in results if r == best]
    return ties[len(ties) // 2]


def ranking_metrics(scores: Sequence[float], labels: Sequence[bool], groups: Sequence[str],
                    seed: int = SEED) -> tuple[float, float, int]:
    """(MAP, MRR, questions counted) over the groups with at least one positive, each ranked by
    score. Equal scores are put in a seeded random order: the data files list a question's
    correct sentences first, so keeping the given order would favour a scorer with ties."""
    tiebreak = random.Random(seed)
    by_group: dict[str, list[tuple[float, bool, float]]] = defaultdict(list)
    for s, y, g in zip(scores, labels, groups):
        by_group[g].append((s, y, tiebreak.random()))
    aps, rrs = [], []
    for rows in by_group.values():
        if not any(y for _, y, _ in rows):
            continue
        ranked = sorted(rows, key=lambda r: (-r[0], r[2]))
        hits, precisions = 0, []
        for k, (_, y, _) in enumerate(ranked, start=1):
            if y:
                hits += 1
                precisions.append(hits / k)
        aps.append(sum(precisions) / hits)
        rrs.append(1 / next(k for k, (_, y, _) in enumerate(ranked, start=1) if y))
    if not aps:
        raise ValueError("no group has a positive")
    return sum(aps) / len(aps), sum(rrs) / len(rrs), len(aps)


def ece(confidences: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> float:
    """Expected calibration error: over equal-width confidence bins, the gap between accuracy and
    mean confidence, weighted by the bin's share of the decisions."""
    if not confidences:
        raise ValueError("no decisions")
    binned: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for c, ok in zip(confidences, correct):
        binned[min(int(c * bins), bins - 1)].append((c, ok))
    total = 0.0
    for rows in binned.values():
        total += len(rows) * abs(sum(ok for _, ok in rows) / len(rows) - sum(c for c, _ in rows) / len(rows))
    return total / len(confidences)


# --- the word-overlap baseline ---------------------------------------------------

STOPWORDS = frozenset("""
a an the and or but if then so because as of at by for with about against between into through during
before after above below to from up down in out on off over under again further once here there when where
why how all any both each few more most other some such no nor not only own same than too very can will just
should would could may might must do does did doing done is are was were be been being have has had having
i me my we our you your he him his she her it its they them their what which who whom this that these those
am s t don isn aren wasn weren doesn didn won
""".split())
_WORD = re.compile(r"[a-z0-9]+")


def stem(word: str) -> str:
    """A crude suffix strip, enough that "connected" meets "connect" and "bulbs" meets "bulb"."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def overlap(reference: str, text: str) -> float:
    """The share of ``reference``'s content words (stemmed) that occur in ``text``."""
    ref = content_words(reference)
    return len(ref & content_words(text)) / len(ref) if ref else 0.0


# --- the judge -------------------------------------------------------------------


@dataclass
class Decision:
    """One yes/no question to the judge: the calibrated probability of yes, and whether the
    judge declined (inside the band of uncertainty)."""

    probability: float
    uncertain: bool

    def said_yes(self, threshold: float) -> bool:
        return self.probability >= threshold


def confidence_of(probability: float, threshold: float) -> float:
    """The confidence the judge reports for a decision: the probability of the side chosen."""
    return probability if probability >= threshold else 1.0 - probability


async def ask_expresses(judge: LocalJudge, text: str, statement: str) -> Decision:
    """``judge.expresses(text, [statement])``, as a checklist or rubric asks it."""
    try:
        (check,) = await judge.expresses(text, [statement])
    except Uncertain as exc:
        return Decision(exc.probability, True)
    return Decision(check.confidence if check.expressed else 1.0 - check.confidence, False)


def band_decisions(probabilities: Iterable[float], threshold: float, band: float) -> list[Decision]:
    """Decisions from the cross-encoder's probabilities by the rule the judge applies."""
    return [Decision(float(p), abs(float(p) - threshold) < band) for p in probabilities]


def cross_encoder() -> Any:
    from jurist.models.minilm.cross import CrossEncoder

    return CrossEncoder()


# --- reporting -------------------------------------------------------------------


@dataclass
class Report:
    figures: dict[str, Any] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)

    def target(self, what: str, value: float, goal: str, met: bool, fmt: str = "{:.3f}") -> str:
        self.targets.append({"what": what, "value": value, "shown": fmt.format(value), "target": goal, "met": met})
        return f"{fmt.format(value)} (target {goal}: {'MET' if met else 'MISSED'})"


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def sample(rows: list[Any], n: int | None, seed: int = SEED) -> list[Any]:
    if n is None or len(rows) <= n:
        return rows
    return random.Random(seed).sample(rows, n)


def sample_groups(rows: list[Any], n: int | None, seed: int = SEED) -> list[Any]:
    """Every row of ``n`` seeded groups (questions)."""
    groups = sorted({r.group for r in rows})
    if n is None or len(groups) <= n:
        return rows
    keep = set(random.Random(seed).sample(groups, n))
    return [r for r in rows if r.group in keep]


def decision_figures(decisions: list[Decision], labels: list[bool], threshold: float) -> dict[str, Any]:
    """Accuracy, ECE, the share declined and the accuracy outside the band."""
    said = [d.said_yes(threshold) for d in decisions]
    correct = [s == y for s, y in zip(said, labels)]
    outside = [ok for ok, d in zip(correct, decisions) if not d.uncertain]
    return {
        "accuracy": accuracy(said, labels),
        "ece": ece([confidence_of(d.probability, threshold) for d in decisions], correct),
        "uncertain_share": sum(d.uncertain for d in decisions) / len(decisions),
        "accuracy_outside_band": sum(outside) / len(outside) if outside else float("nan"),
        "decided": len(outside),
        "n": len(decisions),
    }


# --- sections ----------------------------------------------------------------------


async def short_answers(judge: LocalJudge, quick: bool, rep: Report) -> None:
    section("Short-answer grading: SemEval-2013, questions held out from training "
            "(student answer expresses the first reference answer?)")
    threshold = judge_record().thresholds["expresses"]
    out: dict[str, Any] = {}
    timing = [0.0, 0]
    for corpus in judge_data.SAG_CORPORA:
        test = sample(judge_data.sag(corpus, "test"), QUICK["sag"] if quick else None)
        dev = judge_data.sag(corpus, "dev")
        labels = [p.extra == "correct" for p in test]
        started = time.perf_counter()
        decisions = [await ask_expresses(judge, p.first, p.second) for p in test]
        timing[0] += time.perf_counter() - started
        timing[1] += len(test)
        probs = [d.probability for d in decisions]
        said = [d.said_yes(threshold) for d in decisions]
        # the baseline: word overlap, its threshold fitted on this corpus's development split
        base_t = fit_threshold([overlap(p.second, p.first) for p in dev], [p.extra == "correct" for p in dev])
        base = [overlap(p.second, p.first) for p in test]
        base_said = [s >= base_t for s in base]
        fig: dict[str, Any] = {
            "pairs": len(test), "questions": len({p.group for p in test}),
            "labels": dict(Counter(p.extra for p in test)),
            "auc": roc_auc(probs, labels), "macro_f1": macro_f1(said, labels), "accuracy": accuracy(said, labels),
            "baseline": {"threshold_from_dev": base_t, "auc": roc_auc(base, labels),
                         "macro_f1": macro_f1(base_said, labels), "accuracy": accuracy(base_said, labels)},
        }
        fig["gap_to_baseline_f1"] = fig["macro_f1"] - fig["baseline"]["macro_f1"]
        rejected = {label: [not s for s, p in zip(said, test) if p.extra == label]
                    for label in ("correct", "contradictory", "incorrect")}
        fig["rejected_share"] = {k: sum(v) / len(v) for k, v in rejected.items() if v}
        flagged = {label: [d for d, p in zip(decisions, test) if p.extra == label] for label in rejected}
        fig.update(decision_figures(decisions, labels, threshold))
        # "uncertain" counted as not recalled, as a checklist counts a failed turn
        as_checklist = [s and not d.uncertain for s, d in zip(said, decisions)]
        fig["macro_f1_uncertain_as_no"] = macro_f1(as_checklist, labels)
        out[corpus] = fig
        b = fig["baseline"]
        print(f"{corpus}: {fig['pairs']} answers to {fig['questions']} questions "
              f"({', '.join(f'{k} {v}' for k, v in sorted(fig['labels'].items()))})")
        print(f"  judge     AUC {rep.target(f'{corpus} AUC', fig['auc'], f'>= {AUC_MIN}', fig['auc'] >= AUC_MIN)}")
        print(f"            macro-F1 {rep.target(f'{corpus} macro-F1', fig['macro_f1'], f'>= {MACRO_F1_MIN}', fig['macro_f1'] >= MACRO_F1_MIN)}"
              f"  accuracy {fig['accuracy']:.3f}  (threshold {threshold:.3f} from judge.json)")
        print(f"  baseline  AUC {b['auc']:.3f}  macro-F1 {b['macro_f1']:.3f}  accuracy {b['accuracy']:.3f}  "
              f"(word overlap, threshold {b['threshold_from_dev']:.3f} fitted on the development split)")
        gap = fig["gap_to_baseline_f1"]
        print(f"  macro-F1 above the baseline: "
              f"{rep.target(f'{corpus} macro-F1 above baseline', gap, f'>= {BASELINE_GAP_MIN}', gap >= BASELINE_GAP_MIN, '{:+.3f}')}")
        rs = fig["rejected_share"]
        print(f"  rejected: contradictory "
              f"{rep.target(f'{corpus} contradictory rejected', rs['contradictory'], f'>= {CONTRADICTIONS_REJECTED_MIN:.0%}', rs['contradictory'] >= CONTRADICTIONS_REJECTED_MIN, '{:.1%}')}"
              f"  (n={len(flagged['contradictory'])})")
        print(f"            correct "
              f"{rep.target(f'{corpus} correct rejected', rs['correct'], f'<= {CORRECT_REJECTED_MAX:.0%}', rs['correct'] <= CORRECT_REJECTED_MAX, '{:.1%}')}"
              f"  (n={len(flagged['correct'])});  incorrect {rs['incorrect']:.1%}  (n={len(flagged['incorrect'])})")
        print(f"  uncertain {fig['uncertain_share']:.1%}; accuracy outside the band {fig['accuracy_outside_band']:.3f} "
              f"({fig['decided']} decided); macro-F1 counting uncertain as not recalled {fig['macro_f1_uncertain_as_no']:.3f}")
    out["judgements_per_s"] = timing[1] / timing[0]
    print(f"({timing[1]} expresses calls, one answer each, in {timing[0]:.1f} s: {out['judgements_per_s']:.1f} per second)")
    rep.figures["short_answers"] = out
    await checklist_sample(judge, rep)


async def checklist_sample(judge: LocalJudge, rep: Report, n: int = 20) -> None:
    """The same answers through ChecklistEvaluator(judge="local/minilm"): the point recalled or not."""
    from jurist.checklist.evaluator import ChecklistEvaluator
    from jurist.checklist.points import ChecklistPoint
    from jurist.config import Settings

    threshold = judge_record().thresholds["expresses"]
    pairs = sample(judge_data.sag("beetle", "test") + judge_data.sag("scientsbank", "test"), n, seed=SEED + 1)
    agree = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        evaluator = ChecklistEvaluator(judge="local/minilm", settings=Settings(home=tmp))
        try:
            for p in pairs:
                turn = await evaluator.evaluate_batch(
                    [ChecklistPoint(id="p1", text=p.second)],
                    [{"role": "assistant", "content": "Explain what you observed."}, {"role": "user", "content": p.first}])
                direct = await ask_expresses(judge, p.first, p.second)
                if turn.status != "ok":
                    failed += 1
                    agree += direct.uncertain
                else:
                    agree += ("p1" in turn.recalled_point_ids) == (direct.said_yes(threshold) and not direct.uncertain)
        finally:
            await evaluator.aclose()
    print(f"through ChecklistEvaluator(judge=\"local/minilm\"): {len(pairs)} held-out answers, "
          f"{agree} judged as expresses judges them ({failed} turns failed: uncertain)")
    rep.figures["checklist_sample"] = {"answers": len(pairs), "same_as_expresses": agree, "failed_turns": failed}


def nli(cross: Any, quick: bool, rep: Report) -> None:
    section("NLI: 3-way accuracy on held-out sets (premise, hypothesis -> entails / neutral / contradicts)")
    record = cross.record
    t, band = record.thresholds["expresses"], record.band["expresses"]
    _, dev = judge_data.nli_pool()
    majority = Counter(p.label for p in dev).most_common(1)[0][0]
    out: dict[str, Any] = {}
    for name, rows in judge_data.nli_test().items():
        rows = sample(rows, QUICK["nli"] if quick else None)
        started = time.perf_counter()
        scores = cross.scores([(p.first, p.second) for p in rows])
        seconds = time.perf_counter() - started
        predicted = [int(i) for i in scores.nli.argmax(axis=1)]
        gold = [p.label for p in rows]
        acc = accuracy(predicted, gold)
        entail = [p.label == 0 for p in rows]
        decisions = band_decisions(scores.nli[:, 0], t, band)
        said = [d.said_yes(t) for d in decisions]
        fig: dict[str, Any] = {"pairs": len(rows), "accuracy_3way": acc, "majority_class_accuracy": accuracy([majority] * len(gold), gold),
               "per_label_recall": {judge_data_label(k): accuracy([predicted[i] for i in range(len(gold)) if gold[i] == k],
                                                                  [k] * sum(g == k for g in gold)) for k in (0, 1, 2)},
               "contradictions_rejected": sum(not s for s, p in zip(said, rows) if p.label == 2) / max(1, sum(p.label == 2 for p in rows)),
               "entailments_rejected": sum(not s for s, p in zip(said, rows) if p.label == 0) / max(1, sum(p.label == 0 for p in rows)),
               "expresses": decision_figures(decisions, entail, t), "pairs_per_s_batched": len(rows) / seconds}
        out[name] = fig
        print(f"{name}: {len(rows)} pairs")
        print(f"  3-way accuracy {rep.target(f'{name} NLI accuracy', acc, f'>= {NLI_ACCURACY_MIN}', acc >= NLI_ACCURACY_MIN)}"
              f"  (majority class of the development split: {fig['majority_class_accuracy']:.3f})")
        print("  recall by label: " + ", ".join(f"{k} {v:.3f}" for k, v in fig["per_label_recall"].items()))
        e = fig["expresses"]
        cr, er = fig["contradictions_rejected"], fig["entailments_rejected"]
        print(f"  as expresses (entailment vs not, threshold {t:.3f}): accuracy {e['accuracy']:.3f}")
        print(f"  rejected: contradictions "
              f"{rep.target(f'{name} contradictions rejected', cr, f'>= {CONTRADICTIONS_REJECTED_MIN:.0%}', cr >= CONTRADICTIONS_REJECTED_MIN, '{:.1%}')}"
              f"; entailments {rep.target(f'{name} entailments rejected', er, f'<= {CORRECT_REJECTED_MAX:.0%}', er <= CORRECT_REJECTED_MAX, '{:.1%}')}")
        print(f"  batched cross-encoder: {fig['pairs_per_s_batched']:.0f} pairs/s")
    rep.figures["nli"] = out


def judge_data_label(index: int) -> str:
    return next(k for k, v in judge_data.NLI_INDEX.items() if v == index)


def answers(cross: Any, quick: bool, rep: Report) -> None:
    section("Answers the question: held-out answer-sentence selection (does this sentence answer the question)")
    record = cross.record
    t, band = record.thresholds["answers"], record.band["answers"]
    out: dict[str, Any] = {}
    for name in ("trecqa_test", "wikiqa_test"):
        rows = sample_groups(judge_data.qa(name), QUICK["qa_questions"] if quick else None)
        scores = cross.scores([(p.first, p.second) for p in rows]).answers
        probs = [float(s) for s in scores]
        labels = [bool(p.label) for p in rows]
        groups = [p.group for p in rows]
        base = [overlap(p.first, p.second) for p in rows]
        m, r, q = ranking_metrics(probs, labels, groups)
        bm, br, _ = ranking_metrics(base, labels, groups)
        fig: dict[str, Any] = {"pairs": len(rows), "questions": len(set(groups)), "questions_with_an_answer": q,
               "auc": roc_auc(probs, labels), "map": m, "mrr": r,
               "baseline": {"auc": roc_auc(base, labels), "map": bm, "mrr": br},
               "answers": decision_figures(band_decisions(probs, t, band), labels, t)}
        out[name] = fig
        print(f"{name}: {len(rows)} sentences, {fig['questions']} questions ({q} with a correct sentence: MAP, MRR)")
        print(f"  judge     AUC {fig['auc']:.3f}  MAP {m:.3f}  MRR {r:.3f}  (no target)")
        print(f"  baseline  AUC {fig['baseline']['auc']:.3f}  MAP {bm:.3f}  MRR {br:.3f}  (word overlap with the question)")
    rep.figures["answers"] = out
    rows = judge_data.own_answer_pairs("test")
    probs = [float(s) for s in cross.scores([(p.first, p.second) for p in rows]).answers]
    labels = [bool(p.label) for p in rows]
    base = [overlap(p.first, p.second) for p in rows]
    decisions = band_decisions(probs, t, band)
    own = {"pairs": len(rows), "questions": len({p.group for p in rows}), "auc": roc_auc(probs, labels),
           "macro_f1": macro_f1([d.said_yes(t) for d in decisions], labels),
           **decision_figures(decisions, labels, t), "baseline_auc": roc_auc(base, labels)}
    rep.figures["own_answers"] = own
    print(f"own questions held out from training (training/answers_own.json, test split): {own['pairs']} pairs, "
          f"{own['questions']} questions: AUC {own['auc']:.3f}  macro-F1 {own['macro_f1']:.3f}  accuracy "
          f"{own['accuracy']:.3f}  uncertain {own['uncertain_share']:.1%}  (word overlap AUC {own['baseline_auc']:.3f})"
          "  (no target)")


def calibration(rep: Report) -> None:
    section(f"Calibration: expected calibration error ({BINS} bins) of the yes/no decisions, and the band of uncertainty")
    record = judge_record()
    print(f"band: expresses {record.thresholds['expresses']:.3f} +- {record.band['expresses']:.3f}, "
          f"answers {record.thresholds['answers']:.3f} +- {record.band['answers']:.3f} (judge.json)")
    rows: list[tuple[str, dict[str, Any]]] = []
    for corpus in judge_data.SAG_CORPORA if "short_answers" in rep.figures else ():
        rows.append((f"{corpus} (expresses)", rep.figures["short_answers"][corpus]))
    for name, fig in rep.figures.get("nli", {}).items():
        rows.append((f"{name} (expresses)", fig["expresses"]))
    for name, fig in rep.figures.get("answers", {}).items():
        rows.append((f"{name} (answers)", fig["answers"]))
    for name, fig in rows:
        print(f"  {name:32s} ECE {rep.target(f'{name} ECE', fig['ece'], f'<= {ECE_MAX}', fig['ece'] <= ECE_MAX)}  "
              f"accuracy {fig['accuracy']:.3f}; uncertain {fig['uncertain_share']:.1%}, "
              f"accuracy outside the band {fig['accuracy_outside_band']:.3f}")
    rep.figures["calibration"] = {name: {k: fig[k] for k in ("ece", "accuracy", "uncertain_share",
                                                             "accuracy_outside_band")} for name, fig in rows}


# --- speed -------------------------------------------------------------------------

FIRST_JUDGEMENT = """\
import asyncio
from jurist.errors import Uncertain
from jurist.models.local import get_local_judge

try:
    asyncio.run(get_local_judge().expresses(
        "Caffeine occupies the adenosine receptors, so adenosine cannot make you sleepy.",
        ["Caffeine keeps you awake by blocking adenosine receptors."]))
except Uncertain:
    pass
"""

POINTS = [
    "Water evaporates from oceans, lakes and rivers when the sun heats it.",
    "Plants release water vapour through their leaves, which is called transpiration.",
    "Water vapour cools as it rises and condenses into clouds.",
    "Precipitation is water falling from clouds as rain, snow, sleet or hail.",
    "Water that runs over the ground into rivers is called surface runoff.",
    "Some water soaks into the soil and becomes groundwater.",
    "The sun's energy drives the water cycle.",
    "Most of the Earth's fresh water is frozen in ice caps and glaciers.",
    "Condensation releases heat into the atmosphere.",
    "Water can stay in the ocean for thousands of years before it evaporates.",
]
TUTOR = [
    "Let's go over the water cycle. Where does the water in a cloud come from?",
    "Good start. What happens to the vapour as it rises?",
    "Right. And once the droplets in a cloud get heavy enough?",
    "What happens to rain after it reaches the ground?",
    "Where is most of the fresh water on Earth, do you think?",
]
LEARNER = [
    "It comes from the sea mostly, the sun warms the water and it turns into vapour that goes up.",
    "It gets colder higher up so the vapour turns back into tiny droplets, and those make the clouds.",
    "They fall down as rain, or as snow when it's cold enough, I think hail counts too.",
    "Part of it flows over the ground into streams and rivers and part of it sinks into the soil.",
    "Probably in the oceans? No wait, that's salt water. Maybe in lakes and rivers.",
    "I guess the whole thing runs on heat from the sun, otherwise nothing would evaporate.",
    "Trees also give off water from their leaves, my teacher called it transpiration.",
]

SUPPORT_TURNS = [
    ("Hi, my order #4417 still hasn't arrived and it's been two weeks.",
     "Hello, and thanks for reaching out. I'm sorry your order is late. Let me look it up for you."),
    ("Sure, take your time.", "Thanks for your patience. I can see the parcel left our warehouse on the 3rd."),
    ("So where is it now?", "The tracking shows it reached the regional depot on the 6th and has not moved since."),
    ("That sounds like it's lost.", "It may be held up at the depot. I have opened a trace with the carrier."),
    ("How long does a trace take?", "Usually two to three working days. We will email you as soon as we hear back."),
    ("I needed it for a birthday this weekend.", "I understand, that is frustrating. I can send a replacement today by express delivery."),
    ("Would that cost me anything?", "No, the express shipping is on us because the delay is our fault."),
    ("OK, please do that.", "Done. The replacement ships this afternoon and should arrive on Friday."),
    ("What happens to the first parcel if it shows up?", "If it arrives, you can keep it or return it with the free label in the box."),
    ("Can I get the tracking number for the new one?", "Of course: it is EX-88213-UK. It will be active in a few hours."),
    ("Great. Will I get an email too?", "Yes, you will get a confirmation email with the same number within the hour."),
    ("Is the address the same as before?", "It goes to 14 Mill Lane, the address on your account. Tell me if that has changed."),
    ("No, that's right.", "Perfect. Is there anything else I can help you with today?"),
    ("Actually, can I change the gift wrap option?", "Yes, I have added gift wrap to the replacement at no charge."),
    ("Thank you, that's really kind.", "You're welcome. Again, I apologise for the trouble with the first parcel."),
    ("Will this happen again with my next order?", "We have flagged the depot with the carrier, so future parcels are routed elsewhere."),
    ("How do I leave feedback?", "You will get a short survey by email after the replacement is delivered."),
    ("Can I reply to that email if there's a problem?", "Yes, replies to that email come straight to our support team."),
    ("Alright, I think that's everything.", "Thank you for your patience today, and enjoy the birthday."),
    ("Bye!", "Goodbye, and have a lovely weekend."),
]
RUBRIC_ITEM = "The assistant apologises for the delay."


BAD_SUPPORT_TURNS = [(u, a.replace("I'm sorry your order is late. ", "")
                      .replace("You're welcome. Again, I apologise for the trouble with the first parcel.",
                               "You're welcome."))
                     for u, a in SUPPORT_TURNS]


def forget() -> None:
    """Empty the judge's caches of recent encodings and pairs: a timing starts from texts it has not seen."""
    import jurist.models.local as local

    for name in ("_cache", "_pair_cache"):
        cache = getattr(local, name, None)
        if cache is not None:
            cache.clear()


async def timed_calls(make: Callable[[int], Any], runs: int) -> tuple[list[float], list[Any]]:
    """Wall time of ``make(i)`` for each run, each from empty caches; and what each returned."""
    walls, results = [], []
    for i in range(runs):
        forget()
        started = time.perf_counter()
        results.append(await make(i))
        walls.append(time.perf_counter() - started)
    return walls, results


async def speed(judge: LocalJudge, quick: bool, rep: Report) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    section(f"Speed ({os.cpu_count()} CPU cores, load average {load:.1f} at the start)")
    from jurist.checklist.evaluator import ChecklistEvaluator
    from jurist.checklist.points import ChecklistPoint
    from jurist.config import Settings

    out: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_average": load}
    # judgements per second: one expresses call per (text, statement), answers the judge has not seen before
    pairs = sample(judge_data.sag("scientsbank", "dev") + judge_data.sag("beetle", "dev"), QUICK["speed"] if quick else 300,
                   seed=SEED + 2)
    forget()
    started = time.perf_counter()
    for p in pairs:
        await ask_expresses(judge, p.first, p.second)
    rate = len(pairs) / (time.perf_counter() - started)
    out["judgements_per_s"] = rate
    print(f"judgements per second (one expresses call per answer, {len(pairs)} development-split answers): "
          f"{rep.target('judgements per second', rate, f'>= {JUDGEMENTS_PER_S_MIN:.0f}', rate >= JUDGEMENTS_PER_S_MIN, '{:.1f}')}")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(jurist.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        env["JURIST_HOME"] = tmp
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", FIRST_JUDGEMENT], env=env, check=True, cwd=tmp)
            walls.append(time.perf_counter() - started)
    first = statistics.median(walls)
    out["first_judgement_s"] = first
    print(f"first judgement in a fresh process (python -c: import, load both models, one expresses call), median of 3: "
          f"{rep.target('first judgement (s)', first, f'<= {FIRST_JUDGEMENT_MAX_S:.1f} s', first <= FIRST_JUDGEMENT_MAX_S, '{:.2f} s')}"
          f"  (runs {', '.join(f'{w:.2f}' for w in walls)})")

    points = [ChecklistPoint(id=f"p{i}", text=t) for i, t in enumerate(POINTS, start=1)]
    with tempfile.TemporaryDirectory() as tmp:
        evaluator = ChecklistEvaluator(judge="local/minilm", settings=Settings(home=tmp))
        try:
            def conversation(i: int) -> list[dict[str, str]]:
                msgs = []
                for k in range(5):
                    msgs += [{"role": "assistant", "content": TUTOR[(i + k) % len(TUTOR)]},
                             {"role": "user", "content": LEARNER[(i + k) % len(LEARNER)]}]
                return msgs  # 10 messages, the latest a learner's

            await evaluator.evaluate_batch(points, conversation(99))  # the models loaded: a warm process
            walls, turns = await timed_calls(lambda i: evaluator.evaluate_batch(points, conversation(i)), len(LEARNER))
        finally:
            await evaluator.aclose()
    turn = statistics.median(walls)
    statuses = Counter(str(t.status) for t in turns)
    partly = sum(1 for t in turns if t.undecided_ids)  # ok turns with points the judge could not decide
    out["checklist_turn_s"] = {"median": turn, "max": max(walls), "statuses": dict(statuses),
                               "with_undecided_points": partly}
    print(f"checklist turn (ChecklistEvaluator, 10 unchecked points, the last 10 messages, empty caches), median of "
          f"{len(walls)}: {rep.target('checklist turn (s)', turn, f'<= {TURN_MAX_S} s', turn <= TURN_MAX_S, '{:.3f} s')}"
          f"  (max {max(walls):.3f} s; turns {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}; "
          f"with points left undecided {partly})")

    from jurist.rubrics.sessions import load_session

    walls, whole, verdicts = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rubrics = folder / "rubrics.json"
        rubrics.write_text(json.dumps({"version": "1.0", "scale": [1, 5], "rubrics": [
            {"id": "apology", "name": "Apologises", "description": "The assistant owns the delay.",
             "items": [{"id": "sorry", "text": RUBRIC_ITEM, "points": 1}]}]}))
        for name, turns_of in (("good", SUPPORT_TURNS), ("bad", BAD_SUPPORT_TURNS)):
            path = folder / f"{name}.jsonl"
            path.write_text("\n".join(json.dumps({"role": role, "content": text})
                                       for u, a in turns_of for role, text in (("user", u), ("assistant", a))) + "\n")
            assistant = load_session(path).text_of("assistant")  # what an item is checked against
            for _ in range(3):
                forget()
                started = time.perf_counter()
                await ask_expresses(judge, assistant, RUBRIC_ITEM)
                walls.append(time.perf_counter() - started)
                forget()
                started = time.perf_counter()
                result: Any = await jurist.evaluate(str(rubrics), str(path), judge="local/minilm", settings=Settings(home=tmp))
                whole.append(time.perf_counter() - started)
            scored = result["rubric_scores"][0]
            items = scored.get("items") or [{}]
            verdicts.append((name, scored.get("status"), items[0].get("met"), items[0].get("confidence"),
                             scored.get("reasoning")))
    item = statistics.median(walls)
    out["rubric_item_s"] = {"median": item, "max": max(walls), "jurist_evaluate_median": statistics.median(whole)}
    print(f"rubric item over a 20-turn support transcript (the item's question to the judge, \"{RUBRIC_ITEM}\" against "
          f"the assistant's 20 turns, empty caches), median of {len(walls)}: "
          f"{rep.target('rubric item (s)', item, f'<= {TURN_MAX_S} s', item <= TURN_MAX_S, '{:.3f} s')}"
          f"  (max {max(walls):.3f} s; the whole jurist.evaluate call with its store: median "
          f"{statistics.median(whole):.3f} s)")
    for name, status, met, conf, reasoning in verdicts:
        print(f"  the {name} transcript ({'apologises' if name == 'good' else 'never apologises'}): {status}, "
              f"met {met}, confidence {conf}" + (f" ({reasoning})" if status != "scored" else ""))
    out["rubric_item_verdicts"] = [{"transcript": v[0], "status": v[1], "met": v[2], "confidence": v[3]} for v in verdicts]
    rep.figures["speed"] = out


async def pairwise(rep: Report) -> None:
    section("The README's pairwise example: jurist compare examples/pairwise/{thorough,brief,offtopic}.jsonl")
    from jurist.analysis.answers import load_answers
    from jurist.analysis.pairwise import compare

    with tempfile.TemporaryDirectory() as tmp:
        async with jurist.open(judge="local/minilm", database_url=f"sqlite:///{tmp}/jurist.db", home=tmp) as rt:
            report = await compare([load_answers(str(ROOT / "examples" / "pairwise" / f"{name}.jsonl"))
                                    for name in ("thorough", "brief", "offtopic")], rt)
    data: Any = report.to_json()
    for m in data["matchups"]:
        print(f"  {m['first']} vs {m['second']}: {m['wins']} wins, {m['ties']} ties, {m['losses']} losses")
    ranked = report.ranking or []
    ranking = [r.system for r in ranked]
    settled = all(r.settled for r in ranked)
    print("  Bradley-Terry ranking: " + " > ".join(
        f"{r.system} ({r.strength.value:+.2f}, rank {r.rank_text})" for r in ranked))
    if report.order_note:
        print(f"  {report.order_note}")
    # met only where the order is the one asked for and established (every rank settled)
    ok = ranking == ["thorough", "brief", "offtopic"] and settled
    value = " > ".join(ranking) + ("" if settled else " (order not established)")
    rep.targets.append({"what": "pairwise ranking", "value": value, "target": "thorough > brief > offtopic",
                        "met": ok})
    print(f"  target thorough > brief > offtopic, established: {'MET' if ok else 'MISSED'}")
    rep.figures["pairwise"] = {"ranking": ranking, "ranks": [r.ranks for r in ranked],
                               "matchups": [{k: m[k] for k in ("first", "second", "wins", "ties", "losses")}
                                            for m in data["matchups"]]}



async def coverage_figures(judge: LocalJudge, rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """Whether the judge finds each question of ``rows`` (``local_judge_coverage.jsonl``) covered
    by its answer, decided at ``threshold``: F1, macro-F1, accuracy and the undecided count."""
    decisions = []
    for r in rows:
        try:
            result = await judge.coverage(r["question"], r["answer"], parts=[r["question"]])
            conf = result.confidence[r["question"]]
            decisions.append(Decision(conf if r["question"] in result.covered else 1.0 - conf, False))
        except Uncertain as exc:
            decisions.append(Decision(exc.probability, True))
    labels = [bool(r["label"]) for r in rows]
    covered = [d.said_yes(threshold) for d in decisions]
    return {"pairs": len(rows), "f1": f1(covered, labels), "macro_f1": macro_f1(covered, labels),
            "accuracy": accuracy(covered, labels), "uncertain": sum(d.uncertain for d in decisions)}


async def project_pairs(judge: LocalJudge, rep: Report) -> None:
    section("The project's own pairs (tests/data/, written by hand, not trained on): the held-out half of each file "
            "(judge_data.own_halves; the calibration half is a development split)")
    threshold = judge_record().thresholds["expresses"]
    out: dict[str, Any] = {}
    _, rows = judge_data.own_halves("local_judge_pairs.jsonl")
    decisions = [await ask_expresses(judge, r["text"], r["statement"]) for r in rows]
    labels = [bool(r["label"]) for r in rows]
    said = [d.said_yes(threshold) for d in decisions]
    fig: dict[str, Any] = {"pairs": len(rows), "f1": f1(said, labels), "macro_f1": macro_f1(said, labels),
                           "accuracy": accuracy(said, labels),
                           "uncertain_share": sum(d.uncertain for d in decisions) / len(rows), "by_kind": {}}
    for kind in sorted({r["kind"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["kind"] == kind]
        fig["by_kind"][kind] = {"n": len(idx), "accuracy": accuracy([said[i] for i in idx], [labels[i] for i in idx]),
                                "uncertain": sum(decisions[i].uncertain for i in idx)}
    out["expresses"] = fig
    print(f"expresses, local_judge_pairs.jsonl, held-out half: {len(rows)} pairs: F1 {fig['f1']:.3f}  "
          f"macro-F1 {fig['macro_f1']:.3f}  accuracy {fig['accuracy']:.3f}  uncertain {fig['uncertain_share']:.1%} "
          "(decided at the threshold)")
    print("  accuracy by kind: " + ", ".join(f"{k} {v['accuracy']:.3f} (n={v['n']})" for k, v in fig["by_kind"].items()))

    answers_t = judge_record().thresholds["answers"]
    _, rows = judge_data.own_halves("local_judge_coverage.jsonl")
    cov = await coverage_figures(judge, rows, answers_t)
    out["coverage"] = cov
    print(f"coverage, local_judge_coverage.jsonl, held-out half: {len(rows)} pairs: F1 {cov['f1']:.3f}  "
          f"macro-F1 {cov['macro_f1']:.3f}  accuracy {cov['accuracy']:.3f}  uncertain {cov['uncertain']} "
          f"(decided at the threshold {answers_t:.3f}, fitted on the development pairs by the training script)")
    rep.figures["project_pairs"] = out


async def behaviour(judge: LocalJudge, rep: Report) -> None:
    section("Items about what the assistant does (\"The assistant apologises ...\"), checked against the "
            "assistant's turns")
    threshold = judge_record().thresholds["expresses"]
    out: dict[str, Any] = {}
    rows = judge_data.speech_act_pairs("test")
    decisions = [await ask_expresses(judge, r.extra, r.second) for r in rows]
    labels = [r.label == 0 for r in rows]
    said = [d.said_yes(threshold) for d in decisions]
    dev = judge_data.speech_act_pairs("dev")
    base_t = fit_threshold([overlap(r.second, r.extra) for r in dev], [r.label == 0 for r in dev])
    base = [overlap(r.second, r.extra) >= base_t for r in rows]
    acts = sorted({r.group for r in rows})
    fig = {"acts": acts, "pairs": len(rows), "macro_f1": macro_f1(said, labels), "accuracy": accuracy(said, labels),
           "uncertain_share": sum(d.uncertain for d in decisions) / len(rows),
           "baseline_macro_f1": macro_f1(base, labels), "baseline_threshold": base_t}
    out["held_out_acts"] = fig
    print(f"speech acts held out from training (training/speech_acts.json, test acts: {', '.join(acts)}): "
          f"{len(rows)} pairs: macro-F1 {fig['macro_f1']:.3f}  accuracy {fig['accuracy']:.3f}  uncertain "
          f"{fig['uncertain_share']:.1%}  (word overlap: macro-F1 {fig['baseline_macro_f1']:.3f}, its threshold "
          f"fitted on the dev acts)  (no target)")

    from jurist.analysis.calibrate_local import people_categories
    from jurist.analysis.labels import load_labels
    from jurist.rubrics import load_rubrics
    from jurist.rubrics.sessions import ChatSession, Message, load_session

    folder = ROOT / "examples" / "labels" / "support"
    rubric_set = load_rubrics(folder / "rubrics.json")
    item = (rubric_set.rubrics[0].items or [])[0].text
    scale = (float(rubric_set.scale[0]), float(rubric_set.scale[1]))
    people = people_categories(load_labels(folder / "labels.jsonl").labels, scale)
    sessions: list[tuple[str, bool, Decision]] = []
    for name, category in sorted(people.items()):
        if category is None:
            continue  # the annotators split evenly: no label
        text = load_session(folder / "sessions" / f"{name}.jsonl").text_of("assistant")
        sessions.append((name, bool(category), await ask_expresses(judge, text, item)))
    s_said = [d.said_yes(threshold) for _, _, d in sessions]
    s_labels = [y for _, y, _ in sessions]
    p_yes = [d.probability for _, y, d in sessions if y]
    p_no = [d.probability for _, y, d in sessions if not y]
    out["support_sessions"] = {"sessions": len(sessions), "accuracy": accuracy(s_said, s_labels),
                               "macro_f1": macro_f1(s_said, s_labels),
                               "auc": roc_auc([d.probability for _, _, d in sessions], s_labels),
                               "uncertain": sum(d.uncertain for _, _, d in sessions),
                               "p_apologies": [min(p_yes), max(p_yes)], "p_others": [min(p_no), max(p_no)]}
    fs = out["support_sessions"]
    print(f"\"{item}\" on examples/labels/support (the annotators' majority; {len(people) - len(sessions)} split "
          f"left out): {len(sessions)} sessions: accuracy {fs['accuracy']:.3f}  macro-F1 {fs['macro_f1']:.3f}  AUC "
          f"{fs['auc']:.3f}  uncertain {fs['uncertain']}; p(entails) {min(p_yes):.2f} to {max(p_yes):.2f} where it "
          f"apologises, {min(p_no):.2f} to {max(p_no):.2f} where not (threshold {threshold:.2f})")

    verdicts = {}
    for name, turns_of in (("good", SUPPORT_TURNS), ("bad", BAD_SUPPORT_TURNS)):
        chat = ChatSession(name, [Message(role, text) for u, a in turns_of
                                  for role, text in (("user", u), ("assistant", a))])
        text = chat.text_of("assistant")  # what a rubric item is checked against
        verdicts[name] = await ask_expresses(judge, text, RUBRIC_ITEM)
    good, bad = verdicts["good"], verdicts["bad"]
    right = (good.said_yes(threshold) and not good.uncertain) and not (bad.said_yes(threshold) or bad.uncertain)
    shown = {n: "uncertain" if d.uncertain else f"{'met' if d.said_yes(threshold) else 'not met'} "
             f"(p {d.probability:.2f})" for n, d in verdicts.items()}
    rep.targets.append({"what": "behaviour item, the good and bad support transcripts",
                        "value": f"good {shown['good']}, bad {shown['bad']}", "target": "good met, bad not met",
                        "met": right})
    out["support_transcripts"] = {n: {"probability": d.probability, "uncertain": d.uncertain}
                                  for n, d in verdicts.items()}
    print(f"\"{RUBRIC_ITEM}\" on the 20-turn support transcripts: good (apologises twice) {shown['good']}, bad "
          f"(never apologises) {shown['bad']} (target good met, bad not met: {'MET' if right else 'MISSED'})")
    rep.figures["behaviour"] = out


_RECORD: list[Any] = []


def judge_record() -> Any:
    if not _RECORD:
        from jurist.models.minilm.cross import read_record

        _RECORD.append(read_record())
    return _RECORD[0]


SECTIONS = ("short-answers", "nli", "answers", "speed", "pairwise", "behaviour", "own-pairs")


async def main(quick: bool, json_path: Path | None, only: Sequence[str] = SECTIONS) -> Report:
    rep = Report()
    record = judge_record()
    judge = get_local_judge()
    await judge.load()
    cross = cross_encoder()
    rep.figures["model"] = {"thresholds": record.thresholds, "band": record.band,
                            "temperature": {"nli": record.temperature_nli, "answers": record.temperature_answers},
                            "quick": quick}
    print(f"local/minilm cross-encoder: thresholds {record.thresholds}, band {record.band}"
          f"{'; --quick: a seeded sample of each held-out set' if quick else ''}")
    if "short-answers" in only:
        await short_answers(judge, quick, rep)
    if "nli" in only:
        nli(cross, quick, rep)
    if "answers" in only:
        answers(cross, quick, rep)
    if {"short-answers", "nli", "answers"} & set(only):
        calibration(rep)
    if "speed" in only:
        await speed(judge, quick, rep)
    if "pairwise" in only:
        await pairwise(rep)
    if "behaviour" in only:
        await behaviour(judge, rep)
    if "own-pairs" in only:
        await project_pairs(judge, rep)
    section("Targets")
    met = sum(t["met"] for t in rep.targets)
    for t in rep.targets:
        print(f"  {'MET   ' if t['met'] else 'MISSED'} {t['what']}: {t.get('shown', t['value'])} (target {t['target']})")
    print(f"{met} of {len(rep.targets)} targets met")
    if json_path is not None:
        json_path.write_text(json.dumps({"figures": rep.figures, "targets": rep.targets}, indent=1, default=float) + "\n")
        print(f"wrote {json_path}")
    return rep


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a seeded sample of each held-out set (minutes, not tens)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every figure and target to FILE")
    parser.add_argument("--only", metavar="SECTION", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help=f"run these sections only ({', '.join(SECTIONS)})")
    args = parser.parse_args()
    asyncio.run(main(args.quick, args.json, args.only))
