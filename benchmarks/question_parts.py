"""How many parts the question splitter finds in real questions.

    python benchmarks/question_parts.py

Reads the questions of the SemEval-2013 short-answer grading sets (Beetle and
SciEntsBank, training files) from ``../shared/data/sag`` (``DATA_DIR`` of
``training/judge_data.py``; override with ``JURIST_DATA_DIR``) and prints, per
corpus, how many distinct questions :func:`jurist.models.texts.split_question`
turns into 1 part, 2 parts, and 3 or more. Each of these questions asks one thing
(its reference answers answer one thing), often after a few sentences of context
and instructions, so nearly all should give one part.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import jurist  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

from judge_data import DATA_DIR, SAG_CORPORA  # noqa: E402  (training/judge_data.py)

from jurist.models.texts import split_question  # noqa: E402


def questions(corpus: str) -> list[str]:
    """The distinct questions of one corpus's training file."""
    path = DATA_DIR / "sag" / f"semeval2013_{corpus}_train.jsonl.gz"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: the data lives in ../shared/data next to the checkout "
                         "(or set JURIST_DATA_DIR); see docs/local-judge.md")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return sorted({json.loads(line)["question"] for line in fh})


def main() -> None:
    print(f"{'corpus':<12} {'questions':>9} {'1 part':>7} {'2 parts':>8} {'3+ parts':>9}")
    for corpus in SAG_CORPORA:
        qs = questions(corpus)
        counts = Counter(min(len(split_question(q)), 3) for q in qs)
        print(f"{corpus:<12} {len(qs):>9} {counts[1]:>7} {counts[2]:>8} {counts[3]:>9}")


if __name__ == "__main__":
    main()
