"""Messages: typed by role, read strictly from OpenAI-style dicts, written back as they were read."""

import base64
import json

import pytest

from jurist.errors import InputError
from jurist.models.base import ChatRequest
from jurist.models.images import attach, from_base64
from jurist.models.messages import (AssistantMessage, ImagePart, SystemMessage, TextPart, ToolMessage, UserMessage,
                                    message_from_openai, messages_from_openai, openai_messages)

from tests.images import png

PNG = base64.b64encode(png()).decode()  # a PNG that decodes (images are checked to)

CONVERSATION = [
    {"role": "system", "content": "You plan trips."},
    {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "user", "name": "ana", "content": [
        {"type": "text", "text": "What is on this ticket?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/ticket.png"}},
    ]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "flight", "arguments": "{\"no\": \"SK123\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "hotel", "arguments": "{}"}},
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "SK123 09:00"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "Hotel X"}]},
    {"role": "assistant", "content": "Flight SK123 leaves at 09:00.", "refusal": None,
     "reasoning_content": "the tools said so"},
    {"role": "function", "name": "legacy", "content": "old style"},
]


def test_openai_dicts_come_back_as_they_were_sent():
    messages = messages_from_openai(CONVERSATION)
    assert [type(m) for m in messages] == [SystemMessage, SystemMessage, UserMessage, AssistantMessage,
                                           ToolMessage, ToolMessage, AssistantMessage, type(messages[-1])]
    assert openai_messages(messages) == CONVERSATION
    call = messages[3].tool_calls[1]
    assert (call.id, call.function.name, call.function.arguments) == ("call_2", "hotel", "{}")
    assert messages[4].tool_call_id == "call_1" and messages[5].text == "Hotel X"
    assert isinstance(messages[2].content[1], ImagePart) and messages[2].text == "What is on this ticket?"


def test_messages_are_frozen_and_typed_ones_pass_as_they_are():
    message = UserMessage(content="hi")
    with pytest.raises(Exception):
        message.content = "changed"  # type: ignore[misc]
    assert message_from_openai(message) is message
    assert UserMessage(content=[{"type": "text", "text": "hi"}]).text == "hi"  # parts checked for the class's role
    assert message.openai() == {"role": "user", "content": "hi"}
    assert AssistantMessage(tool_calls=({"id": "c", "function": {"name": "f", "arguments": "{}"}},)).openai() == {
        "role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f",
                                                                                         "arguments": "{}"}}]}


@pytest.mark.parametrize("bad, problem", [
    ({"role": "usr", "content": "x"}, "messages[1]: unknown role 'usr' (did you mean 'user'?)"),
    ({"content": "x"}, "messages[1]: missing field 'role'"),
    ({"role": "user", "contnet": "x"}, "messages[1]: unknown field 'contnet' (did you mean 'content'?)"),
    ({"role": "user"}, "messages[1]: missing field 'content'"),
    ({"role": "tool", "content": "42"}, "messages[1]: missing field 'tool_call_id'"),
    ({"role": "assistant"}, "messages[1]: an assistant turn needs content or tool_calls"),
    ({"role": "assistant", "content": None, "tool_calls": []},
     "messages[1]: an assistant turn needs content or tool_calls"),
    ({"role": "user", "content": [{"type": "imag_url", "image_url": {"url": "x"}}]},
     "messages[1]: content[0]: unknown part type 'imag_url' (did you mean 'image_url'?)"),
    ({"role": "user", "content": [{"type": "image_url", "image_url": {"ulr": "x"}}]},
     "messages[1]: content[0].image_url: unknown field 'ulr' (did you mean 'url'?)"),
    ({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "args": "{}"}}]},
     "messages[1]: tool_calls[0].function: unknown field 'args' (did you mean 'arguments'?)"),
    ({"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
     "messages[1]: content[0]: unknown part type 'image_url'"),
    ({"role": "user", "content": 5}, "messages[1]: content: Input should be a valid string or a list"),
    ("hello", "messages[1]: a message is a JSON object with a role, not str"),
])
def test_bad_messages_are_refused_saying_what_is_wrong(bad, problem):
    with pytest.raises(InputError) as err:
        messages_from_openai([{"role": "user", "content": "q"}, bad])
    assert str(err.value).startswith(problem)


def test_a_transcripts_tool_output_without_a_call_id_can_be_read_as_user_text():
    [message] = messages_from_openai([{"role": "tool", "content": "42"}], tool_text=True)
    assert message == UserMessage(content="[tool result] 42")
    with pytest.raises(InputError, match="unknown field 'contnt'"):
        messages_from_openai([{"role": "tool", "contnt": "42"}], tool_text=True)


def test_a_request_reads_dicts_strictly_and_keeps_a_tuple():
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    assert request.messages == (UserMessage(content="hi"),)
    with pytest.raises(InputError, match=r"messages\[0\]: unknown field 'contnet' \(did you mean 'content'\?\)"):
        ChatRequest(messages=[{"role": "user", "contnet": "hi"}])


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "héllo {x} \"quoted\"\n"}],
    [{"role": "system", "content": "Rules."}, {"role": "user", "content": "data"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "again"}],
    [{"content": "keys in another order", "role": "user", "name": "ana"}],
])
def test_the_messages_json_of_text_messages_is_the_one_of_their_dicts(messages):
    """The call cache's key holds this text: caches written before messages were typed keep answering."""
    assert ChatRequest(messages=messages).messages_json == json.dumps(messages, sort_keys=True, ensure_ascii=False)
    typed = ChatRequest(messages=messages_from_openai(messages))
    assert typed.cache_key("openai/m", "http://e/v1") == ChatRequest(messages=messages).cache_key("openai/m",
                                                                                                   "http://e/v1")


def test_images_join_the_first_user_message_as_parts():
    image = from_base64(PNG)
    sent = attach((SystemMessage(content="S"), UserMessage(content="U")), (image,))
    assert sent[1] == UserMessage(content=(TextPart(text="U"), TextPart(text="[image 1]"),
                                           ImagePart(image_url={"url": image.url})))
    assert attach((SystemMessage(content="S"),), (image,))[1].openai()["content"][0] == {
        "type": "text", "text": "[image 1]"}
