"""The scripted provider server, spoken to with the standard library's http.client."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from jurist.testing import ProviderServer, Reply

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as srv:
        yield srv


def post(
    server: ProviderServer, path: str, payload: Any, conn: http.client.HTTPConnection | None = None
) -> tuple[int, dict[str, str], bytes]:
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(payload), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        if own:
            conn.close()


CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "claude-test", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def sse_data(body: bytes) -> list[str]:
    return [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]


def test_urls_are_loopback_with_a_random_port(server: ProviderServer) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.anthropic_base_url == f"http://127.0.0.1:{server.port}"
    with ProviderServer() as other:
        assert other.port != server.port


def test_openai_json_reply(server: ProviderServer) -> None:
    server.script(Reply(text="hi there", input_tokens=3, output_tokens=2, finish_reason="length"))
    status, headers, body = post(server, "/v1/chat/completions", CHAT)
    data = json.loads(body)
    assert status == 200 and headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    assert data["object"] == "chat.completion" and data["model"] == "gpt-test"
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "hi there"}
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_anthropic_json_reply(server: ProviderServer) -> None:
    server.script(Reply(text="hi there", input_tokens=3, output_tokens=2))
    status, _, body = post(server, "/v1/messages", MESSAGES)
    data = json.loads(body)
    assert status == 200 and data["type"] == "message" and data["role"] == "assistant"
    assert data["content"] == [{"type": "text", "text": "hi there"}]
    assert data["stop_reason"] == "end_turn"
    assert data["usage"] == {"input_tokens": 3, "output_tokens": 2}


def test_default_reply_is_a_verdict(server: ProviderServer) -> None:
    _, _, body = post(server, "/v1/chat/completions", CHAT)
    assert json.loads(json.loads(body)["choices"][0]["message"]["content"]) == {"score": 4, "reasoning": "ok"}


def test_openai_stream(server: ProviderServer) -> None:
    server.script(Reply(text="one two three", input_tokens=4, output_tokens=3))
    status, headers, body = post(
        server, "/v1/chat/completions", {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert status == 200 and headers["content-type"] == "text/event-stream"
    data = sse_data(body)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "one two three"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 7


def test_anthropic_stream_event_sequence(server: ProviderServer) -> None:
    server.script(Reply(text="one two", output_tokens=2))
    _, headers, body = post(server, "/v1/messages", {**MESSAGES, "stream": True})
    assert headers["content-type"] == "text/event-stream"
    events = [line[7:] for line in body.decode().splitlines() if line.startswith("event: ")]
    payloads = [json.loads(d) for d in sse_data(body)]
    assert [e for e in events if e != "ping"] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip
    assert [p["type"] for p in payloads] == events
    text = "".join(p["delta"]["text"] for p in payloads if p["type"] == "content_block_delta")
    assert text == "one two"
    delta = next(p for p in payloads if p["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] == 2


def test_error_bodies_follow_each_provider(server: ProviderServer) -> None:
    server.script(Reply(status=429, headers={"Retry-After": "1"}), Reply(status=529))
    status, headers, body = post(server, "/v1/chat/completions", CHAT)
    assert status == 429 and headers["retry-after"] == "1"
    err = json.loads(body)["error"]
    assert err["type"] == "rate_limit_error" and err["message"]
    status, _, body = post(server, "/v1/messages", MESSAGES)
    data = json.loads(body)
    assert status == 529 and data["type"] == "error"
    assert data["error"]["type"] == "overloaded_error" and data["error"]["message"]


def test_raw_body_overrides_everything(server: ProviderServer) -> None:
    server.script(Reply(body='{"choices": [', status=200, text="ignored"))
    status, headers, body = post(server, "/v1/chat/completions", CHAT)
    assert status == 200 and body == b'{"choices": [' and headers["content-length"] == "13"


def test_script_queue_then_default(server: ProviderServer) -> None:
    server.default = Reply(text="default")
    server.script(Reply(text="first"), lambda req: Reply(text=f"echo {req['model']}"))
    texts = [
        json.loads(post(server, "/v1/chat/completions", CHAT)[2])["choices"][0]["message"]["content"]
        for _ in range(4)
    ]
    assert texts == ["first", "echo gpt-test", "default", "default"]


def test_requests_are_recorded_in_arrival_order(server: ProviderServer) -> None:
    post(server, "/v1/chat/completions", CHAT)
    post(server, "/v1/messages", MESSAGES)
    first, second = server.requests
    assert [first["path"], second["path"]] == ["/v1/chat/completions", "/v1/messages"]
    assert first["json"] == CHAT and first["headers"]["content-type"] == "application/json"
    assert first["started"] <= first["finished"] <= second["started"] <= second["finished"]


def test_keep_alive_serves_several_requests_on_one_connection(server: ProviderServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for _ in range(3):
            status, headers, _ = post(server, "/v1/chat/completions", CHAT, conn)
            assert status == 200 and headers.get("connection", "keep-alive") != "close"
        sock = conn.sock
        post(server, "/v1/messages", {**MESSAGES, "stream": True}, conn)
        assert conn.sock is sock  # the same socket throughout
    finally:
        conn.close()


def test_peak_in_flight_counts_concurrent_requests(server: ProviderServer) -> None:
    server.default = Reply(delay=2.0)  # long enough that all five overlap even when threads start late on a busy machine
    threads = [threading.Thread(target=post, args=(server, "/v1/chat/completions", CHAT)) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert server.peak_in_flight == 5 and server.in_flight == 0
    post(server, "/v1/chat/completions", CHAT)
    assert server.peak_in_flight == 5
    server.reset()
    assert (server.peak_in_flight, server.requests) == (0, [])


def test_reset_clears_the_queue(server: ProviderServer) -> None:
    server.script(Reply(text="queued"))
    server.reset()
    _, _, body = post(server, "/v1/chat/completions", CHAT)
    assert json.loads(body)["choices"][0]["message"]["content"] != "queued"


def test_delay(server: ProviderServer) -> None:
    server.script(Reply(delay=0.25))
    started = time.monotonic()
    post(server, "/v1/chat/completions", CHAT)
    assert time.monotonic() - started >= 0.25


def test_drop_closes_without_a_response(server: ProviderServer) -> None:
    server.script(Reply(drop=True))
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        post(server, "/v1/chat/completions", CHAT)
    assert post(server, "/v1/chat/completions", CHAT)[0] == 200  # the server carries on


def test_a_hang_does_not_keep_the_server_from_stopping() -> None:
    srv = ProviderServer(Reply(hang=True)).start()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            post(srv, "/v1/chat/completions", CHAT)
        except BaseException as exc:  # noqa: BLE001 - the client must see the connection end
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 5
    while srv.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.in_flight == 1
    started = time.monotonic()
    srv.stop()
    caller.join(timeout=5)
    assert time.monotonic() - started < 2 and not caller.is_alive()
    assert len(errors) == 1


def test_idle_keep_alive_connections_do_not_block_stop() -> None:
    srv = ProviderServer().start()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    post(srv, "/v1/chat/completions", CHAT, conn)
    started = time.monotonic()
    srv.stop()
    conn.close()
    assert time.monotonic() - started < 2


def test_unknown_route_and_bad_json(server: ProviderServer) -> None:
    server.script(Reply(text="kept for a real request"))
    status, _, body = post(server, "/v1/embeddings", {"input": "x"})
    assert status == 404 and "error" in json.loads(body)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", "/v1/messages", body=b"{oops", headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 400 and data["type"] == "error"
    assert server.requests[-1]["json"] is None
    _, _, body = post(server, "/v1/chat/completions", CHAT)
    assert json.loads(body)["choices"][0]["message"]["content"] == "kept for a real request"


def test_servers_do_not_share_their_default_reply() -> None:
    with ProviderServer() as one, ProviderServer() as two:
        assert isinstance(one.default, Reply) and isinstance(two.default, Reply)
        one.default.text = "changed"
        assert two.default.text != "changed"


def test_a_failing_responder_answers_500(server: ProviderServer) -> None:
    server.script(lambda req: 1 / 0)  # type: ignore[arg-type, return-value]
    status, _, body = post(server, "/v1/chat/completions", CHAT)
    assert status == 500 and "ZeroDivisionError" in json.loads(body)["error"]["message"]


def test_command_line_server_with_latency() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "jurist.testing.provider_server", "--port", "0", "--latency", "0.2"],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": ""},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        started = time.monotonic()
        conn.request("POST", "/v1/chat/completions", body=json.dumps(CHAT), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        assert resp.status == 200 and time.monotonic() - started >= 0.2
    finally:
        proc.kill()
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
