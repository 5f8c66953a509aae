"""An outcome's status is one Literal vocabulary, and the row status derives from it."""

from __future__ import annotations

import typing

from jurist.judges import outcome
from jurist.judges.outcome import Outcome, Status, row_status


def test_the_status_is_the_literal_vocabulary() -> None:
    assert typing.get_args(Status) == ("ok", "failed", "skipped")
    hints = typing.get_type_hints(Outcome)
    assert hints["status"] == Status
    assert {Outcome.success(1).status, Outcome.failure("x").status, Outcome.skip("y").status} == set(
        typing.get_args(Status))


def test_row_status_is_the_evaluations_rows_word_for_each_status() -> None:
    assert [row_status(s) for s in typing.get_args(Status)] == ["scored", "failed", "skipped"]
    assert set(typing.get_args(outcome.RowStatus)) >= {row_status(s) for s in typing.get_args(Status)}
