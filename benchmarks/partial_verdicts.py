"""How often the gate's offline judge reaches a verdict when it cannot decide every part.

    python benchmarks/partial_verdicts.py            # 300 cases of each kind
    python benchmarks/partial_verdicts.py --cases 50

The gate on ``local/minilm`` judges an answer by which parts of the question it
covers; a part whose probability lies inside the judge's band of uncertainty is
undecided. Before, one undecided part skipped the evaluation (the answer went
out unjudged, saying so); now the parts it did decide give the verdict when the
undecided ones cannot change it (:func:`jurist.gate.evaluators.coverage_evaluation`).
This counts, on held-out data, how many evaluations the judge declined, how many
of those now have a verdict, and how many of those verdicts are right.

The cases are built from the held-out questions of the SemEval-2013 short-answer
sets (``sag_split`` "test" of ``training/judge_data.py``, read from
``../shared/data`` or ``JURIST_DATA_DIR``): a Beetle question and a SciEntsBank
question asked together (in both orders), with

* **one answered**: a student's correct answer to one of them only:
  comprehensiveness should fail (the other question, from another domain, is
  not addressed);
* **both answered**: a student's correct answer to each, one after the other:
  comprehensiveness should pass.

The questions are the sets' own: some are context sentences and instructions
around the question ("Explain your reasoning."), which the question splitter
leaves out or keeps as it can.

Quality (the share of parts covered, threshold 0.4) has no right answer here;
only its counts are printed. Nothing is fitted: the judge runs as it ships.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import jurist  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

from judge_data import Pair, sag, sag_answers  # noqa: E402  (training/judge_data.py: the fixed splits)

from jurist.errors import Uncertain  # noqa: E402
from jurist.gate.evaluators import coverage_evaluation  # noqa: E402
from jurist.models.local import LocalJudge  # noqa: E402

SEED = 7
QUALITY_THRESHOLD = 0.4  # GateConfig's default


def own_answers(corpus: str) -> list[Pair]:
    """(question, a student's answer to it labelled correct) of the corpus's held-out questions."""
    correct = {(p.group, p.first) for p in sag(corpus, "test") if p.extra == "correct"}
    return [p for p in sag_answers("test")
            if p.label == 1 and p.source == f"sag_answers_{corpus}" and (p.group, p.second) in correct]


def cases(n: int) -> list[tuple[str, str, str, bool]]:
    """(kind, question, answer, comprehensive?) cases, ``n`` of each kind, seeded."""
    rng = random.Random(SEED)
    beetle, science = own_answers("beetle"), own_answers("scientsbank")
    out: list[tuple[str, str, str, bool]] = []
    for i in range(n):
        a, b = rng.choice(beetle), rng.choice(science)
        first, second = (a, b) if i % 2 == 0 else (b, a)
        question = f"{first.first} {second.first}"
        out.append(("one answered", question, first.second, False))
        out.append(("both answered", question, f"{first.second} {second.second}", True))
    return out


async def main(n: int) -> None:
    judge = LocalJudge()
    counts: dict[tuple[str, str], Counter[str]] = {}
    for kind, question, answer, comprehensive in cases(n):
        try:
            cov, undecided = await judge.coverage(question, answer), ()
        except Uncertain as exc:
            cov, undecided = exc.decided, exc.undecided
        for name in ("comprehensiveness", "quality"):
            tally = counts.setdefault((name, kind), Counter())
            tally["cases"] += 1
            ev = coverage_evaluation(cov, name, QUALITY_THRESHOLD, undecided)
            if not undecided:
                tally["every part decided"] += 1
            else:
                tally["declined before"] += 1
                tally["verdict now" if ev is not None else "still skipped"] += 1
            if ev is not None and name == "comprehensiveness":
                right = ev.passed == comprehensive
                tally["right" if right else "wrong"] += 1
                if undecided:
                    tally["right, new" if right else "wrong, new"] += 1
    print(f"the gate's coverage verdicts on local/minilm, {n} held-out question pairs "
          f"(SemEval-2013 test questions, Beetle + SciEntsBank)")
    print(f"{'evaluator':<18} {'answer':<14} {'cases':>5} {'all parts decided':>17} {'declined before':>15} "
          f"{'verdict now':>11} {'still skipped':>13} {'right (all)':>11} {'right (new)':>11}")
    for (name, kind), t in counts.items():
        new = t["right, new"] + t["wrong, new"]
        decided = t["right"] + t["wrong"]
        right_all = f"{t['right'] / decided:.3f}" if name == "comprehensiveness" and decided else "-"
        right_new = f"{t['right, new']}/{new}" if name == "comprehensiveness" else "-"
        print(f"{name:<18} {kind:<14} {t['cases']:>5} {t['every part decided']:>17} {t['declined before']:>15} "
              f"{t['verdict now']:>11} {t['still skipped']:>13} {right_all:>11} {right_new:>11}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=300, help="question pairs (each gives one case of each kind)")
    asyncio.run(main(parser.parse_args().cases))
