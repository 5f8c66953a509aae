"""Regular expressions matched within a time limit: a ``regex`` check's match runs in a small
Python process of its own, stopped when it takes longer than :data:`REGEX_TIMEOUT` seconds.

Python's ``re`` has no time-out, and a pattern such as ``(a+)+$`` takes exponential time on some
texts (catastrophic backtracking): run in the judging process it would hold it, and every other
evaluation in it, for as long as it takes. The worker process (``python -I``, the standard library
only) is started on the first match, serves matches one at a time over its pipes, and is killed
and started again after a time-out; the check is then ``evaluation_failed`` with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import weakref

REGEX_TIMEOUT = 1.0  # seconds one match may take
MAX_REGEX_TEXT = 200_000  # characters of an answer a regex check reads; a longer answer is not matched

_WORKER = r"""
import json, re, sys
for line in sys.stdin:
    pattern, flags, text = json.loads(line)
    try:
        reply = "1" if re.search(pattern, text, flags) is not None else "0"
    except Exception as exc:
        reply = "E" + json.dumps(f"{type(exc).__name__}: {exc}")
    sys.stdout.write(reply + "\n")
    sys.stdout.flush()
"""


class RegexTimeout(Exception):
    """A match took longer than the time limit (its worker was stopped)."""


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None and not pipe.closed:
            pipe.close()


class RegexRunner:
    """Matches in a worker process, one at a time (blocking: call :meth:`search` off the event loop)."""

    def __init__(self, timeout: float = REGEX_TIMEOUT) -> None:
        self.timeout = timeout
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def _started(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, encoding="utf-8", errors="surrogatepass")
            weakref.finalize(self, _stop, self._proc)
        return self._proc

    def search(self, pattern: str, flags: int, text: str) -> bool:
        """Whether ``pattern`` matches somewhere in ``text`` (``re.search``); RegexTimeout when it
        takes longer than :attr:`timeout` seconds."""
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            stdout = proc.stdout
            proc.stdin.write(json.dumps([pattern, flags, text]) + "\n")
            proc.stdin.flush()
            reply: list[str] = []
            reader = threading.Thread(target=lambda: reply.append(stdout.readline()), daemon=True)
            reader.start()
            reader.join(self.timeout)
            if reader.is_alive():
                proc.kill()
                proc.wait()
                reader.join()
                _stop(proc)
                self._proc = None
                raise RegexTimeout(f"the regex took longer than {self.timeout:g} s (it was stopped)")
            line = reply[0].rstrip("\n") if reply else ""
            if line in ("0", "1"):
                return line == "1"
            self._proc = None
            _stop(proc)
            raise RuntimeError(json.loads(line[1:]) if line.startswith("E") else "the regex worker stopped")

    def close(self) -> None:
        """Stop the worker (a later match starts another)."""
        with self._lock:
            if self._proc is not None:
                _stop(self._proc)
                self._proc = None
