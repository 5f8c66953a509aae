"""`jurist calibrate` end to end on the shipped labelled example set: the offline judge and a
scripted one (a real HTTP server speaking the OpenAI protocol)."""

from __future__ import annotations

import json
import re

import numpy as np
from scipy import stats

from jurist.testing import Reply
from tests.conftest import EXAMPLES, run_cli
from tests.quoting import prompt_text

RUBRICS = str(EXAMPLES / "rubrics.json")
LABELS = str(EXAMPLES / "labels" / "labels.jsonl")
SESSIONS = ("--sessions", str(EXAMPLES / "sessions"), "--sessions", str(EXAMPLES / "labels" / "sessions"))

# The scripted judge: a criterion is met when the session (any message) holds its phrase.
PHRASES = {"adenosine": "adenosine", "tolerance": "tolerance", "half_life": "half-life",
           "energy_myth": "great source of energy", "limit": "400", "doctor": "doctor",
           "overdose": "no problem at all", "cutoff": "afternoon", "taper": "gradually", "water": "water"}


def keyword_judge(payload: dict) -> Reply:
    prompt = prompt_text(payload["messages"])
    criteria, _, session = prompt.partition("## Chat Session to Evaluate")
    ids = re.findall(r"^- \[([a-z_]+)\]", criteria, flags=re.M)
    items = [{"id": i, "met": PHRASES[i] in session.lower(), "reasoning": "scripted"} for i in ids]
    return Reply(text=json.dumps({"items": items}))


def _env(tmp_path, **extra):
    env = {"JURIST_HOME": str(tmp_path / ".jurist")}
    env.update(extra)
    return env


def _check_report(report: dict) -> None:
    assert report["annotators"] == ["ana", "ben"]
    assert [r["rubric"] for r in report["rubrics"]] == ["mechanism", "safety", "practical"]
    for r in report["rubrics"]:
        jv, hh = r["judge_vs_humans"], r["humans"]
        assert r["items"] == 12 and hh["n"] == 12 and jv["n"] == 2 * (12 - len(r["unscored"]))
        m = np.array(jv["confusion"])
        assert m.sum() == jv["n"] and jv["exact"]["value"] == round(np.trace(m) / m.sum(), 4)
        for d in r["differing"]:
            assert d["gap"] > 0 and d["trace"].startswith("/evaluation/evaluations/")


def test_calibrate_with_the_offline_judge_prints_the_tables(tmp_path):
    out = tmp_path / "report.json"
    r = run_cli("calibrate", "--rubrics", RUBRICS, "--labels", LABELS, *SESSIONS, "--resamples", "200",
                "--output", str(out), env=_env(tmp_path), cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    for heading in ("Explains the mechanism correctly (mechanism), scale 1-5: 12 items", "Cohen's κ (quadratic)",
                    "Spearman ρ", "Kendall τ-b", "Krippendorff's α", "mean bias", "people vs people",
                    "mechanism: confusion", "judge ↓ people →", "where the judge and the people differ"):
        assert heading in r.stdout
    report = json.loads(out.read_text())
    assert report["judge"] == "local/minilm" and report["bootstrap_resamples"] == 200
    _check_report(report)


def test_calibrate_with_a_scripted_judge_as_json_and_from_the_cache(provider, tmp_path):
    provider.default = keyword_judge
    env = _env(tmp_path, OPENAI_BASE_URL=provider.base_url, OPENAI_API_KEY="k", JURIST_JUDGE="openai/gpt-4o-mini")
    args = ("calibrate", "--rubrics", RUBRICS, "--labels", LABELS, *SESSIONS, "--resamples", "100", "--json")
    r = run_cli(*args, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["judge"] == "openai/gpt-4o-mini"
    assert len(provider.requests) == 36  # twelve sessions, three rubrics
    _check_report(report)

    # the judge's scores, recomputed from the phrases: every figure checked against scipy
    labels = [json.loads(line) for line in open(LABELS)]
    safety = {lab["item"] for lab in labels if lab["rubric"] == "safety"}
    texts = {}
    for folder in (EXAMPLES / "sessions", EXAMPLES / "labels" / "sessions"):
        for f in folder.glob("*.jsonl"):
            lines = [json.loads(x) for x in f.read_text().splitlines()]
            texts[lines[0]["session_id"]] = " ".join(x["content"] for x in lines)
    assert safety <= set(texts)

    def judged(item: str) -> int:  # safety: limit +2, doctor +2, overdose -3, over 4 points on 1-5
        t = texts[item].lower()
        earned = 2 * ("400" in t) + 2 * ("doctor" in t) - 3 * ("no problem at all" in t)
        return int(np.floor(1 + min(1, max(0, earned / 4)) * 4 + 0.5))

    pairs = [(judged(lab["item"]), lab["label"]) for lab in labels if lab["rubric"] == "safety"]
    j, h = np.array(pairs).T
    got = next(x for x in report["rubrics"] if x["rubric"] == "safety")["judge_vs_humans"]
    assert got["spearman"]["value"] == round(stats.spearmanr(j, h).statistic, 4)
    assert got["kendall"]["value"] == round(stats.kendalltau(j, h).statistic, 4)
    assert got["mean_bias"]["value"] == round(float(np.mean(j - h)), 4)
    assert got["within_one"]["value"] == round(float(np.mean(np.abs(j - h) <= 1)), 4)

    # a rerun answers from the call cache: no new request; without --json it prints the tables
    out = tmp_path / "again.json"
    again = run_cli(*args[:-1], "--output", str(out), env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(provider.requests) == 36
    assert "judge openai/gpt-4o-mini" in again.stdout and "safety: confusion" in again.stdout
    rerun = json.loads(out.read_text())["rubrics"]
    for before, after in zip(report["rubrics"], rerun):  # the same figures (the traces and stored ids are the rerun's)
        assert {k: v for k, v in after.items() if k not in ("differing", "calibration_id")} == {
            k: v for k, v in before.items() if k not in ("differing", "calibration_id")}
        assert after["calibration_id"] != before["calibration_id"]  # each run stores its own
        assert [d["item"] for d in after["differing"]] == [d["item"] for d in before["differing"]]


def test_calibrate_bad_labels_exit_2_with_file_and_line(provider, tmp_path):
    bad = tmp_path / "labels.jsonl"
    bad.write_text(json.dumps({"item": "s1", "rubric": "mechanism", "label": 4, "annotator": "ana"}) + "\n"
                   + json.dumps({"item": "s1", "rubric": "kindness", "label": 4, "annotator": "ana"}) + "\n")
    env = _env(tmp_path, OPENAI_BASE_URL=provider.base_url, OPENAI_API_KEY="k", JURIST_JUDGE="openai/gpt-4o-mini")
    r = run_cli("calibrate", "--rubrics", RUBRICS, "--labels", str(bad), *SESSIONS, env=env, cwd=tmp_path)
    assert r.returncode == 2 and f"{bad}:2: rubric 'kindness'" in r.stderr.replace("\n", "")
    bad.write_text(json.dumps({"item": "s99", "rubric": "mechanism", "label": 4, "annotator": "ana"}) + "\n")
    r = run_cli("calibrate", "--rubrics", RUBRICS, "--labels", str(bad), *SESSIONS, env=env, cwd=tmp_path)
    assert r.returncode == 2 and f"{bad}:1: no session 's99'" in r.stderr.replace("\n", "")
    bad.write_text(json.dumps({"item": "s1", "rubric": "mechanism", "label": 7, "annotator": "ana"}) + "\n")
    r = run_cli("calibrate", "--rubrics", RUBRICS, "--labels", str(bad), *SESSIONS, env=env, cwd=tmp_path)
    assert r.returncode == 2 and "not a whole number on 'mechanism'" in r.stderr.replace("\n", "")
    assert provider.requests == []


def test_the_commands_default_resamples_are_the_analysis_default():
    from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES
    from jurist.cli import common

    assert common.BOOTSTRAP_RESAMPLES == BOOTSTRAP_RESAMPLES


def test_without_the_analysis_extra_calibrate_says_which_to_install(tmp_path):
    r = run_cli("calibrate", "--rubrics", RUBRICS, "--labels", LABELS, *SESSIONS, env=_env(tmp_path), cwd=tmp_path,
                without=("scipy", "krippendorff", "plotly"), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [
        'error: jurist calibrate needs the analysis extra (scipy, krippendorff, plotly; missing: scipy, '
        'krippendorff, plotly): pip install "jurist[analysis]"']
    assert r.stdout == "" and not (tmp_path / ".jurist").exists()  # stopped before any work


def test_one_missing_package_of_the_extra_is_named(tmp_path):
    r = run_cli("calibrate", "--rubrics", RUBRICS, "--labels", LABELS, *SESSIONS, env=_env(tmp_path), cwd=tmp_path,
                without=("krippendorff",), timeout=120)
    assert r.returncode == 2 and "(scipy, krippendorff, plotly; missing: krippendorff)" in r.stderr, r.stderr
    assert 'pip install "jurist[analysis]"' in r.stderr and "Traceback" not in r.stderr


# --fit-local: the offline judge's item threshold fitted on thirty labelled support sessions
SUPPORT = EXAMPLES / "labels" / "support"
SUPPORT_ARGS = ("--rubrics", str(SUPPORT / "rubrics.json"), "--sessions", str(SUPPORT / "sessions"),
                "--judge", "local/minilm")


def _support_labels(tmp_path, passes: dict[str, bool]):
    path = tmp_path / "support-labels.jsonl"
    path.write_text("".join(json.dumps({"item": i, "rubric": "apology", "label": p, "annotator": "ana"}) + "\n"
                            for i, p in passes.items()))
    return str(path)


def test_fit_local_fits_stores_and_reports_the_offline_judges_threshold(tmp_path):
    from jurist.judges.calibration import LOCAL_THRESHOLDS
    from jurist.store import Store
    from jurist.store.calibrations import list_calibrations

    db = f"sqlite:///{tmp_path}/cal.db"
    out = tmp_path / "report.json"
    r = run_cli("calibrate", *SUPPORT_ARGS, "--labels", str(SUPPORT / "labels.jsonl"), "--fit-local",
                "--resamples", "100", "--db", db, "--output", str(out), env=_env(tmp_path), cwd=tmp_path, timeout=600)
    assert r.returncode in (0, 1), r.stderr
    report = json.loads(out.read_text())
    fit = report["rubrics"][0][LOCAL_THRESHOLDS]
    # t06 is an even split (ana fail, ben pass): left out
    assert fit["items"] == 29 and fit["classes"] == {"fail": 14, "pass": 15} and fit["metric"] == "macro_f1"
    assert fit["after"]["macro_f1"] >= fit["before"]["macro_f1"]
    assert "apology: the offline judge's threshold (an item is met at a probability ≥ it), fitted by macro-F1 on " \
           "29 labelled sessions (fail 14, pass 15)" in " ".join(r.stdout.split()) or fit["degenerate"]
    store = Store(db)
    try:
        (row,) = store.read(list_calibrations)
    finally:
        store.close()
    assert row.judge_model == "local/minilm" and row.figures[LOCAL_THRESHOLDS] == fit
    degenerate = report["rubrics"][0]["threshold"]["degenerate"] or fit["degenerate"]
    assert r.returncode == (1 if degenerate else 0)  # either fitted threshold may be no threshold to use
    if fit["degenerate"] is None:
        assert (f"stored calibration {row.id}: judge local/minilm, template rubric_items_judge ({row.template_hash}), "
                f"rubric 'apology', with the offline judge's fitted threshold {fit['thresholds']['expresses']:.4f} "
                f"(band ±{fit['band']['expresses']:.3g}), which it judges this rubric with from now on") in \
            " ".join(r.stdout.split())


def test_fit_local_refuses_too_few_labels_one_class_or_another_judge_before_any_call(provider, tmp_path):
    env = _env(tmp_path)
    few = _support_labels(tmp_path, {f"t{n:02d}": n % 2 == 1 for n in range(1, 20)})
    r = run_cli("calibrate", *SUPPORT_ARGS, "--labels", few, "--fit-local", env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    err = " ".join(r.stderr.split())
    assert "--fit-local: no threshold fitted, because" in err
    assert "rubric 'apology' has 19 labelled sessions; fitting the offline judge's threshold needs at least 20" in err
    assert r.stdout == ""  # refused before judging: no report

    one_class = _support_labels(tmp_path, {f"t{n:02d}": True for n in range(1, 31)})
    r = run_cli("calibrate", *SUPPORT_ARGS, "--labels", one_class, "--fit-local", env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "the people label every session pass" in " ".join(r.stderr.split())

    # labels of another rubric: the rubrics file has no such rubric (file and line)
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"item": f"t{n:02d}", "rubric": "mechanism", "label": True,
                                         "annotator": "ana"}) + "\n" for n in range(1, 31)))
    r = run_cli("calibrate", *SUPPORT_ARGS, "--labels", str(other), "--fit-local", env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and f"{other}:1: rubric 'mechanism'" in r.stderr.replace("\n", ""), r.stderr

    # another judge: the fit is the offline judge's
    enough = _support_labels(tmp_path, {f"t{n:02d}": n % 2 == 1 for n in range(1, 31)})
    scripted = _env(tmp_path, OPENAI_BASE_URL=provider.base_url, OPENAI_API_KEY="k")
    r = run_cli("calibrate", *SUPPORT_ARGS[:-2], "--judge", "openai/gpt-4o-mini", "--labels", enough, "--fit-local",
                env=scripted, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "--fit-local fits the thresholds of the offline judge (local/minilm)" in \
        " ".join(r.stderr.split())
    assert provider.requests == []

    # --fit-local is for rubrics; --local-band goes with it
    r = run_cli("calibrate", "--gate", "quality", "--labels", enough, "--sessions", str(SUPPORT / "sessions"),
                "--fit-local", env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "--fit-local fits the offline judge's threshold of rubric items" in \
        " ".join(r.stderr.split())
    r = run_cli("calibrate", *SUPPORT_ARGS, "--labels", enough, "--local-band", "0.1", env=env, cwd=tmp_path,
                timeout=120)
    assert r.returncode == 2 and "--local-band is the band kept with a fit" in " ".join(r.stderr.split())
