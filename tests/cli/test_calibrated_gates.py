"""The command line's calibrated gates: evaluate-batch --require-calibration refuses with exit 2 and
the command that makes a calibration; running that command makes one; calibrate --gate stores one."""

from __future__ import annotations

import json
import shlex

from jurist.testing import Reply
from tests.calibrations import write_sessions
from tests.cli.test_calibrate import LABELS, RUBRICS, SESSIONS, keyword_judge
from tests.conftest import EXAMPLES, run_cli
from tests.gate.helpers import bad, good


def _env(tmp_path, provider):
    return {"JURIST_HOME": str(tmp_path / ".jurist"), "OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "k",
            "JURIST_JUDGE": "openai/gpt-4o-mini"}


def _batch(tmp_path, env, *extra):
    return run_cli("evaluate-batch", "--rubrics", *extra[:1] or (RUBRICS,), "--sessions-dir",
                   str(EXAMPLES / "sessions"), "--output-dir", str(tmp_path / "out"), *extra[1:], env=env, cwd=tmp_path)


def test_evaluate_batch_refuses_without_calibration_then_runs_after_the_command_it_names(provider, tmp_path):
    provider.default = keyword_judge
    env = _env(tmp_path, provider)
    refused = _batch(tmp_path, env, RUBRICS, "--require-calibration", "0.6")
    assert refused.returncode == 2, refused.stderr
    err = refused.stderr.replace("\n", " ")
    assert "Traceback" not in refused.stderr and provider.requests == [] and not (tmp_path / "out").exists()
    for rubric in ("mechanism", "safety", "practical"):
        assert f"rubric '{rubric}': no stored calibration (min_kappa 0.6)" in err
    command = next(line.strip() for line in refused.stderr.splitlines() if line.strip().startswith("jurist calibrate"))
    assert command == (f"jurist calibrate --rubrics {RUBRICS} --judge openai/gpt-4o-mini --labels LABELS.jsonl "
                       "--sessions SESSIONS/")

    # the command as printed, with the labels and sessions filled in
    args = [{"LABELS.jsonl": LABELS, "SESSIONS/": SESSIONS[1]}.get(a, a) for a in shlex.split(command)[1:]]
    made = run_cli(*args, *SESSIONS[2:], "--resamples", "100", "--output", str(tmp_path / "cal.json"), env=env,
                   cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert made.stdout.count("stored calibration ") == 3
    kappas = {r["rubric"]: r["judge_vs_humans"]["weighted_kappa"]["value"]
              for r in json.loads((tmp_path / "cal.json").read_text())["rubrics"]}
    calls = len(provider.requests)

    lowest, rubric = min((k, r) for r, k in kappas.items())
    above = _batch(tmp_path, env, RUBRICS, "--require-calibration", f"{lowest + 0.001:.4f}")
    assert above.returncode == 2 and len(provider.requests) == calls
    assert f"rubric '{rubric}': the newest calibration" in above.stderr.replace("\n", " ")
    ran = _batch(tmp_path, env, RUBRICS, "--require-calibration", f"{lowest:.4f}")
    assert ran.returncode == 0, ran.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())  # scored (the calibration's calls
    assert summary["batch_summary"]["total_sessions"] == 5              # answer from the cache)


def test_a_rubric_of_the_file_that_requires_a_calibration(provider, tmp_path):
    provider.default = keyword_judge
    data = json.loads((EXAMPLES / "rubrics.json").read_text())
    data["rubrics"][1]["require_calibration"] = {"min_kappa": 0.5}  # safety only
    rubrics = tmp_path / "rubrics.json"
    rubrics.write_text(json.dumps(data))
    r = _batch(tmp_path, _env(tmp_path, provider), str(rubrics))
    assert r.returncode == 2 and "rubric 'safety'" in r.stderr and "mechanism" not in r.stderr
    assert provider.requests == []
    data["rubrics"][1]["require_calibration"] = {"min_kappa": 5}
    rubrics.write_text(json.dumps(data))
    r = _batch(tmp_path, _env(tmp_path, provider), str(rubrics))
    assert r.returncode == 2 and "require_calibration.min_kappa" in r.stderr.replace("\n", " ")


def _gate_judge(payload: dict) -> Reply:
    answer = payload["messages"][-1]["content"].rpartition("<response")[2]  # the data: the user message
    return Reply(text=good(0.8) if "GOOD" in answer else bad(0.3))


def _gate_calibration(provider, tmp_path):
    """Nine sessions whose answers say GOOD or POOR, labelled so; the calibrate --gate arguments for them."""
    answers = {f"a{k}": ("GOOD" if k % 3 else "POOR") + f" answer {k}" for k in range(9)}
    sessions = write_sessions(tmp_path / "sessions", answers)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item": i, "rubric": "quality", "label": t.startswith("GOOD"),
                                          "annotator": "ana"}) + "\n" for i, t in answers.items()))
    env = _env(tmp_path, provider)
    args = ("calibrate", "--gate", "quality", "--judge", "openai/gpt-4o-mini", "--labels", str(labels),
            "--sessions", str(sessions), "--resamples", "100")
    return args, labels, sessions, env


def test_calibrate_the_gate_from_the_command_line(provider, tmp_path):
    provider.default = _gate_judge
    base, labels, sessions, env = _gate_calibration(provider, tmp_path)
    r = run_cli(*base, "--threshold", "0.5", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())  # table titles and captions wrap
    assert "quality: fitted threshold (the judge passes at a score ≥ it), by agreement" in out
    assert "a score ≥ 0.5 as a pass" in out and "stored calibration " in out
    dry = run_cli(*base, "--no-store", "--fit", "f1", "--json", env=env, cwd=tmp_path)
    report = json.loads(dry.stdout)
    quality = report["rubrics"][0]
    assert report["target"] == "gate" and report["fit"] == "f1" and quality["calibration_id"] is None
    assert quality["threshold"]["threshold"] == 0.8 and quality["threshold"]["agreement"]["value"] == 1.0
    assert quality["judge_key"]["template"] == "gate_quality"

    wrong = run_cli("calibrate", "--labels", str(labels), "--sessions", str(sessions), env=env, cwd=tmp_path)
    assert wrong.returncode == 2 and "say what to calibrate with one of --rubrics" in wrong.stderr.replace("\n", " ")
    mislabelled = tmp_path / "other.jsonl"
    mislabelled.write_text(json.dumps({"item": "a1", "rubric": "safety", "label": True, "annotator": "ana"}) + "\n")
    r = run_cli("calibrate", "--gate", "quality", "--labels", str(mislabelled), "--sessions", str(sessions), env=env,
                cwd=tmp_path)
    assert r.returncode == 2 and f"{mislabelled}:1: rubric 'safety'" in r.stderr.replace("\n", "")


def test_a_degenerate_threshold_is_not_presented_as_the_result(provider, tmp_path):
    """A judge that gives every answer the same score: the best threshold passes every answer, at κ 0."""
    provider.default = lambda payload: Reply(text=good(0.0))
    args, _, _, env = _gate_calibration(provider, tmp_path)
    r = run_cli(*args, env=env, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    out, err = " ".join(r.stdout.split()), " ".join(r.stderr.split())
    assert "by agreement: DEGENERATE, no threshold to use" in out and "0 (degenerate)" in out
    reason = ("threshold 0 is degenerate: it is at the bottom of the scale (0-1), so every item passes; Cohen's κ "
              "at it is 0.000, no better than chance")
    assert f"no usable threshold for quality: {reason}" in err
    report = json.loads(run_cli(*args, "--json", "--no-store", env=env, cwd=tmp_path).stdout)
    assert report["rubrics"][0]["threshold"]["degenerate"] == reason
    from jurist.store import Store
    from jurist.store.calibrations import list_calibrations

    store = Store(f"sqlite:///{tmp_path / '.jurist' / 'jurist.db'}")
    try:
        [row] = store.read(list_calibrations)
    finally:
        store.close()
    fitted = row.figures["threshold"]
    assert row.threshold is None and isinstance(fitted, dict) and fitted["threshold"] == 0.0
    assert fitted["degenerate"] == reason
