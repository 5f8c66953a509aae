"""`experiment run --dry-run` makes no call and writes nothing; `--max-cost` refuses prices it cannot know."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from jurist.cli.main import app
from jurist.store import Store

from tests.experiments.runs import RUBRICS_JSON, add_dataset, questions, replies


@pytest.fixture
def workspace(provider, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    (tmp_path / "jurist.yaml").write_text(yaml.safe_dump(
        {"providers": {"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}}}))
    (tmp_path / "rubrics.json").write_text(json.dumps(RUBRICS_JSON))
    add_dataset(url, tmp_path, questions(3))
    provider.default = replies()
    return url


def invoke(url, *args):
    return CliRunner().invoke(app, ["experiment", "run", "--dataset", "qa", "--rubrics", "rubrics.json",
                                    "--judge", "fake/judge", "--name", "e1", "--db", url, *args],
                              prog_name="jurist", env={"COLUMNS": "300"})


def test_a_dry_run_counts_every_call_and_makes_none(workspace, provider, tmp_path):
    result = invoke(workspace, "--target", "fake/app", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "3 items would be answered and judged (0 already done)" in result.output
    assert "9 calls" in result.output  # 3 generations + 3 x 2 verdicts
    assert "fake/app" in result.output and "fake/judge" in result.output
    assert provider.requests == []
    with Store(workspace) as store:
        assert store.experiment("e1") is None and store.calls(limit=None) == []
    assert not (tmp_path / "experiments").exists()


def test_max_cost_with_a_price_jurist_cannot_know_exits_2_before_any_call(workspace, provider, tmp_path):
    unknown = invoke(workspace, "--target", "fake/app", "--max-cost", "1")
    assert unknown.exit_code == 2 and "--allow-unknown-cost" in unknown.output, unknown.output
    (tmp_path / "my_app.py").write_text("def answer(given):\n    return 'ok'\n")
    function = invoke(workspace, "--target", "python:my_app:answer", "--max-cost", "1")
    assert function.exit_code == 2 and "is your own function" in function.output, function.output
    assert provider.requests == []
    allowed = invoke(workspace, "--target", "fake/app", "--max-cost", "1", "--allow-unknown-cost")
    assert allowed.exit_code == 0, allowed.output
    assert "the budget counts only known costs" in allowed.output
    assert invoke(workspace, "--target", "fake/app", "--allow-unknown-cost").exit_code == 2
