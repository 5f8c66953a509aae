"""What a model call costs in US dollars, budgets, and what a run is expected to cost.

Prices come from the ``genai-prices`` package (prices by provider and model, kept by its
maintainers and shipped with it): jurist keeps no price list of its own and never fetches
prices at run time (the package's bundled table is read; its auto-update is never started).

* :func:`call_cost` prices one call from its tokens. It is ``None`` with a note saying why
  when the price is unknown: a model the table does not have (named), a server that is not
  the provider's own API (a local server, a custom ``base_url``: what it charges is not
  known), usage the endpoint did not report, a call that failed before any usage came
  back. The offline judge, the in-process scripted provider and answers from jurist's call
  cache cost 0, and their note says so.
* :class:`CostBudget` is a running total shared by every call of a run (a lock guards it:
  safe from threads and tasks); :func:`charged_to` makes it the budget of the calls made in
  a block (a context variable, like :func:`jurist.models.model.time_limit`): ``Model``
  charges each call it records to it, and refuses a new call once it is spent
  (:class:`BudgetExceeded`, a failed call like any other).
* :func:`estimate_request` says what one request is expected to cost before it is sent:
  the input counted with the model's tokenizer where one is available offline (``tiktoken``
  with its encoding already on disk), else estimated at 4 characters a token, and says which.
  Within :func:`expecting` (a dry run), ``Model`` counts each call into a :class:`DryRun`
  instead of making it.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Callable, Iterator

from jurist.errors import BudgetExceeded, DryRunCall, InputError

if TYPE_CHECKING:  # pragma: no cover
    from genai_prices.types import Provider

    from jurist.models.base import ChatRequest

__all__ = ["BudgetExceeded", "Cost", "CostBudget", "DryRun", "DryRunCall", "ExpectedCalls", "RequestEstimate",
           "active_budget", "active_dry_run", "call_cost", "charged_to", "count_tokens", "estimate_request",
           "expecting", "format_usd", "is_free", "is_priced", "load_prices", "NOTE_CHARS", "preload_prices"]

#: The most of a note that is kept (the ``llm_calls.cost_note`` column's width).
NOTE_CHARS = 200
OFFLINE = "offline judge: no charge"
SCRIPTED = "scripted provider (in process): no charge"
FROM_CACHE = "answered from jurist's call cache: no request, no charge"
#: Providers that run in this process: nothing is charged.
FREE_PROVIDERS = {"local": OFFLINE, "scripted": SCRIPTED}


@dataclass(frozen=True)
class Cost:
    """A call's cost in US dollars; ``usd`` None: unknown, and ``note`` says why (a known
    cost may carry a note too: why it is 0)."""

    usd: float | None
    note: str | None = None

    @property
    def known(self) -> bool:
        return self.usd is not None


def _note(text: str) -> str:
    return text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS - 1] + "…"


def load_prices() -> None:
    """Read the price table now (about a third of a second, once per process; blocking: run it in
    a thread), so that the first call's record does not wait for it on the event loop."""
    from genai_prices.data_snapshot import get_snapshot

    get_snapshot()


logger = logging.getLogger("jurist")
_preload_lock = threading.Lock()
_preloading: threading.Thread | None = None


def _prices_loaded() -> bool:
    """Whether the price table is read (or being read): its data module is imported."""
    return sys.modules.get("genai_prices.data") is not None


def _load_quietly() -> None:
    try:
        load_prices()
    except Exception as exc:  # the first priced call reads it again, and its record says why if it fails
        logger.warning("the price table (genai-prices) could not be read ahead of the first call: %s: %s; "
                       "a call's cost reads it again", type(exc).__name__, exc)


def preload_prices() -> threading.Thread | None:
    """Start reading the price table in a daemon thread, unless it is read or being read: a
    runtime starts it when it is built, so the first call's record does not wait for it on the
    event loop. Never blocks and never raises (a failure is logged; a call's cost reads the
    table again). Returns the thread started (None: none was needed)."""
    global _preloading
    with _preload_lock:
        if _prices_loaded() or _preloading is not None:
            return None
        _preloading = threading.Thread(target=_load_quietly, name="jurist-prices", daemon=True)
        thread = _preloading
    try:
        thread.start()
    except RuntimeError as exc:  # no thread can be started (interpreter shutting down): the first call reads it
        logger.debug("the price table is not read ahead: %s", exc)
        return None
    return thread


def _provider(provider_id: str) -> "Provider | None":
    from genai_prices.data_snapshot import find_provider_by_id, get_snapshot

    return find_provider_by_id(get_snapshot().providers, provider_id)


@functools.lru_cache(maxsize=256)
def _provider_at(endpoint: str) -> "Provider | None":
    """The price table's provider whose API ``endpoint`` is (its address pattern), if any."""
    import re

    from genai_prices.data_snapshot import get_snapshot

    return next((p for p in get_snapshot().providers if re.match(p.api_pattern, endpoint)), None)


def _price_table_version() -> str:
    from genai_prices import __version__

    return f"genai-prices {__version__}"


def _price_source(model: str, endpoint: str, prices_from: str | None) -> tuple["Provider | None", str, str | None]:
    """The price table's provider for a call of ``model`` (``provider/name``) at ``endpoint``,
    the model's name, and why it has none (None when it has one). The endpoint's address says
    whose prices apply (the provider whose API it is, whatever the reference calls it), unless
    ``prices_from`` names the provider it charges as."""
    name = model.partition("/")[2] or model
    if prices_from is not None:  # the endpoint is declared to bill at this provider's prices
        declared = _provider(prices_from)
        if declared is None:
            return None, name, f"no provider {prices_from!r} in {_price_table_version()}'s price table"
        return declared, name, None
    provider = _provider_at(endpoint)
    if provider is not None:
        return provider, name, None
    return None, name, f"{endpoint} is not a provider's API that {_price_table_version()} knows (a local server " \
                       "or a custom base_url): what it charges is unknown"


def is_priced(model: str, endpoint: str, *, prices_from: str | None = None) -> Cost:
    """Whether calls of ``model`` at ``endpoint`` get a known cost: ``Cost(0.0, note)`` when they
    do (no tokens yet), ``Cost(None, why)`` when they cannot. What a budget checks up front."""
    free = _free(model)
    return Cost(0.0, free) if free is not None else call_cost(model, endpoint, 1, 0, prices_from=prices_from)


def _free(model: str) -> str | None:
    return FREE_PROVIDERS.get(model.partition("/")[0])


def is_free(model: str) -> bool:
    """Whether ``model``'s provider runs in this process and charges nothing (the offline judge,
    the scripted provider)."""
    return _free(model) is not None


def call_cost(
    model: str,
    endpoint: str,
    input_tokens: int,
    output_tokens: int,
    *,
    cached_input_tokens: int = 0,
    usage_known: bool = True,
    failed: bool = False,
    from_cache: bool = False,
    prices_from: str | None = None,
    at: datetime | None = None,
) -> Cost:
    """What one call of ``model`` (a ``provider/model`` reference) at ``endpoint`` cost for these
    tokens (``cached_input_tokens``: of the input, those the provider read from its prompt
    cache), at the prices in force at ``at`` (default: now). ``prices_from``: a provider of the
    price table whose prices ``endpoint`` charges (a gateway in front of it), which the
    endpoint's address alone would not show. ``from_cache``: answered from jurist's call cache
    (no request). ``failed``: the call got no answer."""
    free = _free(model)
    if free is not None:
        return Cost(0.0, free)
    if from_cache:
        return Cost(0.0, FROM_CACHE)
    if failed:
        return Cost(None, "the call failed before usage was reported: any charge is unknown")
    if not usage_known or input_tokens <= 0:
        return Cost(None, "the endpoint reported no token usage")
    provider, name, why = _price_source(model, endpoint, prices_from)
    if provider is None:
        return Cost(None, _note(why or "no price"))
    from genai_prices import Usage
    from genai_prices.data_snapshot import get_snapshot

    try:
        _, info = get_snapshot().find_provider_model(name, provider, None, None)
    except LookupError:
        return Cost(None, _note(f"{_price_table_version()} has no price for {name} at {provider.name}"))
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                  cache_read_tokens=min(cached_input_tokens, input_tokens) or None)
    try:
        price = info.calc_price(usage, provider, genai_request_timestamp=at or datetime.now(tz=timezone.utc))
    except (ValueError, KeyError, LookupError) as exc:  # a price the table cannot apply to these tokens
        return Cost(None, _note(f"{_price_table_version()} could not price {name}: {exc}"))
    return Cost(float(price.total_price))


def format_usd(usd: float | Decimal | None) -> str:
    """Dollars for people: ``$0.0123``, small amounts with 2 significant digits; None: ``unknown``."""
    if usd is None:
        return "unknown"
    value = float(usd)
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    if value >= 0.01:
        return f"${value:.4f}".rstrip("0").rstrip(".")
    return f"${value:.2g}" if value >= 1e-4 else f"${value:.1e}"


@dataclass
class CostBudget:
    """A run's spending: the known cost of its calls, how many calls had an unknown cost,
    and the limit (``max_usd``; None: no limit, a running total only). ``exceeded`` once the
    recorded cost reaches the limit. Shared by threads and tasks (a lock guards it); the
    callbacks given to :meth:`on_exceeded` run once, in the thread of the call that spent it."""

    max_usd: float | None = None
    spent_usd: float = 0.0
    calls: int = 0
    unknown: int = 0
    unknown_notes: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _callbacks: list[Callable[[], None]] = field(default_factory=list, repr=False, compare=False)
    _fired: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_usd is not None and not (self.max_usd >= 0 and self.max_usd != float("inf")):
            raise InputError(f"--max-cost must be a finite number of dollars, 0 or more; got {self.max_usd!r}")

    @property
    def exceeded(self) -> bool:
        """Whether the recorded cost has reached the limit (never without a limit)."""
        return self.max_usd is not None and self.spent_usd >= self.max_usd

    @property
    def remaining_usd(self) -> float | None:
        return None if self.max_usd is None else max(0.0, self.max_usd - self.spent_usd)

    def add(self, cost: Cost) -> None:
        """Count one call's cost (an unknown one counts as unknown, with its note)."""
        fire: list[Callable[[], None]] = []
        with self._lock:
            self.calls += 1
            if cost.usd is None:
                self.unknown += 1
                note = cost.note or "unknown"
                self.unknown_notes[note] = self.unknown_notes.get(note, 0) + 1
            else:
                self.spent_usd += cost.usd
            if self.exceeded and not self._fired:
                self._fired = True
                fire = list(self._callbacks)
        for callback in fire:
            callback()

    def on_exceeded(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when the budget is reached (at once if it already is)."""
        with self._lock:
            if not self._fired:
                self._callbacks.append(callback)
                return
        callback()

    def check(self, model: str) -> None:
        """Raise :class:`BudgetExceeded` if the budget is spent: no new call of ``model`` starts."""
        if self.exceeded:
            raise BudgetExceeded(
                f"the cost budget of {format_usd(self.max_usd)} is spent ({format_usd(self.spent_usd)} recorded): "
                f"no call to {model} was made; rerun with a larger --max-cost to go on", model=model)

    def summary(self) -> dict[str, float | int | None]:
        """The totals as JSON data: ``cost_usd`` (the known part), ``cost_unknown_calls``, ``max_cost_usd``."""
        with self._lock:
            return {"cost_usd": round(self.spent_usd, 9), "cost_unknown_calls": self.unknown,
                    "max_cost_usd": self.max_usd}


_BUDGET: contextvars.ContextVar[CostBudget | None] = contextvars.ContextVar("jurist_cost_budget", default=None)


@contextmanager
def charged_to(budget: CostBudget | None) -> Iterator[CostBudget | None]:
    """Make ``budget`` the budget of the model calls made in the block, in this task and the
    tasks and threads it starts (None: no budget). ``Model`` charges each call it records to
    it and refuses new calls once it is spent."""
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def active_budget() -> CostBudget | None:
    """The budget the calls made here are charged to (:func:`charged_to`), if any."""
    return _BUDGET.get()


@dataclass(frozen=True)
class RequestEstimate:
    """What one request is expected to cost before it is sent: its input tokens (``counted_by``
    says how: a tokenizer's name, or ``estimate``), at most ``max_output_tokens`` out, and the
    cost at that most (``cost``: an upper bound; unknown with a note when the price is)."""

    model: str
    input_tokens: int
    max_output_tokens: int
    counted_by: str
    cost: Cost

    @property
    def estimated(self) -> bool:
        """Whether the input tokens are an estimate (no tokenizer of the model available offline)."""
        return self.counted_by == "estimate"


_ENCODINGS: dict[str, object | None] = {}


def _offline_encoding(model_name: str) -> tuple[object, str] | None:
    """The model's tiktoken encoding, if tiktoken is installed and the encoding's file is
    already on disk (tiktoken would otherwise download it: never at run time)."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        encoding_name = tiktoken.encoding_name_for_model(model_name)
    except KeyError:
        return None
    if encoding_name in _ENCODINGS:
        enc = _ENCODINGS[encoding_name]
        return None if enc is None else (enc, encoding_name)
    enc = None
    if _encoding_cached(encoding_name):
        try:
            enc = tiktoken.get_encoding(encoding_name)
        except Exception:  # a damaged cache file: count by estimate
            enc = None
    _ENCODINGS[encoding_name] = enc
    return None if enc is None else (enc, encoding_name)


#: Where tiktoken downloads the encodings of OpenAI's models from (it caches each file under the SHA-1
#: of its address); the old ``gpt2`` encoding has other files and is counted by estimate.
TIKTOKEN_FILES = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def _expected_hash(url: str) -> str | None:
    """The SHA-256 tiktoken expects of the file at ``url`` (as its ``tiktoken_ext.openai_public``
    names it), None when it names none."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("tiktoken_ext.openai_public")
    if spec is None or spec.origin is None:
        return None
    with open(spec.origin, encoding="utf-8") as f:
        source = f.read()
    found = re.search(re.escape(f'"{url}"') + r',\s*expected_hash="([0-9a-f]{64})"', source)
    return found.group(1) if found else None


def _encoding_cached(encoding_name: str) -> bool:
    """Whether tiktoken's file for this encoding is in its cache folder, where tiktoken looks
    (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR``, else the temporary folder's
    ``data-gym-cache``), whole (the SHA-256 tiktoken expects): then tiktoken reads it and
    downloads nothing. A missing or damaged file: False (tiktoken would download it)."""
    import hashlib
    import os
    import tempfile

    if encoding_name == "gpt2":
        return False
    url = TIKTOKEN_FILES.format(encoding_name)
    expected = _expected_hash(url)
    folder = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or \
        os.path.join(tempfile.gettempdir(), "data-gym-cache")
    path = os.path.join(folder, hashlib.sha1(url.encode()).hexdigest())
    if expected is None or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest() == expected


def count_tokens(model: str, text: str) -> tuple[int, str]:
    """``text``'s tokens for ``model`` and how they were counted: with the model's tokenizer
    when one is available offline (its name), else ``estimate`` (4 characters a token)."""
    found = _offline_encoding(model.partition("/")[2])
    if found is not None:
        enc, name = found
        return len(enc.encode(text, disallowed_special=())), f"tiktoken {name}"  # type: ignore[attr-defined]
    return max(1, len(text) // 4), "estimate"


#: Tokens a chat message adds around its text (role and separators), as OpenAI counts them.
MESSAGE_OVERHEAD = 4


def estimate_request(request: "ChatRequest", model: str, endpoint: str, *,
                     prices_from: str | None = None) -> RequestEstimate:
    """What ``request`` to ``model`` at ``endpoint`` is expected to cost, before it is sent:
    the input tokens (the model's tokenizer where available offline, else an estimate), up to
    ``request.max_tokens`` out, and the cost at that most (an upper bound)."""
    from jurist.models.base import IMAGE_TOKENS

    counted = [count_tokens(model, m.text) for m in request.messages]
    how = counted[0][1] if counted else "estimate"
    if any(c[1] != how for c in counted):
        how = "estimate"
    tokens = sum(n + MESSAGE_OVERHEAD for n, _ in counted) + IMAGE_TOKENS * len(request.images)
    out = request.max_tokens or 0
    free = _free(model)
    cost = Cost(0.0, free) if free is not None else call_cost(model, endpoint, tokens, out, prices_from=prices_from)
    return RequestEstimate(model=model, input_tokens=tokens, max_output_tokens=out, counted_by=how, cost=cost)


@dataclass
class ExpectedCalls:
    """What a dry run expects to send, per model: calls, input tokens, the most output tokens,
    and the cost at that most. ``from_cache`` calls would be answered from jurist's call cache."""

    model: str
    calls: int = 0
    from_cache: int = 0
    input_tokens: int = 0
    max_output_tokens: int = 0
    cost_usd: float = 0.0  # the known part of the upper bound
    unknown: int = 0  # calls whose price is unknown
    estimated: int = 0  # calls whose input tokens are an estimate (no tokenizer offline)
    notes: set[str] = field(default_factory=set)


@dataclass
class DryRun:
    """The calls a run would make, counted by ``Model`` instead of sent while the run is
    :func:`expecting` it. Shared by threads and tasks (a lock guards it)."""

    models: dict[str, ExpectedCalls] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, estimate: RequestEstimate, *, from_cache: bool = False) -> None:
        with self._lock:
            entry = self.models.setdefault(estimate.model, ExpectedCalls(estimate.model))
            entry.calls += 1
            if from_cache:
                entry.from_cache += 1
                return
            entry.input_tokens += estimate.input_tokens
            entry.max_output_tokens += estimate.max_output_tokens
            entry.estimated += estimate.estimated
            if estimate.cost.usd is None:
                entry.unknown += 1
                entry.notes.add(estimate.cost.note or "unknown")
            else:
                entry.cost_usd += estimate.cost.usd
                if estimate.cost.note:
                    entry.notes.add(estimate.cost.note)

    @property
    def calls(self) -> int:
        return sum(e.calls for e in self.models.values())

    @property
    def cost_usd(self) -> float:
        """The known part of the upper bound on what the calls cost."""
        return sum(e.cost_usd for e in self.models.values())

    @property
    def unknown(self) -> int:
        return sum(e.unknown for e in self.models.values())

    def to_json(self) -> dict[str, object]:
        """The expected calls as JSON data (per model, and the totals)."""
        return {"models": [{"model": e.model, "calls": e.calls, "from_cache": e.from_cache,
                            "input_tokens": e.input_tokens, "max_output_tokens": e.max_output_tokens,
                            "max_cost_usd": round(e.cost_usd, 9), "cost_unknown_calls": e.unknown,
                            "input_tokens_estimated": e.estimated > 0, "notes": sorted(e.notes)}
                           for e in self.models.values()],
                "calls": self.calls, "max_cost_usd": round(self.cost_usd, 9), "cost_unknown_calls": self.unknown}


_DRY_RUN: contextvars.ContextVar[DryRun | None] = contextvars.ContextVar("jurist_dry_run", default=None)


@contextmanager
def expecting(dry: DryRun | None) -> Iterator[DryRun | None]:
    """A dry run of the block: ``Model`` counts each call into ``dry`` (what it would send, its
    tokens and cost, or that the call cache would answer it) and makes none, recording
    nothing: the call fails with :class:`DryRunCall`, which a capability handles as any failed call."""
    token = _DRY_RUN.set(dry)
    try:
        yield dry
    finally:
        _DRY_RUN.reset(token)


def active_dry_run() -> DryRun | None:
    """The dry run the calls made here are counted into (:func:`expecting`), if any."""
    return _DRY_RUN.get()
