"""What the gate proxy costs under load: direct vs pass-through vs gated, with default settings.

    python benchmarks/proxy_overhead.py [--requests 1000] [--concurrency 64] [--latency 0.2]

Two fixed-latency servers (``python -m jurist.testing.provider_server --latency``,
each in its own process) stand in for the upstream and for the judge: every
request gets its reply after ``--latency`` seconds. ``--requests`` chat
completions are sent by ``--concurrency`` concurrent ``openai.AsyncOpenAI``
clients (one client each), in six runs:

  direct        to the upstream itself
  pass-through  through ``jurist proxy --no-feedback`` (the answer is sent at once,
                judged after it)
  gated         through ``jurist proxy`` (feedback on: each answer is judged
                before it is sent; the judge passes it)

each not streamed and streamed. Both proxies run with default settings (no
``jurist.yaml`` limits; the judge is configured as a provider at the judge
server's URL and named with ``--judge``), each in its own process with its
own store (SQLite, in a temporary folder). Before each run, ``--concurrency``
requests warm the connections up (not counted).

For each run it prints the throughput (requests per second over the run),
the latency percentiles p50/p90/p99 (from sending to the whole answer),
streamed, the time to the first text (p50), and the CPU time the serving
process spent per counted request (the proxy's, all threads, the evaluations after
``done`` included; for direct, the upstream server's; the warm-up, with what a
proxy builds on its first requests, left out). The ideal of the gated runs is
one generation plus one judge call: 2 x ``--latency``. Then it checks the
targets: pass-through at least 90% of direct throughput, p50 within 15 ms of
direct, time to first text within 20 ms; gated p50 within 10% of the ideal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai

from jurist.testing.provider_server import spawn

QUESTION = "What is the capital of France? (request {n})"  # each request its own: no cache answers the judge
ANSWER = "Paris is the capital of France."
VERDICT = '{"comprehensive": true, "reason": "it answers the question"}'


@dataclass
class Figures:
    name: str
    stream: bool
    seconds: float
    latencies: list[float]
    first_text: list[float]
    failed: int
    cpu_ms: float = float("nan")  # the serving process's CPU time per request

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds

    def pct(self, q: float, values: list[float] | None = None) -> float:
        data = sorted(values if values is not None else self.latencies)
        return data[min(len(data) - 1, int(q * len(data)))] if data else float("nan")


async def one(client: openai.AsyncOpenAI, stream: bool, n: int) -> tuple[float, float | None]:
    ask: list[Any] = [{"role": "user", "content": QUESTION.format(n=n)}]
    started = time.monotonic()
    if not stream:
        r = await client.chat.completions.create(model="m", messages=ask)
        assert r.choices[0].message.content == ANSWER, r.choices[0].message.content
        return time.monotonic() - started, None
    first: float | None = None
    text: list[str] = []
    chunks = await client.chat.completions.create(model="m", messages=ask, stream=True)
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            if first is None:
                first = time.monotonic() - started
            text.append(chunk.choices[0].delta.content)
    assert "".join(text) == ANSWER, text
    return time.monotonic() - started, first


async def load(base_url: str, requests: int, concurrency: int, stream: bool, name: str, first: int,
               server_pid: int | None = None, settle: float = 0.0) -> Figures:
    """``requests`` requests (numbered from ``first``: every question differs) after a warm-up;
    with ``server_pid``, the CPU time that process spent on the counted requests, per request
    (from ``settle`` seconds after the warm-up, when its work after the answers has ended, to
    ``settle`` seconds after the last answer)."""
    clients = [openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0, timeout=120)
               for _ in range(concurrency)]
    latencies: list[float] = []
    first_text: list[float] = []
    failed = 0
    todo = iter(range(requests))

    async def worker(client: openai.AsyncOpenAI, count: bool) -> None:
        nonlocal failed
        for n in todo:
            try:
                took, to_text = await one(client, stream, n)
            except Exception as exc:  # counted and said, never silently dropped
                failed += 1
                if failed <= 3:
                    print(f"  {name}: a request failed: {type(exc).__name__}: {exc}", flush=True)
                continue
            if count:
                latencies.append(took)
                if to_text is not None:
                    first_text.append(to_text)

    try:
        todo = iter(range(first, first + concurrency))  # warm-up: one request per client, not counted
        await asyncio.gather(*(worker(c, False) for c in clients))
        failed = 0
        await asyncio.sleep(settle)  # the warm-up's work after its answers (the evaluations after done)
        before = cpu_seconds(server_pid) if server_pid is not None else 0.0
        todo = iter(range(first + concurrency, first + concurrency + requests))
        started = time.monotonic()
        await asyncio.gather(*(worker(c, True) for c in clients))
        seconds = time.monotonic() - started
        await asyncio.sleep(settle)
        cpu_ms = ((cpu_seconds(server_pid) - before) * 1000 / requests if server_pid is not None
                  else float("nan"))
    finally:
        for c in clients:
            await c.close()
    return Figures(name, stream, seconds, latencies, first_text, failed, cpu_ms)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (Linux: /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_proxy(upstream: str, judge: str, folder: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """`jurist proxy` with default settings in its own process and store; its OpenAI base URL."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "jurist.yaml").write_text(f"providers:\n  bench:\n    type: openai\n    base_url: {judge}\n"
                                        "    api_key: k\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    env["JURIST_HOME"] = str(folder / "home")
    proc = subprocess.Popen([sys.executable, "-m", "jurist", "proxy", "--upstream", upstream, "--port", str(port),
                             "--judge", "bench/judge", *extra],
                            cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                return proc, f"{base}/v1"
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"jurist proxy did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.2)


def row(f: Figures) -> str:
    ttft = f"{f.pct(0.5, f.first_text) * 1000:7.1f}" if f.stream else "      -"
    return (f"{f.name:<13} {'stream' if f.stream else 'json':<7} {f.throughput:8.1f} {f.pct(0.5) * 1000:8.1f} "
            f"{f.pct(0.9) * 1000:8.1f} {f.pct(0.99) * 1000:8.1f} {ttft} {f.cpu_ms:7.2f} {f.failed:6d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the upstream and the judge take")
    args = parser.parse_args()

    up_proc, upstream = spawn(args.latency, ANSWER)
    judge_proc, judge = spawn(args.latency, VERDICT)
    procs = [up_proc, judge_proc]
    results: list[Figures] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pass_proc, pass_url = start_proxy(upstream, judge, Path(tmp) / "pass", "--no-feedback")
            procs.append(pass_proc)
            gated_proc, gated_url = start_proxy(upstream, judge, Path(tmp) / "gated")
            procs.append(gated_proc)
            print(f"{args.requests} requests, {args.concurrency} concurrent clients, upstream and judge at "
                  f"{args.latency * 1000:.0f} ms; cpus: {os.cpu_count()}", flush=True)
            print(f"{'run':<13} {'answer':<7} {'req/s':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} "
                  f"{'ttft ms':>7} {'cpu ms':>7} {'failed':>6}", flush=True)
            for stream in (False, True):
                for name, url, server in (("direct", upstream, up_proc), ("pass-through", pass_url, pass_proc),
                                          ("gated", gated_url, gated_proc)):
                    # pass-through: the evaluations after done are part of its cost (they end a judge call later)
                    figures = asyncio.run(load(url, args.requests, args.concurrency, stream, name,
                                               first=len(results) * (args.requests + args.concurrency),
                                               server_pid=server.pid,
                                               settle=2 * args.latency if name == "pass-through" else 0.0))
                    results.append(figures)
                    print(row(results[-1]), flush=True)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()

    ideal = 2 * args.latency
    print(f"\ntargets (ideal gated latency: {ideal * 1000:.0f} ms):")
    for stream in (False, True):
        by = {f.name: f for f in results if f.stream == stream}
        d, p, g = by["direct"], by["pass-through"], by["gated"]
        kind = "stream" if stream else "json"
        checks = [
            (f"pass-through throughput >= 90% of direct ({p.throughput / d.throughput:.0%})",
             p.throughput >= 0.9 * d.throughput),
            (f"pass-through p50 within 15 ms of direct ({(p.pct(0.5) - d.pct(0.5)) * 1000:+.1f} ms)",
             p.pct(0.5) - d.pct(0.5) <= 0.015),
            (f"gated p50 within 10% of the ideal ({g.pct(0.5) / ideal - 1:+.1%})", g.pct(0.5) <= 1.1 * ideal),
        ]
        if stream:
            gap = statistics.median(p.first_text) - statistics.median(d.first_text)
            checks.insert(2, (f"pass-through time to first text within 20 ms of direct ({gap * 1000:+.1f} ms)",
                              gap <= 0.020))
        for text, ok in checks:
            print(f"  {kind:<6} {'met   ' if ok else 'MISSED'} {text}")


if __name__ == "__main__":
    main()
