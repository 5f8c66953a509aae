"""The write token and the listening address."""

import pytest

from jurist.server.auth import bind_host, is_loopback


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                        ("127.0.0.2", True), ("0.0.0.0", False), ("10.1.2.3", False),
                                        ("example.org", False)])
def test_is_loopback(host, loop):
    assert is_loopback(host) is loop


def test_bind_host():
    assert bind_host("127.0.0.1", None) == ("127.0.0.1", None)
    host, why = bind_host("0.0.0.0", None)
    assert host == "127.0.0.1" and "JURIST_API_TOKEN" in why
    assert bind_host("0.0.0.0", "t") == ("0.0.0.0", None)
