"""Where the store is: the user's data folder whatever the current folder, JURIST_HOME,
JURIST_DATABASE_URL and --db; `jurist logs` says which store it reads."""

import json

from jurist.testing import Reply

from tests.conftest import EXAMPLES, run_cli

FREE = str(EXAMPLES / "rubrics_freeform.json")
S1 = str(EXAMPLES / "sessions" / "s1.jsonl")


def _store_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("store: "))


def test_the_default_store_is_the_same_from_any_folder(tmp_path, monkeypatch, provider):
    monkeypatch.delenv("JURIST_HOME")
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    provider.default = Reply(text="SCORE: 4\nREASONING: fine")
    env = {"OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "k", "JURIST_JUDGE": "openai/m"}
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, env=env, cwd=one)
    assert r.returncode == 0, r.stderr
    logs = run_cli("logs", env=env, cwd=two)
    assert logs.returncode == 0, logs.stderr
    assert _store_line(logs.stdout) == f"store: sqlite:///{data / 'jurist' / 'jurist.db'}"
    assert "rubric_judge" in logs.stdout  # the call made from the other folder
    assert not (one / ".jurist").exists() and not (two / ".jurist").exists()


def test_db_chooses_the_store_for_every_command_that_opens_it(tmp_path, provider):
    provider.default = Reply(text="SCORE: 4\nREASONING: fine")
    env = {"OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "k", "JURIST_JUDGE": "openai/m"}
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--db", "mine.db", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "mine.db").is_file() and not (tmp_path / ".jurist").exists()
    mine = run_cli("logs", "--json", "--db", str(tmp_path / "mine.db"), env=env, cwd=tmp_path)
    rows = [json.loads(line) for line in mine.stdout.splitlines()]  # stdout stays JSON lines
    assert rows and {row["purpose"] for row in rows} == {"rubric_judge"}
    assert _store_line(mine.stderr) == f"store: sqlite:///{tmp_path / 'mine.db'}"
    default = run_cli("logs", "--json", env=env, cwd=tmp_path)  # JURIST_HOME's store: nothing there
    assert default.stdout == "" and _store_line(default.stderr).endswith(".jurist/jurist.db")
    by_url = run_cli("logs", env={**env, "JURIST_DATABASE_URL": f"sqlite:///{tmp_path / 'mine.db'}"}, cwd=tmp_path)
    assert "rubric_judge" in by_url.stdout
    for command in ("logs", "serve", "proxy", "evaluate", "evaluate-batch", "export", "calibrate", "compare",
                    "probe", "tutor", "demo"):
        assert "--db" in run_cli(command, "--help").stdout, command


def test_logs_hides_a_password_and_points_to_an_earlier_versions_store(tmp_path, monkeypatch):
    monkeypatch.delenv("JURIST_HOME")
    (tmp_path / ".jurist").mkdir()
    run_cli("logs", "--db", str(tmp_path / ".jurist" / "jurist.db"), cwd=tmp_path)  # an old store, migrated
    r = run_cli("logs", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "note: .jurist/jurist.db here is not the store in use; to use it: --db .jurist/jurist.db" in r.stdout
    used = run_cli("logs", "--db", ".jurist/jurist.db", cwd=tmp_path)
    assert "note:" not in used.stdout
    r = run_cli("logs", "--db", "postgresql+psycopg://jurist:s3cret@127.0.0.1:9/none", cwd=tmp_path)
    assert r.returncode == 2 and "s3cret" not in r.stdout + r.stderr and "Check --db" in r.stderr
    assert "store: postgresql+psycopg://jurist:***@127.0.0.1:9/none" in r.stdout
