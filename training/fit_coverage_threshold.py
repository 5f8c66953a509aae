"""Fit the local judge's ``answers`` threshold and band to the question it is used for, and
refit the ``expresses`` band (the share of decisions a band holds: ``fitting.BAND_ABSTAIN``).

    .venv/bin/python training/fit_coverage_threshold.py      # after train_local_judge.py; rewrites judge.json

The answers head is trained and its temperature fitted on answer-sentence selection
(TREC-QA: one sentence, a factoid question), but jurist asks it whether an *answer*
covers a *part of a question* (the gate's comprehensiveness check, research coverage),
where its probabilities run lower. So the threshold is fitted where it is used: through
``LocalJudge.coverage`` itself (windows, preselection, band off), on the calibration half
of the project's own coverage pairs (``tests/data/local_judge_coverage.jsonl``, see
``judge_data.own_halves``), maximising macro-F1; the band holds the same share of those
decisions as the training script's bands do. The held-out half is left to the benchmark.
The ``expresses`` band is recomputed on the training script's development pairs (NLI and
short-answer grading) with jurist's own numpy cross-encoder, so a change of
``BAND_ABSTAIN`` needs no retraining.
Run with the project's environment (jurist installed), not the training one.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import judge_data  # noqa: E402
from fitting import BAND_ABSTAIN, band_for, fit_threshold  # noqa: E402

MODEL_DIR = judge_data.ROOT / "src" / "jurist" / "models" / "minilm"


async def probabilities(rows: list[dict]) -> np.ndarray:
    from jurist.models.local import LocalJudge, LocalThresholds

    judge = LocalJudge(thresholds=LocalThresholds(band={"expresses": 0, "answers": 0}))
    out = []
    for r in rows:
        res = await judge.coverage(r["question"], r["answer"], [r["question"]])
        c = res.confidence[r["question"]]
        out.append(c if r["question"] in res.covered else 1 - c)
    return np.array(out)


def expresses_probabilities() -> tuple[np.ndarray, float]:
    from jurist.models.minilm.cross import CrossEncoder

    dev = [p for p in judge_data.development_pairs() if p.task == "nli"]
    encoder = CrossEncoder()
    return encoder.scores([(p.first, p.second) for p in dev]).nli[:, 0], encoder.record.thresholds["expresses"]


def main() -> None:
    cal, _ = judge_data.own_halves("local_judge_coverage.jsonl")
    p = asyncio.run(probabilities(cal))
    y = np.array([bool(r["label"]) for r in cal])
    threshold, f1 = fit_threshold(p, y)
    path = MODEL_DIR / "judge.json"
    meta = json.loads(path.read_text())
    meta["thresholds"]["answers"] = threshold
    meta["band"]["answers"] = band_for(p, threshold)
    p_entail, t_expr = expresses_probabilities()
    meta["band"]["expresses"] = band_for(p_entail, t_expr)
    meta["figures"]["answers_threshold_fit"] = {
        "pairs": len(cal), "positives": int(y.sum()), "macro_f1": round(f1, 4),
        "data": "tests/data/local_judge_coverage.jsonl, calibration half", "band_share": BAND_ABSTAIN}
    path.write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps({"answers": threshold, "band": meta["band"], **meta["figures"]["answers_threshold_fit"]}))


if __name__ == "__main__":
    main()
