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
