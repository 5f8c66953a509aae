"""The jurist error tree.

::

    JuristError
    ├── UsageError            the caller's mistake: fix the input or the config
    │   ├── ConfigError       a missing or invalid setting, key or model reference
    │   │   ├── Unsupported   the backend cannot answer this kind of question (local/minilm
    │   │   │                 asked for free text)
    │   │   └── MissingExtra  a part of jurist whose extra is not installed (names the
    │   │                     pip install "jurist[...]" to run)
    │   ├── InputError        a bad file or value (carries file and line)
    │   ├── NotFound          a thing asked for by name or id does not exist
    │   └── CalibrationRequired
    │                         require_calibration is on and a judge has no stored calibration
    │                         (or one below the bar): carries what is missing and how to make it
    ├── ModelError            a runtime failure talking to a model
    │   ├── RateLimited       429 after every retry (carries retry_after)
    │   ├── ModelTimeout      no answer within the per-call timeout
    │   ├── ModelUnavailable  5xx, dropped connection, unreachable endpoint
    │   │   └── EndpointDown  the endpoint's circuit breaker is open: calls fail at once
    │   ├── AuthFailed        401/403: the key is missing or wrong
    │   ├── RequestRejected   400/404/422: the endpoint refused the request
    │   ├── BudgetExceeded    not sent: the run's cost budget (--max-cost) is spent
    │   └── DryRunCall        not sent: counted by a dry run (--dry-run)
    ├── JudgeParseError       a judge reply that could not be parsed, after the re-ask
    ├── EvaluationError       an evaluator gave no result a capability can use
    │   ├── EvaluationFailed  the gate's evaluator gave no usable verdict (the gate records
    │   │                     evaluation_skipped)
    │   ├── EvaluationUnavailable
    │   │                     a research evaluator produced no scores (a panel: no role survived)
    │   ├── Uncertain         the judge cannot decide: its calibrated probability lies inside the
    │   │                     band of uncertainty round its threshold (local/minilm); the verdict
    │   │                     is evaluation_failed, reason "uncertain: ..."
    │   └── ResearchBlocked   a research stage's evaluation failed and its failAction is block
    ├── IterationLimit        a gated generator's tool loop hit its limit (carries the messages
    │                         for the continue context)
    └── StoreError            the database refused a write or a read
        └── PayloadError      a stored payload no model reads (unknown kind, fields that do not fit)

Every message says what was wrong and what to do about it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence


class JuristError(Exception):
    """Base of every error jurist raises on purpose."""


class UsageError(JuristError):
    """The caller's mistake: bad input, bad configuration."""


class ConfigError(UsageError):
    """A missing or invalid setting, API key or model reference."""


class Unsupported(ConfigError):
    """The backend cannot answer this kind of question: the offline local judge
    asked to write free text or a free-form score. A judge turns it into a
    failed verdict with this message; a generator raises it."""


class MissingExtra(ConfigError):
    """A part of jurist whose optional packages are not installed (the offline
    judge, the statistics and charts); the message names the extra to install
    (:func:`jurist.extras.require_extra`)."""

    def __init__(self, message: str, *, extra: str):
        self.extra = extra
        super().__init__(message)


class InputError(UsageError):
    """A bad input file or value; names the file and, where known, the line."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None):
        self.file = file
        self.line = line
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        super().__init__(f"{where}{message}")
        self.reason = message


class NotFound(UsageError):
    """A thing asked for by name or id (an evaluation, a prompt version) does not exist."""


class CalibrationRequired(UsageError):
    """``require_calibration`` is on and the store holds no calibration of a judge (its model,
    template and rubric or dimension), or only one whose κ is below the bar. Raised before any
    judge call; ``missing`` lists each judge's case, the message the command that makes one."""

    def __init__(self, message: str, *, missing: list[str] | None = None, commands: list[str] | None = None):
        self.missing = list(missing or [])
        self.commands = list(commands or [])
        super().__init__(message)


class ModelError(JuristError):
    """A model call failed at run time (after the retries the policy allows)."""

    retryable = False

    def __init__(self, message: str, *, model: str | None = None, status: int | None = None,
                 body: bytes | None = None, headers: Mapping[str, str] | None = None):
        self.model = model
        self.status = status
        # The endpoint's own error reply (raw body, headers), when it sent one:
        # what a proxy relays to its client unchanged.
        self.body = body
        self.headers: Mapping[str, str] = headers if headers is not None else {}
        self.attempts = 0  # the calls made before giving up (set by the Model that retried)
        super().__init__(message)


class RateLimited(ModelError):
    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any):
        self.retry_after = retry_after
        super().__init__(message, **kw)


class ModelTimeout(ModelError):
    retryable = True


class ModelUnavailable(ModelError):
    retryable = True


class EndpointDown(ModelUnavailable):
    """The endpoint failed too many calls in a row (no answer: timeouts, connection
    failures; or server errors after retries): its circuit breaker is open, so calls fail at once, with
    no retries, until the cool-down ends and one probe call finds it up again."""

    retryable = False

    def __init__(self, message: str, *, endpoint: str = "", retry_in: float = 0.0, **kw: Any):
        self.endpoint = endpoint
        self.retry_in = retry_in  # seconds until a probe call may go through
        super().__init__(message, **kw)


class AuthFailed(ModelError):
    retryable = False


class RequestRejected(ModelError):
    retryable = False


class BudgetExceeded(ModelError):
    """A call not made: the run's cost budget (``--max-cost``) is spent. Not retried; a rerun
    with a larger budget goes on where the run stopped (:class:`jurist.models.cost.CostBudget`)."""

    retryable = False


class DryRunCall(ModelError):
    """A call counted by a dry run (:func:`jurist.models.cost.expecting`), not made."""

    retryable = False


class JudgeParseError(JuristError):
    """The judge's reply could not be turned into a verdict, even after one re-ask."""

    def __init__(self, message: str, *, raw: str | None = None):
        self.raw = raw
        # the judge's replies that failed to parse, jurist.models.Completion (set by Judge.run; this
        # module sits below the models and imports none of them)
        self.completions: list[Any] = []
        super().__init__(message)


class EvaluationError(JuristError):
    """An evaluator gave no result the capability can use (the gate's, a research stage's)."""


class EvaluationFailed(EvaluationError):
    """The evaluator gave no usable verdict (the gate records ``evaluation_skipped``)."""


class EvaluationUnavailable(EvaluationError):
    """The evaluator produced no scores (for a panel: no role survived)."""


#: How the reason of an undecided verdict starts (an :class:`Uncertain` message, as records keep it).
UNDECIDED = "uncertain:"


class Uncertain(EvaluationError):
    """The judge cannot decide and does not guess: the calibrated probability of a decision lies
    within ``band`` of its threshold. The message starts ``uncertain:`` and names what was asked
    (``subject``), the probability and the band; a judge turns it into a failed verdict.

    A question about several statements at once says which of them lie inside the band
    (``undecided``, in the order asked; ``subject`` is the first) and, where the judge decided the
    others, their answers (``decided``, None when the judge reports none: for ``expresses`` a
    :class:`~jurist.models.base.DecidedChecks` of the statements outside the band, in the order
    asked; for ``coverage`` and ``support`` the result over the parts or sentences it decided; for
    an item-based rubric a :class:`~jurist.judges.parsing.DecidedReplies`), so that a caller that can use
    part of an answer (a checklist turn, an item-based rubric, the gate's coverage) keeps those
    verdicts and says which statements stay undecided. ``decided`` is typed ``object`` (this module
    imports no other of jurist's): a reader narrows it to the type its question gives, and reads
    anything else as nothing decided."""

    def __init__(self, message: str, *, subject: str, probability: float, threshold: float, band: float,
                 undecided: Sequence[str] = (), decided: object = None) -> None:
        self.subject = subject
        self.probability = probability
        self.threshold = threshold
        self.band = band
        self.undecided = tuple(undecided) or (subject,)
        self.decided = decided
        super().__init__(message)

    def with_decided(self, decided: object) -> "Uncertain":
        """The same undecided question, carrying ``decided`` in another form (a rubric's replies per
        item)."""
        return Uncertain(str(self), subject=self.subject, probability=self.probability, threshold=self.threshold,
                         band=self.band, undecided=self.undecided, decided=decided)


class ResearchBlocked(EvaluationError):
    """A stage's evaluation failed and its ``failAction`` is ``block``."""

    def __init__(self, stage: str, reason: str) -> None:
        self.stage = stage
        self.reason = reason
        super().__init__(
            f"{stage} evaluation failed ({reason}) and its failAction is 'block', so the research stops; "
            f"set research.evaluation.{stage}Evaluation.failAction to 'continue' or 'warn' to proceed without it"
        )


class IterationLimit(JuristError):
    """Raise from a generator whose tool loop hit its iteration limit; ``messages``
    (the conversation so far, tool results included: :data:`~jurist.models.messages.Message`
    records or OpenAI-style dicts, checked when the gate reads them: this module sits below
    the models and imports none of them) become the continue context."""

    def __init__(self, message: str = "Maximum tool execution iterations reached", *,
                 messages: Sequence[object] | None = None) -> None:
        super().__init__(message)
        self.messages = messages


class StoreError(JuristError):
    """The store could not write or read; the message names the database error."""


class PayloadError(StoreError):
    """A stored evaluation payload that cannot be read as its kind's model."""

    def __init__(self, message: str, *, kind: str | None = None):
        self.kind = kind
        super().__init__(message)
