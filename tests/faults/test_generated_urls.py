"""Database URLs, generated bad: an unknown scheme or driver, a port out of range or not a number,
a host that is none, a path that cannot be made, a lone surrogate or a NUL anywhere, a driver
option with a bad value. The settings take the URL or refuse it, and the store opens or raises
jurist's typed error (ConfigError, StoreError), within seconds: never another exception, never a
hang (each example is bounded).

No URL here can name a database that exists: a PostgreSQL URL names a database ``jurist_no_such_...``
on this machine (a refused port, an unresolvable host or the real server, which answers that the
database does not exist), and a SQLite path is relative to the test's own folder (or under
``/proc``, where nothing can be made).
"""

from __future__ import annotations

import socket
import string
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jurist.config import Settings, database_url_of
from jurist.errors import JuristError
from jurist.store import Store

from tests.conftest import run_cli
from tests.faults.generated import PROPERTY, characters

BOUND_S = 30  # seconds one URL may take: the connect time-out (10 s) and a migration, with room


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CLOSED = _closed_port()
_plain = st.text(st.sampled_from(string.ascii_letters + string.digits + "_-.%~ "), max_size=12)
_odd = st.one_of(_plain, st.text(characters, max_size=8).map(lambda t: t.translate({ord(c): "_" for c in "/?#@&="})))

schemes = st.one_of(
    st.sampled_from(["sqlite", "sqlite+pysqlite", "sqlite+nope", "postgresql", "postgresql+psycopg", "postgres",
                     "postgresql+psycopg2", "mysql", "nope", "", "SQLITE", "http"]),
    st.text(st.sampled_from(string.ascii_lowercase + "+_"), max_size=10),
)
hosts = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "[::1", "256.256.256.256", "", "bad host", "h\x00st",
                         "x\ud800"])
ports = st.one_of(st.just(""), st.sampled_from([str(CLOSED), "0", "65536", "99999", "-1", "abc", ""]).map(":".__add__))
queries = st.one_of(st.just(""), st.sampled_from(["connect_timeout=abc", "connect_timeout=-1", "connect_timeout=1",
                                                  "sslmode=bogus", "options=%00", "x=%ud800", "target_session_attrs=no",
                                                  "mode=ro&uri=true", "timeout=abc", "check_same_thread=maybe"])
                    .map("?".__add__))


@st.composite
def server_urls(draw: st.DrawFn) -> str:
    user = draw(st.one_of(st.just(""), _odd.map(lambda u: u + "@"), _odd.map(lambda u: f"u:{u}@")))
    name = "jurist_no_such_" + draw(_odd)
    return f"{draw(schemes)}://{user}{draw(hosts)}{draw(ports)}/{name}{draw(queries)}"


@st.composite
def file_urls(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(_odd.filter(lambda p: p not in ("", ".", "..")),
                                    st.just("a" * 300)), min_size=1, max_size=3))
    return f"{draw(schemes)}:///{'/'.join(parts)}{draw(queries)}"


urls = st.one_of(server_urls(), file_urls(), _odd, st.sampled_from(["sqlite:////proc/1/nope/x.db", "sqlite:///",
                                                                     "://", "sqlite://", "postgresql://"]))


def opens_or_refuses(url: str) -> None:
    """Settings take ``url`` and the store opens on it, or one raises jurist's typed error; in time."""
    def attempt() -> None:
        try:
            Settings.load(database_url=url)
            Store(url).close()
        except JuristError:
            pass

    with ThreadPoolExecutor(1) as pool:
        pool.submit(attempt).result(timeout=BOUND_S)  # another exception is raised here, as it was


@settings(PROPERTY, max_examples=50)
@given(urls)
def test_a_generated_database_url_opens_or_is_a_typed_error_in_seconds(url):
    opens_or_refuses(url)


@settings(PROPERTY, max_examples=30)
@given(st.one_of(_odd, st.text(characters, max_size=20).filter(lambda v: not v.startswith("/"))))
def test_a_generated_db_option_is_a_path_or_a_url_or_a_typed_error(value):
    """``--db``'s value: a URL as it is, else a SQLite file's path (relative ones in the test's folder)."""
    try:
        url = database_url_of(value)
    except JuristError:
        return
    opens_or_refuses(url)


@pytest.mark.parametrize("url", [
    "sqlite:////proc/1/nope/x.db",  # a folder that cannot be made
    "sqlite:///" + "a" * 300 + "/x.db",  # a name too long
    "sqlite:///x\ud800.db",
    "postgresql+psycopg://u@127.0.0.1:5432/jurist_no_such_db\ud800",
    f"postgresql+psycopg://u@127.0.0.1:{CLOSED}/jurist_no_such_db?connect_timeout=abc",
])
def test_a_database_url_that_cannot_be_used_is_a_typed_error(url):
    opens_or_refuses(url)


def test_the_command_refuses_a_db_it_cannot_use_with_exit_2(tmp_path):
    for url in ("sqlite:////proc/1/nope/x.db", f"postgresql+psycopg://u@127.0.0.1:{CLOSED}/x?connect_timeout=abc"):
        r = run_cli("logs", "--db", url, env={"JURIST_HOME": str(tmp_path / ".jurist")}, cwd=tmp_path, timeout=60)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "Traceback" not in r.stderr, r.stderr
