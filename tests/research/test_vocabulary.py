"""The research vocabulary: the five roles, their dimensions and texts, on the generic panel."""

from __future__ import annotations

import pytest

from jurist.errors import ConfigError
from jurist.judges.panel import roles_for
from jurist.research import DEFAULT_ROLES, DIMENSION_DESCRIPTIONS, ROLE_INSTRUCTIONS
from jurist.research import stages as st


def test_roles_for_restricts_drops_and_overrides_models():
    roles = roles_for(["intent_alignment", "query_coverage", "scope_appropriateness"], DEFAULT_ROLES,
                      models={"intent_analyst": "strong", "fact_checker": "fast"})
    assert [(r.name, r.dimensions, r.model) for r in roles] == [
        ("intent_analyst", ["intent_alignment"], "strong"),
        ("coverage_checker", ["query_coverage"], None),
        ("quality_assessor", ["scope_appropriateness"], None),
    ]
    assert DEFAULT_ROLES[0].dimensions == ["intent_alignment", "relevance"] and DEFAULT_ROLES[0].model is None
    assert {d for r in DEFAULT_ROLES for d in r.dimensions} == set(DIMENSION_DESCRIPTIONS)
    with pytest.raises(ConfigError, match="no role scores tone"):
        roles_for(["tone"], DEFAULT_ROLES)
    with pytest.raises(ConfigError, match="unknown role"):
        roles_for(["relevance"], DEFAULT_ROLES, models={"intent_analyst_typo": "x/y"})


def test_every_role_carries_its_instructions_and_every_stage_dimension_a_description():
    assert {r.name: r.instructions for r in DEFAULT_ROLES} == ROLE_INSTRUCTIONS
    assert {d.key for dims in st.DIMENSIONS.values() for d in dims} == set(DIMENSION_DESCRIPTIONS)
    assert st.descriptions(st.PLAN)["intent_alignment"] == DIMENSION_DESCRIPTIONS["intent_alignment"]
