"""The write token and the listening address."""

import pytest

from jurist.errors import UsageError
from jurist.server.auth import bind_host, is_loopback


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                        ("127.0.0.2", True), ("0.0.0.0", False), ("10.1.2.3", False),
                                        ("example.org", False)])
def test_is_loopback(host, loop):
    assert is_loopback(host) is loop


def test_bind_host():
    assert bind_host("127.0.0.1", None) == "127.0.0.1"
    with pytest.raises(UsageError) as refused:  # no quiet fallback: the command stops and says how to fix it
        bind_host("0.0.0.0", None)
    assert "JURIST_API_TOKEN" in str(refused.value) and "127.0.0.1" in str(refused.value)
    assert bind_host("0.0.0.0", "t") == "0.0.0.0"
