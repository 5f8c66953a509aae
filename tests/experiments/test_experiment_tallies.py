"""The experiments list's counts come from one grouped query (SQLite and PostgreSQL): items, scored,
failed, passed and cost per experiment, the same figures as counting the items one by one."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from jurist.config import Settings
from jurist.server import create_app
from jurist.store import Store
from jurist.store import experiments as xq
from tests.conftest import fresh_database
from tests.experiments.compare_data import item, run, seed

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
IDS = [f"q{i:02d}" for i in range(10)]


def _seeded(store: Store) -> None:
    """``mixed``: 6 passed, 2 below the bar, 1 failed (no answer), 1 only answered; ``empty``: no items."""
    rows = run("mixed", {**{i: (5.0, 4.0) for i in IDS[:6]}, **{i: (1.0, 2.0) for i in IDS[6:8]}})
    rows.append(item("mixed", IDS[8], {"correct": None, "concise": None}, answer=None, error="timed out"))
    rows = [r.model_copy(update={"cost_usd": None if n == 7 else 0.5}) for n, r in enumerate(rows)]  # one unknown
    seed(store, {"mixed": ({}, rows), "empty": ({}, [])}, IDS)
    store.write(xq.save_answer, "mixed", IDS[9], {"answer": "kept, not judged yet"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_tally_counts_what_the_items_hold(backend, tmp_path):
    with fresh_database(backend, tmp_path, "jurist_tallies") as url, Store(url) as store:
        _seeded(store)
        tallies = store.read(xq.experiment_tallies, ["mixed", "empty", "none-such"])
        assert tallies["mixed"] == xq.ExperimentTally(items=10, scored=8, failed=1, judged=8, passed=6,
                                                      cost_usd=pytest.approx(4.0), cost_unknown=1)
        assert tallies["mixed"].pass_rate == 6 / 8
        assert tallies["empty"] == tallies["none-such"] == xq.ExperimentTally()
        assert tallies["empty"].pass_rate is None
        # the same figures as the finished items counted one by one
        done = store.read(xq.get_experiment_items, "mixed")
        assert (sum(1 for i in done if i.passed), sum(1 for i in done if i.passed is not None)) == (6, 8)
        assert store.read(xq.experiment_tallies, []) == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_list_reads_no_item(backend, tmp_path):
    with fresh_database(backend, tmp_path, "jurist_tallies") as url, Store(url) as store:
        _seeded(store)
        statements: list[str] = []
        event.listen(store.engine, "before_cursor_execute",
                     lambda conn, cursor, sql, params, context, many: statements.append(sql))
        with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as c:
            statements.clear()
            listed = {e["record"]["name"]: e for e in c.get("/api/experiments").json()}
            reads = [s for s in statements if "experiment_items" in s]
            assert len(reads) == 1 and "GROUP BY" in reads[0].upper()  # one grouped query, not one per experiment
            mixed = listed["mixed"]
            assert (mixed["passed"], mixed["judged"], mixed["scored"], mixed["failed"]) == (6, 8, 8, 1)
            assert mixed["pass_rate"] == 0.75 and mixed["cost_usd"] == pytest.approx(4.0)
            assert mixed["cost_unknown"] == 1
            assert listed["empty"]["pass_rate"] is None and listed["empty"]["judged"] == 0
            one = c.get("/api/experiments/mixed").json()  # one experiment: the same counts, and its items
            assert {k: one[k] for k in ("passed", "judged", "scored", "failed", "cost_unknown")} == \
                {k: mixed[k] for k in ("passed", "judged", "scored", "failed", "cost_unknown")}
            assert len(one["items"]) == 9
            page = c.get("/evaluation/experiments").text
            assert 'class="num pass-rate">75.0%<' in page
