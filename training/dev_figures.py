"""What decides whether a trained judge replaces the shipped one: the answers head's figures on
development data only, for the judge in ``src/jurist/models/minilm`` (run it before and after
copying a new judge there, then ``python benchmarks/minilm_export.py --judge``).

    python training/dev_figures.py

For each source of answers-the-question development pairs (SemEval's answers to their own
question or another's, the project's dev questions, TREC-QA dev and WikiQA dev; the last two
are evaluation-only sets, never trained on), the AUC and the macro-F1 at the judge's answers
threshold; and the coverage of the calibration half of ``tests/data/local_judge_coverage.jsonl``
(the half the benchmark does not measure), read through the judge as a gate reads it.
The NLI and expresses figures on development pairs are in ``judge.json`` (``figures``), written by
the training script. No test split is read here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import judge_data  # noqa: E402
from fitting import macro_f1, roc_auc  # noqa: E402
from local_judge_accuracy import coverage_figures  # noqa: E402

from jurist.models.local import get_local_judge  # noqa: E402
from jurist.models.minilm.cross import CrossEncoder  # noqa: E402


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    cross = CrossEncoder()
    threshold = cross.record.thresholds["answers"]
    sources: dict[str, list[judge_data.Pair]] = {}
    for p in judge_data.sag_answers("dev") + judge_data.own_answer_pairs("dev"):
        sources.setdefault(p.source, []).append(p)
    for name in ("trecqa_dev", "wikiqa_dev"):
        sources[name] = judge_data.qa(name)
    figures: dict[str, dict[str, float]] = {}
    for name, rows in sources.items():
        probs = np.asarray(cross.scores([(p.first, p.second) for p in rows]).answers, float)
        labels = np.array([p.label == 1 for p in rows])
        figures[name] = {"pairs": len(rows), "auc": round(roc_auc(probs.tolist(), labels.tolist()), 4),
                         "macro_f1": round(macro_f1(labels, probs >= threshold), 4)}
    calibration, _ = judge_data.own_halves("local_judge_coverage.jsonl")
    coverage = asyncio.run(coverage_figures(get_local_judge(), calibration, threshold))
    figures["coverage_calibration_half"] = {k: round(v, 4) for k, v in coverage.items()}
    print(json.dumps({"answers_threshold": threshold, **figures}, indent=2))


if __name__ == "__main__":
    main()
