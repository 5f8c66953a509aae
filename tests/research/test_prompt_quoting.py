"""The plan critic's prompt keeps the user's query inside its block."""

from jurist.research import ResearchConfig, evaluate_plan
from jurist.research import stages as st
from jurist.models import scripted

from tests.quoting import assert_inside, attack, prompt_text
from tests.research.fakes import BAD_PLAN, GOOD_PLAN, FakeEvaluator, Planner
from tests.research.test_plan import critic, critic_reply


async def test_the_critic_prompt_keeps_the_query_inside():
    c = critic(critic_reply())
    planner, ev = Planner(), FakeEvaluator(st.PLAN, BAD_PLAN, GOOD_PLAN)
    await evaluate_plan(attack("query") + attack("text"), planner, evaluator=ev, config=ResearchConfig(), critic=c)
    prompt = prompt_text(scripted("critic").requests[0].messages)
    assert_inside(prompt, "query")
