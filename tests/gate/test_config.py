"""GateConfig: strict like every other input (unknown fields refused, booleans are not numbers)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jurist.gate import GateConfig


@pytest.mark.parametrize("field", ["threshold", "budget_s", "judge_timeout_s", "max_regenerations",
                                   "previous_chars", "max_tokens", "temperature"])
def test_true_and_false_are_not_numbers(field: str) -> None:
    with pytest.raises(ValidationError, match="booleans are not numbers"):
        GateConfig(**{field: True})


def test_numbers_still_read_and_bounds_still_hold() -> None:
    config = GateConfig(threshold=0.6, max_regenerations=2, budget_s="12.5")  # text from an env or a flag
    assert (config.threshold, config.regenerations(), config.budget_s) == (0.6, 2, 12.5)
    with pytest.raises(ValidationError):
        GateConfig(threshold=1.5)


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="treshold"):
        GateConfig(treshold=0.5)  # type: ignore[call-arg]
