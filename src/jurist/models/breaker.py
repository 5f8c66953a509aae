"""A circuit breaker per endpoint: a dead endpoint fails calls at once.

Without one, every call to an endpoint that never answers waits its whole
timeout (and its retries): 200 sessions against a dead judge cost minutes
to hours. :class:`CircuitBreaker` counts the calls that failed in a row:
those that got no answer (timeouts, connection refused or dropped: see
:func:`got_no_answer`), whichever clock ran out (the attempt's own timeout,
or the caller's time limit cancelling it: ``Model`` reports that one as a
timeout), and those that gave up on a server error (5xx) after their
retries (:func:`server_failed`). At ``threshold`` of them it *opens*, and for
``cooldown`` seconds every call fails at once with
:class:`~jurist.errors.EndpointDown`, which is not retried. When the
cool-down ends, one call goes through as a probe (*half-open*; the others
still fail at once): an answer closes the breaker, no answer or a server
error opens it for another cool-down.

Any other answer (a success, 429, 400) counts as the endpoint being up: it
resets the count. A 5xx that is retried says nothing either way, nor does a
call cancelled by its caller before its time limit. ``Model`` asks the
breaker inside its limiter slot, before each attempt, so calls that waited
for a slot while the endpoint died fail at once too. A
:class:`~jurist.models.limiter_pool.LimiterPool` keeps one breaker per
endpoint, shared by every model of the pool, like its limiters.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from jurist.errors import EndpointDown, ModelError, ModelTimeout, ModelUnavailable

DEFAULT_THRESHOLD = 5  # calls in a row without an answer
DEFAULT_COOLDOWN = 30.0  # seconds the breaker stays open before a probe


def got_no_answer(exc: BaseException) -> bool:
    """Whether a failed call means the endpoint did not answer at all: a timeout,
    or a failure with no HTTP status (connection refused or dropped, an unreadable reply)."""
    return (isinstance(exc, (ModelTimeout, ModelUnavailable)) and exc.status is None
            and not isinstance(exc, EndpointDown))


def server_failed(exc: BaseException) -> bool:
    """Whether a failed call got a server error (an HTTP status of 500 or more)."""
    return isinstance(exc, ModelError) and exc.status is not None and exc.status >= 500


class CircuitBreaker:
    """Closed, open or half-open for one endpoint; thread-safe (a pool's models may
    run on several event loops)."""

    def __init__(self, endpoint: str, threshold: int = DEFAULT_THRESHOLD, cooldown: float = DEFAULT_COOLDOWN,
                 *, clock: Callable[[], float] = time.monotonic) -> None:
        self.endpoint = endpoint
        self.threshold = 0
        self.cooldown = 0.0
        self.configure(threshold, cooldown)
        self._clock = clock
        self._lock = threading.Lock()
        self.failures = 0  # calls in a row without an answer
        self.opened_at: float | None = None  # when the breaker last opened; None: closed
        self._probing = False  # a half-open probe call is in flight
        self._last_error = ""
        self._server_errors = 0  # of the failures in a row, those that were server errors (5xx)

    def configure(self, threshold: int | None = None, cooldown: float | None = None) -> None:
        """Change the bounds (``threshold`` 0 turns the breaker off)."""
        if threshold is not None:
            if threshold < 0:
                raise ValueError("breaker threshold must be 0 (off) or more")
            self.threshold = threshold
        if cooldown is not None:
            if cooldown <= 0:
                raise ValueError("breaker cooldown must be positive")
            self.cooldown = cooldown

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half-open`` (the cool-down is over: the next call probes)."""
        with self._lock:
            if self.opened_at is None:
                return "closed"
            return "half-open" if self._probing or self._clock() - self.opened_at >= self.cooldown else "open"

    def admit(self) -> bool:
        """Let a call through, or raise :class:`EndpointDown`. Returns True when the
        call is the half-open probe. Tell :meth:`report` how every admitted call ended."""
        with self._lock:
            if self.opened_at is None or not self.threshold:
                return False
            wait = self.opened_at + self.cooldown - self._clock()
            if wait <= 0 and not self._probing:
                self._probing = True
                return True
            raise EndpointDown(
                f"{self.endpoint} is down: {self.failures} calls in a row "
                + ("got no answer" if not self._server_errors else
                   "got a server error" if self._server_errors == self.failures else
                   "got no answer or a server error")
                + f" (last: {self._last_error}); calls to it fail at once for "
                + (f"{wait:.1f} s more, then one call probes it" if wait > 0
                   else "as long as the probe call is in flight")
                + "; check the endpoint (breaker_threshold and breaker_cooldown in jurist.yaml tune this)",
                endpoint=self.endpoint, retry_in=max(0.0, wait),
            )

    def report(self, probe: bool, error: BaseException | None = None, *, gave_up: bool = False) -> None:
        """How an admitted call ended: ``error`` None is an answer, and so is a model
        error with an HTTP status under 500 (429, 400): the breaker closes. A call that
        got no answer (:func:`got_no_answer`) counts toward opening it, and so does a
        server error (5xx) the call ``gave_up`` on (no retry follows); a retried one says
        nothing, unless it answered the probe. A failed probe opens the breaker again at
        once. Anything else (the caller cancelled before its time limit, the breaker's
        own EndpointDown) says nothing, but a probe's turn goes to the next call."""
        with self._lock:
            if probe:
                self._probing = False
            if error is not None and (not isinstance(error, ModelError) or isinstance(error, EndpointDown)):
                return
            if error is None or not (got_no_answer(error) or server_failed(error)):
                self.failures = self._server_errors = 0
                self.opened_at = None
                return
            if server_failed(error) and not gave_up:
                if probe:
                    self.opened_at = self._clock()
                return
            self.failures += 1
            self._server_errors += server_failed(error)
            self._last_error = f"{type(error).__name__}: {_short(str(error))}"
            if probe or (self.opened_at is None and self.threshold and self.failures >= self.threshold):
                self.opened_at = self._clock()


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
