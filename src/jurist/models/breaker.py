"""A circuit breaker per endpoint: a dead endpoint fails calls at once.

Without one, every call to an endpoint that never answers waits its whole
timeout (and its retries): 200 sessions against a dead judge cost minutes
to hours. :class:`CircuitBreaker` counts the calls that got no answer in a
row (timeouts, connection refused or dropped: see :func:`got_no_answer`);
at ``threshold`` of them it *opens*, and for ``cooldown`` seconds every call
fails at once with :class:`~jurist.errors.EndpointDown`, which is not
retried. When the cool-down ends, one call goes through as a probe
(*half-open*; the others still fail at once): an answer closes the breaker,
no answer opens it for another cool-down.

Any answer, an error status included (429, 400, 500), counts as the endpoint
being up: it resets the count. A call cancelled by its caller says nothing
either way. ``Model`` asks the breaker inside its limiter slot, before each
attempt, so calls that waited for a slot while the endpoint died fail at
once too. A :class:`~jurist.models.limiter_pool.LimiterPool` keeps one
breaker per endpoint, shared by every model of the pool, like its limiters.
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
                f"{self.endpoint} is down: {self.failures} calls in a row got no answer "
                f"(last: {self._last_error}); calls to it fail at once for "
                + (f"{wait:.1f} s more, then one call probes it" if wait > 0
                   else "as long as the probe call is in flight")
                + "; check the endpoint (breaker_threshold and breaker_cooldown in jurist.yaml tune this)",
                endpoint=self.endpoint, retry_in=max(0.0, wait),
            )

    def report(self, probe: bool, error: BaseException | None = None) -> None:
        """How an admitted call ended: ``error`` None is an answer, and so is a model
        error with an HTTP status (429, 400, 500): the breaker closes. A call that got
        no answer (:func:`got_no_answer`) counts toward opening it; a failed probe
        opens it again at once. Anything else (the caller cancelled, the breaker's own
        EndpointDown) says nothing, but a probe's turn goes to the next call."""
        with self._lock:
            if probe:
                self._probing = False
            if error is not None and (not isinstance(error, ModelError) or isinstance(error, EndpointDown)):
                return
            if error is None or not got_no_answer(error):
                self.failures = 0
                self.opened_at = None
                return
            self.failures += 1
            self._last_error = f"{type(error).__name__}: {_short(str(error))}"
            if probe or (self.opened_at is None and self.threshold and self.failures >= self.threshold):
                self.opened_at = self._clock()


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
