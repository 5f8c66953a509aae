"""/redoc in Debian's chromium under its Content-Security-Policy: nothing is asked of another host
(ReDoc's footer asked cdn.redoc.ly for its logo, and the CSP refused it), and /favicon.ico answers."""

from __future__ import annotations

from pathlib import Path

from jurist.config import Settings
from jurist.server import create_app
from tests.server.live import running
from tests.server.test_browser import page  # noqa: F401  (a fixture: Debian's chromium, nothing leaves the machine)


def test_redoc_loads_nothing_from_another_host(page, tmp_path: Path):  # noqa: F811
    from playwright.sync_api import expect

    elsewhere: list[str] = []
    console: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(("http://127.0.0.1", "data:", "blob:"))
            else elsewhere.append(r.url))
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/docs.db", home=str(tmp_path / ".jurist")))
    with running(app) as base:
        page.goto(f"{base}/redoc")
        expect(page.locator("h1").first).to_contain_text("jurist")
        expect(page.get_by_text("API docs by Redocly")).to_be_attached()  # the footer, drawn
        page.wait_for_timeout(500)  # the footer's image, had it been one from elsewhere, is asked for by now
        assert elsewhere == []
        assert [m for m in console if "Content Security Policy" in m or "cdn.redoc.ly" in m] == []
        icon = page.request.get(f"{base}/favicon.ico")  # over HTTP (the test's request routing drops favicons)
        assert icon.status == 200 and icon.headers["content-type"] == "image/x-icon"
