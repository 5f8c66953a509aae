"""The Vercel AI SDK in node (`ai` with `@ai-sdk/openai`), direct and through the proxy:
`generateText`, `streamText`, and a tool with steps, on the chat-completions model
(``openai.chat(...)``) and on the Responses model (``openai.responses(...)``, what
``openai(model)`` means by default).

The packages are installed with npm at test time into ``~/.cache/jurist-tests/vercel-ai``
(kept between runs; reinstalled when the versions below change)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jurist.testing import Reply
from tests.conformance.conftest import (ANSWER, CALL, NO_RESPONSES_API, QUESTION, WEATHER_ANSWER, WEATHER_RESULT,
                                        Outcome, Routes, cache_dir, cell, openai_upstream_only, tool_reply)

PACKAGES = {"ai": "^6.0.0", "@ai-sdk/openai": "^3.0.0", "zod": "^4.0.0"}
CLIENT = Path(__file__).with_name("vercel_client.mjs")


@pytest.fixture(scope="module")
def node_client() -> Path:
    """The client script in a folder with the packages installed; its path."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        why = f"{' and '.join(missing)} not installed (node 20 or later)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    folder = cache_dir("vercel-ai")
    manifest = json.dumps({"name": "jurist-conformance", "private": True, "type": "module",
                           "dependencies": PACKAGES}, indent=2)
    stamp = folder / ".installed"
    with open(folder / ".lock", "w") as lock:  # another test session on this machine may be installing
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.is_file() or stamp.read_text() != manifest:
            (folder / "package.json").write_text(manifest)
            done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"npm install failed:\n{done.stdout}\n{done.stderr}"
            stamp.write_text(manifest)
        script = folder / CLIENT.name
        shutil.copyfile(CLIENT, script)
    return script


def vercel(node_client: Path, routes: Routes, route: str, api: str, mode: str, prompt: str) -> Outcome:
    spec = {"baseURL": routes.base(route), "api": api, "mode": mode, "prompt": prompt}
    done = subprocess.run(["node", str(node_client), json.dumps(spec)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip(), f"node failed:\n{done.stdout}\n{done.stderr}"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if out.get("error"):
        return Outcome(error=tuple(out["error"]))
    return Outcome(text=out["text"], tool_calls=[tuple(c) for c in out["toolCalls"]], finish=out["finishReason"],
                   usage=out["usage"], extra={"tool results": out["toolResults"], "steps": out["steps"]})


def answered(text: str) -> Any:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert (out.text, out.finish, out.tool_calls) == (text, "stop", [])
    return check


APIS = ["chat", "responses"]


@pytest.mark.parametrize("api", APIS)
def test_generate_text(node_client: Path, routes: Routes, route: str, api: str) -> None:
    cell(routes, route, [Reply(text=ANSWER)], lambda r: vercel(node_client, routes, r, api, "generate", QUESTION),
         answered(ANSWER),
         direct_fails=NO_RESPONSES_API if routes.llama and api == "responses" else None)


@pytest.mark.parametrize("api", APIS)
def test_stream_text(node_client: Path, routes: Routes, route: str, api: str) -> None:
    cell(routes, route, [Reply(text=ANSWER)], lambda r: vercel(node_client, routes, r, api, "stream", QUESTION),
         answered(ANSWER),
         direct_fails=NO_RESPONSES_API if routes.llama and api == "responses" else None)


@pytest.mark.parametrize("api", APIS)
def test_tool_with_steps(node_client: Path, routes: Routes, route: str, api: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert out.tool_calls == [("get_weather", {"city": "Paris"})], out.tool_calls
        assert out.extra == {"tool results": [WEATHER_RESULT], "steps": 2}
        assert (out.text, out.finish) == (WEATHER_ANSWER, "stop")

    cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)],
         lambda r: vercel(node_client, routes, r, api, "tool", "Weather in Paris?"), check,
         direct_fails=NO_RESPONSES_API if routes.llama and api == "responses" else None)


@openai_upstream_only
@pytest.mark.parametrize("api", APIS)
def test_error_429_with_retry_after(node_client: Path, routes: Routes, route: str, api: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error == ("AI_APICallError", 429, "7"), out.error

    cell(routes, route, [Reply(status=429, headers={"Retry-After": "7"})],
         lambda r: vercel(node_client, routes, r, api, "generate", QUESTION), check,
         direct_fails=NO_RESPONSES_API if routes.llama and api == "responses" else None)
