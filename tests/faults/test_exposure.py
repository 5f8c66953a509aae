"""Who may use the server: where it listens, host names, the token, Origin, content type, body size.

A Host / Origin / body-size / token matrix against the three ways the app is
served: ``jurist serve``, ``jurist serve --upstream`` and ``jurist proxy``
(``create_app(...)`` as each command builds it, run by uvicorn on 127.0.0.1),
with and without an API token; then the attacks it stops, one by one.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
import typer
from typer.testing import CliRunner
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from jurist.config import Settings
from jurist.judges.templates import builtin
from jurist.models import script
from jurist.server import create_app
from jurist.testing import Reply
from tests.server.conftest import checklist_dir  # noqa: F401  (a fixture)
from tests.server.fakes import FakeFactory, judge_says
from tests.server.live import free_port, running
from tests.server.test_proxy import PASS, use_fake_gate

TOKEN = "t0ken-for-the-tests"
UPSTREAM_KEY = "sk-upstream-configured"
LIMIT = 64 * 1024  # max_body_bytes in these servers
PROXY_LIMIT = 256 * 1024  # max_proxy_body_bytes
KINDS = ("serve", "serve --upstream", "proxy")
ASK = [{"role": "user", "content": "What is the capital of France?"}]
# Each write with a body its route refuses (422): past the guard, nothing is spent or stored.
API_WRITES = [("POST", "/api/evaluate"), ("POST", "/api/evaluation/analyze"), ("PUT", "/api/prompts/rubric_judge"),
              ("POST", "/api/research/evaluate"), ("POST", "/api/research/r1/decision")]
PROXY_WRITE = ("POST", "/v1/chat/completions")
INVALID = b'{"unexpected": true}'
RUBRICS = {"rubrics": [{"id": "a", "name": "A", "scoring_criteria": "x"}]}


@dataclass
class Server:
    kind: str
    base: str
    port: int
    token: str | None
    provider: object
    factory: FakeFactory

    @property
    def writes(self) -> list[tuple[str, str]]:
        return API_WRITES + ([PROXY_WRITE] if self.kind != "serve" else [])

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def build(kind: str, settings: Settings, checklist_dir: Path, provider, factory: FakeFactory):
    """The app as `jurist serve`, `jurist serve --upstream` or `jurist proxy` builds it."""
    if kind == "serve":
        return create_app(settings, checklist_dirs=[checklist_dir], session_factory=factory)
    if kind == "serve --upstream":
        app = create_app(settings, checklist_dirs=[checklist_dir], session_factory=factory, upstream=provider.base_url)
    else:
        app = create_app(settings, upstream=provider.base_url, gate_config={"judge": "scripted/judge"},
                         upstream_api_key=UPSTREAM_KEY, session_factory=factory)
    use_fake_gate(app)
    return app


@pytest.fixture
def served(isolated: Path, checklist_dir: Path, provider) -> Iterator:
    """A function: (kind, token, **settings) -> a running Server (stopped after the test)."""
    stack = []

    def start(kind: str, token: str | None, **more) -> Server:
        factory = FakeFactory()
        settings = Settings(home=str(isolated / ".jurist"), api_token=token, max_body_bytes=LIMIT,
                            max_proxy_body_bytes=PROXY_LIMIT, **more)
        ctx = running(build(kind, settings, checklist_dir, provider, factory))
        base = ctx.__enter__()
        stack.append(ctx)
        return Server(kind, base, int(base.rsplit(":", 1)[1]), token, provider, factory)

    yield start
    for ctx in reversed(stack):
        ctx.__exit__(None, None, None)


def send(server: Server, method: str, path: str, *, host: str | None = None, body: bytes | None = INVALID,
         content_type: str | None = "application/json", headers: dict[str, str] | None = None) -> httpx.Response:
    all_headers = dict(headers or {})
    if host is not None:
        all_headers["Host"] = host
    if content_type is not None:
        all_headers["Content-Type"] = content_type
    return httpx.request(method, server.base + path, content=body, headers=all_headers, timeout=30)


def refused(r: httpx.Response, status: int, words: str) -> None:
    """A refusal: the status, JSON, the message (OpenAI's error shape under /v1/)."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    message = body["error"]["message"] if r.request.url.path.startswith("/v1/") else body["detail"]
    assert words in message, message


def raw(port: int, head: list[str], parts: list[bytes] = (), *, wait: float = 10.0) -> tuple[int, dict, bytes]:
    """Send a request line by line over a socket (the body need not be complete); the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        try:
            for part in parts:
                sock.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        status_head, _, rest = data.partition(b"\r\n\r\n")
        lines = status_head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        while len(rest) < int(headers.get("content-length", 0)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    return int(lines[0].split()[1]), headers, rest


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


# -- where it listens ---------------------------------------------------------------------------


def _command(name: str) -> typer.Typer:
    from jurist.cli import proxy, serve

    app = typer.Typer()
    (serve if name == "serve" else proxy).register(app)
    app.command("version")(lambda: None)
    return app


COMMANDS = [["serve"], ["serve", "--upstream", "http://127.0.0.1:9/v1"],
            ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--api-key", "K"]]


def _on_a_free_port(command: list[str]) -> list[str]:
    """``command`` with a free port: the default one (8000, 8001) may be a real server's."""
    return [*command, "--port", str(free_port())]


@pytest.fixture
def uvicorn_runs(monkeypatch) -> list[dict]:
    """uvicorn.run, recorded instead of run."""
    import uvicorn

    runs: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append({"app": app, **kw}))
    monkeypatch.delenv("JURIST_API_TOKEN", raising=False)
    return runs


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_without_a_token_a_public_address_is_refused_with_the_fix(command, uvicorn_runs):
    """`jurist proxy --host 0.0.0.0 --api-key K` used to serve every interface, no token, no warning."""
    r = CliRunner().invoke(_command(command[0]), [*_on_a_free_port(command), "--host", "0.0.0.0"],
                           env={"COLUMNS": "300"})
    assert r.exit_code == 2 and uvicorn_runs == []
    assert "refusing to listen on 0.0.0.0 without an API token" in r.output
    assert "JURIST_API_TOKEN" in r.output and "127.0.0.1" in r.output  # the two fixes


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_loopback_needs_no_token_and_a_token_opens_any_address(command, uvicorn_runs, monkeypatch):
    runner = CliRunner()
    for host in ("127.0.0.1", "::1", "localhost"):
        assert runner.invoke(_command(command[0]), [*_on_a_free_port(command), "--host", host]).exit_code == 0
    monkeypatch.setenv("JURIST_API_TOKEN", TOKEN)
    r = runner.invoke(_command(command[0]),
                      [*_on_a_free_port(command), "--host", "0.0.0.0", "--allowed-host", "jurist.example"])
    assert r.exit_code == 0, r.output
    run = uvicorn_runs[-1]
    assert run["host"] == "0.0.0.0" and run["ws_max_size"] == Settings().max_body_bytes
    assert "needs the API token" in r.output or "need the API token" in r.output
    settings = run["app"].state.jurist.settings
    assert settings.allowed_hosts == ["jurist.example"]  # 0.0.0.0 is no name anybody sends


def test_the_bound_address_is_an_allowed_host(uvicorn_runs, monkeypatch):
    monkeypatch.setenv("JURIST_API_TOKEN", TOKEN)
    r = CliRunner().invoke(_command("serve"), [*_on_a_free_port(["serve"]), "--host", "10.1.2.3",
                                               "--allowed-host", "a.example", "--allowed-host", "B.Example."])
    assert r.exit_code == 0, r.output
    assert uvicorn_runs[-1]["app"].state.jurist.settings.allowed_hosts == ["a.example", "b.example", "10.1.2.3"]


# -- the matrix: Host ---------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
@pytest.mark.parametrize("kind", KINDS)
def test_host_names(served, kind, token):
    s = served(kind, token)
    for host in (f"127.0.0.1:{s.port}", f"localhost:{s.port}", f"[::1]:{s.port}", "LOCALHOST", "localhost."):
        assert send(s, "GET", "/api/health", host=host, body=None).status_code == 200, host
    for host in (f"evil.example:{s.port}", f"127.0.0.1.evil.example:{s.port}", f"jurist.example:{s.port}"):
        refused(send(s, "GET", "/api/health", host=host, body=None), 400, "--allowed-host")
        refused(send(s, "GET", "/api/calls", host=host, body=None), 400, "does not answer to the host name")
        for method, path in s.writes:
            refused(send(s, method, path, host=host, headers=s.auth()), 400, "--allowed-host")
    if kind != "serve":
        refused(send(s, "GET", "/v1/models", host="evil.example", body=None), 400, "--allowed-host")
    assert s.provider.requests == [] and s.factory.started == {}


@pytest.mark.parametrize("kind", KINDS)
def test_an_added_host_name_and_any_host(served, kind):
    named = served(kind, TOKEN, allowed_hosts=["jurist.example"])
    assert send(named, "GET", "/api/health", host=f"jurist.example:{named.port}", body=None).status_code == 200
    refused(send(named, "GET", "/api/health", host="other.example", body=None), 400, "jurist.example")
    anything = served(kind, TOKEN, allowed_hosts=["*"])  # behind a reverse proxy that checks names itself
    assert send(anything, "GET", "/api/health", host="other.example", body=None).status_code == 200


# -- the matrix: token ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_with_a_token_every_write_needs_it(served, kind):
    s = served(kind, TOKEN)
    for method, path in s.writes:
        refused(send(s, method, path), 401, "API token")
        refused(send(s, method, path, headers={"Authorization": "Bearer wrong"}), 401, "API token")
        refused(send(s, method, path, headers={"Authorization": TOKEN}), 401, "API token")  # not a bearer
        r = send(s, method, path, headers=s.auth())
        assert r.status_code == 422, (path, r.text)  # past the guard: the route read and refused the body
    r = send(s, "POST", "/api/evaluate", headers={})
    assert r.headers["www-authenticate"] == "Bearer"
    assert send(s, "GET", "/api/evaluation/metrics", body=None).status_code == 200  # reads stay open
    assert s.provider.requests == []


@pytest.mark.parametrize("kind", KINDS)
def test_without_a_token_writes_from_this_machine_pass(served, kind):
    s = served(kind, None)
    for method, path in s.writes:
        assert send(s, method, path).status_code == 422, path


# -- the matrix: Origin and Content-Type ---------------------------------------------------------


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
@pytest.mark.parametrize("kind", KINDS)
def test_writes_from_another_origin_are_refused(served, kind, token):
    s = served(kind, token)
    for method, path in s.writes:
        for origin in ("http://evil.example", f"http://localhost:{s.port}", f"http://127.0.0.1:{s.port + 1}",
                       "http://127.0.0.1", "null", "file://", f"chrome-extension://127.0.0.1:{s.port}"):
            refused(send(s, method, path, headers={**s.auth(), "Origin": origin}), 403, "refused")
        for same in (s.base, s.base.replace("http://", "https://")):  # https: TLS may end at a reverse proxy
            r = send(s, method, path, headers={**s.auth(), "Origin": same})
            assert r.status_code == 422, r.text  # a page of this server itself
    assert s.provider.requests == []


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
@pytest.mark.parametrize("kind", KINDS)
def test_writes_must_be_json(served, kind, token):
    s = served(kind, token)
    for method, path in s.writes:
        for content_type, body in (("text/plain", INVALID), ("application/x-www-form-urlencoded", b"a=1"),
                                   ("multipart/form-data; boundary=x", b"--x--"), (None, None), (None, INVALID)):
            r = send(s, method, path, content_type=content_type, body=body, headers=s.auth())
            refused(r, 415, "Content-Type: application/json")
        r = send(s, method, path, content_type="application/json; charset=utf-8", headers=s.auth())
        assert r.status_code == 422
    assert s.provider.requests == []


# -- the matrix: body size --------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
@pytest.mark.parametrize("kind", KINDS)
def test_bodies_over_the_limit_are_413_before_anything_else(served, kind, token):
    s = served(kind, token)
    for method, path in s.writes:
        limit = PROXY_LIMIT if path.startswith("/v1/") else LIMIT
        head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{s.port}", "Content-Type: application/json",
                *(f"{k}: {v}" for k, v in s.auth().items())]
        # announced too large: answered at once, no byte of the body sent
        status, headers, body = raw(s.port, [*head, f"Content-Length: {limit + 1}"])
        assert status == 413 and headers["content-type"] == "application/json"
        assert "larger than this server accepts" in json.dumps(json.loads(body))
        # chunked: cut once past the limit, without waiting for the end of the body
        status, _, _ = raw(s.port, [*head, "Transfer-Encoding: chunked"], [chunk(b" " * 4096)] * (limit // 4096 + 2))
        assert status == 413
        # at the limit: the route gets it (and refuses what it says)
        padded = INVALID[:-1] + b" " * (limit - len(INVALID)) + b"}"
        assert send(s, method, path, body=padded, headers=s.auth()).status_code == 422
    # a GET with a body is bounded too
    status, _, _ = raw(s.port, ["GET /api/health HTTP/1.1", f"Host: 127.0.0.1:{s.port}",
                                f"Content-Length: {LIMIT + 1}"])
    assert status == 413


def test_the_proxy_takes_larger_bodies_than_the_api(served, provider):
    s = served("proxy", TOKEN)
    body = json.dumps({"messages": [], "pad": "x" * (LIMIT * 2)}).encode()
    assert send(s, "POST", "/v1/chat/completions", body=body, headers=s.auth()).status_code == 422
    refused(send(s, "POST", "/api/evaluate", body=body, headers=s.auth()), 413, "larger than")


def test_default_limits():
    settings = Settings()
    assert settings.max_body_bytes == 4 * 1024 * 1024 and settings.max_proxy_body_bytes == 32 * 1024 * 1024


def test_limits_and_hosts_from_the_environment(monkeypatch):
    monkeypatch.setenv("JURIST_MAX_BODY_BYTES", "100000")
    monkeypatch.setenv("JURIST_MAX_PROXY_BODY_BYTES", "200000")
    monkeypatch.setenv("JURIST_ALLOWED_HOSTS", "a.example, b.example")
    settings = Settings.load()
    assert (settings.max_body_bytes, settings.max_proxy_body_bytes) == (100_000, 200_000)
    assert settings.allowed_hosts == ["a.example", "b.example"]


# -- the matrix: the tutor socket -------------------------------------------------------------------


def ws_url(s: Server) -> str:
    return s.base.replace("http://", "ws://") + "/tutor/ws?points=caffeine&learner=ada"


def b64url(text: str) -> str:
    import base64

    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_socket_checks_origin_and_host(served, kind, token):
    s = served(kind, token)
    headers = s.auth()
    for origin in ("http://evil.example", f"http://localhost:{s.port}", "null"):
        with pytest.raises(InvalidStatus) as err:
            connect(ws_url(s), origin=origin, additional_headers=headers, open_timeout=10)
        assert err.value.response.status_code == 403
    rebound = ws_url(s).replace("127.0.0.1", "rebind.evil.example")  # a name that resolves here
    with pytest.raises(InvalidStatus) as err:
        connect(rebound, sock=socket.create_connection(("127.0.0.1", s.port)), additional_headers=headers,
                open_timeout=10)
    assert err.value.response.status_code == 403
    assert s.factory.started == {}  # no session, no model call
    with connect(ws_url(s), origin=s.base, additional_headers=headers, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "session"
    assert len(s.factory.started) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_with_a_token_the_socket_needs_it(served, kind):
    s = served(kind, TOKEN)
    for protocols in (None, ["jurist"], ["jurist", "jurist.bearer." + b64url("wrong")], ["jurist", "jurist.bearer.!!"]):
        with connect(ws_url(s), origin=s.base, subprotocols=protocols, open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10)) == {"type": "error",
                                                       "message": "this server needs the API token (JURIST_API_TOKEN)"}
            with pytest.raises(Exception):
                ws.recv(timeout=10)
            assert ws.close_code == 4401
    assert s.factory.started == {}
    # the header (scripts, other programs), or from a browser, the subprotocol
    with connect(ws_url(s), additional_headers=s.auth(), open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "session"
    with connect(ws_url(s), origin=s.base, subprotocols=["jurist", "jurist.bearer." + b64url(TOKEN)],
                 open_timeout=10) as ws:
        assert ws.subprotocol == "jurist"
        assert json.loads(ws.recv(timeout=10))["type"] == "session"
    assert len(s.factory.started) == 2


# -- the attacks, one by one ---------------------------------------------------------------------------


def test_serve_upstream_token_covers_the_proxy_and_a_stock_client_sends_it(served, provider):
    """On `serve --upstream` the token did not cover /v1/chat/completions."""
    script("judge", default=PASS)
    s = served("serve --upstream", TOKEN)
    provider.script(Reply(text="Paris."))
    r = httpx.post(f"{s.base}/v1/chat/completions", json={"model": "m", "messages": ASK}, timeout=30)
    refused(r, 401, "API token")
    assert r.json()["error"]["type"] == "authentication_error"  # what openai.AuthenticationError reads
    with openai.OpenAI(base_url=f"{s.base}/v1", api_key="sk-somebody", max_retries=0) as c:
        with pytest.raises(openai.AuthenticationError):
            c.chat.completions.create(model="m", messages=ASK)
    assert provider.requests == []  # nothing was spent
    with openai.OpenAI(base_url=f"{s.base}/v1", api_key=TOKEN, max_retries=0) as c:
        assert c.chat.completions.create(model="m", messages=ASK).choices[0].message.content == "Paris."
    assert "authorization" not in provider.requests[0]["headers"] or \
        TOKEN not in provider.requests[0]["headers"]["authorization"]  # the token never goes upstream


def test_proxy_with_a_token_pays_upstream_with_its_own_key(served, provider):
    script("judge", default=PASS)
    s = served("proxy", TOKEN)
    provider.script(Reply(text="Paris."))
    with openai.OpenAI(base_url=f"{s.base}/v1", api_key=TOKEN, max_retries=0) as c:
        assert c.chat.completions.create(model="m", messages=ASK).choices[0].message.content == "Paris."
    assert [r["headers"]["authorization"] for r in provider.requests] == [f"Bearer {UPSTREAM_KEY}"]


def test_proxy_without_a_token_passes_the_callers_key(served, provider):
    script("judge", default=PASS)
    s = served("proxy", None)
    provider.script(Reply(text="Paris."))
    with openai.OpenAI(base_url=f"{s.base}/v1", api_key="sk-caller", max_retries=0) as c:
        c.chat.completions.create(model="m", messages=ASK)
    assert provider.requests[0]["headers"]["authorization"] == "Bearer sk-caller"


def test_a_web_page_cannot_drive_the_tutor(served):
    """Any page a user visited could open the tutor socket of their local server."""
    script("judge", judge_says(["adenosine"]))
    script("tutor", "Yes.")
    s = served("serve", None)
    with pytest.raises(InvalidStatus):
        connect(ws_url(s), origin="https://evil.example", open_timeout=10)
    assert s.factory.started == {}


def test_dns_rebinding_reads_and_writes_nothing(served):
    """A page on a name that resolves to 127.0.0.1 is same-origin to the browser: the Host header tells."""
    s = served("serve", None)
    rebound = f"rebind.evil.example:{s.port}"
    refused(send(s, "GET", "/api/calls", host=rebound, body=None), 400, "host name 'rebind.evil.example'")
    refused(send(s, "GET", "/evaluation", host=rebound, body=None), 400, "--allowed-host")
    evaluate = json.dumps({"rubrics": RUBRICS, "session": [{"role": "user", "content": "hi"}]}).encode()
    refused(send(s, "POST", "/api/evaluate", host=rebound, body=evaluate,
                 headers={"Origin": f"http://{rebound}"}), 400, "--allowed-host")
    assert send(s, "GET", "/api/evaluation/sessions", body=None).json()["total"] == 0


def test_a_cross_site_simple_request_does_not_run_the_analysis(served):
    """`POST /api/evaluation/analyze` with no body is a "simple request" any page can send."""
    s = served("serve", None)
    # what fetch(url, {method: "POST", mode: "no-cors"}) sends from another site
    refused(send(s, "POST", "/api/evaluation/analyze", body=None, content_type=None,
                 headers={"Origin": "https://evil.example"}), 403, "refused")
    # and from a browser that leaves Origin out, or a form
    refused(send(s, "POST", "/api/evaluation/analyze", body=None, content_type=None), 415, "application/json")
    refused(send(s, "POST", "/api/evaluation/analyze", body=b"x=1", content_type="text/plain"), 415, "application/json")
    assert send(s, "GET", "/api/evaluation/patterns", body=None).json()["run"] is None  # it never ran
    # the dashboard's own request: JSON, same origin
    r = send(s, "POST", "/api/evaluation/analyze", body=b'{"kind": "rubric"}', headers={"Origin": s.base})
    assert r.status_code == 200 and r.json()["run"]["status"] == "done"


def test_an_unauthenticated_huge_body_is_answered_before_it_is_read(served):
    """A 400 MB POST without the token was read and parsed before the token was checked."""
    s = served("serve", TOKEN)
    head = ["POST /api/evaluate HTTP/1.1", f"Host: 127.0.0.1:{s.port}", "Content-Type: application/json"]
    start = time.monotonic()
    status, _, _ = raw(s.port, [*head, f"Content-Length: {400 * 1024 * 1024}"], wait=5)
    assert status == 413 and time.monotonic() - start < 5  # nothing of the 400 MB was sent
    status, _, body = raw(s.port, [*head, "Transfer-Encoding: chunked"], [chunk(b"{")], wait=5)
    assert status == 401 and "API token" in json.loads(body)["detail"]  # the body's end never came: not awaited
    # with the token, the chunked body is cut at the limit, its end not awaited either
    status, _, _ = raw(s.port, [*head, "Transfer-Encoding: chunked", f"Authorization: Bearer {TOKEN}"],
                       [chunk(b" " * 8192)] * (LIMIT // 8192 + 1), wait=5)
    assert status == 413


FILTERS = {
    "/api/evaluation/sessions": ["kind", "status", "failure", "subject_id", "pattern", "since", "until",
                                 "min_score", "escalated"],
    "/api/evaluation/metrics": ["failure", "subject_id", "pattern", "since"],
    "/api/calls": ["purpose", "status", "model", "trace_id", "since", "until"],
    "/evaluation": ["failure", "subject_id"],
    "/evaluation/explorer": ["failure", "subject_id", "pattern"],
    "/api/evaluation/patterns": ["run_id"],
    "/api/prompts/rubric_judge/compare": ["key"],
}
PATHS = ["/api/calls/a%00b", "/api/evaluation/sessions/a%00b", "/api/prompts/rubric%00judge",
         "/evaluation/evaluations/a%00b", "/evaluation/research/a%00b", "/evaluation/prompts/a%00b",
         "/tutor?points=caffeine&learner=a%00b"]
PROBES = [f"{path}?{param}=a%00b" for path, params in FILTERS.items() for param in params] + PATHS


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_nul_byte_in_a_parameter_is_a_json_422(backend, tmp_path, checklist_dir):
    """On PostgreSQL a NUL byte in a filter was a plain-text 500 (in a written text, a 500 too)."""
    from tests.conftest import fresh_database

    with fresh_database(backend, tmp_path, "jurist_nul") as url:
        app = create_app(Settings(database_url=url, home=str(tmp_path / ".jurist")), checklist_dirs=[checklist_dir])
        with running(app) as base:
            answers = {probe: httpx.get(base + probe, timeout=30) for probe in PROBES}
            text = builtin("rubric_judge").text
            for name, body in (("prompt text", {"text": text + "\x00"}), ("prompt note", {"text": text, "note": "\x00"}),
                               ("session", {"rubrics": RUBRICS, "session": [{"role": "user", "content": "a\x00"}]})):
                path = "/api/evaluate" if name == "session" else "/api/prompts/rubric_judge"
                answers[name] = httpx.request("POST" if name == "session" else "PUT", base + path, json=body, timeout=30)
    wrong = {probe: (r.status_code, r.headers["content-type"]) for probe, r in answers.items()
             if (r.status_code, r.headers["content-type"]) != (422, "application/json")}
    assert wrong == {}
    assert all("NUL" in r.json()["detail"] for r in answers.values())


def test_an_unexpected_failure_is_a_json_500(tmp_path):
    from fastapi.testclient import TestClient

    app = create_app(Settings(home=str(tmp_path / ".jurist")))

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("internal detail that must not leak")

    @app.get("/v1/boom")
    async def boom_v1() -> None:
        raise RuntimeError("internal detail that must not leak")

    with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as c:
        r = c.get("/boom")
        assert r.status_code == 500 and r.json() == {"detail": "internal error (RuntimeError)"}
        r = c.get("/v1/boom")
        assert r.status_code == 500 and r.json()["error"]["message"] == "internal error (RuntimeError)"
        assert "must not leak" not in r.text
