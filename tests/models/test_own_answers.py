"""The project's own answers-the-question data (training/answers_own.json), which teaches the
local judge's answers head a sentence that answers a question from one that is only on its
topic: the file's shape, its split by question, and the pairs made from it. Also the script
that refits the head writes the head alone, so the NLI probabilities stay the same."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from jurist.models.minilm import MODEL_DIR
from jurist.models.minilm.cross import JUDGE_RECORD, JUDGE_WEIGHTS, CrossEncoder
from jurist.models.minilm.weights import read_stored

TRAINING = Path(__file__).resolve().parents[2] / "training"
sys.path.insert(0, str(TRAINING))
import judge_data  # noqa: E402  (training/judge_data.py: no torch)

DATA = json.loads((TRAINING / "answers_own.json").read_text(encoding="utf-8"))


def test_every_question_is_well_formed() -> None:
    assert set(DATA) == {"about", "questions"}
    ids = [q["id"] for q in DATA["questions"]]
    assert len(ids) == len(set(ids))
    for q in DATA["questions"]:
        assert set(q) == {"id", "split", "question", "answers", "topical"}, q["id"]
        assert q["split"] in ("train", "dev", "test") and len(q["answers"]) >= 2 and len(q["topical"]) >= 2, q["id"]
    assert set(Counter(q["split"] for q in DATA["questions"])) == {"train", "dev", "test"}


def test_no_sentence_is_shared_so_held_out_questions_are_unseen() -> None:
    texts = [t for q in DATA["questions"] for key in ("answers", "topical") for t in q[key]]
    texts += [q["question"] for q in DATA["questions"]]
    assert len(texts) == len(set(texts)), [t for t, n in Counter(texts).items() if n > 1]


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_pairs_of_a_split_come_from_its_questions_only_and_are_reproducible(split: str) -> None:
    pairs = judge_data.own_answer_pairs(split)
    questions = {q["id"]: q for q in DATA["questions"] if q["split"] == split}
    assert pairs == judge_data.own_answer_pairs(split)  # seeded
    assert {p.group for p in pairs} == set(questions)
    for p in pairs:
        q = questions[p.group]
        assert p.task == "answers" and p.first == q["question"]
        assert p.label == int(any(a in p.second for a in q["answers"]))
        rest = p.second
        for sentence in q["answers"] + q["topical"]:
            rest = rest.replace(sentence, "")
        assert not rest.strip(), p.second  # made of this question's sentences only
    assert Counter(p.label for p in pairs).keys() == {0, 1}


def test_refitting_the_answers_head_changes_that_head_only(tmp_path: Path) -> None:
    """The script's writing step: a copy of the model with a new answers head reads back with the
    same NLI logits and the new answers logit, and the record beside it is the one given."""
    import fit_answers_head

    model = tmp_path / "minilm"
    shutil.copytree(MODEL_DIR, model)
    before = CrossEncoder(model)
    pairs = [("When was the bridge opened?", "It opened to traffic in 1932."),
             ("When was the bridge opened?", "The bridge is painted grey.")]
    weight = np.linspace(-0.01, 0.01, before.hidden)
    record = json.loads((model / JUDGE_RECORD).read_text())
    record["thresholds"]["answers"] = 0.42
    fit_answers_head.write_head(model, weight, 0.25, record)
    assert json.loads((model / JUDGE_RECORD).read_text()) == record
    assert sorted(p.name for p in model.iterdir() if p.name.startswith(".")) == []  # no temporary file left
    after = CrossEncoder(model)
    old, new = before.logits(pairs), after.logits(pairs)
    np.testing.assert_array_equal(old[:, :3], new[:, :3])
    expected = before.pair_vectors(pairs) @ weight.astype(np.float16).astype(np.float32) + np.float16(0.25)
    np.testing.assert_allclose(new[:, 3], expected, rtol=1e-5, atol=1e-5)
    stored, _ = read_stored(model / JUDGE_WEIGHTS)
    original, _ = read_stored(MODEL_DIR / JUDGE_WEIGHTS)
    assert stored.keys() == original.keys()
    assert all(np.array_equal(stored[k], original[k]) for k in stored if not k.startswith("head.answers"))


@pytest.mark.parametrize(("change", "expected"), [
    (lambda q: q.update(topcial=q.pop("topical")), "questions.0.topcial: Extra inputs are not permitted (did you mean 'topical'?)"),
    (lambda q: q.pop("question"), "questions.0.question: Field required"),
    (lambda q: q.update(split="validation"), "questions.0.split: Input should be 'train', 'dev' or 'test'"),
    (lambda q: q.update(answers=["  "]), "questions.0.answers.0: String should match pattern"),
    (lambda q: q.update(topical=q["topical"][:1]), "questions.0.topical: List should have at least 2 items"),
])
def test_a_written_file_with_a_fault_is_refused_by_name(tmp_path: Path, change, expected: str) -> None:
    """The reader of the project's own data files names the file, the place and the fault (and the
    field a typo meant), rather than skipping or mis-reading a question."""
    data = json.loads(json.dumps(DATA))
    change(data["questions"][0])
    path = tmp_path / "answers_own.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError) as err:
        judge_data.read_written(path, judge_data.OwnQuestions)
    assert str(err.value).startswith("answers_own.json: ")
    assert expected in str(err.value)


def test_the_judge_files_stay_as_they_were_when_writing_fails(tmp_path: Path) -> None:
    """Both files are written whole beside their targets and renamed in: a failure while writing
    the weights leaves the old weights and record, and no temporary file."""
    import judge_files

    (tmp_path / "judge.safetensors").write_bytes(b"old weights")
    (tmp_path / "judge.json").write_text('{"old": true}\n')

    def fails(path: Path) -> None:
        path.write_bytes(b"half of the new")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        judge_files.write_judge(tmp_path, fails, {"new": True})
    assert (tmp_path / "judge.safetensors").read_bytes() == b"old weights"
    assert (tmp_path / "judge.json").read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judge.json", "judge.safetensors"]

    judge_files.write_judge(tmp_path, lambda path: path.write_bytes(b"new weights"), {"new": True})
    assert (tmp_path / "judge.safetensors").read_bytes() == b"new weights"
    assert json.loads((tmp_path / "judge.json").read_text()) == {"new": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judge.json", "judge.safetensors"]


def test_the_development_pairs_hold_the_development_questions_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--own-answers`` fits the thresholds on the development questions too, never on the test ones
    (the public sets are left out here: they live outside the repository)."""
    monkeypatch.setattr(judge_data, "nli_pool", lambda: ([], []))
    monkeypatch.setattr(judge_data, "sag", lambda corpus, split, **_: [])
    monkeypatch.setattr(judge_data, "sag_answers", lambda split: [])
    assert judge_data.development_pairs() == []
    pairs = judge_data.development_pairs(own_answers=True)
    assert pairs == judge_data.own_answer_pairs("dev")
    dev_ids = {q["id"] for q in DATA["questions"] if q["split"] == "dev"}
    assert {p.group for p in pairs} == dev_ids
