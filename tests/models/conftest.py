"""Fixtures for the adapter tests: a scripted provider on 127.0.0.1 and nothing else.

``_offline`` clears every environment variable that could point an SDK at a
real endpoint, key or proxy, and refuses any connection that is not to the
loopback interface, so a mistake fails loudly instead of reaching the network.
"""

from __future__ import annotations

import socket
from typing import Iterator

import pytest

from jurist.testing import ProviderServer

_ENV = [
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY",
    "OPENAI_CUSTOM_HEADERS", "OPENAI_WEBHOOK_SECRET",
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
    "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_IDENTITY_TOKEN", "ANTHROPIC_IDENTITY_TOKEN_FILE",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
]  # fmt: skip
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in _ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect

    def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host not in _LOOPBACK and host is not None:
            raise OSError(f"test tried to resolve {host!r}: tests talk to 127.0.0.1 only")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(self: socket.socket, address):  # type: ignore[no-untyped-def]
        if isinstance(address, tuple) and address[0] not in _LOOPBACK:
            raise OSError(f"test tried to connect to {address!r}: tests talk to 127.0.0.1 only")
        return real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster for the module (one already running is used as it is); yields its job id."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, namespace="jurist", log_to_driver=False)
    yield ray.get_runtime_context().get_job_id()
    if started:
        ray.shutdown()
