"""`jurist demo` from a clean folder: offline, every call on record."""

import json

import pytest

from tests.conftest import run_cli


@pytest.mark.slow
def test_demo_runs_offline_from_a_clean_folder(tmp_path):
    env = {"JURIST_HOME": str(tmp_path / ".jurist"), "HF_HUB_OFFLINE": "1"}
    r = run_cli("demo", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "jurist-demo" / "rubrics"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["batch_summary"]["total_sessions"] == 5
    results = [json.loads(f.read_text()) for f in sorted(out.glob("*_result.json"))]
    failed = [r for res in results for r in res["rubric_scores"] if r["status"] == "evaluation_failed"]
    # the offline judge decides, or says it cannot (uncertain): no other failure, and none unreported
    assert summary["failures"]["evaluations_failed"] == len(failed)
    assert all(r["reasoning"].startswith("uncertain:") for r in failed), failed
    for undecided in failed:  # each says what it decided, and where its score lies
        assert any(i["met"] is None for i in undecided["items"]) and len(undecided["score_range"]) == 2
    if failed:
        assert "its result file lists the items it did decide" in " ".join(r.stdout.split())
    s1 = json.loads((out / "s1_result.json").read_text())
    assert all(r["judge_model"] == "local/minilm" for r in s1["rubric_scores"])
    # s1 says about 400 mg, roughly four cups, is the limit: the eight-cups item is never met
    safety = next(r for r in s1["rubric_scores"] if r["rubric_id"] == "safety")
    assert safety["status"] == "evaluation_failed" or \
        {i["id"]: i["met"] for i in safety["items"]}["overdose"] is False
    assert "per-rubric summary" in r.stdout and "15 judge calls on record" in r.stdout
    # the checklist tutor part: every point recalled, or a turn the offline judge could not decide, said so
    assert ("completed, 5/5 points recalled" in r.stdout or "the judge gave no verdict: uncertain:" in r.stdout
            or "the judge could not decide" in r.stdout)
    assert "http://127.0.0.1:8000/evaluation" in r.stdout  # how to open the dashboard on what was stored
    from jurist.store import Store
    from jurist.store.dashboard import EvaluationFilter, overview

    with Store(f"sqlite:///{tmp_path / '.jurist' / 'jurist.db'}") as store:
        metrics = store.read(overview, EvaluationFilter())
    kinds = {k.kind: k.count for k in metrics.by_kind}
    assert set(kinds) == {"rubric", "research", "checklist", "gate"} and kinds["rubric"] == 5
    assert metrics.calls.count >= 15 and metrics.judged > 0
    logs = run_cli("logs", "-n", "50", "--json", "--purpose", "rubric_judge", cwd=tmp_path, env=env)
    rows = [json.loads(line) for line in logs.stdout.splitlines()]
    assert len(rows) == 15 and {x["model"] for x in rows} == {"local/minilm"}
    # the research part: a record persisted and exported, the plan loop visible
    evaluations = list((tmp_path / "jurist-demo" / "research" / "evaluations").iterdir())
    assert len(evaluations) == 1
    record = json.loads((evaluations[0] / "evaluation.json").read_text())
    assert record["planEvaluation"]["totalIterations"] >= 1  # the loop itself: tests/demo/test_research.py
    assert (evaluations[0] / "plan_attempts" / "attempt_1.json").exists()
    export = run_cli("export", evaluations[0].name, "--output-dir", str(tmp_path / "exp"), cwd=tmp_path, env=env)
    assert export.returncode == 0, export.stderr
    assert json.loads((tmp_path / "exp" / evaluations[0].name / "evaluation.json").read_text()) == record


def test_no_judge_configured_says_how_to_configure_one(tmp_path):
    """Without a judge the local one is used, announced on stderr with how to configure an LLM."""
    from tests.conftest import EXAMPLES

    r = run_cli("evaluate", "--rubrics", str(EXAMPLES / "rubrics_freeform.json"), "--session",
                str(EXAMPLES / "sessions" / "s1.jsonl"), cwd=tmp_path,
                env={"JURIST_HOME": str(tmp_path / ".jurist")})
    assert "no judge configured" in r.stderr and "JURIST_JUDGE=openai/gpt-4o-mini" in r.stderr
    assert r.returncode == 1  # free-form rubrics: the local judge refuses, never a made-up score
    assert "the local judge cannot score free-form rubric rubric_001; configure an LLM judge" in r.stdout


def test_demo_judge_is_the_judge_of_every_part(provider, tmp_path):
    """`jurist demo --judge X`: the rubric batch, the research panels, the checklist judge and the
    gate's evaluator all call X; the tutor and the generators stay the scripted, offline ones."""
    from jurist.testing import Reply

    provider.default = Reply(text="I will not judge this.")  # every part records its calls, failed ones too
    env = {"JURIST_HOME": str(tmp_path / ".jurist"), "OPENAI_BASE_URL": provider.base_url,
           "OPENAI_API_KEY": "k", "HF_HUB_OFFLINE": "1"}
    r = run_cli("demo", "--judge", "openai/judge-x", cwd=tmp_path, env=env)
    assert r.returncode == 1, r.stdout + r.stderr  # a judge that never answers in form: parts report failures
    shown = " ".join(r.stdout.split())
    assert "with judge openai/judge-x" in shown and "Research question" in shown and "turn 5 learner>" in shown
    assert "comprehensiveness checked by the judge openai/judge-x" in shown
    assert {q["json"]["model"] for q in provider.requests} == {"judge-x"}
    logs = run_cli("logs", "-n", "1000", "--json", cwd=tmp_path, env=env)
    rows = [json.loads(line) for line in logs.stdout.splitlines()]
    by_purpose: dict[str, set[str]] = {}
    for row in rows:
        by_purpose.setdefault(row["purpose"], set()).add(row["model"])
    judged = {"rubric_judge": "rubrics", "panel_role": "research", "checklist_batch": "checklist",
              "self_evaluation": "gate"}
    for purpose, part in judged.items():
        assert by_purpose.get(purpose) == {"openai/judge-x"}, (part, by_purpose)
    assert by_purpose.pop("checklist_tutor") == {"scripted/tutor-demo"}  # the scripted tutor, not a judge
    assert set(by_purpose) == set(judged)  # no other call, and none to the local judge
    assert len(rows) - sum(r["purpose"] == "checklist_tutor" for r in rows) == len(provider.requests)
