"""The chat page (/chat on `jurist serve --upstream`) in a real headless browser: Debian's chromium
driven by Playwright, the proxy's upstream the scripted provider server, the judge scripted.

Needs ``apt-get install chromium`` and ``pip install playwright`` (the Python package only; no
browser download). Skipped when either is missing, except under CI (env CI set), where that is a
failure. Every request that would leave the machine is blocked and recorded. With env
JURIST_SCREENSHOTS=docs/img the page of the regenerated answer is saved as chat.png.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from jurist.testing import Reply
from tests.conftest import REPO
from tests.gate.helpers import comp
from tests.server.live import running
from tests.server.test_browser import ARGS, CHROMIUM, PAYLOAD, require_browser
from tests.server.test_proxy import broken_stream

QUESTION = "When was the Eiffel Tower built and how tall is it?"


@pytest.fixture
def settings(isolated) -> Settings:
    return Settings(home=str(isolated / ".jurist"))


@pytest.fixture
def browser():
    """(page, posts, problems): the page, the JSON bodies and headers it POSTed, and any
    page error, console error or request that tried to leave the machine."""
    require_browser()
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    posts: list[dict] = []

    def route(r):
        if r.request.url.startswith("http://127.0.0.1"):
            r.continue_()
        else:
            problems.append(f"blocked: {r.request.url}")  # nothing leaves the machine
            r.abort()

    def on_request(request):
        if request.method == "POST":
            posts.append({"url": request.url, "headers": request.headers, "json": json.loads(request.post_data)})

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            context = chromium.new_context()
            context.route("**/*", route)
            page = context.new_page()
            page.on("request", on_request)
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
            yield page, posts, problems
        finally:
            chromium.close()


def shot(page, name: str) -> None:
    """A screenshot for the docs, into the folder in env JURIST_SCREENSHOTS (relative to the repository)."""
    given = os.environ.get("JURIST_SCREENSHOTS")
    if given:
        folder = Path(given) if Path(given).is_absolute() else REPO / given
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / name), full_page=True)


def ask(page, text: str) -> None:
    page.fill("#message", text)
    page.keyboard.press("Enter")


def test_an_answer_appears_with_its_evaluation_made_after_it(browser, provider, settings):
    """Feedback off (`jurist serve --upstream`'s gate): the answer comes at once, the judge's
    evaluation after it, from the stored record; every piece of text stays text."""
    from playwright.sync_api import expect

    page, posts, problems = browser
    judged = json.dumps({"quality_score": 0.1, "confidence_score": 0.9, "issues": [PAYLOAD],
                         "improvement_hint": "give the height"})
    script("judge", judged).delay = 1.0
    provider.script(Reply(text=f"Built in 1889. {PAYLOAD}"))
    app = create_app(settings, upstream=provider.base_url, gate_config={"judge": "scripted/judge"})
    with running(app) as base:
        page.goto(f"{base}/chat?model=gpt-test")
        expect(page.locator("#model")).to_have_value("gpt-test")
        ask(page, PAYLOAD)
        answer = page.locator(".message.assistant")
        expect(answer.locator(".text")).to_have_text(f"Built in 1889. {PAYLOAD}")
        expect(answer.locator(".pending-note")).to_have_text("evaluating… (the judge answers after the reply)")
        expect(answer.locator(".evaluation")).to_have_text(
            f"Attempt 1: quality 0.10, below the threshold — {PAYLOAD}", timeout=10_000)
        expect(answer.locator(".pending-note")).to_have_count(0)
        rows = answer.locator(".call-table tbody tr")
        expect(rows).to_have_count(2)
        assert [r.split("\t")[0] for r in rows.all_inner_texts()] == ["generation #1", "quality_evaluation #1"]
        link = answer.locator(".trace-link a")
        expect(link).to_have_text("this request in the dashboard")
        assert link.get_attribute("href").startswith("/evaluation/evaluations/")

        assert page.locator(".message.user .text").inner_text() == PAYLOAD
        assert page.locator(".conversation img, .conversation script, .conversation b").count() == 0
        assert page.evaluate("window.__pwned === undefined")
        sent = posts[0]["json"]
        assert sent["messages"] == [{"role": "user", "content": PAYLOAD}] and sent["stream"] is True
        assert "authorization" not in posts[0]["headers"]  # no token on this server

        # the second question carries the conversation so far
        provider.script(Reply(text="330 metres."))
        script("judge", json.dumps({"quality_score": 0.9, "confidence_score": 0.9, "issues": [],
                                    "improvement_hint": None}))
        ask(page, "And how tall?")
        expect(page.locator(".message.assistant .text").nth(1)).to_have_text("330 metres.")
        expect(page.locator(".message.assistant").nth(1).locator(".evaluation")).to_have_text(
            "Attempt 1: quality 0.90, passed", timeout=10_000)
        assert [m["role"] for m in posts[1]["json"]["messages"]] == ["user", "assistant", "user"]
        assert posts[1]["json"]["messages"][1]["content"] == f"Built in 1889. {PAYLOAD}"
    assert problems == []


def test_a_rejected_answer_shows_each_attempts_evaluation_and_every_call(browser, provider, settings):
    """Note 004's proxy: not comprehensive, retried with the encouragement, then comprehensive."""
    from playwright.sync_api import expect

    page, _, problems = browser
    script("judge", comp(False, "the height is missing"), comp(True, "both parts answered"))
    provider.script(Reply(text="It was built in 1889."), Reply(text="Built in 1889; it is 330 m tall."))
    config = {"judge": "scripted/judge", "evaluator": "comprehensiveness", "evaluate_feedback_enabled": True}
    app = create_app(settings, upstream=provider.base_url, gate_config=config)
    with running(app) as base:
        page.goto(f"{base}/chat?model=gpt-test")
        ask(page, QUESTION)
        answer = page.locator(".message.assistant")
        expect(answer.locator(".text")).to_have_text("Built in 1889; it is 330 m tall.")
        expect(answer.locator(".evaluation")).to_have_text([
            "Attempt 1: not comprehensive — the height is missing",
            "Attempt 2: comprehensive — both parts answered"])
        expect(answer.locator(".evaluation.fail")).to_have_count(1)
        expect(answer.locator(".note.thinking")).to_contain_text("I can do better")
        rows = answer.locator(".call-table tbody tr")
        expect(rows).to_have_count(4)
        assert [r.split("\t")[0] for r in rows.all_inner_texts()] == [
            "generation #1", "self_evaluation #1", "comprehensive_retry #2", "self_evaluation #2"]
        expect(answer.locator(".trace-link a")).to_be_visible()
        shot(page, "chat.png")
    assert problems == []


def test_an_upstream_error_then_continue_succeeds(browser, provider, settings):
    """An upstream 500 before the answer, then a stream that breaks mid-answer: each time the page
    offers Continue, which resends the full context with isContinuation; the third try answers."""
    from playwright.sync_api import expect

    page, posts, problems = browser
    script("judge", default=comp(True, "answered"))
    provider.script(Reply(status=500), broken_stream("Sunny"))
    config = {"judge": "scripted/judge", "evaluator": "comprehensiveness", "evaluate_feedback_enabled": True}
    app = create_app(settings, upstream=provider.base_url, gate_config=config)
    with running(app) as base:
        page.goto(f"{base}/chat?model=gpt-test")
        ask(page, "Weather in Paris?")
        first = page.locator(".message.assistant").nth(0)
        expect(first.locator(".note.error")).to_contain_text("Error 500")
        expect(page.locator("#continue")).to_be_visible()
        expect(page.locator("#continue")).to_have_text("Continue Processing")  # the label the chat UI shows
        expect(first.locator(".call-table tbody tr")).to_have_count(1)  # the failed call, from the stored record
        expect(first.locator(".call.failed")).to_have_count(1)

        page.click("#continue")
        second = page.locator(".message.assistant").nth(1)
        expect(second.locator(".note.error")).to_contain_text("upstream exploded")
        expect(second.locator(".text")).to_have_text("Sunny")  # what came before the break
        expect(page.locator("#continue")).to_be_visible()

        provider.script(Reply(text="It is 18C and sunny in Paris."))
        page.click("#continue")
        third = page.locator(".message.assistant").nth(2)
        expect(third.locator(".text")).to_have_text("It is 18C and sunny in Paris.")
        expect(third.locator(".evaluation")).to_have_text("Attempt 1: comprehensive — answered")
        expect(page.locator("#continue")).to_be_hidden()
    bodies = [p["json"] for p in posts]
    assert [b.get("isContinuation", False) for b in bodies] == [False, True, True]
    assert all(b["messages"] == [{"role": "user", "content": "Weather in Paris?"}] for b in bodies)
    assert [r["json"]["messages"] for r in provider.requests] == [bodies[0]["messages"]] * 3
    # chromium itself logs the refused POST; nothing else went wrong
    assert problems == ["console: Failed to load resource: the server responded with a status of 500 "
                        "(Internal Server Error)"]


def test_with_a_token_the_page_asks_for_it_and_sends_it(browser, provider, isolated):
    from playwright.sync_api import expect

    page, posts, problems = browser
    script("judge", default=comp(True, "answered"))
    provider.script(Reply(text="Paris."))
    settings = Settings(home=str(isolated / ".jurist"), api_token="chat-t0ken")
    config = {"judge": "scripted/judge", "evaluator": "comprehensiveness", "evaluate_feedback_enabled": True}
    app = create_app(settings, upstream=provider.base_url, gate_config=config)
    with running(app) as base:
        page.goto(f"{base}/chat?model=gpt-test")
        expect(page.locator("#token-form")).to_be_visible()
        page.fill("#token", "wrong")
        page.click("#save-token")
        ask(page, "Capital of France?")
        expect(page.locator("#status")).to_have_text("The API token was not accepted; enter it again, then send again.")
        expect(page.locator("#token-form")).to_be_visible()
        assert provider.requests == []  # refused before anything went upstream

        page.fill("#token", "chat-t0ken")
        page.click("#save-token")
        ask(page, "Capital of France?")
        expect(page.locator(".message.assistant .text")).to_have_text("Paris.")
        expect(page.locator(".message.assistant .evaluation")).to_have_text("Attempt 1: comprehensive — answered")
    assert [p["headers"].get("authorization") for p in posts] == ["Bearer wrong", "Bearer chat-t0ken"]
    assert "chat-t0ken" not in json.dumps(provider.requests[0]["headers"])  # the token never goes upstream
    assert problems == ["console: Failed to load resource: the server responded with a status of 401 "
                        "(Unauthorized)"]
