"""Dataset versions in the store (SQLite and PostgreSQL), and the git commit an experiment records."""

import subprocess

import pytest

from jurist.experiments.datasets import content_version
from jurist.experiments.records import DatasetItem
from jurist.experiments.run import git_commit
from jurist.store import Store

from tests.conftest import fresh_database

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_versions_are_numbered_found_by_hash_or_number_and_keep_their_items(backend, tmp_path):
    one = [DatasetItem(id="a", input="Hi?", expected=["Hello", "Hi"], metadata={"k": [1, 2]}),
           DatasetItem(id="b", input=[{"role": "user", "content": "Yo?"}])]
    two = one[:1]
    with fresh_database(backend, tmp_path, "jurist_datasets") as url, Store(url) as store:
        first, new = store.add_dataset_version("qa", content_version(one), one, "qa.jsonl")
        assert new and first.number == 1 and first.items == 2
        again, new = store.add_dataset_version("qa", content_version(one), one, "copy.jsonl")
        assert not new and again == first
        second, new = store.add_dataset_version("qa", content_version(two), two)
        assert new and second.number == 2
        store.add_dataset_version("other", content_version(two), two)
        assert store.dataset_version("qa") == second  # the latest
        assert store.dataset_version("qa", "1") == first == store.dataset_version("qa", first.dataset_version)
        assert store.dataset_version("qa", "3") is None and store.dataset_version("nope") is None
        assert store.dataset_items("qa", first.dataset_version) == one
        assert [(v.dataset, v.number) for v in store.dataset_versions()] == [("other", 1), ("qa", 1), ("qa", 2)]


def test_the_git_commit_of_the_working_folder_says_when_it_has_changes(tmp_path):
    assert git_commit(tmp_path) is None  # not a checkout
    run = lambda *args: subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "app.py").write_text("A = 1\n")
    run("add", "app.py")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_commit(tmp_path) == head
    (tmp_path / "app.py").write_text("A = 2\n")
    assert git_commit(tmp_path) == f"{head}-dirty"


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_adds_racing_for_the_next_number_both_land(backend, tmp_path):
    """Another process adds a version between this add's look-up of the next number and its insert."""
    from datetime import datetime, timezone

    from sqlalchemy import create_engine, event, insert

    from jurist.store.tables import dataset_versions

    ours = [DatasetItem(id="a", input="Ours?")]
    with fresh_database(backend, tmp_path, "jurist_race") as url, Store(url) as store:
        other = create_engine(url)
        raced = []

        def race(conn, cursor, statement, *args):
            if statement.lstrip().upper().startswith("INSERT INTO DATASET_VERSIONS") and not raced:
                raced.append(True)
                with other.begin() as c:
                    c.execute(insert(dataset_versions).values(dataset="qa", version="theirs", number=1, items=0,
                                                              created_at=datetime.now(timezone.utc)))

        event.listen(store.engine, "before_cursor_execute", race)
        try:
            version, new = store.add_dataset_version("qa", content_version(ours), ours)
        finally:
            event.remove(store.engine, "before_cursor_execute", race)
            other.dispose()
        assert raced and new and version.number == 2
        assert [v.dataset_version for v in store.dataset_versions("qa")] == ["theirs", content_version(ours)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_items_row_is_kept_answered_then_replaced_by_its_result(backend, tmp_path):
    from jurist.experiments.records import ExperimentItem
    from jurist.store import experiments as xq

    with fresh_database(backend, tmp_path, "jurist_item_rows") as url, Store(url) as store:
        store.write(xq.save_answer, "exp", "a", {"answer": "kept"})
        store.write(xq.save_answer, "exp", "b", {"answer": "first"})
        store.write(xq.save_answer, "exp", "b", {"answer": "again"})  # a rerun's answer replaces the kept one
        assert store.read(xq.item_states, "exp") == {"a": ("answered", {"answer": "kept"}),
                                                     "b": ("answered", {"answer": "again"})}
        done = ExperimentItem(experiment="exp", item_id="a", status="scored", answer="kept", evaluation_id="e1",
                              cost_usd=0.5, judged_at="2026-01-01T00:00:00Z")
        store.write(xq.save_item, done)
        assert store.read(xq.item_states, "exp") == {"a": ("scored", None), "b": ("answered", {"answer": "again"})}
        assert store.experiment_items("exp") == [done]
