"""Typos in the files `jurist` reads stop it with exit 2, the file and line, and the closest known name."""

import json

from tests.cli.test_cli import FREE, S1, env_for
from tests.conftest import EXAMPLES, run_cli


def test_a_session_with_a_misspelt_field_exits_2_naming_the_line_and_the_field(provider, tmp_path):
    session = tmp_path / "s1.jsonl"
    session.write_text('{"role": "user", "contnet": "Why does coffee wake me up?"}\n'
                       '{"role": "assistant", "content": "Caffeine blocks adenosine."}\n')
    r = run_cli("evaluate", "--rubrics", FREE, "--session", str(session), env=env_for(provider, tmp_path),
                cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{session}:1: unknown field 'contnet' (did you mean 'content'?)" in r.stderr.replace("\n", "")
    assert provider.requests == []


def test_a_rubric_with_a_misspelt_or_boolean_weight_exits_2(provider, tmp_path):
    data = json.loads((EXAMPLES / "rubrics_freeform.json").read_text())
    data["rubrics"][0]["weigth"] = 2
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps(data, indent=2))
    r = run_cli("evaluate", "--rubrics", str(typo), "--session", S1, env=env_for(provider, tmp_path), cwd=tmp_path)
    assert r.returncode == 2
    assert "unknown field 'weigth' (did you mean 'weight'?)" in r.stderr.replace("\n", "")

    data["rubrics"][0].pop("weigth")
    data["rubrics"][0]["weight"] = True
    boolean = tmp_path / "boolean.json"
    boolean.write_text(json.dumps(data, indent=2))
    r = run_cli("evaluate", "--rubrics", str(boolean), "--session", S1, env=env_for(provider, tmp_path), cwd=tmp_path)
    assert r.returncode == 2
    assert "weight: expected a number, got true" in r.stderr.replace("\n", "")
    assert provider.requests == []


def test_a_misspelt_setting_in_jurist_yaml_names_the_setting_it_meant(tmp_path):
    (tmp_path / "jurist.yaml").write_text("cache: true\njudg: openai/gpt-4o-mini\n")
    r = run_cli("logs", cwd=tmp_path, env={"JURIST_HOME": str(tmp_path / ".jurist")})
    assert r.returncode == 2
    assert "jurist.yaml" in r.stderr and "unknown field 'judg' (did you mean 'judge'?)" in r.stderr.replace("\n", "")
