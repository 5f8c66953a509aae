"""`jurist prompts`: the prompt lab's versions, active version and A/B tests from the terminal."""

from __future__ import annotations

import asyncio

from jurist.analysis.prompt_tests import active_routes, list_tests
from jurist.judges.templates import builtin
from jurist.store import Store
from tests.conftest import run_cli


def _env(tmp_path):
    return {"JURIST_HOME": str(tmp_path / ".jurist")}


def _routes(tmp_path):
    async def read():
        store = Store(f"sqlite:///{tmp_path / '.jurist' / 'jurist.db'}")
        try:
            return await active_routes(store), await list_tests(store)
        finally:
            store.close()

    return asyncio.run(read())


def test_a_version_added_activated_and_ab_tested_from_the_terminal(tmp_path):
    env = _env(tmp_path)
    shown = run_cli("prompts", "show", "gate_quality", env=env, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout == builtin("gate_quality").text  # the text alone
    (tmp_path / "v2.txt").write_text(shown.stdout + "\nBe strict.\n")
    added = run_cli("prompts", "add", "gate_quality", "v2.txt", "--note", "stricter", env=env, cwd=tmp_path)
    assert added.returncode == 0 and "stored gate_quality version 2" in added.stdout, added.stderr
    from_stdin = run_cli("prompts", "add", "gate_quality", "-", input=shown.stdout + "\nBe kind.\n", env=env,
                         cwd=tmp_path)
    assert from_stdin.returncode == 0 and "version 3" in from_stdin.stdout, from_stdin.stderr
    assert run_cli("prompts", "show", "gate_quality", "2", env=env, cwd=tmp_path).stdout.endswith("Be strict.\n")

    started = run_cli("prompts", "ab", "gate_quality", "1", "2", "--share", "0.3", "--calls", "40", env=env,
                      cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    routes, tests = _routes(tmp_path)
    test = tests[0]
    assert (test.a, test.b, test.share, test.calls, test.running) == (1, 2, 0.3, 40, True)
    assert routes["gate_quality"].id == test.id and test.id in started.stdout
    listed = run_cli("prompts", "list", env=env, cwd=tmp_path).stdout
    assert "A/B test: 1 vs 2" in listed and "1, 2, 3" in listed

    stopped = run_cli("prompts", "stop", test.id, "--keep", "2", env=env, cwd=tmp_path)
    assert stopped.returncode == 0 and "version 2 kept" in " ".join(stopped.stdout.split()), stopped.stdout
    routes, tests = _routes(tmp_path)
    assert routes["gate_quality"].status == "prompt_active" and routes["gate_quality"].version == 2
    assert not tests[0].running

    activated = run_cli("prompts", "activate", "gate_quality", "3", env=env, cwd=tmp_path)
    assert activated.returncode == 0 and "version 3 is in use" in activated.stdout
    assert _routes(tmp_path)[0]["gate_quality"].version == 3
    assert run_cli("prompts", "tests", "gate_quality", env=env, cwd=tmp_path).stdout.count("A/B test") == 1


def test_bad_input_is_exit_2_with_the_reason(tmp_path):
    env = _env(tmp_path)
    (tmp_path / "bogus.txt").write_text("Judge {bogus}.")
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "huge.txt").write_text("x" * 100_001)
    cases = [
        (("prompts", "show", "nope"), "no prompt named 'nope'"),
        (("prompts", "show", "gate_quality", "9"), "has no version 9"),
        (("prompts", "add", "gate_quality", "missing.txt"), "cannot read the prompt text"),
        (("prompts", "add", "gate_quality", "bogus.txt"), "unknown placeholder {bogus}"),
        (("prompts", "add", "gate_quality", "binary.txt"), "not UTF-8"),
        (("prompts", "add", "gate_quality", "huge.txt"), "the limit is 99,999"),
        (("prompts", "activate", "gate_quality", "2"), "has no version 2"),
        (("prompts", "ab", "gate_quality", "1", "1", "--calls", "5"), "two different versions"),
        (("prompts", "ab", "gate_quality", "1", "2"), "give an end condition"),
        (("prompts", "stop", "not-a-test"), "no A/B test 'not-a-test'"),
    ]
    for args, message in cases:
        r = run_cli(*args, env=env, cwd=tmp_path)
        assert r.returncode == 2 and message in " ".join(r.stderr.split()), (args, r.stdout, r.stderr)
    assert _routes(tmp_path) == ({}, [])  # nothing was written


def test_a_tests_calls_and_verdicts_are_shown_per_judge(capsys):
    from datetime import datetime, timezone

    from jurist.analysis.comparison import ABComparison, JudgePool
    from jurist.analysis.prompt_tests import ArmJudge, PromptTest
    from jurist.cli.prompts import show_test

    refused = "not compared: 2 judge models scored both versions (a/x, b/y); verdicts of different judges are not pooled"
    comparison = ABComparison(
        prompt="gate_quality", a=1, b=2, hash_a="h1", hash_b="h2", unit="points", mean_a=None, mean_b=None, n_a=0,
        n_b=0, difference=None, ci_low=None, ci_high=None, p_value=None, test=None, paired=False, significant=False,
        verdict=refused, refused=refused, design="randomized",
        judges=[JudgePool(judge_model="a/x", n_a=4, n_b=5, common=0, compared=False),
                JudgePool(judge_model="b/y", n_a=6, n_b=3, common=0, compared=False)])
    test = PromptTest(id="t1", prompt="gate_quality", a=1, b=2, hash_a="h1", hash_b="h2", share=0.5, calls=None,
                      alpha=0.05, better="higher", running=True, created_at=datetime.now(timezone.utc), calls_a=10,
                      calls_b=8, calls_by_judge=[ArmJudge(judge_model="a/x", calls_a=4, calls_b=5),
                                                 ArmJudge(judge_model="b/y", calls_a=6, calls_b=3)],
                      comparison=comparison)
    show_test(test)
    out = " ".join(capsys.readouterr().out.split())
    assert "by judge: a/x A 4, B 5; b/y A 6, B 3" in out
    assert f"comparison: {refused}" in out and "verdicts by judge: a/x (A 4, B 5); b/y (A 6, B 3)" in out
