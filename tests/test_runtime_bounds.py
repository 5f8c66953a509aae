"""An endpoint's bounds are fixed when a runtime is built, from its settings and providers:
resolving a model never changes them, and two runtimes in one process each keep their own.
What a runtime finds per endpoint (the structured-output mode) is its own too."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import jurist
from jurist.config import Settings
from jurist.errors import UsageError
from jurist.judges.panel import Panel, Role
from jurist.rubrics import evaluate_batch
from jurist.rubrics.models import Rubric, RubricSet
from jurist.testing import ProviderServer, Reply

from tests.rubrics.test_batch import make_sessions


def providers(server: ProviderServer) -> dict[str, Any]:
    return {"fake": {"type": "openai", "base_url": server.base_url, "api_key": "k"}}


def in_flight(model: Any) -> int:
    bound = model.limiter.stats().max_in_flight
    assert bound is not None
    return int(bound)


def test_two_runtimes_with_different_bounds_for_one_endpoint_each_keep_theirs(provider, tmp_path: Path) -> None:
    with jurist.open(providers=providers(provider), max_concurrency=50,
                     database_url=f"sqlite:///{tmp_path / 'a.db'}") as wide:
        a = wide.model("fake/j")
        with jurist.open(providers=providers(provider), database_url=f"sqlite:///{tmp_path / 'b.db'}") as narrow:
            b = narrow.model("fake/j")  # the default settings: 10 in flight
            assert a.endpoint == b.endpoint
            assert (in_flight(a), in_flight(b)) == (50, 10)
            assert in_flight(wide.model("fake/other")) == 50  # resolving again changes nothing
        assert in_flight(a) == 50


def test_max_in_flight_is_fixed_when_the_runtime_is_built(provider, tmp_path: Path) -> None:
    from jurist.runtime import runtime_for

    s = {"providers": {"fake": {**providers(provider)["fake"], "max_in_flight": 4, "requests_per_minute": 600}},
         "database_url": f"sqlite:///{tmp_path / 'a.db'}"}
    with jurist.open(**s) as own, jurist.open(max_in_flight=25, **s) as over:
        assert (in_flight(own.model("fake/j")), in_flight(over.model("fake/j"))) == (4, 25)
        assert over.model("fake/j").limiter.stats().requests_per_minute == 600  # the provider's, kept
        with pytest.raises(UsageError, match="fixed when the runtime is built"):
            runtime_for(over, max_in_flight=3)


def test_each_runtime_keeps_the_structured_output_modes_it_finds(provider, tmp_path: Path) -> None:
    with jurist.open(providers=providers(provider), database_url=f"sqlite:///{tmp_path / 'a.db'}") as one, \
            jurist.open(providers=providers(provider), database_url=f"sqlite:///{tmp_path / 'b.db'}") as two:
        a, b = one.model("fake/j"), two.model("fake/j")
        assert a.adapter.modes is one.modes and b.adapter.modes is two.modes and one.modes is not two.modes
        one.modes.set(a.endpoint, "prompt")
        assert two.modes.get(b.endpoint) is None


async def test_a_panel_with_default_settings_leaves_a_running_batchs_bound_alone(provider, tmp_path: Path) -> None:
    """A batch at 50 in flight; a panel built with the default settings (10 in flight) while the batch
    runs, on the same endpoint: the batch's later requests still go 50 at a time."""
    settings = Settings.load(providers=providers(provider), database_url=f"sqlite:///{tmp_path / 'j.db'}")
    seen: list[int] = []  # requests in flight at the server as each request arrives
    built = threading.Event()

    def respond(_: dict[str, Any]) -> Reply:
        seen.append(provider.in_flight)
        if not built.is_set():
            built.set()  # the batch's model is resolved and calling: now a panel of the same endpoint
            Panel([Role("expert", ["accuracy"])], {"accuracy": 1.0}, settings=Settings.load(
                providers=providers(provider)), model="fake/j")
        return Reply(text="SCORE: 3", delay=0.2)

    provider.default = respond
    rubrics = RubricSet(rubrics=[Rubric(id=f"r{i}", name=f"R{i}", scoring_criteria="c") for i in range(4)])
    sessions = make_sessions(tmp_path / "s", 25)  # 100 calls, all wanted at once
    report = await evaluate_batch(rubrics, sessions, tmp_path / "out", parallel=25, max_concurrency=50,
                                  judge="fake/j", settings=settings)
    assert report.summary["batch_summary"]["total_sessions"] == 25 and len(seen) == 100
    assert max(seen[50:]) > 20, seen  # the second 50 still went many at a time, not 10
    assert provider.peak_in_flight <= 50
