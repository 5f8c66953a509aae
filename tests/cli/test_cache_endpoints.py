"""``jurist evaluate`` pointed at another server of the same provider and model name calls that
server: the verdicts cached from the first are not returned for it."""

from __future__ import annotations

import json
from pathlib import Path

from jurist.testing import ProviderServer, Reply

from tests.conftest import EXAMPLES, run_cli

FREE = str(EXAMPLES / "rubrics_freeform.json")
S1 = str(EXAMPLES / "sessions" / "s1.jsonl")


def evaluate_at(server: ProviderServer, tmp_path: Path, out: str) -> tuple[int, dict]:
    (tmp_path / "jurist.yaml").write_text(f"providers:\n  llamacpp:\n    base_url: {server.base_url}\n")
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--judge", "llamacpp/x", "--output", out,
                env={"JURIST_HOME": str(tmp_path / ".jurist")}, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads((tmp_path / out).read_text())


def test_evaluate_at_another_port_calls_that_server_not_the_cache(tmp_path: Path) -> None:
    with ProviderServer(Reply(text="SCORE: 4\nREASONING: first")) as first, \
            ProviderServer(Reply(status=500, message="down")) as second:
        code, result = evaluate_at(first, tmp_path, "first.json")
        assert code == 0 and {s["score"] for s in result["rubric_scores"]} == {4.0}
        calls = len(first.requests)
        code, result = evaluate_at(second, tmp_path, "second.json")
        assert len(second.requests) >= 1 and len(first.requests) == calls  # asked there, not answered from cache
        assert code == 1 and {s["status"] for s in result["rubric_scores"]} == {"evaluation_failed"}
