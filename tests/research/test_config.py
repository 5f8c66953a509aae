"""The research configuration: the note's YAML shape, its defaults, clear errors."""

from __future__ import annotations

import pytest

from jurist.errors import ConfigError
from jurist.research import ResearchConfig, load_research_config, research_config
from jurist.research.failsafe import StageOptions

NOTE_YAML = """
judge: scripted/x
research:
  evaluators:
    intent_analyst:
      model: "openai/gpt-4o-mini"
    fact_checker:
      model: "anthropic/claude-haiku-4-5"
  escalation_model: "openai/gpt-4o"
  iteration:
    max_attempts: 4
    timeout_per_attempt: 20000
    escalation_after_attempt: 3
  stages:
    plan:
      pass_threshold: 0.75
      dimensions:
        intent_alignment: {weight: 0.6}
  evaluation:
    enabled: true
    planEvaluation:
      enabled: true
      iterationEnabled: false
      timeout: 1000
      failAction: "warn"
    retrievalEvaluation:
      enabled: false
      timeout: 30000
      failAction: "continue"
    answerEvaluation:
      enabled: true
      regenerationEnabled: false
      timeout: 45000
      failAction: "block"
"""


def test_defaults_are_the_notes():
    c = ResearchConfig()
    plan, ret, ans = c.stages.plan, c.stages.retrieval, c.stages.answer
    assert plan.weights == {"intent_alignment": 0.5, "query_coverage": 0.35, "scope_appropriateness": 0.15}
    assert [(d.threshold, d.rule) for d in plan.dimensions.values()] == [
        (0.7, "always"), (0.6, "iterate"), (0.5, "if_borderline")]
    assert plan.pass_threshold == 0.7
    assert ret.weights == {"context_recall": 0.4, "context_precision": 0.35, "source_quality": 0.25}
    assert ret.severe_threshold == 0.5
    assert ans.weights == {"faithfulness": 0.3, "relevance": 0.25, "factual_accuracy": 0.2, "completeness": 0.15,
                           "coherence": 0.1}
    assert ans.regenerate_below == 0.5
    assert c.role_models() == {
        "intent_analyst": "ollama/llama3.1:8b", "coverage_checker": "ollama/qwen3:14b",
        "faithfulness_judge": "ollama/llama3.1:8b", "quality_assessor": "ollama/qwen3:14b",
        "fact_checker": "ollama/qwen3:14b"}
    assert c.escalation_model == "ollama/qwen3:30b" and c.visual_evaluator == "ollama/qwen3-vl:8b"
    assert (c.iteration.max_attempts, c.iteration.timeout_per_attempt, c.iteration.escalation_after_attempt) == (
        3, 60000, 2)
    assert (c.escalation.low_confidence, c.escalation.disagreement, c.escalation.borderline) == (0.6, 0.3, 0.05)
    ev = c.snapshot()["evaluation"]
    assert ev == {
        "enabled": True,
        "planEvaluation": {"enabled": True, "iterationEnabled": True, "maxAttempts": 3, "timeout": 60000,
                           "failAction": "continue"},
        "retrievalEvaluation": {"enabled": True, "timeout": 30000, "failAction": "continue"},
        "answerEvaluation": {"enabled": True, "regenerationEnabled": True, "timeout": 45000,
                             "failAction": "continue"},
    }
    assert c.max_attempts == 3 and c.critic() == "ollama/llama3.1:8b"
    assert StageOptions.of("retrieval", c) == StageOptions("retrieval", True, 30.0, "continue")


def test_section_of_jurist_yaml(isolated):
    from jurist.config import Settings

    (isolated / "jurist.yaml").write_text(NOTE_YAML)
    settings = Settings.load()  # the research section sits beside the other settings
    for c in (load_research_config("jurist.yaml"), load_research_config(), load_research_config(settings=settings)):
        assert c.role_models()["intent_analyst"] == "openai/gpt-4o-mini"
        assert c.role_models()["coverage_checker"] == "ollama/qwen3:14b"  # not given: the default
        assert c.role_models()["fact_checker"] == "anthropic/claude-haiku-4-5"
        assert c.escalation_model == "openai/gpt-4o"
        assert c.max_attempts == 4 and c.iteration.escalation_after_attempt == 3
        plan = c.stages.plan
        assert plan.pass_threshold == 0.75
        assert plan.weights == {"intent_alignment": 0.6, "query_coverage": 0.35, "scope_appropriateness": 0.15}
        assert plan.dimensions["intent_alignment"].threshold == 0.7  # merged over the default
        assert StageOptions.of("plan", c) == StageOptions("plan", True, 1.0, "warn")
        assert StageOptions.of("retrieval", c).enabled is False
        assert StageOptions.of("answer", c).fail_action == "block"
        assert c.evaluation.answer_evaluation.regeneration_enabled is False
        assert c.evaluation.plan_evaluation.iteration_enabled is False


def test_separate_file_without_section_and_dict(isolated):
    (isolated / "research.yaml").write_text("escalation_model: null\nevaluation: {enabled: false}\n")
    c = load_research_config(isolated / "research.yaml")
    assert c.escalation_model is None and c.evaluation.enabled is False
    assert StageOptions.of("plan", c).enabled is False
    assert load_research_config({"research": {"model": "openai/gpt-4o-mini"}}).model == "openai/gpt-4o-mini"
    assert load_research_config().stages.plan.pass_threshold == 0.7  # no file: the defaults
    with pytest.raises(ConfigError, match="'research:' must hold a mapping"):
        load_research_config({"research": ["model"]})


def test_model_replaces_every_default_model():
    c = research_config({"model": "openai/gpt-4o-mini"})
    assert set(c.role_models().values()) == {"openai/gpt-4o-mini"} and len(c.role_models()) == 5
    assert c.escalation_model == "openai/gpt-4o-mini" and c.critic() == "openai/gpt-4o-mini"
    assert c.snapshot()["evaluators"]["fact_checker"] == {"model": "openai/gpt-4o-mini"}  # what ran, on record
    named = research_config({"model": "openai/gpt-4o-mini", "evaluators": {"fact_checker": "openai/gpt-4o"},
                             "escalation_model": None, "critic_model": "anthropic/claude-haiku-4-5"})
    assert named.role_models()["fact_checker"] == "openai/gpt-4o"
    assert named.role_models()["intent_analyst"] == "openai/gpt-4o-mini"
    assert named.escalation_model is None and named.critic() == "anthropic/claude-haiku-4-5"
    unset = research_config({"model": "openai/gpt-4o-mini", "evaluators": {"coverage_checker": None}})
    assert "coverage_checker" not in unset.role_models()  # the panel's default model: research.model


def test_milliseconds_in_the_file_seconds_in_the_code():
    c = research_config({"role_timeout": 1500, "iteration": {"timeout_per_attempt": 20000},
                         "evaluation": {"answerEvaluation": {"timeout": 250}}})
    assert (c.role_timeout_seconds, c.iteration.attempt_seconds) == (1.5, 20.0)
    assert c.evaluation.of("answer").timeout_seconds == 0.25 and StageOptions.of("answer", c).timeout == 0.25
    assert ResearchConfig().role_timeout_seconds is None
    assert c.snapshot()["role_timeout"] == 1500  # the record keeps the file's units


def test_global_switch_disables_every_stage():
    c = research_config({"evaluation": {"enabled": False}})
    assert not any(StageOptions.of(s, c).enabled for s in ("plan", "retrieval", "answer"))


@pytest.mark.parametrize("section, field", [
    ({"evaluation": {"planEvaluation": {"failAction": "stop"}}}, "research.evaluation.planEvaluation.failAction"),
    ({"evaluation": {"answerEvaluation": {"timeout": -5}}}, "research.evaluation.answerEvaluation.timeout"),
    ({"evaluation": {"retrievalEvaluation": {"regenerationEnabled": True}}},
     "research.evaluation.retrievalEvaluation: unknown field 'regenerationEnabled' (fields: enabled, timeout, "
     "failAction)"),
    ({"iteration": {"max_attempts": 0}}, "research.iteration.max_attempts"),
    ({"iteration": {"timeout_per_attempts": 5}},
     "research.iteration: unknown field 'timeout_per_attempts' (did you mean 'timeout_per_attempt'?)"),
    ({"evaluation": {"planEvaluation": {"failaction": "warn"}}},
     "research.evaluation.planEvaluation: unknown field 'failaction' (did you mean 'failAction'?)"),
    ({"stages": {"plan": {"dimensions": {"intent_alignment": {"wieght": 1}}}}},
     "research.stages.plan.dimensions.intent_alignment: unknown field 'wieght' (did you mean 'weight'?)"),
    ({"evaluators": {"intent_analist": {"model": "x/y"}}},
     "unknown evaluator role 'intent_analist' (did you mean 'intent_analyst'?)"),
    ({"stages": {"plan": {"dimensions": {"intent": {"weight": 1}}}}},
     "plan.dimensions: unknown dimension 'intent' (did you mean 'intent_alignment'?)"),
    ({"stages": {"plan": {"dimensions": {"intent_alignment": {"weight": True}}}}},
     "research.stages.plan.dimensions.intent_alignment.weight: expected a number, got true"),
    ({"iteration": {"max_attempts": True}}, "research.iteration.max_attempts: expected a number, got true"),
    ({"escalation": {"borderline": False}}, "research.escalation.borderline: expected a number, got false"),
    ({"stages": {"answer": {"dimensions": {"coherence": {"weight": -1}}}}},
     "research.stages.answer.dimensions.coherence.weight"),
    ({"stages": {"plan": {"pass_threshold": 1.5}}}, "research.stages.plan.pass_threshold"),
    ({"stages": {"retrieval": {"dimensions": {"context_recall": {"weight": 0}, "context_precision": {"weight": 0},
                                              "source_quality": {"weight": 0}}}}}, "must not all be 0"),
    ({"iteration": {"max_attempts": 4}, "evaluation": {"planEvaluation": {"maxAttempts": 2}}}, "disagree"),
    ({"escalation": {"borderline": 2}}, "research.escalation.borderline"),
])
def test_bad_config_names_the_field(section, field):
    with pytest.raises(ConfigError) as err:
        research_config(section, source="jurist.yaml")
    assert field in str(err.value) and "in jurist.yaml" in str(err.value)


def test_bad_files(isolated):
    (isolated / "a.yaml").write_text("research: [1, 2]\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_research_config(isolated / "a.yaml")
    (isolated / "b.yaml").write_text("research: {evaluation: {planEvaluation: {failAction: nope}}}\n")
    with pytest.raises(ConfigError, match=r"research.evaluation.planEvaluation.failAction.*b.yaml|b.yaml.*failAction"):
        load_research_config(isolated / "b.yaml")
    with pytest.raises(ConfigError, match="not found"):
        load_research_config(isolated / "missing.yaml")
    (isolated / "c.yaml").write_text("research: {a: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_research_config(isolated / "c.yaml")
