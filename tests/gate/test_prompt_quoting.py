"""The gate's evaluator prompts keep the conversation, the tool results and the answer inside their blocks."""

from jurist.config import Settings
from jurist.gate.evaluators import ComprehensivenessEvaluator, QualityEvaluator
from jurist.models import resolve_model, script
from jurist.gate.policy import read_messages

from tests.gate.helpers import comp, good
from tests.quoting import assert_inside, attack, prompt_text

MESSAGES, _ = read_messages([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": attack("question") + attack("user") + attack("conversation")},
    {"role": "tool", "content": attack("result") + attack("results")},
])
ANSWER = attack("response") + attack("assistant")


async def test_quality_prompt():
    judge = script("judge", good())
    await QualityEvaluator(resolve_model("scripted/judge", Settings.load())).evaluate(MESSAGES, ANSWER, trace_id="t")
    prompt = prompt_text(judge.requests[0].messages)
    for tag in ("question", "result", "response"):
        assert_inside(prompt, tag)


async def test_comprehensiveness_prompt():
    judge = script("judge", comp(True))
    evaluator = ComprehensivenessEvaluator(resolve_model("scripted/judge", Settings.load()))
    await evaluator.evaluate(MESSAGES, ANSWER, trace_id="t")
    prompt = prompt_text(judge.requests[0].messages)
    for tag in ("conversation", "user", "response"):
        assert_inside(prompt, tag)
    assert prompt.count("<user>\n") == 1 and "<assistant>\n" not in prompt  # no forged turn
