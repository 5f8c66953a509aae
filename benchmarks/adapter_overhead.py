"""CPU per judge call of three ways to send one OpenAI chat completion.

Against the benchmarks' judge server (``python -m jurist.testing.provider_server``,
its own process, fixed latency), ``--calls`` requests with ``--in-flight`` at
once, each with a judge-sized prompt, sent

* ``sdk create``: the openai SDK's ``chat.completions.create`` (typed objects),
* ``sdk post``: the SDK's generic ``post`` with a ready JSON body,
* ``jurist adapter``: :class:`jurist.models.openai.OpenAIChat.complete`, which
  posts over aiohttp with the SDK's headers (what every jurist judge call uses),

all three over aiohttp (the SDK's ``DefaultAioHttpClient``). Prints the CPU
milliseconds of this process per call and the wall time for each.

    python benchmarks/adapter_overhead.py
    python benchmarks/adapter_overhead.py --calls 2000 --in-flight 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any, Awaitable, Callable

from jurist.models.base import ChatRequest
from jurist.models.openai import OpenAIChat
from jurist.testing.provider_server import spawn

MESSAGES = [
    {"role": "system", "content": "You are an impartial judge of a support conversation. " * 20},
    {"role": "user", "content": "Conversation:\nuser: how do I reset my password?\nassistant: "
                                + "Open Settings, choose Security, then Reset password. " * 30},
]


async def measure(name: str, calls: int, in_flight: int, one: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    gate = asyncio.Semaphore(in_flight)

    async def bounded() -> None:
        async with gate:
            await one()

    await asyncio.gather(*(bounded() for _ in range(min(calls, 100))))  # warm connections and imports
    cpu0, wall0 = os.times(), time.perf_counter()
    await asyncio.gather(*(bounded() for _ in range(calls)))
    cpu1, wall = os.times(), time.perf_counter() - wall0
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {"path": name, "calls": calls, "in_flight": in_flight, "cpu_ms_per_call": round(cpu * 1000 / calls, 3),
            "wall_s": round(wall, 2)}


async def run(args: argparse.Namespace, base_url: str) -> None:
    import openai

    client = openai.AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0,
                                http_client=openai.DefaultAioHttpClient())
    adapter = OpenAIChat("judge", provider="bench", base_url=base_url, api_key="bench")
    body = {"model": "judge", "messages": MESSAGES, "temperature": 0.0, "max_tokens": 512}
    request = ChatRequest(messages=MESSAGES, temperature=0.0, max_tokens=512)
    paths: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("sdk create", lambda: client.chat.completions.create(**body)),
        ("sdk post", lambda: client.post("/chat/completions", cast_to=object,
                                         content=json.dumps(body, ensure_ascii=False).encode())),
        ("jurist adapter", lambda: adapter.complete(request, timeout=30)),
    ]
    try:
        for name, one in paths:
            print(json.dumps(await measure(name, args.calls, args.in_flight, one)), flush=True)
    finally:
        await client.close()
        await adapter.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--in-flight", type=int, default=128)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds the server waits before each reply")
    args = ap.parse_args()
    proc, base_url = spawn(args.latency)
    try:
        asyncio.run(run(args, base_url))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
