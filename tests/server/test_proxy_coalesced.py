"""coalesced(): the pieces of the proxy's gated stream that are ready together go out as one write."""

from __future__ import annotations

import asyncio

import pytest

from jurist.server.proxy import coalesced


async def test_pieces_ready_together_are_joined_and_a_wait_lets_them_out():
    gate = asyncio.Event()

    async def pieces():
        yield "a"
        yield "b"
        yield "c"
        await gate.wait()  # the producer waits: what is ready goes out now
        yield "d"

    out = coalesced(pieces())
    first = await out.__anext__()
    assert first == "abc"
    gate.set()
    assert [p async for p in out] == ["d"]


async def test_an_error_of_the_source_reaches_the_reader_after_what_came_before():
    async def pieces():
        yield "a"
        raise ValueError("upstream broke")

    got = []
    with pytest.raises(ValueError, match="upstream broke"):
        async for p in coalesced(pieces()):
            got.append(p)
    assert "".join(got) == "a"


async def test_a_reader_that_goes_away_cancels_the_producer_and_closes_the_source():
    closed = asyncio.Event()
    never = asyncio.Event()

    async def pieces():
        try:
            yield "a"
            await never.wait()
            yield "b"
        finally:
            closed.set()

    out = coalesced(pieces())
    assert await out.__anext__() == "a"
    await out.aclose()  # the client went away
    await asyncio.wait_for(closed.wait(), 1)


async def test_the_producer_stays_a_bounded_number_of_pieces_ahead():
    made = 0

    async def pieces():
        nonlocal made
        for _ in range(1000):
            made += 1
            yield "x"

    out = coalesced(pieces())
    first = await out.__anext__()
    await asyncio.sleep(0.05)  # the producer runs on while nobody reads
    from jurist.server.proxy import COALESCE_AHEAD

    assert len(first) <= COALESCE_AHEAD + 1 and made <= len(first) + COALESCE_AHEAD + 2
    rest = "".join([p async for p in out])
    assert len(first) + len(rest) == 1000
