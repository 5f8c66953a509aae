"""Accuracy of the offline local/minilm judge on hand-labelled pairs.

    python benchmarks/local_judge_accuracy.py         # calibrate, then measure the held-out half
    python benchmarks/local_judge_accuracy.py --cv    # also: cross-validation inside the calibration half

Data (tests/data/):
  local_judge_pairs.jsonl     {"text", "statement", "label", "kind"}   -> LocalJudge.expresses
  local_judge_coverage.jsonl  {"question", "answer", "label", "kind"}  -> LocalJudge.coverage

Each file is split deterministically into a calibration half and a held-out half:
within each kind, pairs are sorted by sha256(text + U+001F + statement) and
alternate between the halves. The threshold is the F1-maximising one on the
calibration half (grid 0.30..0.90, step 0.01; the middle of the best plateau).
For expresses the score is cosine - weight * unmatched share - conflict weight
when the evidence contradicts the statement (see
jurist.models.local.expressed_score). Both weights are picked on the calibration
half too (grid 0.0..1.0, step 0.1; the smallest weight reaching the best F1):
first the unmatched weight without the conflict checks, then the conflict weight
with that unmatched weight. Coverage uses the cosine alone. Precision, recall,
F1 and accuracy are then measured on the held-out half only, which plays no part
in choosing anything. The held-out figures are printed for every pair and for
the original kinds alone (paraphrase, entailed, near_miss, unrelated), so the
figures from before the contradiction pairs were added stay comparable.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
try:
    import jurist.models.local as local
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))
    import jurist.models.local as local

DATA = ROOT / "tests" / "data"
GRID = [round(0.30 + 0.01 * i, 2) for i in range(61)]
WEIGHTS = [round(0.1 * i, 1) for i in range(11)]
# The kinds of the first 326 pairs; the others were added for the contradiction checks.
ORIGINAL_KINDS = {"paraphrase", "entailed", "near_miss", "unrelated", "answered", "same_topic"}


def load(path: Path, text_key: str, query_key: str) -> list[dict]:
    """Read a JSONL file into rows with uniform keys: text, query, label, kind."""
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows.append({"text": r[text_key], "query": r[query_key], "label": bool(r["label"]), "kind": r["kind"]})
    return rows


def split(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Stable calibration / held-out halves, stratified by kind."""
    cal, held = [], []
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
    for kind in sorted(by_kind):
        ordered = sorted(by_kind[kind], key=lambda r: hashlib.sha256(f"{r['text']}\x1f{r['query']}".encode()).hexdigest())
        for i, r in enumerate(ordered):
            (cal if i % 2 == 0 else held).append(r)
    return cal, held


def metrics(rows: list[dict], threshold: float) -> dict[str, float]:
    """Precision, recall, F1 and accuracy of score >= threshold."""
    tp = sum(r["score"] >= threshold and r["label"] for r in rows)
    fp = sum(r["score"] >= threshold and not r["label"] for r in rows)
    fn = sum(r["score"] < threshold and r["label"] for r in rows)
    tn = len(rows) - tp - fp - fn
    p = tp / (tp + fp) if tp + fp else 0.0
    rc = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * p * rc / (p + rc) if p + rc else 0.0
    return {"precision": p, "recall": rc, "f1": f1, "accuracy": (tp + tn) / len(rows) if rows else 0.0}


def pick_threshold(rows: list[dict]) -> float:
    """F1-maximising threshold on the grid; the middle of the best plateau."""
    scores = [metrics(rows, t)["f1"] for t in GRID]
    best = max(scores)
    ties = [t for t, f in zip(GRID, scores) if f == best]
    return ties[len(ties) // 2]


async def score(judge: local.LocalJudge, rows: list[dict], align: bool) -> float:
    """Fill in row["cosine"] (best window cosine), row["unmatched"] (the
    statement's unmatched share in that window) and row["conflict"] (how that
    window contradicts the statement, or None), the last two with ``align``,
    one pair at a time, as ``expresses`` computes them; returns seconds."""
    start = time.perf_counter()
    for r in rows:
        (match,) = await judge.similarity(r["text"], [r["query"]], align=align)
        r["cosine"], r["unmatched"], r["conflict"] = match.score, match.unmatched, match.conflict
    return time.perf_counter() - start


def set_scores(rows: list[dict], weight: float, conflict_weight: float = 0.0) -> None:
    """row["score"] = the score the judge thresholds, for these weights."""
    for r in rows:
        match = local.Match(r["cosine"], None, r["unmatched"], r["conflict"])
        r["score"] = local.expressed_score(match, weight, conflict_weight)


def pick(
    rows: list[dict], weights: Sequence[float], conflict_weights: Sequence[float] = (0.0,)
) -> tuple[float, float, float]:
    """(weight, conflict weight, threshold) maximising F1 on ``rows``, one at a
    time: the smallest unmatched weight reaching the best F1 without the conflict
    checks, then with it the smallest conflict weight reaching the best F1, and
    for both the middle of the best threshold plateau."""

    def smallest_best(candidates: list[tuple[float, float]]) -> tuple[float, float]:
        best: tuple[float, float, float] | None = None
        for w, cw in candidates:
            set_scores(rows, w, cw)
            f1 = metrics(rows, pick_threshold(rows))["f1"]
            if best is None or f1 > best[0]:
                best = (f1, w, cw)
        assert best is not None
        return best[1], best[2]

    weight, _ = smallest_best([(w, 0.0) for w in weights])
    weight, conflict_weight = smallest_best([(weight, cw) for cw in conflict_weights])
    set_scores(rows, weight, conflict_weight)
    return weight, conflict_weight, pick_threshold(rows)


def cross_validate(
    cal: list[dict], weights: Sequence[float], conflict_weights: Sequence[float] = (0.0,), folds: int = 5,
    repeats: int = 20,
) -> tuple[float, float]:
    """Mean and spread of F1 over repeated stratified k-fold cross-validation
    inside the calibration half: weights and threshold picked on the training
    folds by :func:`pick`, predictions pooled over the test folds."""
    scores = []
    for seed in range(repeats):
        rng = random.Random(seed)
        parts: list[list[int]] = [[] for _ in range(folds)]
        for label in (True, False):
            idx = [i for i, r in enumerate(cal) if r["label"] == label]
            rng.shuffle(idx)
            for k, i in enumerate(idx):
                parts[k % folds].append(i)
        predicted: dict[int, bool] = {}
        for part in parts:
            test = set(part)
            w, cw, t = pick([r for i, r in enumerate(cal) if i not in test], weights, conflict_weights)
            set_scores(cal, w, cw)
            predicted.update({i: cal[i]["score"] >= t for i in part})
        tp = sum(predicted[i] and cal[i]["label"] for i in predicted)
        fp = sum(predicted[i] and not cal[i]["label"] for i in predicted)
        fn = sum(not predicted[i] and cal[i]["label"] for i in predicted)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return statistics.mean(scores), statistics.pstdev(scores)


def held_out_line(name: str, rows: list[dict], t: float) -> str:
    m = metrics(rows, t)
    return (
        f"{name}: precision {m['precision']:.3f}  recall {m['recall']:.3f}  "
        f"F1 {m['f1']:.3f}  accuracy {m['accuracy']:.3f}  (n={len(rows)})"
    )


def kind_accuracy(rows: list[dict], t: float, kinds: Sequence[str]) -> str:
    """Share judged correctly for each of ``kinds`` present in ``rows``."""
    out = []
    for kind in kinds:
        part = [r for r in rows if r["kind"] == kind]
        if part:
            out.append(f"{kind} {sum((r['score'] >= t) == r['label'] for r in part) / len(part):.3f}")
    return "  ".join(out)


WEAK_SPOTS = ("near_miss", "contradiction", "swapped")


def report(
    title: str,
    rows: list[dict],
    module_threshold: float,
    weights: Sequence[float],
    module_weight: float,
    conflict_weights: Sequence[float] = (0.0,),
    module_conflict_weight: float = 0.0,
    cv: bool = False,
) -> float:
    """Calibrate on one half, print held-out figures; returns the chosen threshold."""
    cal, held = split(rows)
    checks = len(conflict_weights) > 1
    if cv and len(weights) > 1:
        print(f"\n== {title}: cross-validation inside the calibration half (5 folds x 20 repeats)")
        variants = [("cosine alone", [0.0], (0.0,)), ("cosine - weight * unmatched", weights, (0.0,))]
        if checks:
            variants.append(("... - conflict weight * conflict", weights, conflict_weights))
        for name, ws, cws in variants:
            mean, sd = cross_validate(cal, ws, cws)
            print(f"  {name:32s} F1 {mean:.3f} (sd {sd:.3f})")
    weight, conflict_weight, t = pick(cal, weights, conflict_weights)
    set_scores(rows, weight, conflict_weight)
    c = metrics(cal, t)
    print(f"\n== {title}")
    print(f"pairs: {len(rows)} ({sum(r['label'] for r in rows)} positive); calibration {len(cal)}, held-out {len(held)}")
    if checks:
        print(
            f"score = cosine - weight * unmatched - conflict weight * (evidence contradicts the statement); "
            f"chosen on calibration half: weight {weight:.1f}, conflict weight {conflict_weight:.1f}; "
            f"local.py uses {module_weight:.1f}, {module_conflict_weight:.1f}"
        )
    elif len(weights) > 1:
        print(
            f"score = cosine - weight * unmatched; weight chosen on calibration half: {weight:.1f}; "
            f"local.py uses {module_weight:.1f}"
        )
    print(f"threshold chosen on calibration half: {t:.2f} (calibration F1 {c['f1']:.3f}); local.py uses {module_threshold:.2f}")
    print(held_out_line("held-out", held, t))
    original = [r for r in held if r["kind"] in ORIGINAL_KINDS]
    if len(original) < len(held):
        print(held_out_line("held-out, original kinds only", original, t))
    print("held-out by kind (label: share judged correctly, mean cosine, mean score, pairs with a conflict found):")
    for kind in sorted({r["kind"] for r in held}):
        part = [r for r in held if r["kind"] == kind]
        ok = sum((r["score"] >= t) == r["label"] for r in part)
        label = "positive" if part[0]["label"] else "negative"
        mean = statistics.mean(r["cosine"] for r in part)
        mean_score = statistics.mean(r["score"] for r in part)
        flagged = sum(bool(r.get("conflict")) for r in part)
        print(
            f"  {kind:19s} {label:8s} n={len(part):3d}  correct {ok:3d}  accuracy {ok / len(part):.3f}  "
            f"mean cosine {mean:.3f}  mean score {mean_score:.3f}  conflict {flagged:3d}"
        )
    if any(r["kind"] in WEAK_SPOTS for r in held):
        print(f"held-out accuracy on the weak spots: {kind_accuracy(held, t, WEAK_SPOTS)}")
    print("held-out accuracy by confidence band:")
    bands = [(0.5, 0.7), (0.7, 0.9), (0.9, 1.01)]
    for lo, hi in bands:
        part = [r for r in held if lo <= local.confidence(r["score"], t) < hi]
        if part:
            ok = sum((r["score"] >= t) == r["label"] for r in part)
            print(f"  confidence [{lo:.1f}, {min(hi, 1.0):.1f}{']' if hi > 1 else ')'}  n={len(part):3d}  accuracy {ok / len(part):.3f}")
    if (abs(t - module_threshold) > 1e-9 or abs(weight - module_weight) > 1e-9
            or abs(conflict_weight - module_conflict_weight) > 1e-9):
        set_scores(rows, module_weight, module_conflict_weight)
        m = metrics(held, module_threshold)
        print(f"NOTE: local.py differs; held-out F1 with its weights and threshold is {m['f1']:.3f}")
    # References only, calibrated the same way on the same half.
    if checks and conflict_weight != 0.0:
        w0, _, t0 = pick(cal, weights)
        set_scores(rows, w0)
        print(f"reference, without the conflict checks (weight {w0:.1f}, threshold {t0:.2f} from the calibration half):")
        print("  " + held_out_line("held-out", held, t0))
        print("  " + held_out_line("held-out, original kinds only", original, t0))
        print(f"  held-out accuracy on the weak spots: {kind_accuracy(held, t0, WEAK_SPOTS)}")
    if len(weights) > 1 and weight != 0.0:
        t0 = pick(cal, [0.0])[2]
        set_scores(rows, 0.0)
        m = metrics(held, t0)
        print(
            f"reference, cosine alone (weight 0.0, threshold {t0:.2f} from the calibration half): "
            f"held-out precision {m['precision']:.3f}  recall {m['recall']:.3f}  F1 {m['f1']:.3f}"
        )
    set_scores(rows, weight, conflict_weight)
    return t


async def main(cv: bool = False) -> None:
    pairs = load(DATA / "local_judge_pairs.jsonl", "text", "statement")
    coverage = load(DATA / "local_judge_coverage.jsonl", "answer", "question")
    judge = local.LocalJudge()
    t0 = time.perf_counter()
    await judge.load()
    load_s = time.perf_counter() - t0
    local._cache.clear()  # each pass encodes from scratch: the judge keeps recent texts' encodings
    plain_s = await score(judge, pairs, align=False)
    local._cache.clear()
    pair_s = await score(judge, pairs, align=True)
    cached_s = await score(judge, pairs, align=True)
    local._cache.clear()
    cov_s = await score(judge, coverage, align=False)
    windows = sum(len(local.text_windows(r["text"])) for r in pairs)
    report(
        "expresses (tests/data/local_judge_pairs.jsonl)",
        pairs,
        local.EXPRESSED_THRESHOLD,
        WEIGHTS,
        local.UNMATCHED_WEIGHT,
        WEIGHTS,
        local.CONFLICT_WEIGHT,
        cv,
    )
    report("coverage (tests/data/local_judge_coverage.jsonl)", coverage, local.COVERAGE_THRESHOLD, [0.0], 0.0)
    print("\n== timing (CPU)")
    print(f"model load: {load_s:.2f} s")
    print(
        f"expresses: {len(pairs)} pairs, {windows} windows, {pair_s:.2f} s "
        f"({1000 * pair_s / len(pairs):.1f} ms per pair, {len(pairs) / pair_s:.1f} pairs/s, one call per pair)"
    )
    print(f"expresses again, every text in the judge's cache of recent encodings: {cached_s:.2f} s")
    print(
        f"cosine alone (no token alignment), same pairs: {plain_s:.2f} s "
        f"({1000 * plain_s / len(pairs):.1f} ms per pair, {len(pairs) / plain_s:.1f} pairs/s)"
    )
    print(f"coverage: {len(coverage)} pairs, {cov_s:.2f} s ({1000 * cov_s / len(coverage):.1f} ms per pair)")
    big = [r["text"] for r in pairs]
    local._cache.clear()
    t0 = time.perf_counter()
    await judge.similarity(big[:50], [r["query"] for r in pairs[:50]], align=True)
    print(f"batched: 50 statements against the windows of 50 texts in one call: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cv", action="store_true", help="also cross-validate inside the calibration half")
    asyncio.run(main(cv=parser.parse_args().cv))
