"""Accuracy of the offline local/minilm judge on hand-labelled pairs.

    python benchmarks/local_judge_accuracy.py

Data (tests/data/):
  local_judge_pairs.jsonl     {"text", "statement", "label", "kind"}   -> LocalJudge.expresses
  local_judge_coverage.jsonl  {"question", "answer", "label", "kind"}  -> LocalJudge.coverage

Each file is split deterministically into a calibration half and a held-out half:
within each kind, pairs are sorted by sha256(text + U+001F + statement) and
alternate between the halves. The threshold is the F1-maximising one on the
calibration half (grid 0.30..0.90, step 0.01; the middle of the best plateau).
Precision, recall, F1 and accuracy are then measured on the held-out half only,
which plays no part in choosing anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
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


async def score(judge: local.LocalJudge, rows: list[dict]) -> float:
    """Fill in row["score"] (best window cosine) one pair at a time; returns seconds."""
    start = time.perf_counter()
    for r in rows:
        (match,) = await judge.similarity(r["text"], [r["query"]])
        r["score"] = match.score
    return time.perf_counter() - start


def report(title: str, rows: list[dict], module_threshold: float) -> float:
    """Calibrate on one half, print held-out figures; returns the chosen threshold."""
    cal, held = split(rows)
    t = pick_threshold(cal)
    c, h = metrics(cal, t), metrics(held, t)
    print(f"\n== {title}")
    print(f"pairs: {len(rows)} ({sum(r['label'] for r in rows)} positive); calibration {len(cal)}, held-out {len(held)}")
    print(f"threshold chosen on calibration half: {t:.2f} (calibration F1 {c['f1']:.3f}); local.py uses {module_threshold:.2f}")
    print(
        f"held-out: precision {h['precision']:.3f}  recall {h['recall']:.3f}  "
        f"F1 {h['f1']:.3f}  accuracy {h['accuracy']:.3f}  (n={len(held)})"
    )
    print("held-out by kind (label: share judged correctly, mean cosine):")
    for kind in sorted({r["kind"] for r in held}):
        part = [r for r in held if r["kind"] == kind]
        ok = sum((r["score"] >= t) == r["label"] for r in part)
        label = "positive" if part[0]["label"] else "negative"
        mean = statistics.mean(r["score"] for r in part)
        print(f"  {kind:11s} {label:8s} n={len(part):3d}  correct {ok:3d}  accuracy {ok / len(part):.3f}  mean cosine {mean:.3f}")
    print("held-out accuracy by confidence band:")
    bands = [(0.5, 0.7), (0.7, 0.9), (0.9, 1.01)]
    for lo, hi in bands:
        part = [r for r in held if lo <= local.confidence(r["score"], t) < hi]
        if part:
            ok = sum((r["score"] >= t) == r["label"] for r in part)
            print(f"  confidence [{lo:.1f}, {min(hi, 1.0):.1f}{']' if hi > 1 else ')'}  n={len(part):3d}  accuracy {ok / len(part):.3f}")
    if abs(t - module_threshold) > 1e-9:
        m = metrics(held, module_threshold)
        print(f"NOTE: local.py threshold differs; held-out F1 at {module_threshold:.2f} is {m['f1']:.3f}")
    return t


async def main() -> None:
    pairs = load(DATA / "local_judge_pairs.jsonl", "text", "statement")
    coverage = load(DATA / "local_judge_coverage.jsonl", "answer", "question")
    judge = local.LocalJudge()
    t0 = time.perf_counter()
    await judge.load()
    load_s = time.perf_counter() - t0
    pair_s = await score(judge, pairs)
    cov_s = await score(judge, coverage)
    windows = sum(len(local.text_windows(r["text"])) for r in pairs)
    report("expresses (tests/data/local_judge_pairs.jsonl)", pairs, local.EXPRESSED_THRESHOLD)
    report("coverage (tests/data/local_judge_coverage.jsonl)", coverage, local.COVERAGE_THRESHOLD)
    print("\n== timing (CPU)")
    print(f"model load: {load_s:.2f} s")
    print(
        f"expresses: {len(pairs)} pairs, {windows} windows, {pair_s:.2f} s "
        f"({1000 * pair_s / len(pairs):.1f} ms per pair, one call per pair)"
    )
    print(f"coverage: {len(coverage)} pairs, {cov_s:.2f} s ({1000 * cov_s / len(coverage):.1f} ms per pair)")
    big = [r["text"] for r in pairs]
    t0 = time.perf_counter()
    await judge.similarity(big[:50], [r["query"] for r in pairs[:50]])
    print(f"batched: 50 statements against the windows of 50 texts in one call: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
