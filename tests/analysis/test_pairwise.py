"""Comparing systems: the Bradley–Terry fit against worked examples, and the figures of a compare
run against scripted judges on a real HTTP server."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pytest

from jurist.analysis.answers import AnswerSet, load_answers
from jurist.analysis.pairwise import BT_PRIOR, bradley_terry, compare
from jurist.config import Settings
from jurist.runtime import Runtime
from tests.conftest import EXAMPLES
from tests.judges.test_pairwise import first_position, shown, verdict

# The worked example of the Wikipedia article "Bradley–Terry model": four teams, wins[i][j] = the
# times i beat j; its estimates after convergence (scaled to a geometric mean of 1) are
# 0.640, 1.043, 0.660 and 2.270.
WINS = np.array([[0, 2, 0, 1], [3, 0, 5, 0], [0, 3, 0, 1], [4, 0, 3, 0]])
PUBLISHED = np.array([0.640, 1.043, 0.660, 2.270])


def comparisons(wins: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f, s = [], []
    for i, j in zip(*np.nonzero(wins)):
        f += [i] * wins[i, j]
        s += [j] * wins[i, j]
    return np.array(f), np.array(s), np.ones(len(f))


def mm(wins: np.ndarray, rounds: int = 5000) -> np.ndarray:
    """Zermelo's iteration, as Hunter (2004, "MM algorithms for generalized Bradley-Terry models",
    eq. 3) writes it: an independent computation of the same maximum-likelihood estimate."""
    n = wins + wins.T
    w = wins.sum(axis=1)
    p = np.ones(len(wins))
    for _ in range(rounds):
        p = w / np.array([sum(n[i, j] / (p[i] + p[j]) for j in range(len(p)) if j != i) for i in range(len(p))])
        p /= np.exp(np.mean(np.log(p)))
    return p


def test_bradley_terry_reproduces_the_worked_example():
    theta = bradley_terry(4, *comparisons(WINS), prior=0.0)
    strengths = np.exp(theta)  # centred log-strengths: a geometric mean of 1
    assert np.round(strengths, 3).tolist() == PUBLISHED.tolist()
    assert np.allclose(strengths, mm(WINS), rtol=1e-6)
    assert abs(theta.sum()) < 1e-9


def test_bradley_terry_meets_the_likelihood_equations_and_the_two_system_closed_form():
    rng = np.random.default_rng(7)
    wins = rng.integers(1, 9, size=(5, 5)) * (1 - np.eye(5, dtype=int))
    theta = bradley_terry(5, *comparisons(wins), prior=0.0)
    # at the maximum, each system's expected wins equal its observed wins (Zermelo 1929)
    p = 1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    expected = ((wins + wins.T) * p).sum(axis=1) - np.diag((wins + wins.T) * p)
    assert np.allclose(expected, wins.sum(axis=1), atol=1e-6)
    # two systems, 7 wins of 10: P(first beats second) = 0.7 exactly; a tie is half a win each way
    f, s = np.zeros(10, int), np.ones(10, int)
    theta2 = bradley_terry(2, f, s, np.array([1.0] * 6 + [0.5] * 2 + [0.0] * 2), prior=0.0)
    assert 1 / (1 + np.exp(-(theta2[0] - theta2[1]))) == pytest.approx(0.7, abs=1e-8)


def test_the_prior_keeps_a_system_that_won_everything_finite_and_first():
    f, s = np.array([0] * 6 + [1] * 6), np.array([1] * 6 + [2] * 6)
    theta = bradley_terry(3, f, s, np.ones(12), prior=BT_PRIOR)
    assert np.all(np.isfinite(theta)) and theta[0] > theta[1] > theta[2]


def _runtime(provider) -> Runtime:
    return Runtime(Settings.load(providers={"fake": {"type": "openai", "base_url": provider.base_url,
                                                     "api_key": "k"}}, judge="fake/judge", max_retries=0))


def ranked_judge(order: list[str]):
    """A consistent judge that ranks answers by the rank word they carry (``order``, best first)."""
    def respond(payload: dict) -> object:
        a = shown(payload)
        rank = {pos: next(k for k, word in enumerate(order) if word in text) for pos, text in a.items()}
        return verdict("tie" if rank["A"] == rank["B"] else min(rank, key=rank.get))
    return respond


def systems(tmp_path, names: list[str], prompts: int = 6) -> list[AnswerSet]:
    out = []
    for name in names:
        f = tmp_path / f"{name}.jsonl"
        f.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}?", "answer": f"{name} answer {i}"})
                             + "\n" for i in range(prompts)))
        out.append(load_answers(f))
    return out


async def test_a_first_position_judge_gives_all_ties_and_a_flip_rate_of_one(provider, tmp_path):
    provider.default = first_position
    runtime = _runtime(provider)
    report = await compare(systems(tmp_path, ["good", "bad"]), runtime, resamples=200)
    await runtime.aclose()
    (m,) = report.matchups
    assert (m.judged, m.wins, m.ties, m.losses) == (6, 0, 6, 0)
    assert m.tie_rate.value == 1.0 and m.score.value == 0.5 and m.win_rate.value == 0.0
    assert m.position.flips == 6 and m.position.flip_rate.value == 1.0
    assert m.position.first_position.value == 1.0 and m.position.decisive == 12
    assert report.ranking is None and len(provider.requests) == 12


async def test_a_consistent_judge_finds_the_winner_and_the_ranking(provider, tmp_path):
    provider.default = ranked_judge(["good", "fair", "poor"])
    runtime = _runtime(provider)
    report = await compare(systems(tmp_path, ["poor", "good", "fair"]), runtime, resamples=200)
    await runtime.aclose()
    by_pair = {(m.first, m.second): m for m in report.matchups}
    assert by_pair[("poor", "good")].losses == 6 and by_pair[("poor", "good")].win_rate.value == 0.0
    assert by_pair[("good", "fair")].wins == 6 and by_pair[("good", "fair")].win_rate.to_json() == {
        "value": 1.0, "low": 1.0, "high": 1.0}
    assert report.position.flips == 0 and report.position.flip_rate.value == 0.0
    assert report.position.first_position.value == 0.5  # the winner was shown first half the time
    assert [r.system for r in report.ranking] == ["good", "fair", "poor"]
    top = report.ranking[0]
    assert (top.wins, top.ties, top.losses) == (12, 0, 0) and top.strength.low > 0
    # every prompt orders them the same way: every place is established
    assert [(r.ranks, r.settled, r.unordered_with) for r in report.ranking] == [
        ((1, 1), True, []), ((2, 2), True, []), ((3, 3), True, [])]
    assert report.order_note is None
    data = report.to_json()
    assert data["order_note"] is None and [r["ranks"] for r in data["ranking"]] == [[1, 1], [2, 2], [3, 3]]
    assert data["kind"] == "pairwise_comparison" and len(data["pairs"]) == 18
    assert {p["outcome"] for p in data["pairs"]} == {"win", "loss"}


async def test_a_ranking_says_which_order_the_prompts_do_not_establish(provider, tmp_path):
    # "alpha" beats both on every prompt; "beta" and "gamma" each win half the prompts against the other
    def respond(payload: dict) -> object:
        a = shown(payload)
        odd = int(a["A"].rsplit(" ", 1)[1]) % 2
        return ranked_judge(["alpha", "beta", "gamma"] if odd else ["alpha", "gamma", "beta"])(payload)

    provider.default = respond
    runtime = _runtime(provider)
    report = await compare(systems(tmp_path, ["gamma", "beta", "alpha"]), runtime, resamples=300)
    await runtime.aclose()
    by_name = {r.system: r for r in report.ranking}
    assert by_name["alpha"].ranks == (1, 1) and by_name["alpha"].settled and by_name["alpha"].rank_text == "1"
    for name, other in (("beta", "gamma"), ("gamma", "beta")):
        assert by_name[name].ranks == (2, 3) and not by_name[name].settled
        assert by_name[name].unordered_with == [other] and by_name[name].rank_text == "2–3"
    note = report.order_note
    assert note is not None and "not established over these 6 prompts" in note
    assert ("gamma and beta" in note) != ("beta and gamma" in note) and "alpha" not in note
    assert report.to_json()["order_note"] == note


async def test_a_ranking_without_a_bootstrap_says_it_tested_no_order(provider, tmp_path):
    provider.default = ranked_judge(["good", "fair", "poor"])
    runtime = _runtime(provider)
    report = await compare(systems(tmp_path, ["poor", "good", "fair"]), runtime, resamples=0)
    await runtime.aclose()
    assert [r.ranks for r in report.ranking] == [None, None, None]
    assert [r.rank_text for r in report.ranking] == ["1", "2", "3"]
    assert not any(r.settled for r in report.ranking)
    assert report.order_note is not None and "no order is tested" in report.order_note


def test_an_order_is_established_only_where_the_interval_of_the_difference_excludes_zero():
    from jurist.analysis.pairwise import established_order

    rng = np.random.default_rng(0)
    draws = np.stack([rng.normal(2.0, 0.3, 1000), rng.normal(0.0, 0.3, 1000), rng.normal(0.1, 0.3, 1000)])
    above = established_order(draws)
    assert above.tolist() == [[False, True, True], [False, False, False], [False, False, False]]
    # a draw that failed (NaN) is left out, not read as a difference
    draws[0, :10] = np.nan
    assert established_order(draws).tolist() == above.tolist()
    # nothing to go on: no order
    assert not established_order(np.full((2, 5), np.nan)).any()


async def test_win_rates_and_their_intervals_come_from_the_pairs(provider, tmp_path):
    # "a" wins on the first four prompts, ties on q4 and loses q5
    def respond(payload: dict) -> object:
        a = shown(payload)
        number = int(a["A"].rsplit(" ", 1)[1])
        if number == 4:
            return verdict("tie")
        a_is_a = a["A"].startswith("a ")
        return verdict("A" if (number < 4) == a_is_a else "B")

    provider.default = respond
    runtime = _runtime(provider)
    report = await compare(systems(tmp_path, ["a", "b"]), runtime, resamples=500, seed=3)
    await runtime.aclose()
    (m,) = report.matchups
    assert (m.wins, m.ties, m.losses) == (4, 1, 1)
    assert m.win_rate.value == pytest.approx(4 / 6, abs=1e-4) and m.score.value == pytest.approx(4.5 / 6, abs=1e-4)
    assert m.win_rate.low < m.win_rate.value < m.win_rate.high <= 1.0
    # the interval is scipy's percentile bootstrap over the six prompts
    from scipy import stats

    wins = np.array([1, 1, 1, 1, 0, 0], float)
    ref = stats.bootstrap((np.arange(6),), lambda i: float(np.mean(wins[np.asarray(i, int)])), vectorized=False,
                          n_resamples=500, method="percentile", rng=np.random.default_rng(3))
    assert (m.win_rate.low, m.win_rate.high) == (round(ref.confidence_interval.low, 4),
                                                   round(ref.confidence_interval.high, 4))


async def test_failed_pairs_are_counted_apart_with_their_reasons(provider, tmp_path):
    provider.default = lambda payload: verdict("maybe")
    runtime = _runtime(provider)
    report = await compare(systems(tmp_path, ["a", "b"], prompts=2), runtime, resamples=0)
    await runtime.aclose()
    (m,) = report.matchups
    assert (m.judged, m.failed) == (0, 2) and m.win_rate.value is None and report.judged == 0
    assert "could not be parsed after one re-ask" in m.failures[0]["reason"]
    assert len(provider.requests) == 8  # two prompts, two orders, one re-ask each


async def test_a_rerun_answers_from_the_call_cache(provider, tmp_path):
    def longer(payload: dict) -> object:
        a = shown(payload)
        return verdict("A" if len(a["A"]) > len(a["B"]) else "B")

    provider.default = longer
    files = [load_answers(EXAMPLES / "pairwise" / f"{n}.jsonl") for n in ("thorough", "brief")]
    runtime = _runtime(provider)
    first = await compare(files, runtime, resamples=0)
    again = await compare(files, runtime, resamples=0)
    await runtime.aclose()
    assert len(provider.requests) == 16 and first.matchups[0].wins == again.matchups[0].wins == 8
    assert all(p.forward.cached and p.backward.cached for p in again.pairs)


def test_every_two_systems_meet(tmp_path):
    from jurist.analysis.pairwise import matchups

    names = ["a", "b", "c", "d"]
    assert [(m.first.name, m.second.name) for m in matchups(systems(tmp_path, names, 2))] == list(
        combinations(names, 2))
