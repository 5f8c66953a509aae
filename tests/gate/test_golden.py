"""The gate's records, events and the proxy's responses are what they were before the record
layer was rewritten: ``tests/gate/data/golden.json`` was written by ``python -m tests.gate.golden
--write`` from the code before that change (see :mod:`tests.gate.golden` for the cases and what
is normalised)."""

from __future__ import annotations

import json

import pytest

from tests.gate import golden

EXPECTED: dict[str, str] = json.loads(golden.DATA.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def produced() -> dict[str, str]:
    return golden.produce()


def test_every_case_is_produced(produced: dict[str, str]) -> None:
    assert sorted(produced) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_text_is_byte_for_byte_the_same(produced: dict[str, str], case: str) -> None:
    got, want = produced[case].splitlines(), EXPECTED[case].splitlines()
    assert got == want
