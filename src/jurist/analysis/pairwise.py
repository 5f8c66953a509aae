"""Comparing systems by their answers: pairwise verdicts, win rates and a ranking.

:func:`compare` judges, for every two systems, each prompt both answered, in both
orders (:class:`~jurist.judges.pairwise.PairwiseJudge`: a verdict that changes with
the order is a tie and a position flip). Per two systems it reports wins, ties and
losses of the first, its win rate and its score (a win 1, a tie ½), and the flip rate,
each with a percentile bootstrap 95% interval over the prompts
(:func:`jurist.analysis.agreement.bootstrap_items`, :func:`scipy.stats.bootstrap`).
A prompt that not every system answered is left out of the matchups with the systems
that did not answer it; the report lists each such prompt and why (``dropped``).

With more than two systems it ranks them by a Bradley–Terry model (Bradley & Terry
1952): ``P(i beats j) = σ(θ_i − θ_j)`` with σ the logistic function, every pair's
result counting as one comparison, a tie as half a win for each side (the common
convention; Davidson 1970 models ties apart, which this does not). The log-strengths θ maximise the log-likelihood less a weak Gaussian
penalty ``BT_PRIOR / 2 · Σθ²``, by :func:`scipy.optimize.minimize` (Newton-CG, with
the analytic gradient and Hessian: the objective is convex). The penalty keeps θ
finite when a system won (or lost) every comparison, where the maximum-likelihood
estimate does not exist (Zermelo 1929; Ford 1957); otherwise it moves θ very
little. θ is reported centred on 0, with a percentile bootstrap interval over the
prompts. The order of two systems is *established* when the 95% percentile bootstrap
interval of the difference of their strengths (the same resamples) excludes 0; each
system's rank is then given as the range of ranks the established order leaves it
(``ranks``: best, worst), so a ranking over too few prompts says that it orders nothing
rather than printing 1, 2, 3.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Callable

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import optimize, special, stats

from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES, CONFIDENCE, Estimate, bootstrap_items
from jurist.analysis.answers import AnswerSet
from jurist.errors import InputError
from jurist.judges.pairwise import LOSS, RELEVANCE_MARGIN, TIE, WIN, Contestant, PairJudgement, PairwiseJudge
from jurist.judges.parsing import PREFER_A, PREFER_NEITHER
from jurist.judges.templates import from_file
from jurist.rubrics.naming import shorten
from jurist.runtime import Runtime
from jurist.sync import gather_bounded

BT_PRIOR = 0.01  # the Gaussian penalty on the log-strengths (a prior of standard deviation 10)
FAILURES_SHOWN = 10


def build_pairwise_judge(runtime: Runtime, *, judge: str | None = None, template: str | Path | None = None,
                         criteria: str | None = None, cache: bool | None = None) -> PairwiseJudge:
    """The pairwise judge on the runtime's judge model (or ``judge``), with the settings'
    temperature, seed, token limit, re-ask and per-verdict time limit (``rubric_timeout``)."""
    cfg = runtime.settings
    tmpl = from_file(template) if template is not None else None
    return PairwiseJudge(runtime.judge(judge, cache=cache), tmpl, criteria=criteria, temperature=cfg.temperature,
                         seed=cfg.seed, max_tokens=cfg.max_tokens, reask=cfg.retry_on_parse_failure,
                         timeout=cfg.rubric_timeout, prompts=runtime.prompts)


@dataclass
class Matchup:
    """Two systems and the prompts both answered."""

    first: AnswerSet
    second: AnswerSet
    items: list[str]
    left_out: int = 0  # prompts only one of the two answered


class DroppedPrompt(BaseModel):
    """A prompt not every system answered: left out of each matchup with a system that did not."""

    model_config = ConfigDict(frozen=True)

    prompt: str  # its id
    answered_by: list[str]
    missing_from: list[str]
    left_out_of: int  # matchups
    reason: str


def dropped_prompts(systems: list[AnswerSet]) -> list[DroppedPrompt]:
    """The prompts some system did not answer (in the order the systems give them), each with why
    and how many matchups it is left out of."""
    total = len(systems) * (len(systems) - 1) // 2
    out = []
    for item in dict.fromkeys(i for s in systems for i in s.answers):
        have = [s.name for s in systems if item in s.answers]
        missing = [s.name for s in systems if item not in s.answers]
        if not missing:
            continue
        kept = len(have) * (len(have) - 1) // 2
        where = "every matchup" if kept == 0 else f"{total - kept} of the {total} matchups"
        out.append(DroppedPrompt(prompt=item, answered_by=have, missing_from=missing, left_out_of=total - kept,
                                 reason=f"not answered by {', '.join(missing)}: left out of {where}"))
    return out


def matchups(systems: list[AnswerSet]) -> list[Matchup]:
    """Every two systems with their shared prompts (in the first's order). A prompt id whose
    text differs between two files is an InputError; so are two systems with no prompt in common."""
    if len(systems) < 2:
        raise InputError("give at least two systems' answers to compare")
    out = []
    for a, b in combinations(systems, 2):
        shared = [i for i in a.answers if i in b.answers]
        for i in shared:
            x, y = a.answers[i], b.answers[i]
            if " ".join(x.prompt.split()) != " ".join(y.prompt.split()):
                raise InputError(f"prompt {shorten(i)!r} differs between {x.where()} and {y.where()}; the same id "
                                 "must name the same prompt")
        if not shared:
            raise InputError(f"{a.name} ({a.source}) and {b.name} ({b.source}) answer no prompt id in common")
        out.append(Matchup(a, b, shared, left_out=len(set(a.answers) ^ set(b.answers))))
    return out


async def judge_matchups(pairs: list[Matchup], judge: PairwiseJudge, *, parallel: int = 4, sample: int | None = None,
                         on_progress: Callable[[PairJudgement], None] | None = None) -> list[PairJudgement]:
    """Every shared prompt of every matchup judged in both orders, ``parallel`` pairs at a time."""
    async def one(job: tuple[Matchup, str]) -> PairJudgement:
        m, item = job
        x, y = m.first.answers[item], m.second.answers[item]
        result = await judge.compare(item, x.prompt, Contestant(m.first.name, x.answer),
                                     Contestant(m.second.name, y.answer), sample=sample)
        if on_progress:
            on_progress(result)
        return result

    return await gather_bounded(one, [(m, i) for m in pairs for i in m.items], parallel)


# -- statistics -----------------------------------------------------------------------


def _share(hits: np.ndarray) -> Callable[[np.ndarray], float]:
    return lambda idx: float(np.mean(hits[idx])) if len(idx) else float("nan")


def _ratio(num: np.ndarray, den: np.ndarray) -> Callable[[np.ndarray], float]:
    def stat(idx: np.ndarray) -> float:
        total = float(den[idx].sum())
        return float(num[idx].sum()) / total if total else float("nan")

    return stat


@dataclass
class PositionStats:
    """How the order of the answers moved the verdicts, over pairs judged both ways."""

    pairs: int
    flips: int
    flip_rate: Estimate  # share of pairs whose two orders disagree
    decisive: int  # single-order verdicts that named a winner
    first_position: Estimate  # share of those that chose the answer shown first (A); 0.5 without position bias

    def to_json(self) -> dict[str, object]:
        return {"pairs": self.pairs, "flips": self.flips, "flip_rate": self.flip_rate.to_json(),
                "decisive_verdicts": self.decisive, "first_position_share": self.first_position.to_json()}


def position_stats(judged: list[PairJudgement], *, resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = 0) -> PositionStats:
    """Flip rate and the share of decisive verdicts that chose position A, with intervals over pairs."""
    ok = [p for p in judged if p.ok]
    flips = np.array([p.flipped for p in ok], dtype=float)
    a_picks = np.array([sum(w == PREFER_A for w in p.positions) for p in ok], dtype=float)
    decisive = np.array([sum(w != PREFER_NEITHER for w in p.positions) for p in ok], dtype=float)
    return PositionStats(
        pairs=len(ok), flips=int(flips.sum()),
        flip_rate=bootstrap_items(_share(flips), len(ok), resamples=resamples, seed=seed),
        decisive=int(decisive.sum()),
        first_position=bootstrap_items(_ratio(a_picks, decisive), len(ok), resamples=resamples, seed=seed))


@dataclass
class MatchupStats:
    """One system against another over the prompts both answered."""

    first: str
    second: str
    items: int
    judged: int  # pairs with a verdict in both orders
    wins: int  # the first system's
    ties: int
    losses: int
    win_rate: Estimate
    tie_rate: Estimate
    loss_rate: Estimate
    score: Estimate  # the first's points per pair: a win 1, a tie ½
    position: PositionStats
    failures: list[dict[str, str]] = field(default_factory=list)
    failed: int = 0
    left_out: int = 0  # prompts only one of the two answered (see CompareReport.dropped)

    def to_json(self) -> dict[str, object]:
        return {"first": self.first, "second": self.second, "items": self.items, "left_out": self.left_out,
                "judged": self.judged,
                "failed": self.failed, "wins": self.wins, "ties": self.ties, "losses": self.losses,
                "win_rate": self.win_rate.to_json(), "tie_rate": self.tie_rate.to_json(),
                "loss_rate": self.loss_rate.to_json(), "score": self.score.to_json(),
                "position": self.position.to_json(), "failures": self.failures}


def matchup_stats(m: Matchup, judged: list[PairJudgement], *, resamples: int = BOOTSTRAP_RESAMPLES,
                  seed: int = 0) -> MatchupStats:
    mine = [p for p in judged if p.first == m.first.name and p.second == m.second.name]
    ok = [p for p in mine if p.ok]
    outcomes = np.array([p.outcome for p in ok], dtype=object)
    points = np.array([p.score for p in ok], dtype=float)

    def rate(what: str) -> Estimate:
        return bootstrap_items(_share((outcomes == what).astype(float)), len(ok), resamples=resamples, seed=seed)

    failed = [p for p in mine if not p.ok]
    return MatchupStats(
        first=m.first.name, second=m.second.name, items=len(m.items), judged=len(ok),
        wins=int((outcomes == WIN).sum()), ties=int((outcomes == TIE).sum()), losses=int((outcomes == LOSS).sum()),
        win_rate=rate(WIN), tie_rate=rate(TIE), loss_rate=rate(LOSS),
        score=bootstrap_items(lambda idx: float(np.mean(points[idx])) if len(idx) else float("nan"), len(ok),
                              resamples=resamples, seed=seed),
        position=position_stats(mine, resamples=resamples, seed=seed),
        failures=[{"item": p.item, "reason": p.reason or ""} for p in failed[:FAILURES_SHOWN]], failed=len(failed),
        left_out=m.left_out)


def bradley_terry(n: int, first: np.ndarray, second: np.ndarray, score: np.ndarray, *,
                  prior: float = BT_PRIOR) -> np.ndarray:
    """Bradley–Terry log-strengths of ``n`` systems, centred on 0, from comparisons
    ``first[k]`` against ``second[k]`` with the first's result ``score[k]`` (1 win, ½ tie, 0 loss):
    the maximiser of ``Σ s·log σ(θ_f − θ_s) + (1 − s)·log σ(θ_s − θ_f) − prior/2·Σθ²``."""
    first, second, score = np.asarray(first, int), np.asarray(second, int), np.asarray(score, float)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        d = theta[first] - theta[second]
        loglik = score * special.log_expit(d) + (1.0 - score) * special.log_expit(-d)
        residual = special.expit(d) - score  # d(−loglik)/dd
        grad = np.bincount(first, residual, n) - np.bincount(second, residual, n) + prior * theta
        return float(-loglik.sum() + prior / 2.0 * theta @ theta), grad

    def hessian(theta: np.ndarray) -> np.ndarray:
        p = special.expit(theta[first] - theta[second])
        w = p * (1.0 - p)
        h = prior * np.eye(n)
        np.add.at(h, (first, first), w)
        np.add.at(h, (second, second), w)
        np.add.at(h, (first, second), -w)
        np.add.at(h, (second, first), -w)
        return h

    result = optimize.minimize(objective, np.zeros(n), jac=True, hess=hessian, method="Newton-CG",
                               options={"xtol": 1e-10, "maxiter": 200})
    theta = np.asarray(result.x, float)
    centred: np.ndarray = theta - theta.mean()
    return centred


@dataclass
class Ranked:
    system: str
    rank: int  # by the strength's point estimate
    strength: Estimate  # Bradley–Terry log-strength, centred on 0
    p_vs_mean: float  # σ(θ): the chance of beating a system of the mean strength
    wins: int
    ties: int
    losses: int
    # the ranks the established order leaves it (best, worst): 1 + the systems established above it,
    # n − the systems established below it; None without a bootstrap (too few prompts, no resamples)
    ranks: tuple[int, int] | None = None
    unordered_with: list[str] = field(default_factory=list)  # systems whose order against it is not established

    @property
    def settled(self) -> bool:
        """Whether its place is established: a bootstrap was run and it is ordered against every other system."""
        return self.ranks is not None and self.ranks[0] == self.ranks[1]

    @property
    def rank_text(self) -> str:
        """``2`` where its place is established (or no bootstrap was run: see
        :attr:`CompareReport.order_note`), ``1–3``, every place left to it, where it is not."""
        if self.ranks is None:
            return str(self.rank)
        best, worst = self.ranks
        return str(best) if best == worst else f"{best}–{worst}"

    def to_json(self) -> dict[str, object]:
        return {"system": self.system, "rank": self.rank,
                "ranks": None if self.ranks is None else list(self.ranks), "settled": self.settled,
                "unordered_with": self.unordered_with, "strength": self.strength.to_json(),
                "p_vs_mean": round(self.p_vs_mean, 4), "wins": self.wins, "ties": self.ties, "losses": self.losses}


def established_order(draws: np.ndarray) -> np.ndarray:
    """``above[i, j]``: system i's strength is established above j's, the 95% percentile interval
    of ``θ_i − θ_j`` over the bootstrap draws (``draws``: systems × resamples) lying above 0."""
    n = draws.shape[0]
    above = np.zeros((n, n), bool)
    tail = (1.0 - CONFIDENCE) / 2.0 * 100.0
    for i, j in combinations(range(n), 2):
        diff = draws[i] - draws[j]
        diff = diff[np.isfinite(diff)]
        if not len(diff):
            continue
        low, high = np.percentile(diff, [tail, 100.0 - tail])
        above[i, j], above[j, i] = bool(low > 0), bool(high < 0)
    return above


def ranking(names: list[str], judged: list[PairJudgement], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
            prior: float = BT_PRIOR) -> list[Ranked]:
    """The systems ranked by Bradley–Terry strength, each with a bootstrap interval over the prompts."""
    index = {name: i for i, name in enumerate(names)}
    ok = [p for p in judged if p.ok]
    items = sorted({p.item for p in ok})
    item_of = {item: k for k, item in enumerate(items)}
    f = np.array([index[p.first] for p in ok], int)
    s = np.array([index[p.second] for p in ok], int)
    pts = np.array([p.score for p in ok], float)
    where = np.array([item_of[p.item] for p in ok], int)
    theta = bradley_terry(len(names), f, s, pts, prior=prior)
    low = high = above = None
    if len(items) >= 2 and resamples > 0:
        def statistic(idx: np.ndarray) -> np.ndarray:
            take = np.concatenate([np.flatnonzero(where == k) for k in np.asarray(idx, int)])
            return bradley_terry(len(names), f[take], s[take], pts[take], prior=prior)

        res = stats.bootstrap((np.arange(len(items)),), statistic, vectorized=False, n_resamples=resamples,
                              confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(seed))
        low, high = res.confidence_interval.low, res.confidence_interval.high
        above = established_order(np.asarray(res.bootstrap_distribution, float))
    out = []
    for i, name in enumerate(names):
        mine_first, mine_second = pts[f == i], pts[s == i]
        wins = int((mine_first == 1).sum() + (mine_second == 0).sum())
        losses = int((mine_first == 0).sum() + (mine_second == 1).sum())
        ties = int((mine_first == 0.5).sum() + (mine_second == 0.5).sum())
        est = Estimate(round(float(theta[i]), 4), None if low is None else round(float(low[i]), 4),
                       None if high is None else round(float(high[i]), 4))
        ranked = Ranked(name, 0, est, float(special.expit(theta[i])), wins, ties, losses)
        if above is not None:
            ranked.ranks = (1 + int(above[:, i].sum()), len(names) - int(above[i, :].sum()))
            ranked.unordered_with = [other for j, other in enumerate(names)
                                     if j != i and not above[i, j] and not above[j, i]]
        out.append(ranked)
    out.sort(key=lambda r: (-(r.strength.value or 0.0), r.system))
    for k, r in enumerate(out, start=1):
        r.rank = k
    return out


@dataclass
class ComparedSystem:
    """One system of a comparison: its name, where its answers came from, how many."""

    name: str
    source: str
    answers: int

    def to_json(self) -> dict[str, str | int]:
        return {"name": self.name, "source": self.source, "answers": self.answers}


#: Said with the report of a judge that writes no text (``method`` "relevance").
RELEVANCE_CAVEAT = ("{judge} writes no text: it preferred the answer it found more about the prompt (p(answers), "
                    f"a difference under {RELEVANCE_MARGIN} a tie), not the more accurate, complete or safe one, so "
                    "these verdicts and this ranking are no evidence of the answers' quality; compare with an LLM "
                    "judge (--judge) for that")


@dataclass
class CompareReport:
    judge: str
    template: str
    template_hash: str
    criteria: str
    systems: list[ComparedSystem]
    matchups: list[MatchupStats]
    position: PositionStats  # over every pair
    ranking: list[Ranked] | None
    pairs: list[PairJudgement]
    resamples: int
    dropped: list[DroppedPrompt] = field(default_factory=list)  # prompts not every system answered
    # how each pair was decided: "prompt" (the judge read the template), or "relevance" (a judge that
    # writes no text, such as local/minilm: the answer more about the prompt, see RELEVANCE_CAVEAT)
    method: str = "prompt"

    @property
    def caveat(self) -> str | None:
        """What the verdicts cannot show, said with every report of a judge that writes no text."""
        return RELEVANCE_CAVEAT.format(judge=self.judge) if self.method == "relevance" else None

    @property
    def judged(self) -> int:
        return sum(m.judged for m in self.matchups)

    @property
    def order_note(self) -> str | None:
        """What the ranking does not establish, said with it; None where every place is established."""
        if not self.ranking:
            return None
        prompts = len({p.item for p in self.pairs if p.ok})
        if any(r.ranks is None for r in self.ranking):
            return (f"the ranking is by the strengths' point estimates alone: no order is tested without a "
                    f"bootstrap over at least two prompts ({prompts} judged, {self.resamples} resamples)")
        unordered = [(r.system, other) for k, r in enumerate(self.ranking) for other in r.unordered_with
                     if other in {q.system for q in self.ranking[k + 1:]}]
        if not unordered:
            return None
        n = len(self.ranking)
        if len(unordered) == n * (n - 1) // 2:
            return (f"no system's place is established over these {prompts} prompts: every {CONFIDENCE:.0%} "
                    f"bootstrap interval of a difference in strength includes 0, so each ranks 1–{n}")
        which = "; ".join(f"{a} and {b}" for a, b in unordered)
        return (f"the order is not established over these {prompts} prompts for {which}: the "
                f"{CONFIDENCE:.0%} bootstrap interval of the difference in strength includes 0, so a "
                "rank shown as a range is every place the established order leaves to that system")

    def to_json(self) -> dict[str, object]:
        return {"kind": "pairwise_comparison", "judge": self.judge, "method": self.method, "caveat": self.caveat,
                "order_note": self.order_note,
                "template": self.template,
                "template_hash": self.template_hash, "criteria": self.criteria, "bootstrap_resamples": self.resamples,
                "bt_prior": BT_PRIOR, "systems": [s.to_json() for s in self.systems],
                "matchups": [m.to_json() for m in self.matchups],
                "dropped_prompts": [d.model_dump() for d in self.dropped], "position": self.position.to_json(),
                "ranking": None if self.ranking is None else [r.to_json() for r in self.ranking],
                "pairs": [p.to_json() for p in self.pairs]}


def report(systems: list[AnswerSet], pairs: list[Matchup], judged: list[PairJudgement], judge: PairwiseJudge, *,
           resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> CompareReport:
    """The figures of judged matchups (blocking: bootstrap)."""
    names = [s.name for s in systems]
    return CompareReport(
        judge=judge.name, template=judge.template.name, template_hash=judge.template.hash, criteria=judge.criteria,
        systems=[ComparedSystem(name=s.name, source=s.source, answers=len(s)) for s in systems],
        matchups=[matchup_stats(m, judged, resamples=resamples, seed=seed) for m in pairs],
        position=position_stats(judged, resamples=resamples, seed=seed),
        ranking=ranking(names, judged, resamples=resamples, seed=seed) if len(systems) > 2 else None,
        pairs=judged, resamples=resamples, dropped=dropped_prompts(systems),
        method="prompt" if judge.model.chats else "relevance")


async def compare(systems: list[AnswerSet], runtime: Runtime, *, judge: str | None = None,
                  template: str | Path | None = None, criteria: str | None = None, cache: bool | None = None,
                  parallel: int = 4, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                  on_progress: Callable[[PairJudgement], None] | None = None) -> CompareReport:
    """Judge every two systems' shared prompts in both orders; win rates, flips and (over two
    systems) a Bradley–Terry ranking. Every judge call is recorded in the runtime's store."""
    pairs = matchups(systems)  # before any call
    await runtime.astore()
    pj = await asyncio.to_thread(build_pairwise_judge, runtime, judge=judge, template=template, criteria=criteria,
                                 cache=cache)
    try:
        judged = await judge_matchups(pairs, pj, parallel=parallel, on_progress=on_progress)
    finally:
        await pj.model.aclose()
    await runtime.aflush()
    return await asyncio.to_thread(report, systems, pairs, judged, pj, resamples=resamples, seed=seed)
