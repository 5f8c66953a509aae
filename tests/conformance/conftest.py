"""The proxy conformance suite: clients nobody here wrote, each in its real package,
run once DIRECT to an upstream and once THROUGH the gate proxy in front of that same
upstream, and the two results compared.

A cell is one test: ``test_<mode>[<dialect>-<route>]``. The ``direct`` cell checks
that the client works against the upstream at all (the scripted answer comes back);
the ``proxy`` cell runs the same exchange direct and through the proxy and asserts
the same answer text, the same tool calls, the same finish reason, usage when direct
has it, the same error (class, status, ``Retry-After``), and that the upstream
received the same messages. The upstream is the scripted
:class:`~jurist.testing.ProviderServer`, as OpenAI answers (``openai``) and as
llama-cpp-python's server answers (``llama-cpp-python``: tool-call names repeated in
stream pieces, no usage in streams, a 500 for ``response_format: json_schema``); one
server and one proxy per module and dialect. The proxy is the real app
(``create_app(upstream=...)``) with the gate on, judged by a scripted judge that
accepts every answer, so every upstream request seen is the client's own.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.testing import ProviderServer, Reply, tool_call, tool_reply
from tests.server.live import running

JUDGE = "conformance"
#: The gate's judge accepts every answer: no regeneration, so the upstream sees only the client's requests.
ACCEPT = '{"comprehensive": true, "reason": "it answers every part of the question"}'
GATE = {"evaluate_feedback_enabled": True, "judge": f"scripted/{JUDGE}", "evaluator": "comprehensiveness"}
ROUTES = ("direct", "proxy")
DIALECTS = ("openai", "llama-cpp-python")
API_KEY = "sk-conformance"

# What every module scripts: a question, a weather tool, its call and the final answer.
QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
WEATHER_ANSWER = "It is 18C and sunny in Paris."
CALL = tool_call("get_weather", {"city": "Paris"}, "call_w1")
WEATHER_RESULT = "18C, sunny"
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CAPITAL_JSON = '{"country": "France", "capital": "Paris"}'


#: Why a client cannot work DIRECT against llama-cpp-python's server (the proxy may still make it work).
NO_RESPONSES_API = "llama-cpp-python serves no Responses API (404)"
NO_MESSAGES_API = "llama-cpp-python serves no Messages API (404)"
NO_JSON_SCHEMA = "llama-cpp-python refuses response_format json_schema (500)"
REPEATED_NAMES = "llama-cpp-python repeats the tool's name in every stream piece"


@dataclass
class Outcome:
    """What a client made of one exchange, in terms every client can be compared in."""

    text: str | None = None
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, parsed arguments)
    finish: str | None = None  # the client's own vocabulary ("stop", "end_turn", "completed" ...)
    usage: int | None = None  # total tokens as the client reports them; None: none reported
    error: tuple[str, int | None, str | None] | None = None  # (exception class, HTTP status, Retry-After)
    extra: dict[str, Any] = field(default_factory=dict)  # client-specific facts compared as they are
    sent: list[tuple[str, Any]] = field(default_factory=list)  # (path, messages or input) the upstream received
    judged: bool | None = None  # the answer carried the gate's record (the ``jurist`` field); None: not read


@dataclass
class Routes:
    """One upstream and a proxy in front of it."""

    upstream: ProviderServer
    proxy_root: str  # http://127.0.0.1:PORT (no /v1)
    dialect: str
    dead_root: str | None = None  # an address where nothing answers, instead of the upstream's

    @property
    def direct_root(self) -> str:
        return self.dead_root or self.upstream.anthropic_base_url

    @property
    def llama(self) -> bool:
        """The upstream answers as llama-cpp-python's server: chat completions only, its own stream shapes."""
        return self.dialect == "llama-cpp-python"

    def root(self, route: str) -> str:
        return self.direct_root if route == "direct" else self.proxy_root

    def base(self, route: str) -> str:
        """The OpenAI base URL (``.../v1``) of a route."""
        return f"{self.root(route)}/v1"


def gate_app(upstream_url: str, home: Path) -> Any:
    """The proxy app, gate on, judged by the scripted judge, in front of ``upstream_url``."""
    script(JUDGE, default=ACCEPT)
    return create_app(Settings(home=str(home)), upstream=upstream_url, gate_config=GATE)


@contextmanager
def proxy_in_front_of(upstream_url: str, home: Path) -> Iterator[str]:
    with running(gate_app(upstream_url, home)) as base:
        yield base


@pytest.fixture(scope="module", params=DIALECTS)
def routes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routes]:
    """The module's scripted upstream (one per dialect) and the proxy in front of it."""
    with ProviderServer(Reply(text=ANSWER), dialect=request.param) as upstream:
        with proxy_in_front_of(upstream.base_url, tmp_path_factory.mktemp("proxy") / ".jurist") as root:
            yield Routes(upstream, root, request.param)


@pytest.fixture(scope="module")
def down(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routes]:
    """An upstream that is down (its port is held but nothing listens: connections are
    refused) and a proxy in front of it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        root = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with proxy_in_front_of(f"{root}/v1", tmp_path_factory.mktemp("proxy-down") / ".jurist") as proxy:
            yield Routes(ProviderServer(), proxy, "openai", dead_root=root)  # a server never started: no requests


#: A test that runs on the OpenAI-like upstream only (where the dialect changes nothing the test reads:
#: errors are relayed the same way from either).
openai_upstream_only = pytest.mark.parametrize("routes", ["openai"], indirect=True)


@pytest.fixture(params=ROUTES)
def route(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _judge_accepts() -> None:
    """Each test starts with no scripted adapters (tests/conftest.py); the gate's judge is scripted again."""
    script(JUDGE, default=ACCEPT)


Replies = Sequence[Reply | Callable[[dict[str, Any]], Reply]]


def once(routes: Routes, route: str, replies: Replies, run: Callable[[str], Outcome]) -> Outcome:
    """One exchange on ``route``: the upstream forgets what came before, gets ``replies`` queued,
    ``run`` drives the client; the outcome records what the upstream received."""
    routes.upstream.reset()
    routes.upstream.script(*replies)
    outcome = run(route)
    outcome.sent = [(r["path"], _conversation(r["json"])) for r in routes.upstream.requests]
    return outcome


def _conversation(body: Any) -> Any:
    if not isinstance(body, dict):
        return body
    if "messages" in body:
        return {"system": body.get("system"), "messages": body["messages"]} if "system" in body else body["messages"]
    return {"instructions": body.get("instructions"), "input": body.get("input")}


_DIRECT: dict[str, Outcome] = {}  # a direct cell's outcome, for its proxy cell (the same exchange)
_CELL: list[str] = [""]  # the running test's id without its route
_NODE: list[Any] = [None]  # the running test's item: a direct cell that fails as expected says so in the report


@pytest.fixture(autouse=True)
def _cell_id(request: pytest.FixtureRequest) -> None:
    _CELL[0] = "-".join(p for p in request.node.nodeid.replace("[", "-").rstrip("]").split("-") if p not in ROUTES)
    _NODE[0] = request.node


def cell(routes: Routes, route: str, replies: Replies, run: Callable[[str], Outcome],
         check: Callable[[Outcome], None], *, direct_fails: str | None = None, gated: bool = False) -> Outcome:
    """A cell of the matrix. Direct: run, then ``check`` the outcome. Proxy: the direct outcome
    (the direct cell's, when it ran, else run here), then through the proxy; the proxied outcome
    must pass ``check`` and be the direct one (see :func:`same`).

    ``direct_fails`` says why the client cannot work direct against this upstream (it serves
    another API, or answers in a shape the client cannot read): the direct cell then asserts
    that it does fail, and the proxy cell only that the proxy makes it work. ``gated``: the gate
    may ask the upstream again (an answer it does not pass, such as one cut off at the token
    limit), so the proxy's upstream requests need only begin with the client's own."""
    direct = _DIRECT.pop(_CELL[0], None) if route == "proxy" else None
    if direct is None:
        direct = once(routes, "direct", replies, run)
    try:
        check(direct)
        failure = None
    except AssertionError as exc:
        failure = exc
    if route == "direct":
        if direct_fails is None and failure is not None:
            raise failure
        assert direct_fails is None or failure is not None, f"expected to fail direct ({direct_fails}), it worked"
        if direct_fails is not None and _NODE[0] is not None:
            _NODE[0].user_properties.append(("direct_fails", direct_fails))  # in --junitxml's output
        _DIRECT[_CELL[0]] = direct
        return direct
    proxied = once(routes, "proxy", replies, run)
    if failure is None:
        same(direct, proxied, gated=gated)
    try:
        check(proxied)
    except AssertionError as exc:
        also = f" (direct fails too: {failure})" if failure is not None else ""
        raise AssertionError(f"through the proxy: {exc}{also}") from exc
    return proxied


def same(direct: Outcome, proxied: Outcome, *, gated: bool = False) -> None:
    """The proxy is invisible: what the client saw, and what the upstream received, match."""
    assert proxied.error == direct.error, f"error: direct {direct.error}, through the proxy {proxied.error}"
    assert proxied.text == direct.text, f"text: direct {direct.text!r}, through the proxy {proxied.text!r}"
    assert proxied.tool_calls == direct.tool_calls, (
        f"tool calls: direct {direct.tool_calls}, through the proxy {proxied.tool_calls}")
    assert proxied.finish == direct.finish, f"finish: direct {direct.finish!r}, through the proxy {proxied.finish!r}"
    if direct.usage is not None:  # a regenerated answer's usage is its own attempt's (or the attempts')
        assert proxied.usage == direct.usage or (gated and proxied.usage is not None), (
            f"usage: direct {direct.usage}, through the proxy {proxied.usage}")
    assert proxied.extra == direct.extra, f"direct {direct.extra}, through the proxy {proxied.extra}"
    direct_paths = [path for path, _ in direct.sent]
    proxied_paths = [path for path, _ in proxied.sent]
    if gated:  # the gate's own requests (regenerations) follow the client's
        proxied = replace(proxied, sent=proxied.sent[:len(direct.sent)])
    assert len(proxied.sent) == len(direct.sent), (
        f"the upstream got {len(direct.sent)} requests direct {direct_paths}, "
        f"{len(proxied.sent)} through the proxy {proxied_paths}")
    for i, ((path_d, conv_d), (path_p, conv_p)) in enumerate(zip(direct.sent, proxied.sent)):
        if path_d == path_p:  # the same API: the same conversation (a translated request is another shape)
            assert conv_p == conv_d, (f"upstream request {i + 1} ({path_d}): direct it got {json.dumps(conv_d)}, "
                                      f"through the proxy {json.dumps(conv_p)}")


def error_of(exc: BaseException, status: int | None, headers: Any) -> tuple[str, int | None, str | None]:
    """An error as compared: the exception's class, the HTTP status, ``Retry-After``."""
    retry_after = headers.get("retry-after") if headers is not None else None
    return (type(exc).__name__, status, retry_after)


def cache_dir(name: str) -> Path:
    """A folder kept between runs (``~/.cache/jurist-tests/NAME``)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jurist-tests" / name
    base.mkdir(parents=True, exist_ok=True)
    return base


__all__ = ["ANSWER", "API_KEY", "CALL", "CAPITAL_JSON", "QUESTION", "WEATHER_ANSWER", "WEATHER_RESULT",
           "WEATHER_SCHEMA", "Outcome", "Routes", "cell", "error_of", "tool_reply"]
