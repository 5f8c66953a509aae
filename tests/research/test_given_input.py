"""The caller's sources and plan are read through models at the edge."""

from __future__ import annotations

import json

import pytest

from jurist.errors import InputError
from jurist.research.local import plan_prose
from jurist.research.plan import GivenPlan, plan_queries
from jurist.research.retrieval import Source, normalise_sources, sources_text


def test_sources_become_typed_records() -> None:
    got = normalise_sources(["plain", {"id": 7, "title": "T", "snippet": "s", "extra": 1}, {"text": 3, "body": "b"}])
    assert got == [Source(id="s1", content="plain"), Source(id="7", title="T", content="s"),
                   Source(id="s3", content="b")]
    assert json.loads(sources_text(["plain"])) == [{"id": "s1", "title": None, "url": None, "content": "plain"}]


def test_a_source_title_that_is_not_a_string_is_an_input_error() -> None:
    with pytest.raises(InputError, match="source 2: title"):
        normalise_sources(["a", {"title": 5, "content": "x"}])


def test_plan_fields_are_read_by_attribute() -> None:
    plan = {"searchQueries": [{"query": " a "}, "b"], "queries": ["ignored"], "objective": "find", "goal": 3}
    assert GivenPlan.model_validate(plan).query_list() == ["a", "b"]
    assert plan_queries({"search_terms": "not a list", "queries": ["q"]}) == ["q"]
    assert plan_prose(plan) == "find\na\nb"
