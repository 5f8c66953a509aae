"""The project's own speech acts (training/speech_acts.json), which teach the local judge's
cross-encoder what an assistant does ("The assistant apologises ..."): the file's shape, its
split by act, and the frame its pairs share with the judge."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

import jurist.models.local as local

TRAINING = Path(__file__).resolve().parents[2] / "training"
sys.path.insert(0, str(TRAINING))
import judge_data  # noqa: E402  (training/judge_data.py: no torch)

DATA = json.loads((TRAINING / "speech_acts.json").read_text(encoding="utf-8"))


def test_the_pairs_frame_a_reply_as_the_judge_frames_an_assistants_turn() -> None:
    assert judge_data.SPEAKER_FRAME == local.SPEAKER_FRAME


def test_every_act_is_well_formed_and_heard_in_the_assistants_voice() -> None:
    assert set(DATA) == {"about", "fillers", "acts"}
    names = [a["act"] for a in DATA["acts"]]
    assert len(names) == len(set(names))
    for act in DATA["acts"]:
        assert set(act) == {"act", "split", "statements", "says", "near", "against"}, act["act"]
        assert act["split"] in ("train", "dev", "test") and act["statements"] and len(act["says"]) >= 4
        assert all(local.about_assistant(s) for s in act["statements"]), act["act"]  # else the judge would not frame
    assert Counter(a["split"] for a in DATA["acts"]).keys() == {"train", "dev", "test"}


def test_no_reply_or_statement_is_shared_between_acts_so_held_out_acts_are_unseen() -> None:
    texts = [t for a in DATA["acts"] for key in ("statements", "says", "near", "against") for t in a[key]]
    texts += DATA["fillers"]
    assert len(texts) == len(set(texts)), [t for t, n in Counter(texts).items() if n > 1]


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_pairs_of_a_split_come_from_its_acts_only_and_are_reproducible(split: str) -> None:
    pairs = judge_data.speech_act_pairs(split)
    acts = {a["act"]: a for a in DATA["acts"] if a["split"] == split}
    assert pairs == judge_data.speech_act_pairs(split)  # seeded
    assert {p.group for p in pairs} == set(acts)
    own = {u for a in acts.values() for key in ("says", "near", "against") for u in a[key]}
    for p in pairs:
        assert p.first == local.SPEAKER_FRAME.format(p.extra) and p.second in acts[p.group]["statements"]
        reply_of_act = any(u in p.extra for u in acts[p.group]["says"])
        assert (p.label == judge_data.NLI_INDEX["entailment"]) == reply_of_act
        assert any(u in p.extra for u in own) or p.extra in DATA["fillers"]  # never another split's reply
    labels = Counter(p.label for p in pairs)
    assert labels[0] and labels[1]
