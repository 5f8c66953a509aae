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
For expresses the score is cosine - weight * unmatched share (see
jurist.models.local.expressed_score); the weight is picked on the calibration
half too (grid 0.0..1.0, step 0.1; the smallest weight reaching the best F1).
Coverage uses the cosine alone. Precision, recall, F1 and accuracy are then
measured on the held-out half only, which plays no part in choosing anything.
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

ROOT = Path(__file__).resolve().parents[1]
try:
    import jurist.models.local as local
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))
    import jurist.models.local as local

DATA = ROOT / "tests" / "data"
GRID = [round(0.30 + 0.01 * i, 2) for i in range(61)]
WEIGHTS = [round(0.1 * i, 1) for i in range(11)]


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
    """Fill in row["cosine"] (best window cosine) and row["unmatched"] (the
    statement's unmatched share in that window, with ``align``) one pair at a
    time, as ``expresses`` computes them; returns seconds."""
    start = time.perf_counter()
    for r in rows:
        (match,) = await judge.similarity(r["text"], [r["query"]], align=align)
        r["cosine"], r["unmatched"] = match.score, match.unmatched
    return time.perf_counter() - start


def set_scores(rows: list[dict], weight: float) -> None:
    """row["score"] = the score the judge thresholds, for this weight."""
    for r in rows:
        r["score"] = local.expressed_score(local.Match(r["cosine"], None, r["unmatched"]), weight)


def pick(rows: list[dict], weights: list[float]) -> tuple[float, float]:
    """(weight, threshold) maximising F1 on ``rows``: the smallest weight reaching
    the best F1, and for it the middle of the best threshold plateau."""
    best: tuple[float, float, float] | None = None
    for w in weights:
        set_scores(rows, w)
        t = pick_threshold(rows)
        f1 = metrics(rows, t)["f1"]
        if best is None or f1 > best[0]:
            best = (f1, w, t)
    assert best is not None
    return best[1], best[2]


def cross_validate(cal: list[dict], weights: list[float], folds: int = 5, repeats: int = 20) -> tuple[float, float]:
    """Mean and spread of F1 over repeated stratified k-fold cross-validation
    inside the calibration half: weight and threshold picked on the training
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
            w, t = pick([r for i, r in enumerate(cal) if i not in test], weights)
            set_scores(cal, w)
            predicted.update({i: cal[i]["score"] >= t for i in part})
        tp = sum(predicted[i] and cal[i]["label"] for i in predicted)
        fp = sum(predicted[i] and not cal[i]["label"] for i in predicted)
        fn = sum(not predicted[i] and cal[i]["label"] for i in predicted)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return statistics.mean(scores), statistics.pstdev(scores)


def report(
    title: str, rows: list[dict], module_threshold: float, weights: list[float], module_weight: float, cv: bool = False
) -> float:
    """Calibrate on one half, print held-out figures; returns the chosen threshold."""
    cal, held = split(rows)
    if cv and len(weights) > 1:
        print(f"\n== {title}: cross-validation inside the calibration half (5 folds x 20 repeats)")
        for name, ws in (("cosine alone", [0.0]), ("cosine - weight * unmatched", weights)):
            mean, sd = cross_validate(cal, ws)
            print(f"  {name:28s} F1 {mean:.3f} (sd {sd:.3f})")
    weight, t = pick(cal, weights)
    set_scores(rows, weight)
    c, h = metrics(cal, t), metrics(held, t)
    print(f"\n== {title}")
    print(f"pairs: {len(rows)} ({sum(r['label'] for r in rows)} positive); calibration {len(cal)}, held-out {len(held)}")
    if len(weights) > 1:
        print(
            f"score = cosine - weight * unmatched; weight chosen on calibration half: {weight:.1f}; "
            f"local.py uses {module_weight:.1f}"
        )
    print(f"threshold chosen on calibration half: {t:.2f} (calibration F1 {c['f1']:.3f}); local.py uses {module_threshold:.2f}")
    print(
        f"held-out: precision {h['precision']:.3f}  recall {h['recall']:.3f}  "
        f"F1 {h['f1']:.3f}  accuracy {h['accuracy']:.3f}  (n={len(held)})"
    )
    print("held-out by kind (label: share judged correctly, mean cosine, mean score):")
    for kind in sorted({r["kind"] for r in held}):
        part = [r for r in held if r["kind"] == kind]
        ok = sum((r["score"] >= t) == r["label"] for r in part)
        label = "positive" if part[0]["label"] else "negative"
        mean = statistics.mean(r["cosine"] for r in part)
        mean_score = statistics.mean(r["score"] for r in part)
        print(
            f"  {kind:11s} {label:8s} n={len(part):3d}  correct {ok:3d}  accuracy {ok / len(part):.3f}  "
            f"mean cosine {mean:.3f}  mean score {mean_score:.3f}"
        )
    print("held-out accuracy by confidence band:")
    bands = [(0.5, 0.7), (0.7, 0.9), (0.9, 1.01)]
    for lo, hi in bands:
        part = [r for r in held if lo <= local.confidence(r["score"], t) < hi]
        if part:
            ok = sum((r["score"] >= t) == r["label"] for r in part)
            print(f"  confidence [{lo:.1f}, {min(hi, 1.0):.1f}{']' if hi > 1 else ')'}  n={len(part):3d}  accuracy {ok / len(part):.3f}")
    if abs(t - module_threshold) > 1e-9 or abs(weight - module_weight) > 1e-9:
        set_scores(rows, module_weight)
        m = metrics(held, module_threshold)
        print(f"NOTE: local.py differs; held-out F1 with its weight and threshold is {m['f1']:.3f}")
    if len(weights) > 1 and weight != 0.0:
        # Reference only: the cosine alone, calibrated the same way on the same half.
        t0 = pick(cal, [0.0])[1]
        set_scores(rows, 0.0)
        m = metrics(held, t0)
        print(
            f"reference, cosine alone (weight 0.0, threshold {t0:.2f} from the calibration half): "
            f"held-out precision {m['precision']:.3f}  recall {m['recall']:.3f}  F1 {m['f1']:.3f}"
        )
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
    asyncio.run(main(cv="--cv" in sys.argv[1:]))
