"""Locks between processes: lock files (a SQLite store's migration, a batch's output folder)
and PostgreSQL advisory locks.

A :class:`FileLock` is an exclusive ``flock`` on a file that names its holder
(process id and host) and is removed when released, so a folder holds no lock
file while nobody works in it. The operating system releases the lock of a
process that dies, ``kill -9`` included: a lock is never left stale. On
Windows, which has no ``flock``, a FileLock does not exclude other processes.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType

from sqlalchemy import text
from sqlalchemy.engine import Connection

if sys.platform != "win32":
    import fcntl

_POLL = 0.02  # seconds between attempts while waiting for a lock


class FileLock:
    """An exclusive lock on ``path`` between processes (and between two holders in one process)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float | None = None) -> bool:
        """Take the lock: wait up to ``timeout`` seconds (None: as long as it takes; 0: not at
        all). True if taken."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._try():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL)
        return True

    def _try(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if sys.platform != "win32":
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # The holder before us removes the file when it lets go: if it did so after we opened
            # the file, we hold a lock on a file nobody else will find, so try again.
            mine, there = os.fstat(fd), os.stat(self.path)
            if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
                os.close(fd)
                return False
        except (BlockingIOError, FileNotFoundError):
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.unlink(self.path)  # while still holding it: nobody can take a file that is going away
        except OSError:  # gone already, or (Windows) open elsewhere: the lock goes with the descriptor
            pass
        finally:
            os.close(fd)

    def holder(self) -> str:
        """Who holds the lock, as its file says ("process 1234 on host"), for messages."""
        try:
            pid, _, host = self.path.read_text(encoding="utf-8").strip().partition(" ")
        except (OSError, UnicodeDecodeError):
            pid = host = ""
        if not pid:
            return "another process"
        return f"process {pid}" + (f" on {host}" if host and host != socket.gethostname() else "")

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def pg_transaction_lock(conn: Connection, key: int) -> None:
    """Take PostgreSQL's advisory lock ``key`` for the rest of ``conn``'s transaction
    (released at commit or rollback, or when the connection dies)."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
