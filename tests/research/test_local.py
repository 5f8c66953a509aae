"""The local-judge evaluator: logic on a fake meaning judge, and MiniLM on a real example (slow)."""

from __future__ import annotations

import json

import pytest

from jurist.errors import Uncertain
from jurist.models.base import CoverageResult, RelevanceScore, SupportResult
from jurist.research import (
    LocalPlanCritic, LocalResearchEvaluator, ResearchConfig, ResearchEvaluation, evaluate_plan, research_config,
)
from jurist.research import stages as st
from jurist.research.plan import plan_text
from jurist.research.retrieval import sources_text

from tests.conftest import EXAMPLES

QUERY = "What causes tides? How high do spring tides get?"


class KeywordJudge:
    """A MeaningJudge by shared words: enough to test the scoring logic."""

    name = "local/minilm"

    @staticmethod
    def _hit(part: str, text: str, every: bool = True) -> bool:
        key = [w.strip("?.").lower() for w in part.split() if len(w) > 4]
        return (all if every else any)(k in text.lower() for k in key)

    async def coverage(self, question, answer, parts=None):
        parts = parts or [question]
        cov = [p for p in parts if self._hit(p, answer)]
        return CoverageResult(covered=cov, uncovered=[p for p in parts if p not in cov],
                              confidence={p: 0.9 for p in parts}, judge_model=self.name)

    async def relevance(self, query, passages):
        return [RelevanceScore(p, 0.8 if self._hit(query, p, every=False) else 0.1, self.name) for p in passages]

    async def support(self, answer, sources):
        sentences = [s.strip() for s in answer.split(".") if s.strip()]
        ok = [s for s in sentences if any(s.lower() in src.lower() for src in sources)]
        return SupportResult(supported=ok, unsupported=[s for s in sentences if s not in ok],
                             confidence={s: 0.8 for s in sentences}, judge_model=self.name)

    async def expresses(self, text, statements):  # pragma: no cover - not used here
        raise NotImplementedError


async def test_plan_scores_only_meaning_dimensions():
    ev = LocalResearchEvaluator(st.PLAN, judge=KeywordJudge())
    plan = {"objective": "explain tides", "search_queries": ["what causes ocean tides"]}
    r = await ev.evaluate({"query": QUERY, "plan": plan_text(plan)}, task="t")
    assert r.status == "ok" and set(r.scores) == {"intent_alignment", "query_coverage"}
    assert r.scores["query_coverage"] == 0.5 and r.scores["intent_alignment"] == 0.8
    assert r.overall == pytest.approx((0.5 * 0.8 + 0.35 * 0.5) / 0.85, abs=1e-4)  # renormalised weights
    [role] = r.role_results
    assert role.role == "local_judge" and role.model == "local/minilm" and role.tokens_used == 0
    assert "no search query covers: How high do spring tides get?" in role.critique
    assert json.loads(role.raw_response)["queries"] == ["what causes ocean tides"]


async def test_retrieval_and_answer_scores():
    sources = [{"id": "a", "content": "The moon causes tides."}, {"id": "b", "content": "Cats sleep a lot."}]
    ret = await LocalResearchEvaluator(st.RETRIEVAL, judge=KeywordJudge()).evaluate(
        {"query": QUERY, "plan": "x", "sources": sources_text(sources)}, task="t")
    assert ret.scores == {"context_recall": 0.5, "context_precision": 0.45}
    assert json.loads(ret.role_results[0].raw_response)["sources"] == [
        {"id": "a", "relevance": 0.8}, {"id": "b", "relevance": 0.1}]
    ans = await LocalResearchEvaluator(st.ANSWER, judge=KeywordJudge()).evaluate(
        {"query": QUERY, "sources": sources_text(sources), "answer": "The moon causes tides. Pigs fly."}, task="t")
    assert ans.scores == {"faithfulness": 0.5, "relevance": 0.5, "completeness": 0.5}
    assert "Pigs fly" in ans.role_results[0].critique


async def test_judge_failure_is_a_skipped_result():
    class Broken(KeywordJudge):
        async def relevance(self, query, passages):
            raise RuntimeError("no model")

    r = await LocalResearchEvaluator(st.PLAN, judge=Broken()).evaluate(
        {"query": QUERY, "plan": "what causes tides"}, task="t")
    assert r.status == "skipped" and "RuntimeError: no model" in r.skip_reason
    assert r.role_results[0].status == "failed"


async def test_the_plan_loop_runs_offline_with_the_local_critic():
    plans = [{"search_queries": ["what causes ocean tides"]},
             {"search_queries": ["what causes ocean tides", "spring tides height"]}]
    seen = []

    async def planner(query, feedback, mode):
        seen.append((mode, feedback))
        return plans[len(seen) - 1]

    out = await evaluate_plan(QUERY, planner, evaluator=LocalResearchEvaluator(st.PLAN, judge=KeywordJudge()),
                              config=ResearchConfig(), critic=LocalPlanCritic(KeywordJudge()))
    decision = seen[1][1]
    assert seen[1][0] == "targeted_fix" and decision.recommended_mode == "targeted_fix"
    assert [(i.issue, i.fix) for i in decision.specific_issues] == [
        ("no search query covers: How high do spring tides get?", "add a query about How high do spring tides get?")]
    assert out.evaluation.passed and out.evaluation.chosen_attempt == 2
    assert out.evaluation.unscored_dimensions == ["scope_appropriateness"]
    assert "weights renormalised" in out.evaluation.scoring_note


@pytest.mark.xfail(strict=True, reason="beyond the shipped cross-encoder of the offline judge: see docs/local-judge.md, what it is not good at")
@pytest.mark.slow
async def test_minilm_on_the_bundled_example(tmp_path):
    ex = EXAMPLES / "research"
    question = (ex / "question.txt").read_text().strip()
    corpus = {d["id"]: d for d in json.loads((ex / "corpus.json").read_text())}
    first = json.loads((ex / "first_plan.json").read_text())
    plan_ev = LocalResearchEvaluator(st.PLAN)
    bad = await plan_ev.evaluate({"query": question, "plan": plan_text(first)}, task="t")
    assert bad.scores["query_coverage"] == pytest.approx(1 / 3, abs=1e-3)
    assert bad.passed is False and bad.role_results[0].model == "local/minilm"
    fixed = dict(first, search_queries=first["search_queries"] + [
        "How does ocean acidification affect coral reefs and shellfish?",
        "What can be done to reduce ocean acidification?"])
    good = await plan_ev.evaluate({"query": question, "plan": plan_text(fixed)}, task="t")
    assert good.scores["query_coverage"] == 1.0 and good.overall > bad.overall and good.passed

    ret_ev = LocalResearchEvaluator(st.RETRIEVAL)
    on_topic = [corpus[i] for i in ("d02", "d04", "d05", "d07")]
    off_topic = [corpus[i] for i in ("d11", "d12")]
    r_on = await ret_ev.evaluate({"query": question, "plan": "", "sources": sources_text(on_topic)}, task="t")
    r_off = await ret_ev.evaluate({"query": question, "plan": "", "sources": sources_text(off_topic)}, task="t")
    assert r_on.scores["context_precision"] > r_off.scores["context_precision"] + 0.2
    assert r_on.scores["context_recall"] > r_off.scores["context_recall"]

    ans_ev = LocalResearchEvaluator(st.ANSWER)
    grounded = ("The main cause is the uptake of carbon dioxide from the atmosphere. Ocean acidification slows the "
                "rate at which corals build their calcium carbonate skeletons. The most effective way to reduce "
                "ocean acidification is to cut carbon dioxide emissions from fossil fuels.")
    made_up = "Tides are caused by whales. Volcanoes on Mars erupt every Tuesday."
    used = sources_text([corpus["d01"], *on_topic])
    a_good = await ans_ev.evaluate({"query": question, "sources": used, "answer": grounded}, task="t")
    a_bad = await ans_ev.evaluate({"query": question, "sources": used, "answer": made_up}, task="t")
    assert a_good.scores["faithfulness"] == 1.0 and a_bad.scores["faithfulness"] == 0.0
    assert a_good.overall > 0.7 > a_bad.overall


def test_local_constructor_wires_every_stage():
    ev = ResearchEvaluation.local(research_config({}), judge=KeywordJudge())
    assert all(isinstance(ev.evaluators[s], LocalResearchEvaluator) for s in st.STAGE_NAMES)
    assert isinstance(ev.critic, LocalPlanCritic)
    with pytest.raises(ValueError, match="unknown stage"):
        LocalResearchEvaluator("synthesis")


# --- parts the judge cannot decide --------------------------------------------------------------

THREE = "What causes tides? How high do spring tides get? When do neap tides occur?"


class UnsureOf(KeywordJudge):
    """The keyword judge, unsure of the parts (and sentences) named: it raises Uncertain carrying
    what it decided of the others, as the local judge does."""

    def __init__(self, *unsure):
        self.unsure = set(unsure)

    def _partial(self, result, names, make):
        unsure = [n for n in names if n in self.unsure]
        if not unsure:
            return result
        raise Uncertain(f"uncertain: not sure about {unsure[0]!r}", subject=unsure[0], probability=0.5,
                        threshold=0.5, band=0.1, undecided=unsure, decided=make(unsure))

    async def coverage(self, question, answer, parts=None):
        full = await super().coverage(question, answer, parts)
        return self._partial(full, full.covered + full.uncovered, lambda unsure: CoverageResult(
            covered=[p for p in full.covered if p not in unsure], uncovered=[p for p in full.uncovered if p not in unsure],
            confidence={p: c for p, c in full.confidence.items() if p not in unsure}, judge_model=self.name))

    async def support(self, answer, sources):
        full = await super().support(answer, sources)
        return self._partial(full, full.supported + full.unsupported, lambda unsure: SupportResult(
            supported=[s for s in full.supported if s not in unsure],
            unsupported=[s for s in full.unsupported if s not in unsure],
            confidence={s: c for s, c in full.confidence.items() if s not in unsure}, judge_model=self.name))


async def plan_result(judge, queries):
    return await LocalResearchEvaluator(st.PLAN, judge=judge).evaluate(
        {"query": THREE, "plan": plan_text({"search_queries": queries})}, task="t")


async def test_a_plan_passes_when_its_undecided_part_cannot_fail_it():
    # two parts covered, the third undecided: query_coverage 2/3..1, the overall passes 0.7 either way
    r = await plan_result(UnsureOf("When do neap tides occur?"),
                          ["what causes tides", "how high do spring tides get", "neap tides"])
    assert r.status == "ok" and r.passed
    assert r.scores["query_coverage"] == 0.6667  # the end of the range that decides: at least this much
    details = json.loads(r.role_results[0].raw_response)
    assert details["undecided"] == ["When do neap tides occur?"]
    low, high = details["overall_range"]
    assert low == r.overall and low >= 0.7 and high > low
    assert [p["covered"] for p in details["parts"]] == [True, True, None]
    critique = r.role_results[0].critique
    assert critique.startswith("every part the judge decided has a search query (could not decide: When do neap")
    assert "passes the threshold 0.7 either way" in critique


async def test_a_plan_fails_when_its_undecided_part_cannot_pass_it_and_the_critic_names_it():
    unsure = UnsureOf("When do neap tides occur?")
    r = await plan_result(unsure, ["neap tides"])
    assert r.status == "ok" and r.passed is False
    assert r.scores["query_coverage"] == 0.3333  # at most this much
    assert "no search query covers: What causes tides?; How high do spring tides get?" in r.role_results[0].critique

    plans = [{"search_queries": ["neap tides"]},
             {"search_queries": ["what causes tides", "how high do spring tides get", "neap tides"]}]
    seen = []

    async def planner(query, feedback, mode):
        seen.append(feedback)
        return plans[len(seen) - 1]

    out = await evaluate_plan(THREE, planner, evaluator=LocalResearchEvaluator(st.PLAN, judge=unsure),
                              config=ResearchConfig(), critic=LocalPlanCritic(unsure))
    assert [i.issue for i in seen[1].specific_issues] == [
        "no search query covers: What causes tides?", "no search query covers: How high do spring tides get?",
        "the judge could not decide whether a search query covers: When do neap tides occur?"]
    assert out.evaluation.passed and out.evaluation.chosen_attempt == 2


async def test_a_plan_whose_undecided_part_could_turn_the_verdict_is_skipped_with_the_reason():
    r = await plan_result(UnsureOf("How high do spring tides get?"), ["what causes tides"])
    assert r.status == "skipped" and r.passed is None
    assert "uncertain: not sure about 'How high do spring tides get?'" in r.skip_reason


async def test_an_answer_with_an_undecided_sentence_is_scored_at_the_end_that_decides():
    sources = [{"id": "s1", "content": "The moon causes tides. Spring tides rise highest. Neap tides occur at "
                                       "quarter moons."}]
    answer = "The moon causes tides. Spring tides rise highest. Neap tides occur at quarter moons. Tides are blue."
    r = await LocalResearchEvaluator(st.ANSWER, judge=UnsureOf("Tides are blue")).evaluate(
        {"query": THREE, "answer": answer, "sources": sources_text(sources)}, task="t")
    details = json.loads(r.role_results[0].raw_response)
    assert details["undecided"] == ["Tides are blue"] and "Tides are blue" not in details["unsupported"]
    low, high = details["overall_range"]
    # faithfulness 3/4..1, every part covered: the overall passes either way, at its lower end
    assert r.status == "ok" and r.passed and r.overall == low < high
    assert r.scores["faithfulness"] == 0.75 and r.scores["completeness"] == 1.0
