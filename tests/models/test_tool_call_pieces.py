"""Streamed tool-call pieces: read from the endpoint's JSON, merged into a message's tool calls."""

from jurist.models.base import StreamedToolCall, ToolCallDelta, add_tool_call, message_tool_calls


def test_a_piece_is_read_from_its_json_and_written_back_the_same() -> None:
    entry = {"index": 1, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\""}}
    piece = ToolCallDelta.from_openai(entry)
    assert piece == ToolCallDelta(index=1, id="call_1", type="function", name="lookup", arguments="{\"q\"")
    assert piece.openai() == entry


def test_a_piece_without_an_index_takes_its_position_and_fields_that_are_not_text_are_left_out() -> None:
    piece = ToolCallDelta.from_openai({"id": 7, "function": {"arguments": ":1}"}}, position=2)
    assert piece == ToolCallDelta(index=2, arguments=":1}")
    assert ToolCallDelta.from_openai({"index": True, "function": None}, position=3).index == 3


def test_pieces_merge_into_the_calls_in_index_order_without_the_index() -> None:
    calls: list[StreamedToolCall] = []
    for piece in (ToolCallDelta(index=1, id="b", type="function", name="second", arguments=""),
                  ToolCallDelta(index=0, id="a", type="function", name="first", arguments="{\"x\""),
                  ToolCallDelta(index=0, arguments=": 1}"),
                  ToolCallDelta(index=1, arguments="{}")):
        add_tool_call(calls, piece)
    assert message_tool_calls(calls) == [
        {"id": "a", "type": "function", "function": {"name": "first", "arguments": "{\"x\": 1}"}},
        {"id": "b", "type": "function", "function": {"name": "second", "arguments": "{}"}},
    ]
