"""`jurist compare` and `jurist probe` end to end: the offline judge on the shipped examples, and a
scripted judge on a real HTTP server."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES, run_cli
from tests.judges.test_pairwise import first_position, shown, verdict
from tests.quoting import prompt_text

PAIRWISE = EXAMPLES / "pairwise"
FILES = [str(PAIRWISE / f"{n}.jsonl") for n in ("thorough", "brief", "offtopic")]


def _env(tmp_path, provider=None, judge="openai/gpt-4o-mini"):
    env = {"JURIST_HOME": str(tmp_path / ".jurist")}
    if provider is not None:
        env.update(OPENAI_BASE_URL=provider.base_url, OPENAI_API_KEY="k", JURIST_JUDGE=judge)
    return env


def longer(payload: dict):
    a = shown(payload)
    return verdict("A" if len(a["A"]) > len(a["B"]) else "B")


def test_compare_with_the_offline_judge_prints_the_tables(tmp_path):
    out = tmp_path / "report.json"
    r = run_cli("compare", *FILES, "--resamples", "200", "--output", str(out), env=_env(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for text in ("judge local/minilm", "Each system against each other", "position flips over every pair",
                 "Bradley–Terry ranking", "thorough", "offtopic"):
        assert text in r.stdout
    report = json.loads(out.read_text())
    assert report["judge"] == "local/minilm" and len(report["pairs"]) == 24 and report["position"]["flips"] == 0
    assert sorted(r["system"] for r in report["ranking"]) == ["brief", "offtopic", "thorough"]
    # a judge that writes no text says, in the report and the output, what its verdicts cannot show
    assert report["method"] == "relevance" and "no evidence of the answers' quality" in report["caveat"]
    assert "no evidence of the answers' quality" in " ".join(r.stdout.split())
    # eight prompts establish no order between these three: the ranking says so rather than printing 1, 2, 3
    assert [x["ranks"] for x in report["ranking"]] == [[1, 3]] * 3 and not any(x["settled"] for x in report["ranking"])
    assert "no system's place is established over these 8 prompts" in report["order_note"]
    assert report["order_note"] in " ".join(r.stdout.split()) and "1–3" in r.stdout


@pytest.mark.xfail(strict=True, reason="beyond the shipped cross-encoder of the offline judge: it prefers the answer "
                   "about the prompt's topic, not the accurate one (docs/local-judge.md, what it is not good at)")
def test_the_offline_judge_ranks_the_thorough_answers_first(tmp_path):
    r = run_cli("compare", *FILES, "--resamples", "50", "--json", env=_env(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ranking = json.loads(r.stdout)["ranking"]
    assert [x["system"] for x in ranking] == ["thorough", "brief", "offtopic"] and all(x["settled"] for x in ranking)


def test_compare_with_a_scripted_judge_as_json_then_from_the_cache(provider, tmp_path):
    provider.default = longer
    args = ("compare", f"long={FILES[0]}", f"short={FILES[1]}", "--resamples", "100", "--json")
    r = run_cli(*args, env=_env(tmp_path, provider), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    (m,) = report["matchups"]
    assert (m["first"], m["second"], m["wins"], m["losses"]) == ("long", "short", 8, 0)
    assert report["method"] == "prompt" and report["caveat"] is None
    assert report["ranking"] is None and len(provider.requests) == 16
    again = run_cli(*args, env=_env(tmp_path, provider), cwd=tmp_path)
    assert again.returncode == 0 and len(provider.requests) == 16
    assert json.loads(again.stdout)["matchups"] == report["matchups"]


def test_compare_two_answers_given_on_the_command_line(provider, tmp_path):
    provider.default = first_position
    r = run_cli("compare", "--prompt", "Why is the sky blue?", "--answer", "Rayleigh scattering.", "--answer",
                "Because [bold]it is[/bold].", "--resamples", "0", env=_env(tmp_path, provider), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "answer1" in r.stdout and "1 (100.0%)" in r.stdout  # one pair, flipped
    assert "position flips over every pair: 1 of 1" in r.stdout.replace("\n", " ")


def test_compare_bad_input_exits_2_before_any_call(provider, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "q1", "prompt": "p", "answer": "a"}) + "\n{oops\n")
    env = _env(tmp_path, provider)
    r = run_cli("compare", FILES[0], str(bad), env=env, cwd=tmp_path)
    assert r.returncode == 2 and f"{bad}:2: not valid JSON" in r.stderr.replace("\n", "")
    r = run_cli("compare", FILES[0], env=env, cwd=tmp_path)
    assert r.returncode == 2 and "at least two systems" in r.stderr
    r = run_cli("compare", "--prompt", "p", "--answer", "only one", env=env, cwd=tmp_path)
    assert r.returncode == 2 and "give 2 answers" in r.stderr
    assert provider.requests == []


def test_compare_exits_1_when_no_pair_gets_a_verdict(provider, tmp_path):
    provider.default = lambda payload: verdict("nobody")
    r = run_cli("compare", FILES[0], FILES[1], "--resamples", "0", env=_env(tmp_path, provider), cwd=tmp_path)
    assert r.returncode == 1 and "no pair got a verdict in both orders" in r.stderr
    assert "Pairs without a verdict in both orders" in r.stdout and "could not be parsed" in r.stdout


def test_probe_with_the_offline_judge_reports_every_section(tmp_path):
    r = run_cli("probe", FILES[0], FILES[2], "--rubrics", str(EXAMPLES / "rubrics.json"), "--samples", "2",
                "--resamples", "100", env=_env(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for text in ("position flips: 0 of 8 pairs", "verbosity:", "score shift per rubric", "self-preference:",
                 "families of the answers' models: gpt: 8, llama: 8", "variance:", "repeatability SD"):
        assert text in r.stdout.replace("\n", " ") or text in r.stdout


def test_probe_with_a_scripted_judge_as_json(provider, tmp_path):
    def respond(payload: dict):
        prompt = prompt_text(payload["messages"])
        if '<answer id="A">' in prompt:
            return first_position(payload)
        from tests.analysis.test_probe import by_seed

        return by_seed(payload)

    provider.default = respond
    rubrics = tmp_path / "rubrics.json"
    rubrics.write_text(json.dumps({"rubrics": [{"id": "helpful", "name": "Helpful", "description": "Helps.",
                                                "scoring_criteria": {"1": "no", "5": "yes"}}]}))
    args = ("probe", FILES[0], FILES[1], "--rubrics", str(rubrics), "--samples", "2", "--resamples", "100", "--json")
    env = _env(tmp_path, provider, judge="openai/gpt-4o-mini")
    r = run_cli(*args, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    sections = {s["name"]: s for s in report["sections"]}
    assert sections["position"]["flip_rate"]["value"] == 1.0 and sections["position"]["items"] == 8
    assert sections["variance"]["rubrics"][0]["varying"] == 16  # seeds 0 and 1 score 1 and 2
    assert sections["self_preference"]["same_family"] == 8 and sections["self_preference"]["warning"]
    calls = len(provider.requests)
    assert calls == 16 + 16 * 2 + 16  # pairs in both orders; two samples and one padded score per answer
    again = run_cli(*args, env=env, cwd=tmp_path)
    assert again.returncode == 0 and len(provider.requests) == calls


def test_the_commands_defaults_are_the_analysis_defaults():
    from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES
    from jurist.analysis.bias import PAD_FACTOR
    from jurist.analysis.probe import DEFAULT_SAMPLES
    from jurist.cli import common, probe

    assert common.BOOTSTRAP_RESAMPLES == BOOTSTRAP_RESAMPLES
    assert (probe.DEFAULT_SAMPLES, probe.PAD_FACTOR) == (DEFAULT_SAMPLES, PAD_FACTOR)


def test_without_the_analysis_extra_compare_and_probe_say_which_to_install(tmp_path):
    for command in ("compare", "probe"):
        r = run_cli(command, *FILES, env=_env(tmp_path), cwd=tmp_path, without=("scipy",), timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"jurist {command} needs the analysis extra" in r.stderr and 'pip install "jurist[analysis]"' in r.stderr
        assert "Traceback" not in r.stderr


def test_compare_lists_the_prompts_not_every_system_answered(tmp_path):
    """brief leaves out q1, offtopic q1 and q2: q1 is in no matchup with them, q2 only in thorough against brief."""
    brief, offtopic = tmp_path / "brief.jsonl", tmp_path / "offtopic.jsonl"
    brief.write_text("".join((PAIRWISE / "brief.jsonl").read_text().splitlines(keepends=True)[1:]))
    offtopic.write_text("".join((PAIRWISE / "offtopic.jsonl").read_text().splitlines(keepends=True)[2:]))
    args = ("compare", FILES[0], str(brief), str(offtopic), "--resamples", "0")
    r = run_cli(*args, "--json", env=_env(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["dropped_prompts"] == [
        {"prompt": "q1", "answered_by": ["thorough"], "missing_from": ["brief", "offtopic"], "left_out_of": 3,
         "reason": "not answered by brief, offtopic: left out of every matchup"},
        {"prompt": "q2", "answered_by": ["thorough", "brief"], "missing_from": ["offtopic"], "left_out_of": 2,
         "reason": "not answered by offtopic: left out of 2 of the 3 matchups"}]
    assert [(m["first"], m["second"], m["items"], m["left_out"]) for m in report["matchups"]] == [
        ("thorough", "brief", 7, 1), ("thorough", "offtopic", 6, 2), ("brief", "offtopic", 6, 1)]
    assert len(report["pairs"]) == 19
    shown_ = " ".join(run_cli(*args, env=_env(tmp_path), cwd=tmp_path).stdout.split())
    assert "2 prompt(s) not every system answered: left out of the matchups with the systems that did not answer" \
           in shown_
    assert "q1 thorough brief, offtopic every matchup" in " ".join(shown_.replace("│", " ").split())
