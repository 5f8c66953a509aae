"""Every call record carries its cost in dollars from genai-prices' bundled table, or none with
the reason; a budget stops new calls once spent; a dry run counts calls and makes none."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from jurist.models import ChatRequest, Limiter
from jurist.models.cost import (FROM_CACHE, BudgetExceeded, Cost, CostBudget, DryRun, DryRunCall, call_cost,
                                charged_to, estimate_request, expecting, format_usd)
from jurist.models.model import Model, RetryPolicy
from jurist.models.openai import OpenAIChat
from jurist.store import Store
from jurist.testing import ProviderServer, Reply

REQ = ChatRequest(messages=[{"role": "user", "content": "Is the sky blue? Answer briefly."}], max_tokens=50)
OTHER = ChatRequest(messages=[{"role": "user", "content": "Is grass green?"}], max_tokens=50)


def openai_price(model: str, input_tokens: int, output_tokens: int) -> float:
    """What genai-prices' own table says such a call costs at OpenAI."""
    return float(calc_price(Usage(input_tokens=input_tokens, output_tokens=output_tokens), model,
                            provider_id="openai").total_price)


def model_at(server: ProviderServer, name: str, store: Store | None, *, prices_from: str | None = "openai",
             cache: bool = False, retries: int = 4) -> Model:
    return Model(OpenAIChat(name, base_url=server.base_url, api_key="k"), Limiter(4), sink=store, cache=cache,
                 prices_from=prices_from, retry=RetryPolicy(max_retries=retries, backoff_base=0.01))


def calls_of(store: Store) -> list[dict]:
    store.flush()
    return sorted(store.calls(limit=None), key=lambda c: c["created_at"])


async def test_a_call_at_a_priced_endpoint_has_its_cost_in_the_store(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/c.db")
    with ProviderServer(Reply(text="Yes.", input_tokens=1200, output_tokens=300)) as server:
        priced = model_at(server, "gpt-4o-mini", store)
        unpriced = model_at(server, "gpt-4o-mini", store, prices_from=None)
        unknown = model_at(server, "gpt-nonesuch-9", store)
        for m in (priced, unpriced, unknown):
            await m.complete(REQ)
            await m.aclose()
        url = server.base_url
    rows = calls_of(store)
    store.close()
    assert [(r["model"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        ("openai/gpt-4o-mini", 1200, 300), ("openai/gpt-4o-mini", 1200, 300), ("openai/gpt-nonesuch-9", 1200, 300)]
    assert rows[0]["cost_usd"] == pytest.approx(openai_price("gpt-4o-mini", 1200, 300)) and rows[0]["cost_usd"] > 0
    assert rows[0]["cost_note"] is None
    # the same server, not declared to charge OpenAI's prices: a custom base_url's price is unknown
    assert rows[1]["cost_usd"] is None and url in rows[1]["cost_note"]
    assert "custom base_url" in rows[1]["cost_note"]
    assert rows[2]["cost_usd"] is None and "gpt-nonesuch-9" in rows[2]["cost_note"]


async def test_no_usage_a_failed_call_and_a_cached_answer_say_why(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/c.db")
    with ProviderServer() as server:
        server.script(Reply(text="a", usage=False), Reply(status=500), Reply(text="b", input_tokens=40),
                      Reply(text="never sent"))
        m = model_at(server, "gpt-4o-mini", store, retries=0)
        async for _ in m.stream(REQ):  # a stream whose server sends no usage
            pass
        with pytest.raises(Exception):
            await m.complete(REQ)
        cached = model_at(server, "gpt-4o-mini", store, cache=True)
        await cached.complete(OTHER)
        store.flush()
        again = await cached.complete(OTHER)  # answered from the call cache: no request
        assert again.cached and len(server.requests) == 3
        await m.aclose()
        await cached.aclose()
    no_usage, failed, paid, from_cache = calls_of(store)
    store.close()
    assert (no_usage["cost_usd"], no_usage["cost_note"]) == (None, "the endpoint reported no token usage")
    assert failed["cost_usd"] is None and "failed" in failed["cost_note"]
    assert paid["cost_usd"] == pytest.approx(openai_price("gpt-4o-mini", 40, 5))
    assert (from_cache["cost_usd"], from_cache["cost_note"]) == (0.0, FROM_CACHE)


def test_the_providers_own_apis_are_priced_and_in_process_providers_cost_nothing() -> None:
    assert call_cost("openai/gpt-4o-mini", "https://api.openai.com/v1", 1000, 10).usd == \
        pytest.approx(openai_price("gpt-4o-mini", 1000, 10))
    # the address decides whose prices apply, whatever the reference calls the provider
    assert call_cost("upstream/gpt-4o-mini", "https://api.openai.com/v1", 1000, 10).known
    haiku = float(calc_price(Usage(input_tokens=1000, output_tokens=10), "claude-haiku-4-5",
                             provider_id="anthropic").total_price)
    assert call_cost("anthropic/claude-haiku-4-5", "https://api.anthropic.com", 1000, 10).usd == pytest.approx(haiku)
    local = call_cost("ollama/qwen3:14b", "http://localhost:11434/v1", 1000, 10)
    assert local.usd is None and "local server" in (local.note or "")
    assert call_cost("local/minilm", "local", 0, 0) == Cost(0.0, "offline judge: no charge")
    assert call_cost("scripted/x", "scripted:x", 9, 9).usd == 0.0
    assert call_cost("openai/gpt-4o-mini", "https://api.openai.com/v1", 0, 0).usd is None  # no usage reported


def test_prices_are_read_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    import genai_prices.data_snapshot as snapshot

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("genai-prices tried the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert call_cost("openai/gpt-4o", "https://api.openai.com/v1", 500, 500).known
    assert snapshot._custom_snapshot is None  # the bundled table, never an update fetched at run time


async def test_a_spent_budget_starts_no_new_call(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/c.db")
    one = openai_price("gpt-4o-mini", 1000, 500)
    budget = CostBudget(max_usd=one * 1.5)
    spent: list[bool] = []
    budget.on_exceeded(lambda: spent.append(True))
    with ProviderServer(Reply(text="ok", input_tokens=1000, output_tokens=500)) as server:
        m = model_at(server, "gpt-4o-mini", store)
        with charged_to(budget):
            await m.complete(REQ)
            assert not budget.exceeded and not spent
            await asyncio.gather(m.complete(REQ))  # a task started in the block is charged too
            assert budget.exceeded and spent == [True]
            with pytest.raises(BudgetExceeded, match="budget"):
                await m.complete(REQ)
        await m.complete(REQ)  # outside the block: no budget
        await m.aclose()
        assert len(server.requests) == 3
    rows = calls_of(store)
    store.close()
    assert budget.spent_usd == pytest.approx(2 * one) and budget.calls == 3 and budget.unknown == 0
    refused = [r for r in rows if r["status"] == "error"]
    assert len(refused) == 1 and refused[0]["cost_usd"] == 0.0 and "budget" in refused[0]["cost_note"]


def test_a_budget_counts_unknown_costs_apart_and_refuses_a_bad_limit() -> None:
    budget = CostBudget(max_usd=1.0)
    budget.add(Cost(None, "no price"))
    budget.add(Cost(None, "no price"))
    budget.add(Cost(0.25))
    assert (budget.spent_usd, budget.unknown, budget.unknown_notes) == (0.25, 2, {"no price": 2})
    assert not budget.exceeded and budget.remaining_usd == 0.75
    with pytest.raises(Exception, match="finite"):
        CostBudget(max_usd=float("nan"))
    with pytest.raises(Exception, match="finite"):
        CostBudget(max_usd=-1.0)


async def test_a_dry_run_counts_the_calls_and_makes_none(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/c.db")
    dry = DryRun()
    with ProviderServer() as server:
        priced = model_at(server, "gpt-4o-mini", store)
        unpriced = model_at(server, "gpt-4o-mini", store, prices_from=None)
        with expecting(dry):
            for m in (priced, priced, unpriced):
                with pytest.raises(DryRunCall):
                    await m.complete(REQ)
        await priced.aclose()
        await unpriced.aclose()
        assert server.requests == []
        url = server.base_url
    assert calls_of(store) == []  # nothing recorded
    store.close()
    (entry,) = dry.models.values()
    expected = estimate_request(REQ, "openai/gpt-4o-mini", url, prices_from="openai")
    assert (entry.calls, entry.unknown, entry.input_tokens) == (3, 1, 3 * expected.input_tokens)
    assert entry.max_output_tokens == 3 * 50
    assert dry.cost_usd == pytest.approx(2 * openai_price("gpt-4o-mini", expected.input_tokens, 50))
    assert expected.counted_by in ("estimate",) or expected.counted_by.startswith("tiktoken")
    assert entry.estimated == (3 if expected.estimated else 0)


def test_dollars_read_for_people() -> None:
    assert [format_usd(x) for x in (None, 0, 0.00045, 0.0123, 12.5)] == ["unknown", "$0", "$0.00045", "$0.0123",
                                                                        "$12.50"]


async def test_the_offline_judge_costs_nothing_and_a_users_own_judge_is_unknown(tmp_path: Path) -> None:
    from jurist.config import Settings
    from jurist.models import resolve_model
    from jurist.models.base import StatementCheck
    from jurist.models.model import MeaningBackend

    class Mine:
        name = "my-judge"

        async def expresses(self, text: str, statements: list[str]) -> list[StatementCheck]:
            return [StatementCheck(s, True, 0.9, self.name) for s in statements]

    store = Store(f"sqlite:///{tmp_path}/c.db")
    local = resolve_model("local/minilm", Settings(home=str(tmp_path)), sink=store)
    await local.meaning("checklist_batch").expresses("The sky is blue.", ["the sky's colour"])
    mine = Model(MeaningBackend(Mine()), Limiter(4), sink=store)  # type: ignore[arg-type]
    await mine.meaning("checklist_batch").expresses("The sky is blue.", ["the sky's colour"])
    rows = {r["model"]: r for r in calls_of(store)}
    store.close()
    assert (rows["local/minilm"]["cost_usd"], rows["local/minilm"]["cost_note"]) == (0.0, "offline judge: no charge")
    assert rows["my-judge"]["cost_usd"] is None and "own judge" in rows["my-judge"]["cost_note"]


def test_a_tokenizer_is_used_only_from_a_whole_file_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken downloads an encoding it lacks (and one whose cached file is damaged): a dry run
    never lets it; the tokens are then an estimate that says so."""
    import hashlib

    import jurist.models.cost as cost
    from jurist.models.cost import TIKTOKEN_FILES, count_tokens

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a download was tried")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(cost, "_ENCODINGS", {})
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert count_tokens("openai/gpt-4o-mini", "x" * 40) == (10, "estimate")  # no file
    damaged = tmp_path / hashlib.sha1(TIKTOKEN_FILES.format("o200k_base").encode()).hexdigest()
    damaged.write_bytes(b"not the encoding")
    monkeypatch.setattr(cost, "_ENCODINGS", {})
    assert count_tokens("openai/gpt-4o-mini", "x" * 40) == (10, "estimate")
    assert damaged.read_bytes() == b"not the encoding"  # left as it was: tiktoken was never asked
