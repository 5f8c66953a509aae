"""Server memory under an oversized request body.

    python benchmarks/server_bounds.py [--mb 400]

Starts ``jurist serve`` (and ``jurist proxy`` in front of a closed port) in
its own process with ``JURIST_API_TOKEN`` set, then sends one POST of
``--mb`` megabytes (a JSON document: one chat message of that size) over a
raw socket, 1 MiB at a time, stopping as soon as the server answers or closes
the connection. Each case gets a fresh server. For each it prints the
server's resident memory before (VmRSS) and its peak (VmHWM, from
``/proc/<pid>/status``), how much this side had sent when the answer came
(the socket buffers hold a few MiB the server never read), the status and
the time:

  no token, Content-Length     POST /api/evaluate, the size announced, no Authorization header
  no token, chunked            Transfer-Encoding: chunked, no Authorization header
  token, Content-Length        with ``Authorization: Bearer <token>``
  token, chunked               with the token, chunked
  proxy, token, chunked        ``POST /v1/chat/completions`` on ``jurist proxy``, with the token

Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

TOKEN = "bench-token-0123456789"
MIB = 1024 * 1024
PREFIX = b'{"rubrics": {"rubrics": [{"id": "a", "name": "A", "scoring_criteria": "x"}]}, "session": [{"role": "user", "content": "'
SUFFIX = b'"}]}'
MESSAGES = (b'{"model": "m", "messages": [{"role": "user", "content": "', b'"}]}')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def start(command: list[str], tmp: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JURIST_HOME=str(Path(tmp) / ".jurist"), JURIST_API_TOKEN=TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "jurist", *command, "--port", str(port)], env=env, cwd=tmp,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                return proc, port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("the server did not start") from None
            time.sleep(0.2)


def answered(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def post(port: int, path: str, size: int, *, token: bool, chunked: bool, shell: tuple[bytes, bytes]) -> tuple[int, str, float]:
    """Send the body until the server answers; (bytes sent, the status line, seconds)."""
    head, tail = shell
    total = len(head) + size + len(tail)
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json"]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
    if token:
        lines.append(f"Authorization: Bearer {TOKEN}")
    sent, t0 = 0, time.perf_counter()
    block = b"x" * MIB
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        parts = [p for p in [head, *[block] * (size // MIB), b"x" * (size % MIB), tail] if p]
        try:
            for part in parts:
                if answered(sock):
                    break
                data = f"{len(part):x}\r\n".encode() + part + b"\r\n" if chunked else part
                sock.sendall(data)
                sent += len(part)
            else:
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            first = sock.recv(65536).split(b"\r\n", 1)[0].decode(errors="replace")
        except ConnectionResetError:
            first = "(connection reset)"
    return sent, first or "(closed without an answer)", time.perf_counter() - t0


def measure(command: list[str], path: str, size: int, *, token: bool, chunked: bool,
            shell: tuple[bytes, bytes]) -> tuple[int, int, int, str, float]:
    """One POST to a fresh server: RSS before and peak (KiB), bytes sent, the answer, seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start(command, tmp)
        try:
            before = memory_kib(proc.pid)["VmRSS"]
            sent, status, seconds = post(port, path, size, token=token, chunked=chunked, shell=shell)
            time.sleep(0.5)
            peak = memory_kib(proc.pid)["VmHWM"]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return before, peak, sent, status, seconds


def unauthenticated_post(mb: int) -> tuple[int, int, str]:
    """RSS before and peak (KiB) of ``jurist serve`` under one POST of ``mb`` MiB without the token, and its answer."""
    before, peak, _, status, _ = measure(["serve"], "/api/evaluate", mb * MIB, token=False, chunked=False,
                                         shell=(PREFIX, SUFFIX))
    return before, peak, status


def main() -> int:
    ap = argparse.ArgumentParser(description="Server memory under an oversized request body.")
    ap.add_argument("--mb", type=int, default=400, help="body size in MiB")
    args = ap.parse_args()
    size = args.mb * MIB
    cases = [
        ("no token, Content-Length", ["serve"], "/api/evaluate", False, False, (PREFIX, SUFFIX)),
        ("no token, chunked", ["serve"], "/api/evaluate", False, True, (PREFIX, SUFFIX)),
        ("token, Content-Length", ["serve"], "/api/evaluate", True, False, (PREFIX, SUFFIX)),
        ("token, chunked", ["serve"], "/api/evaluate", True, True, (PREFIX, SUFFIX)),
        ("proxy, token, chunked", ["proxy", "--upstream", "http://127.0.0.1:9/v1"], "/v1/chat/completions", True,
         True, MESSAGES),
    ]
    print(f"one POST of {args.mb} MiB; server memory in MiB")
    print(f"{'case':26} {'RSS before':>10} {'peak RSS':>9} {'MiB sent':>10} {'seconds':>8}  answer")
    for name, command, path, token, chunked, shell in cases:
        before, peak, sent, status, seconds = measure(command, path, size, token=token, chunked=chunked, shell=shell)
        print(f"{name:26} {before / 1024:10.0f} {peak / 1024:9.0f} {sent / MIB:10.1f} {seconds:8.2f}  {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
