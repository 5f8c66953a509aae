"""The datasets and experiments pages in Debian's chromium: compare two experiments from the list, open
an item's trace, add it to a dataset with an expected answer, and nothing the runs wrote runs as code."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from jurist.config import Settings
from jurist.server import create_app
from jurist.store import Store
from tests.experiments.compare_data import item, run, seed
from tests.server.live import running
from tests.server.test_dashboard_browser import browser_page  # noqa: F401  (a fixture: chromium, nothing leaves)
from tests.server.test_dashboard_pages import XSS
from tests.server.test_experiments_pages import IDS, _evaluations


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[tuple[Store, dict[str, str]]]:
    """Made before the browser starts (Playwright's sync API holds an event loop)."""
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        evs = _evaluations(store)
        good = {i: (5.0, 4.0) for i in IDS}
        base = run("base", good)
        base[0] = item("base", IDS[0], {"correct": 5.0, "concise": 4.0}, answer=f"Paris. {XSS}",
                       evaluation_id=evs["s-xss"])
        seed(store, {"base": ({}, base), "worse": ({}, run("worse", dict(good, **{i: (2.0, 4.0) for i in IDS[:8]})))},
             IDS)
        yield store, evs
    finally:
        store.close()


def test_compare_and_add_an_item_in_a_browser(seeded, browser_page):  # noqa: F811
    from playwright.sync_api import expect

    page, blocked, problems = browser_page
    store, evs = seeded
    with running(create_app(Settings(), store=store)) as base_url:
        page.goto(f"{base_url}/evaluation/experiments")
        expect(page.locator("#experiments tbody tr")).to_have_count(2)
        page.select_option("#compare-form select[name=a]", "base")
        page.select_option("#compare-form select[name=b]", "worse")
        page.click("#compare-form button[type=submit]")
        page.wait_for_url(re.compile(r"/evaluation/compare\?a=base&b=worse"))
        expect(page.locator("#regression-count")).to_have_text("8")
        expect(page.locator("tr[data-key=correct] .badge.fail")).to_have_text("significant drop")
        expect(page.locator("tr[data-id=q00] .item-change")).to_have_text("pass → fail")
        expect(page.locator("tr[data-id=q00] td").nth(2)).to_contain_text(f"Paris. {XSS}")  # shown as text

        page.goto(f"{base_url}/evaluation/experiments/base")
        page.locator("tr[data-id=q00] a.trace-link").click()
        page.wait_for_url(f"**/evaluation/evaluations/{evs['s-xss']}")
        page.click("#add-to-dataset")
        page.wait_for_url(f"**/evaluation/evaluations/{evs['s-xss']}/add-to-dataset")
        expect(page.locator("#item-input")).to_have_text(f"Question {XSS}?")
        expect(page.locator("#add-expected")).to_have_value(f"Answer {XSS}")  # the judged answer, to start from
        page.fill("#add-dataset", "from-traces")
        page.fill("#add-expected", "A safe answer")
        page.click("#add-item-form button[type=submit]")
        expect(page.locator("#add-status")).to_contain_text("Added: from-traces version 1")
        page.click("#added-link")
        page.wait_for_url(re.compile(r"/evaluation/datasets/from-traces\?version="))
        expect(page.locator("#items tbody tr")).to_have_count(1)
        expect(page.locator("#items tbody tr td").nth(2)).to_have_text("A safe answer")

        # a second add of the same item is refused, and the page says why
        page.goto(f"{base_url}/evaluation/evaluations/{evs['s-xss']}/add-to-dataset")
        page.fill("#add-dataset", "from-traces")
        page.click("#add-item-form button[type=submit]")
        expect(page.locator("#add-status")).to_contain_text("already has an item 's-xss'")
        assert page.evaluate("window.__pwned") is None
    refused = [p for p in problems if "status of 422" in p]
    assert len(refused) == 1 and len(problems) == 1, problems  # the browser logs the refused add, nothing else
    assert not blocked, blocked
