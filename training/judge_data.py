"""The data the local judge's cross-encoder is trained and measured on, and its splits.

Read at development time from ``../shared/data`` (next to the checkout; override with
``JURIST_DATA_DIR``): public, human-labelled sets described in ``docs/local-judge.md``
(source, commit, licence, size). Nothing here is committed to the repository and
nothing is downloaded.

The splits are fixed before training and never change with a run:

* NLI. Training pool: SNLI dev, MultiNLI dev (matched and mismatched) and the
  counterfactual SNLI train set; 2,000 pairs of that pool (seeded) are the
  development split (temperature, thresholds, band). Held out: SNLI test with the
  counterfactual SNLI test set (one unit: the latter is built from the former),
  and SICK test (SICK is non-commercial: evaluation only, never training).
* Short-answer grading (SemEval-2013 Beetle and SciEntsBank, training files only):
  split by *question*, so test questions are never seen in training: a question's
  SHA-256 decides (test 25 %, development 15 %, training 60 %). The student answer is
  the premise, the reference answer the hypothesis: correct -> entailment,
  contradictory -> contradiction, incorrect -> neutral.
* Speech acts (the project's own written examples, ``training/speech_acts.json``): what
  an assistant does ("The assistant apologises for the delay.") against replies that do it,
  come close, or do the opposite, framed as the local judge frames an assistant's turn.
  Split by act: train, dev (with the development pairs) and test acts (held out: the
  benchmark measures acts the model never saw).
* The project's own questions (``training/answers_own.json``, :func:`own_answer_pairs`):
  sentences that answer each question against sentences on its topic, split by question; the
  benchmark measures the test questions (the shipped model learnt from none of them).
* Answers the question: made from short-answer grading (:func:`sag_answers`: an answer to its
  own question, or to another); TREC-QA test and WikiQA test are held out and evaluation only
  (TREC-QA's licence is unclear, WikiQA's research-only: neither trains the shipped model).
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("JURIST_DATA_DIR", ROOT.parent / "shared" / "data"))
SEED = 20261127
NLI_DEV_SIZE = 2000
SAG_CORPORA = ("beetle", "scientsbank")
SAG_LABELS = {"correct": "entailment", "contradictory": "contradiction", "incorrect": "neutral"}


@dataclass(frozen=True)
class Pair:
    """One labelled pair: ``first`` (premise, or the question) and ``second``
    (hypothesis, or the candidate answer); ``task`` is ``nli`` (label 0 entailment,
    1 neutral, 2 contradiction) or ``answers`` (label 1 answers, 0 does not);
    ``group`` ties the rows of one question together (SAG, QA)."""

    first: str
    second: str
    task: str
    label: int
    source: str
    group: str = ""
    extra: str = ""  # SAG: the original label (correct / contradictory / incorrect); speech acts: the reply


NLI_INDEX = {"entailment": 0, "neutral": 1, "contradiction": 2}


def _rows(name: str) -> Iterator[dict[str, Any]]:
    path = DATA_DIR / name
    if not path.is_file():
        raise SystemExit(f"{path} is missing: the training data lives in ../shared/data next to the "
                         "checkout (or set JURIST_DATA_DIR); see docs/local-judge.md")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def _nli(name: str, source: str) -> list[Pair]:
    return [Pair(r["premise"].strip(), r["hypothesis"].strip(), "nli", NLI_INDEX[r["label"]], source)
            for r in _rows(name) if r["premise"].strip() and r["hypothesis"].strip()]


def nli_pool() -> tuple[list[Pair], list[Pair]]:
    """(training, development) NLI pairs."""
    pool = (_nli("nli/snli_dev.jsonl.gz", "snli_dev") + _nli("nli/mnli_dev_matched.jsonl.gz", "mnli_dev_m")
            + _nli("nli/mnli_dev_mismatched.jsonl.gz", "mnli_dev_mm") + _nli("nli/cad_snli_train.jsonl.gz", "cad_train"))
    random.Random(SEED).shuffle(pool)
    return pool[NLI_DEV_SIZE:], pool[:NLI_DEV_SIZE]


def nli_test() -> dict[str, list[Pair]]:
    """Held-out NLI sets, by name."""
    sick = [Pair(r["premise"], r["hypothesis"], "nli", NLI_INDEX[r["label"].lower()] if r["label"].lower() in NLI_INDEX
                 else {"e": 0, "n": 1, "c": 2}[r["label"][0].lower()], "sick_test")
            for r in _rows("nli/sick.jsonl.gz") if r["split"] == "test"]
    return {"snli_test+cad_test": _nli("nli/snli_test.jsonl.gz", "snli_test") + _nli("nli/cad_snli_test.jsonl.gz", "cad_test"),
            "sick_test": sick}


def sag_split(question_id: str) -> str:
    """``train`` | ``dev`` | ``test`` for a SemEval question, from its id's SHA-256."""
    bucket = int(hashlib.sha256(question_id.encode()).hexdigest()[:8], 16) % 100
    return "test" if bucket < 25 else "dev" if bucket < 40 else "train"


def sag(corpus: str, split: str, *, all_references: bool = False) -> list[Pair]:
    """Short-answer pairs of one corpus and split: (student answer, reference answer).
    Evaluation uses the first reference answer only (a checklist point is one text);
    training may use every reference marked BEST (Beetle has several)."""
    out: list[Pair] = []
    for r in _rows(f"sag/semeval2013_{corpus}_train.jsonl.gz"):
        if sag_split(r["question_id"]) != split or not r["student_answer"].strip():
            continue
        refs = r["reference_answers"][:1]
        if all_references:
            cats = r.get("reference_categories") or ["BEST"] * len(r["reference_answers"])
            refs = [a for a, c in zip(r["reference_answers"], cats) if c == "BEST"] or refs
        for ref in refs:
            out.append(Pair(r["student_answer"].strip(), ref.strip(), "nli", NLI_INDEX[SAG_LABELS[r["label"]]],
                            f"sag_{corpus}", r["question_id"], r["label"]))
    return out


_PTB = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}", "``": '"', "''": '"'}


def detokenize(text: str) -> str:
    """Undo the PTB / whitespace tokenisation of the QA sets (``( 1990 )`` -> ``(1990)``)."""
    for k, v in _PTB.items():
        text = text.replace(k, v)
    text = re.sub(r"\s+([.,;:!?%)\]}])", r"\1", text)
    text = re.sub(r"([(\[{$])\s+", r"\1", text)
    text = re.sub(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def qa(name: str) -> list[Pair]:
    """Question / sentence pairs of one QA file (``trecqa_train`` ...)."""
    return [Pair(detokenize(r["question"]), detokenize(r["sentence"]), "answers", int(r["label"]), name,
                 r["question_id"]) for r in _rows(f"qa/{name}.jsonl.gz")]


def sag_answers(split: str) -> list[Pair]:
    """Answers-the-question pairs made from short-answer grading (its licence allows any use; the
    answer-selection sets' do not: TREC-QA's is unclear, WikiQA's research-only, so they are
    evaluation only): each student answer of the split, right or wrong, addresses its own question
    (label 1); paired with the question of another answer of the same corpus and split, it does
    not (label 0). One of each per answer, the other answer chosen with a fixed seed."""
    out: list[Pair] = []
    for corpus in SAG_CORPORA:
        rows = [r for r in _rows(f"sag/semeval2013_{corpus}_train.jsonl.gz")
                if sag_split(r["question_id"]) == split and r["student_answer"].strip()]
        rng = random.Random(f"{SEED}-{corpus}-{split}")
        for r in rows:
            other = rng.choice(rows)
            while other["question_id"] == r["question_id"]:
                other = rng.choice(rows)
            out.append(Pair(r["question"].strip(), r["student_answer"].strip(), "answers", 1, f"sag_answers_{corpus}",
                            r["question_id"]))
            out.append(Pair(other["question"].strip(), r["student_answer"].strip(), "answers", 0,
                            f"sag_answers_{corpus}", other["question_id"]))
    return out


Text = Annotated[str, StringConstraints(pattern=r"\S")]  # not empty, not only spaces
Texts = Annotated[list[Text], Field(min_length=1)]
Split = Literal["train", "dev", "test"]


class _Written(BaseModel):
    """A record of one of the project's own data files: every field required, no other allowed."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SpeechAct(_Written):
    act: Text
    split: Split
    statements: Texts
    says: Texts
    near: Texts
    against: list[Text]  # an act may have no opposite


class SpeechActs(_Written):
    about: Text
    fillers: Texts
    acts: Annotated[list[SpeechAct], Field(min_length=1)]


class OwnQuestion(_Written):
    id: Text
    split: Split
    question: Text
    answers: Texts
    topical: Annotated[list[Text], Field(min_length=2)]


class OwnQuestions(_Written):
    about: Text
    questions: Annotated[list[OwnQuestion], Field(min_length=1)]


W = TypeVar("W", bound=_Written)


def read_written(path: Path, model: type[W]) -> W:
    """One of the project's own data files, checked: a missing field, a wrong type or an unknown
    field (with the known name it is closest to) is a ValueError naming the file and the place."""
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        known = {name for m in (model, *_Written.__subclasses__()) for name in m.model_fields}
        problems = []
        for err in exc.errors():
            place = ".".join(str(part) for part in err["loc"])
            hint = ""
            if err["type"] == "extra_forbidden":
                close = difflib.get_close_matches(str(err["loc"][-1]), sorted(known), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{place}: {err['msg']}{hint}")
        raise ValueError(f"{path.name}: " + "; ".join(problems)) from None


SPEECH_ACTS = ROOT / "training" / "speech_acts.json"
# how the local judge frames an assistant's turn for a statement about the assistant
# (jurist.models.local.SPEAKER_FRAME; a test keeps the two the same)
SPEAKER_FRAME = 'The assistant says: "{}"'
SPEECH_NEGATIVES = 8  # replies of other acts paired with each statement (neutral)


def speech_act_pairs(split: str) -> list[Pair]:
    """NLI pairs from the project's own speech acts of one split (``train`` | ``dev`` |
    ``test``): each statement of an act against each reply that performs it (entailment),
    alone and with a neutral sentence before or after it (a window of two sentences, as
    the judge reads a turn); against the act's near misses (neutral, alone and with a
    sentence) and its opposites (contradiction); against a neutral sentence and
    :data:`SPEECH_NEGATIVES` replies of other acts of the same split (neutral)."""
    data = read_written(SPEECH_ACTS, SpeechActs)
    fillers = data.fillers
    acts = [a for a in data.acts if a.split == split]
    rng = random.Random(f"{SEED}-speech-{split}")
    out: list[Pair] = []

    def pair(reply: str, statement: str, label: str, act: str) -> None:
        out.append(Pair(SPEAKER_FRAME.format(reply), statement, "nli", NLI_INDEX[label], "own_speech_acts", act, reply))

    def with_filler(reply: str) -> str:
        filler = rng.choice(fillers)
        return f"{filler} {reply}" if rng.random() < 0.5 else f"{reply} {filler}"

    for act in acts:
        others = [u for a in acts if a.act != act.act for u in a.says]
        for statement in act.statements:
            for reply in act.says:
                pair(reply, statement, "entailment", act.act)
                pair(with_filler(reply), statement, "entailment", act.act)
            for reply in act.near:
                pair(reply, statement, "neutral", act.act)
                pair(with_filler(reply), statement, "neutral", act.act)
            for reply in act.against:
                pair(reply, statement, "contradiction", act.act)
            pair(rng.choice(fillers), statement, "neutral", act.act)
            for reply in rng.sample(others, min(SPEECH_NEGATIVES, len(others))):
                pair(reply, statement, "neutral", act.act)
    return out


ANSWERS_OWN = ROOT / "training" / "answers_own.json"


def own_answer_pairs(split: str) -> list[Pair]:
    """Answers-the-question pairs from the project's own written questions of one split
    (``train`` | ``dev`` | ``test``, split by question): the question against each sentence that
    answers it (label 1) and each sentence on its topic that does not (label 0), alone and as
    a window of two sentences the judge may read (an answer with a topical sentence: 1; two
    topical sentences: 0), the second sentence chosen with a fixed seed."""
    questions = [q for q in read_written(ANSWERS_OWN, OwnQuestions).questions if q.split == split]
    rng = random.Random(f"{SEED}-answers-{split}")
    out: list[Pair] = []
    for q in questions:
        def pair(text: str, label: int) -> None:
            out.append(Pair(q.question, text, "answers", label, "own_answers", q.id))

        for answer in q.answers:
            pair(answer, 1)
            pair(" ".join(rng.sample([answer, rng.choice(q.topical)], 2)), 1)
        for i, topical in enumerate(q.topical):
            pair(topical, 0)
            pair(f"{topical} {q.topical[(i + 1) % len(q.topical)]}", 0)
    return out


def training_pairs() -> list[Pair]:
    """Everything the shipped model may learn from (licences allow any use: SNLI, MultiNLI, the
    counterfactual SNLI set and SemEval-2013; never SICK, WikiQA or TREC-QA). The project's
    own speech acts are apart: :func:`speech_act_pairs`."""
    train, _ = nli_pool()
    for corpus in SAG_CORPORA:
        train += sag(corpus, "train", all_references=True)
    return train + sag_answers("train")


def development_pairs(*, speech_acts: bool = False, own_answers: bool = False) -> list[Pair]:
    """What temperatures, thresholds and the band are fitted on (never a test split); with
    ``speech_acts``, the dev acts' pairs too; with ``own_answers``, the project's dev questions'."""
    _, dev = nli_pool()
    for corpus in SAG_CORPORA:
        dev += sag(corpus, "dev")
    return (dev + sag_answers("dev") + (speech_act_pairs("dev") if speech_acts else [])
            + (own_answer_pairs("dev") if own_answers else []))


OWN_PAIRS = ROOT / "tests" / "data"


def own_halves(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(calibration, held-out) halves of one of the project's own hand-written pair files in
    tests/data (``local_judge_pairs.jsonl``: text, statement; ``local_judge_coverage.jsonl``:
    question, answer), stratified by kind, by each pair's SHA-256. The calibration half is a
    development split; the benchmark measures the held-out half only."""
    rows = [json.loads(line) for line in (OWN_PAIRS / name).read_text().splitlines() if line.strip()]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r)
    cal: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    for kind in sorted(by_kind):
        ordered = sorted(by_kind[kind], key=lambda r: hashlib.sha256(
            "\x1f".join(str(v) for k, v in sorted(r.items()) if k not in ("label", "kind")).encode()).hexdigest())
        for i, r in enumerate(ordered):
            (cal if i % 2 == 0 else held).append(r)
    return cal, held
