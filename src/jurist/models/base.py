"""Request and completion types, and the protocol every model adapter follows.

Adapters are thin: they turn a :class:`ChatRequest` into one provider call and
the reply into a :class:`Completion`, mapping the SDK's errors onto
:mod:`jurist.errors` in one place. They never retry, rate-limit, cache or log;
:class:`jurist.models.model.Model` does all of that around any adapter.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, AsyncIterator, Literal, Mapping, Protocol, TypedDict, Union, runtime_checkable

from pydantic import BaseModel, ConfigDict, JsonValue, PrivateAttr

from jurist.models.images import Image
from jurist.models.messages import BaseMessage, Message, messages_from_openai

Role = Literal["system", "user", "assistant", "tool"]

#: The alternatives per token a logprobs request asks for: OpenAI's maximum, vLLM's default limit.
TOP_LOGPROBS = 20
#: What an image counts for in a request's token estimate (OpenAI bills a detailed 1024x1024
#: image 765 tokens, Anthropic about 1,600 at most; the estimate only feeds tokens-per-minute limits).
IMAGE_TOKENS = 1_000


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request, independent of the provider. ``messages`` are typed
    (:data:`~jurist.models.messages.Message`); OpenAI-style dicts given instead are read
    strictly (:func:`~jurist.models.messages.messages_from_openai`: an InputError names a bad
    one; a tool turn without a call id is a transcript's tool output, sent as user text
    ``[tool result] ...``), and a list is kept as a tuple."""

    messages: tuple[Message, ...]
    temperature: float | None = 0.0
    max_tokens: int | None = 1024
    seed: int | None = None
    # JSON schema the reply must follow; adapters use the provider's
    # structured-output mode where it has one and otherwise leave the prompt
    # (which already asks for JSON) to do the work.
    response_schema: dict[str, Any] | None = None
    schema_name: str = "verdict"
    # More body fields, sent to the endpoint as they are (an OpenAI-compatible
    # proxy forwards its caller's: tools, stop, top_p ...). Recorded with the params.
    extra_body: dict[str, JsonValue] | None = None
    # The caller's own key for this one request (a proxy passes its client's
    # through), instead of the adapter's: never recorded, not in the cache key.
    api_key: str | None = field(default=None, repr=False, compare=False)
    # Ask for the log probabilities of each reply token and of this many
    # alternatives at each position (``logprobs`` / ``top_logprobs``), where the
    # endpoint gives them. A reply from the call cache has none, so such a
    # request is never answered from it.
    top_logprobs: int | None = None
    # Which of several samples of the same request this is (``jurist probe --samples``):
    # in the cache key and the record, never sent. None: the one request, as always.
    sample: int | None = None
    # Images for a vision model, sent after the text of the first user message, each after a
    # text part naming it ``[image i]`` (i from 1): the OpenAI adapter as image_url parts, the
    # Anthropic one as image blocks. Recorded as descriptions (media type, bytes, SHA-256), never
    # the bytes; their hashes are in the cache key. Empty: a text request, as always.
    images: tuple[Image, ...] = ()
    # The messages exactly as a proxy's client sent them (OpenAI wire dicts, every field kept),
    # sent instead of ``messages``' wire form; ``messages`` stay the typed view (the record's).
    wire_messages: tuple[dict[str, JsonValue], ...] | None = field(default=None, repr=False)
    # json_schema's ``strict``, where the schema goes out in that mode.
    schema_strict: bool = False

    def __post_init__(self) -> None:
        messages = self.messages
        if not all(isinstance(m, BaseMessage) for m in messages):
            messages = messages_from_openai(messages, tool_text=True)  # OpenAI-style dicts, read strictly
        if not isinstance(messages, tuple):
            messages = tuple(messages)
        if messages is not self.messages:
            object.__setattr__(self, "messages", messages)

    def params(self) -> dict[str, JsonValue]:
        """Sampling parameters, as recorded with each call."""
        out: dict[str, JsonValue] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.seed is not None:
            out["seed"] = self.seed
        if self.response_schema is not None:
            out["response_schema"] = self.schema_name
        if self.top_logprobs:
            out["logprobs"] = True
            out["top_logprobs"] = self.top_logprobs
        if self.sample is not None:
            out["sample"] = self.sample
        if self.extra_body:
            out.update(self.extra_body)
        if self.images:
            out["images"] = [dict(image.describe()) for image in self.images]
        return out

    @functools.cached_property
    def messages_json(self) -> str:
        """The messages as JSON text (their OpenAI wire dicts, keys sorted; ``wire_messages`` as
        they are, when given), made once: the cache key and an adapter's request body both use it
        (a prompt is the bulk of both)."""
        if self.wire_messages is not None:  # as the client sent them, keys in their order
            return json.dumps(list(self.wire_messages), ensure_ascii=False)
        return json.dumps([m.openai() for m in self.messages], sort_keys=True, ensure_ascii=False)

    def cache_key(self, model: str, endpoint: str) -> str:
        """Stable hash of everything that determines the answer: the SHA-256 of
        ``json.dumps({endpoint, model, messages, temperature, max_tokens, seed, schema},
        sort_keys=True, ensure_ascii=False)``, with the messages' text reused
        (``extra_body`` after ``endpoint``, in key order, when there is one; ``sample`` in its
        place in key order when there is one, so samples of one request are
        distinct calls, each answered from the cache on a rerun; ``images``, the images'
        SHA-256 hashes in order, after ``extra_body`` when there are images).
        ``model`` is the ``provider/model`` reference and ``endpoint`` the server's base URL:
        a reply cached from one endpoint never answers for another."""
        fields: tuple[tuple[str, Any], ...] = (
            ("max_tokens", self.max_tokens), ("messages", None), ("model", model),
            ("schema", self.response_schema), ("seed", self.seed), ("temperature", self.temperature))
        if self.images:
            fields = (("images", [image.sha256 for image in self.images]), *fields)
        if self.extra_body:
            fields = (("extra_body", self.extra_body), *fields)
        if self.sample is not None:
            fields = (*fields[:-3], ("sample", self.sample), *fields[-3:])  # before schema, seed, temperature
        fields = (("endpoint", endpoint), *fields)
        blob = "{" + ", ".join(
            f'"{name}": ' + (self.messages_json if name == "messages" else
                             json.dumps(value, sort_keys=True, ensure_ascii=False))
            for name, value in fields) + "}"
        return hashlib.sha256(blob.encode()).hexdigest()

    def estimated_tokens(self) -> int:
        """Rough token estimate for tokens-per-minute limits (4 chars a token, an image
        :data:`IMAGE_TOKENS`)."""
        chars = sum(len(m.text) for m in self.messages)
        return chars // 4 + (self.max_tokens or 0) + IMAGE_TOKENS * len(self.images)


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One token of a reply with its log probability; ``top`` holds the most likely
    tokens at its position (``(token, logprob)``, as the endpoint ranked them)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


def holds_digit(token: str) -> bool:
    """Whether a token can be (part of) a number, the only place a score's alternatives are needed."""
    return any(ch.isdigit() for ch in token)


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """One piece of a streamed tool call, as an OpenAI-compatible endpoint sent it
    (an entry of ``choices[0].delta.tool_calls``): the first piece of a call has its
    ``id``, ``type`` and function ``name``, the others more of its ``arguments``;
    ``index`` says which call of the answer a piece belongs to."""

    index: int
    id: str | None = None
    type: str | None = None
    name: str | None = None
    arguments: str | None = None

    @classmethod
    def from_openai(cls, entry: Mapping[str, object], position: int = 0) -> "ToolCallDelta":
        """A piece from the JSON the endpoint sent (``position``: its place in the chunk, the index
        of a piece that gives none); a field that is not a string is left out."""
        function = entry.get("function")
        fn: Mapping[str, object] = function if isinstance(function, Mapping) else {}
        index = entry.get("index")
        return cls(index=index if isinstance(index, int) and not isinstance(index, bool) else position,
                   id=_text(entry.get("id")), type=_text(entry.get("type")),
                   name=_text(fn.get("name")), arguments=_text(fn.get("arguments")))

    def openai(self) -> dict[str, JsonValue]:
        """The piece in OpenAI's delta form again (only the fields it carries)."""
        out: dict[str, JsonValue] = {"index": self.index}
        if self.id is not None:
            out["id"] = self.id
        if self.type is not None:
            out["type"] = self.type
        function: dict[str, JsonValue] = {
            k: v for k, v in (("name", self.name), ("arguments", self.arguments)) if v is not None}
        if function:
            out["function"] = function
        return out


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


#: What a stream yields: text deltas, and the pieces of tool calls where the reply calls tools.
StreamItem = Union[str, ToolCallDelta]


class ToolCallFunction(TypedDict):
    """The function a tool call calls: its name and its arguments (JSON text)."""

    name: str
    arguments: str


class _Assembling:
    """One tool call being assembled: its pieces of name and arguments, joined once at the end."""

    __slots__ = ("id", "type", "name", "name_len", "arguments")

    def __init__(self) -> None:
        self.id: str | None = None
        self.type = "function"
        self.name: list[str] = []
        self.name_len = 0
        self.arguments: list[str] = []

    def add_name(self, piece: str) -> bool:
        """Add a piece of the name; False (nothing added) when the piece repeats the whole name so
        far, as servers that send the full name in every delta do (llama-cpp-python)."""
        if self.name_len and len(piece) == self.name_len and piece == "".join(self.name):
            return False
        self.name.append(piece)
        self.name_len += len(piece)
        return True


class ToolCallAssembly:
    """The tool calls of one answer assembled from its streamed pieces, as OpenAI's SDK does: one
    call per ``index`` (in index order), its ``id`` and ``type`` from the pieces that carry them,
    its arguments the pieces joined; its name too, except that a piece repeating the whole name so
    far is not appended (a server that repeats the name in every delta is normalised). Linear in
    the pieces: the parts are joined once, in :meth:`calls`."""

    def __init__(self) -> None:
        self._calls: dict[int, _Assembling] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(self, piece: ToolCallDelta) -> ToolCallDelta:
        """Merge one piece; return it as it is to be relayed (without a name that only repeats the name)."""
        call = self._calls.get(piece.index)
        if call is None:
            call = self._calls[piece.index] = _Assembling()
        if piece.id:
            call.id = piece.id
        if piece.type:
            call.type = piece.type
        if piece.name and not call.add_name(piece.name):
            piece = ToolCallDelta(index=piece.index, id=piece.id, type=piece.type, name=None,
                                  arguments=piece.arguments)
        if piece.arguments:
            call.arguments.append(piece.arguments)
        return piece

    def calls(self) -> list[dict[str, JsonValue]]:
        """The calls as a message's ``tool_calls`` (``{"id", "type", "function": {"name", "arguments"}}``)."""
        return [{"id": c.id, "type": c.type, "function": {"name": "".join(c.name), "arguments": "".join(c.arguments)}}
                for _, c in sorted(self._calls.items())]


#: Response headers never kept (credentials, cookies) and the bounds on the ones that are.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key",
                            "api-key", "openai-organization", "openai-project"})
MAX_HEADERS, MAX_HEADER_CHARS = 40, 512


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """An answer's HTTP headers as recorded: names lower-cased, secrets left out (any name with
    ``key``, ``token``, ``secret`` or ``auth`` in it too), at most :data:`MAX_HEADERS`, each value
    cut to :data:`MAX_HEADER_CHARS` characters."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        low = name.lower()
        if low in SECRET_HEADERS or any(word in low for word in ("key", "token", "secret", "auth", "cookie")):
            continue
        out[low] = value if len(value) <= MAX_HEADER_CHARS else value[:MAX_HEADER_CHARS] + "…"
        if len(out) >= MAX_HEADERS:
            break
    return out


@dataclass
class ReplyMeta:
    """What an endpoint's answer carried besides its text and tokens.

    ``http_status`` and ``http_headers`` (:func:`kept_headers`); ``finish_reason`` as the endpoint
    sent it; ``fields``: the reply's own fields jurist does not read, as sent, for a proxy to pass
    on (``system_fingerprint``, the choice's ``logprobs``, the message's ``refusal``, ``usage``)."""

    http_status: int | None = None
    http_headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Completion:
    """A model's reply, plus what the Model wrapper learned while getting it."""

    text: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    # The reply's tokens when the request asked for logprobs and the endpoint
    # gave them (None otherwise). Bounded: alternatives are kept only at tokens
    # that hold a digit, where a score can be (see :func:`holds_digit`).
    logprobs: list[TokenLogprob] | None = None
    # The tool calls of an answer that calls tools (OpenAI's message form:
    # ``{"id", "type", "function": {"name", "arguments"}}``), else None.
    tool_calls: list[dict[str, JsonValue]] | None = None
    # How the request's schema went out (a mode of jurist.models.structured), when it had one.
    structured_output: str | None = None
    # False when a stream ended without the usage it asked for (some servers never send it).
    usage_reported: bool = True
    # What the endpoint said besides the text, for a proxy to pass on and for the record: the
    # HTTP status and headers of its answer, and the reply's fields jurist does not read itself.
    reply: ReplyMeta | None = None
    # Filled in by the Model wrapper:
    latency_ms: float = 0.0
    attempts: int = 1
    cached: bool = False
    call_id: str | None = None
    parsed: Any = None
    parse_error: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    """What every adapter provides. ``name`` is the ``provider/model`` reference;
    ``endpoint`` identifies the server it talks to (the limiter's key)."""

    name: str
    endpoint: str

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        ...

    def stream(self, request: ChatRequest, *, timeout: float | None = None,
               into: Completion | None = None) -> AsyncIterator[StreamItem]:
        """The reply's text deltas (and :class:`ToolCallDelta` pieces, where the
        reply calls tools); ``into``, when given, gets the tokens, finish reason
        and assembled tool calls the endpoint reports as the stream ends."""
        ...

    async def aclose(self) -> None:
        ...


#: A call's status, one vocabulary: ``ok``; ``error``, the call failed (no answer: the endpoint's
#: error, a timeout, a cancelled or broken stream); ``parse_error``, the reply came but could not be read.
CallStatus = Literal["ok", "error", "parse_error"]
#: The statuses of a failed call, whatever the kind of failure.
FAILED_CALL_STATUSES: frozenset[CallStatus] = frozenset({"error", "parse_error"})


class CallRecord(BaseModel):
    """One LLM call as stored in ``llm_calls``. ``usage_known`` is False when the endpoint
    reported no token usage (a stream from a server that sends none): the tokens are then
    unknown, not 0."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    trace_id: str | None
    purpose: str
    model: str
    endpoint: str
    messages: tuple[Message, ...]
    params: dict[str, Any]
    request_hash: str
    response_text: str | None
    input_tokens: int
    output_tokens: int
    latency_ms: float
    attempts: int
    status: CallStatus
    error: str | None = None
    cached: bool = False
    template_name: str | None = None
    template_hash: str | None = None
    parsed: Any = None
    created_at: datetime | None = None
    usage_known: bool = True
    #: US dollars from the provider's published prices; None when unknown, ``cost_note`` says why.
    cost_usd: float | None = None
    cost_note: str | None = None
    # What the endpoint's answer carried besides its text (HTTP status, headers, finish reason):
    # passed to the gate's call entries, not a column of ``llm_calls`` (``with_reply``).
    _reply: ReplyMeta | None = PrivateAttr(default=None)

    @property
    def reply(self) -> ReplyMeta | None:
        return self._reply

    def with_reply(self, reply: ReplyMeta | None) -> "CallRecord":
        """This record, with what the endpoint's answer carried (:class:`ReplyMeta`)."""
        self._reply = reply
        return self

    @property
    def failed(self) -> bool:
        """Whether the call failed, whatever the kind of failure (:data:`FAILED_CALL_STATUSES`)."""
        return self.status in FAILED_CALL_STATUSES


# --- Meaning questions -------------------------------------------------------
# The questions where matching meaning is the right tool. Both the offline
# embedding judge (models/local.py) and the LLM judges (judges/meaning.py)
# answer them with these types, so a capability does not care which it has.


@dataclass
class StatementCheck:
    """Does a text express a statement (a checklist point, a rubric item, a fact)?"""

    statement: str
    expressed: bool
    confidence: float  # 0..1
    judge_model: str
    evidence: str | None = None  # the passage of the text that matched best


@dataclass(frozen=True)
class DecidedChecks:
    """What an undecided ``expresses`` did decide (``Uncertain.decided``): the checks of the
    statements outside the band, in the order asked."""

    checks: tuple[StatementCheck, ...]


@dataclass
class CoverageResult:
    """Which parts of a question an answer covers."""

    covered: list[str]
    uncovered: list[str]
    confidence: dict[str, float]
    judge_model: str


@dataclass(frozen=True)
class ScoreRange:
    """Where a score lies when some of its parts are undecided: ``low`` counts them all against,
    ``high`` all for. A verdict stands when the whole range lies on one side of the threshold."""

    low: float
    high: float

    def verdict(self, threshold: float) -> bool | None:
        """True when the score passes ``threshold`` whichever way the undecided parts go, False
        when it fails either way, None when they could turn it."""
        if self.low < threshold <= self.high:
            return None
        return self.low >= threshold

    def deciding_end(self, passed: bool) -> float:
        """The end of the range that bounds a verdict: at least ``low`` for a pass, at most ``high``
        for a fail."""
        return self.low if passed else self.high

    def describe(self, what: str, threshold: float) -> str:
        passed = self.low >= threshold
        return (f"{what} lies between {self.low:.4g} and {self.high:.4g} and {'passes' if passed else 'fails'} "
                f"the threshold {threshold:g} either way")


@dataclass
class RelevanceScore:
    """How relevant a passage is to a query, 0..1."""

    passage: str
    score: float
    judge_model: str


@dataclass
class SupportResult:
    """Which sentences of an answer are supported by the sources."""

    supported: list[str]
    unsupported: list[str]
    confidence: dict[str, float]
    judge_model: str


@runtime_checkable
class MeaningJudge(Protocol):
    name: str

    async def expresses(self, text: str, statements: list[str]) -> list[StatementCheck]:
        ...

    async def coverage(self, question: str, answer: str, parts: list[str] | None = None) -> CoverageResult:
        ...

    async def relevance(self, query: str, passages: list[str]) -> list[RelevanceScore]:
        ...

    async def support(self, answer: str, sources: list[str]) -> SupportResult:
        ...
