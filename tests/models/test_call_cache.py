"""The call cache answers only for the same endpoint, provider, model and request: a verdict
cached from one server is never returned for another of the same provider and model name."""

from __future__ import annotations

from pathlib import Path

from jurist.config import Settings
from jurist.rubrics import evaluate
from jurist.store import Store
from jurist.testing import ProviderServer, Reply

from tests.rubrics.test_against_server import ONE
from tests.rubrics.test_scoring import SESSION


def llamacpp_at(server: ProviderServer, db: str) -> Settings:
    return Settings.load(database_url=db, providers={"llamacpp": {"base_url": server.base_url}})


async def test_a_reply_cached_at_one_endpoint_never_answers_for_another(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cache.db'}"
    with ProviderServer(Reply(text="SCORE: 4\nREASONING: first")) as first, \
            ProviderServer(Reply(text="SCORE: 2\nREASONING: second")) as second:
        at_first = await evaluate(ONE, SESSION, judge="llamacpp/x", settings=llamacpp_at(first, db))
        again = await evaluate(ONE, SESSION, judge="llamacpp/x", settings=llamacpp_at(first, db))
        at_second = await evaluate(ONE, SESSION, judge="llamacpp/x", settings=llamacpp_at(second, db))
        assert (len(first.requests), len(second.requests)) == (1, 1)  # the rerun at the first: its cache
        urls = first.base_url, second.base_url
    assert [r["rubric_scores"][0]["score"] for r in (at_first, again, at_second)] == [4.0, 4.0, 2.0]
    store = Store(db)
    try:
        calls = sorted(store.calls(limit=None), key=lambda c: c["created_at"])
    finally:
        store.close()
    assert [(c["endpoint"], c["cached"]) for c in calls] == [
        (urls[0], False), (urls[0], True), (urls[1], False)]
