"""The shipped example sets for calibrating the gate and a research stage are well formed."""

from __future__ import annotations

from jurist.analysis.calibrate import find_sessions
from jurist.analysis.calibrate_gate import gate_item, gate_labels
from jurist.analysis.calibrate_panel import load_research_items
from jurist.analysis.labels import load_labels
from jurist.research import stages as st
from tests.conftest import EXAMPLES

GATE = EXAMPLES / "labels" / "gate"
RESEARCH = EXAMPLES / "labels" / "research"


def test_the_gate_set_is_pass_fail_labels_of_answers():
    labels = load_labels(GATE / "labels.jsonl")
    assert len(gate_labels(labels, "quality")) == 16
    chats = find_sessions(labels, [GATE / "sessions"])
    assert sorted(chats) == [f"g{k}" for k in range(1, 9)]
    for chat in chats.values():
        turns, answer = gate_item(chat)
        assert [t.role for t in turns] == ["user"] and answer


def test_the_research_set_labels_answer_dimensions_of_its_items():
    items = load_research_items(RESEARCH / "answer_items.jsonl", st.ANSWER)
    labels = load_labels(RESEARCH / "answer_labels.jsonl")
    answer_dims = {d.key for d in st.DIMENSIONS[st.ANSWER]}
    assert {lab.rubric for lab in labels.labels} == {"faithfulness", "relevance"} <= answer_dims
    assert {lab.item for lab in labels.labels} == set(items) and all(lab.is_pass_fail for lab in labels.labels)
    assert set(next(iter(items.values()))) == {"query", "sources", "answer"}
