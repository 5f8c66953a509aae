"""Streamed tool-call pieces: read from the endpoint's JSON, merged into a message's tool calls."""

import time

from jurist.models.base import ToolCallAssembly, ToolCallDelta


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
    calls = ToolCallAssembly()
    for piece in (ToolCallDelta(index=1, id="b", type="function", name="second", arguments=""),
                  ToolCallDelta(index=0, id="a", type="function", name="first", arguments="{\"x\""),
                  ToolCallDelta(index=0, arguments=": 1}"),
                  ToolCallDelta(index=1, arguments="{}")):
        calls.add(piece)
    assert calls.calls() == [
        {"id": "a", "type": "function", "function": {"name": "first", "arguments": "{\"x\": 1}"}},
        {"id": "b", "type": "function", "function": {"name": "second", "arguments": "{}"}},
    ]


def test_a_name_repeated_in_every_piece_is_one_name_and_is_not_relayed_again() -> None:
    """llama-cpp-python sends the whole name (and id) with every piece: one name, as OpenAI's SDK makes it."""
    calls = ToolCallAssembly()
    relayed = [calls.add(ToolCallDelta(index=0, id="call_1", type="function", name="get_weather", arguments=part))
               for part in ('{"city"', ': "Paris"', "}")]
    assert calls.calls() == [{"id": "call_1", "type": "function",
                              "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    assert [p.name for p in relayed] == ["get_weather", None, None]  # the client's own joining gets one name too


def test_a_name_in_pieces_is_joined() -> None:
    calls = ToolCallAssembly()
    for part in ("get", "_", "weather"):
        calls.add(ToolCallDelta(index=0, name=part))
    assert calls.calls()[0]["function"]["name"] == "get_weather"


def test_thirty_thousand_pieces_assemble_in_linear_time() -> None:
    calls = ToolCallAssembly()
    pieces = [ToolCallDelta(index=0, id="c", name="f", arguments="x" * 100)] + [
        ToolCallDelta(index=0, arguments="y" * 100) for _ in range(30_000)]
    started = time.perf_counter()
    for piece in pieces:
        calls.add(piece)
    [call] = calls.calls()
    elapsed = time.perf_counter() - started
    assert len(call["function"]["arguments"]) == 3_000_100
    assert elapsed < 1.0, f"30,000 pieces took {elapsed:.2f} s"
