"""The tutor page in a real headless browser (Debian's chromium, driven by Playwright).

Needs ``apt-get install chromium`` and ``pip install playwright`` (the Python
package only; no browser download). Skipped when either is missing, except
under CI (env CI set), where that is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from tests.server.fakes import SECRET_FEEDBACK, FakeFactory, judge_says
from tests.server.live import running

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
PAYLOAD = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold</b>'


def _missing() -> str | None:
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} not found: apt-get install -y chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install playwright (the Python package only)"
    return None


def require_browser() -> None:
    """Skip a browser test where Debian's chromium or playwright is missing; under CI, fail it."""
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"browser test cannot run under CI: {reason}")
        pytest.skip(reason)


@pytest.fixture
def page():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            context = browser.new_context()
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
                ("http://127.0.0.1", "ws://127.0.0.1")) else route.abort())  # nothing leaves the machine
            yield context.new_page()
        finally:
            browser.close()


def test_tutor_page_in_a_browser(page, checklist_dir: Path):
    from playwright.sync_api import expect

    script("judge", judge_says(["adenosine"]), judge_says([]), judge_says(["half-life"]))
    script("tutor", "Yes, adenosine. What else?", PAYLOAD, "Good, the half-life.")
    app = create_app(Settings(tutor_progress=True), checklist_dirs=[checklist_dir], session_factory=FakeFactory())
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    with running(app) as base:
        page.goto(f"{base}/tutor?points=caffeine&learner=ada")
        progress = page.locator("#progress")
        assert progress.inner_text() == "0 / 3 points"
        assert page.locator("h1").inner_text() == "Caffeine <b>basics</b>"  # shown as text
        send = page.locator("#send")
        expect(send).to_be_enabled()
        sid = page.evaluate("new URLSearchParams(location.search).get('session_id')")
        assert sid

        page.fill("#message", "It blocks adenosine.")
        send.click()
        expect(page.locator(".message.assistant .text").last).to_have_text("Yes, adenosine. What else?")
        expect(progress).to_have_text("1 / 3 points")
        expect(page.locator("#status")).to_have_text("connected")  # "the tutor is thinking…" is gone

        # an HTML/script payload, from the learner and from the tutor, stays text
        expect(send).to_be_enabled()
        page.fill("#message", PAYLOAD)
        page.keyboard.press("Enter")
        expect(page.locator(".message.assistant .text")).to_have_count(3)
        texts = page.locator(".message .text").all_inner_texts()
        assert texts.count(PAYLOAD) == 2  # the learner's message and the tutor's reply
        assert page.locator(".conversation img, .conversation script, .conversation b").count() == 0
        assert page.evaluate("window.__pwned === undefined")

        # reload: the session id in the URL resumes the conversation
        page.reload()
        expect(page.locator(".message")).to_have_count(5)
        assert page.evaluate("new URLSearchParams(location.search).get('session_id')") == sid
        expect(progress).to_have_text("1 / 3 points")
        expect(send).to_be_enabled()
        page.fill("#message", "Half-life is five hours.")
        send.click()
        expect(progress).to_have_text("2 / 3 points")
        expect(page.locator("#status")).to_have_text("connected")
        assert SECRET_FEEDBACK not in page.content()
    assert errors == []


def test_tutor_page_with_a_token(page, checklist_dir: Path):
    """With an API token the page asks for it, sends it as the socket's subprotocol, keeps it for the tab."""
    from playwright.sync_api import expect

    script("judge", judge_says(["adenosine"]))
    script("tutor", "Yes, adenosine.")
    factory = FakeFactory()
    app = create_app(Settings(api_token="browser-t0ken"), checklist_dirs=[checklist_dir], session_factory=factory)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    with running(app) as base:
        page.goto(f"{base}/tutor?points=caffeine&learner=ada")
        expect(page.locator("#token-form")).to_be_visible()
        expect(page.locator("#status")).to_have_text("This server needs its API token to start the tutor.")
        assert factory.started == {}

        page.fill("#token", "wrong")
        page.click("#connect")
        expect(page.locator("#status")).to_have_text("The API token was not accepted; enter it again.")
        expect(page.locator("#token-form")).to_be_visible()
        assert factory.started == {}

        page.fill("#token", "browser-t0ken")
        page.click("#connect")
        expect(page.locator("#token-form")).to_be_hidden()
        send = page.locator("#send")
        expect(send).to_be_enabled()
        page.fill("#message", "It blocks adenosine.")
        send.click()
        expect(page.locator(".message.assistant .text").last).to_have_text("Yes, adenosine.")

        page.reload()  # the token stays with the tab: no second prompt
        expect(page.locator(".message")).to_have_count(3)
        expect(page.locator("#token-form")).to_be_hidden()
        assert len(factory.started) == 1
    assert errors == []


def test_a_page_of_another_site_cannot_use_the_server(page, checklist_dir: Path):
    """A page the user visits elsewhere (here: another origin on this machine, served by its own
    server) opens the tutor socket and posts a body-less analysis request, as any site could:
    both are refused."""
    import httpx
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    factory = FakeFactory()
    app = create_app(Settings(), checklist_dirs=[checklist_dir], session_factory=factory)
    elsewhere = FastAPI()
    with running(app) as base:
        target = base.replace("http://", "")
        html = f"""<!doctype html><script>
          window.results = {{}};
          fetch("http://{target}/api/evaluation/analyze", {{method: "POST", mode: "no-cors"}})
            .then(function () {{ results.fetch = "sent"; }}, function () {{ results.fetch = "failed"; }});
          var ws = new WebSocket("ws://{target}/tutor/ws?points=caffeine&learner=ada");
          ws.onopen = function () {{ results.socket = "open"; }};
          ws.onerror = function () {{ results.socket = "refused"; }};
        </script>"""
        elsewhere.get("/page.html", response_class=HTMLResponse)(lambda: html)
        with running(elsewhere) as other:
            page.goto(f"{other}/page.html")
            page.wait_for_function("window.results.fetch && window.results.socket")
            assert page.evaluate("window.results.fetch") == "sent"  # the browser sent it: the server refused it
            assert page.evaluate("window.results.socket") == "refused"
        assert httpx.get(f"{base}/api/evaluation/patterns").json()["run"] is None  # the analysis never ran
    assert factory.started == {}


def test_tutor_index_starts_the_tutor(page, checklist_dir: Path):
    """/tutor alone lists the checklists; its form opens the tutor for the chosen one."""
    from playwright.sync_api import expect

    script("judge", judge_says(["adenosine"]))
    script("tutor", "Yes, adenosine.")
    app = create_app(Settings(), checklist_dirs=[checklist_dir], session_factory=FakeFactory())
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    with running(app) as base:
        page.goto(f"{base}/tutor")
        expect(page.locator("#checklists tr[data-name='caffeine'] td").nth(1)).to_have_text("Caffeine <b>basics</b>")
        expect(page.locator("#points")).to_have_value("caffeine")
        page.click(".start button")  # no name yet: the browser asks for one, nothing is sent
        assert page.url == f"{base}/tutor"
        page.fill("#learner", "<ada>")  # not a learner name: refused in the page
        page.click(".start button")
        assert page.url == f"{base}/tutor"
        page.fill("#learner", "Ada Lovelace")
        page.click(".start button")
        page.wait_for_url("**/tutor?points=caffeine&learner=Ada+Lovelace*")
        expect(page.locator("h1")).to_have_text("Caffeine <b>basics</b>")
        expect(page.locator("#learner")).to_have_text("Ada Lovelace")
        expect(page.locator("#send")).to_be_enabled()
    assert errors == []
