"""The prompt lab's routes: the active version of a prompt, and A/B tests between two versions.

An active version is the text every call of that prompt uses from then on (version 1 is the
text shipped with jurist). An A/B test sends a ``share`` of the calls to version B and the
rest to version A (:mod:`jurist.prompt_router` chooses, per call, without statistics) until
its end condition:

* ``calls``: each version has had that many successful, uncached calls since the test
  started. The router ends the test; further calls use version A, the control (activate
  B in the lab if the comparison says so).
* ``alpha``: the comparison is significant at that level, once each version has scored at
  least :data:`MIN_SCORED` evaluations. Checked each time the comparison is computed (the
  lab page, ``GET /api/prompt-tests/<id>``, :func:`ab_report`), which needs the
  ``analysis`` extra; the test ends and the better version (``better``: the one with the
  higher mean score, or the lower) becomes the active one. Looking again and again and
  stopping at the first significant look makes a false "significant" likelier than
  ``alpha``: give ``calls`` too, or a small ``alpha``.

Both may be given: the first reached ends the test. The comparison is :mod:`jurist.analysis.ab`'s
(randomized design: one judge model, unpaired), on what the two versions scored since the test
started (see :func:`jurist.store.prompt_routes.arm_scores`). Each routed call is on record with
its version (the template hash) and its judge model; the report counts the calls per judge
(``calls_by_judge``), and a test whose versions were scored by several judges is not tested
for significance (``comparison.refused`` says so) until one judge is left.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jurist.analysis.comparison import ABComparison
from jurist.analysis.prompts import prompt_version, prompt_versions
from jurist.errors import InputError, NotFound
from jurist.extras import missing_extra
from jurist.ids import new_id
from jurist.prompt_router import end_test
from jurist.store import Store
from jurist.store import prompt_routes as q

MIN_SCORED = 10  # scored evaluations per version before significance can end a test
MAX_CALLS = 10_000_000


class ArmJudge(BaseModel):
    """The calls one judge model made with each version since the test started."""

    model_config = ConfigDict(frozen=True)

    judge_model: str
    calls_a: int
    calls_b: int


class PromptTest(BaseModel):
    """An A/B test of two versions of one prompt, with its running comparison."""

    id: str
    prompt: str
    a: int = Field(description="version A, the control")
    b: int = Field(description="version B")
    hash_a: str
    hash_b: str
    share: float = Field(description="the share of calls routed to version B")
    calls: int | None = Field(description="end when each version has had this many calls")
    alpha: float | None = Field(description="end when the comparison is significant at this level")
    better: Literal["higher", "lower"] = Field(description="which mean score wins a significant test")
    running: bool
    created_at: datetime
    finished_at: datetime | None = None
    ended_because: str | None = None
    routed_calls: int | None = Field(None, description="the calls routed, counted when the test ended")
    calls_a: int | None = Field(None, description="successful, uncached calls on version A since the start")
    calls_b: int | None = None
    calls_by_judge: list[ArmJudge] = Field(default_factory=list, description="those calls by judge model")
    comparison: ABComparison | None = None
    comparison_notice: str | None = Field(None, description="why there is no comparison (the analysis extra)")


def _now() -> datetime:
    return datetime.now(timezone.utc)


async def active_routes(store: Store) -> dict[str, q.Route]:
    """prompt name -> its route now (``status`` ``prompt_active`` with ``version``, or
    ``prompt_test`` with the test's configuration)."""
    return await store.aread(q.current_routes)


async def activate_version(store: Store, name: str, version: int) -> q.VersionRoute:
    """Make ``version`` of prompt ``name`` the one every call uses (ends a running test of it);
    returns the route written."""
    await prompt_version(store, name, version)  # NotFound for an unknown prompt or version
    when = _now()
    route = q.VersionRoute(id=new_id(), created_at=when, prompt=name, version=version)

    def write(conn: Any) -> None:
        q.end_running_tests(conn, name, when, f"version {version} was activated")
        q.insert_route(conn, route)

    await store.awrite(write)
    return route


async def start_test(store: Store, name: str, a: int, b: int, share: float = 0.5, *, calls: int | None = None,
                     alpha: float | None = None, better: str = "higher") -> PromptTest:
    """Start an A/B test of versions ``a`` and ``b`` of prompt ``name`` (ends a running one)."""
    if a == b:
        raise InputError("an A/B test needs two different versions")
    if not 0.0 < share < 1.0:
        raise InputError(f"share is the share of calls routed to B, between 0 and 1 (exclusive), not {share!r}")
    if calls is None and alpha is None:
        raise InputError("give an end condition: calls (per version), alpha (a significance level), or both")
    if calls is not None and not 1 <= calls <= MAX_CALLS:
        raise InputError(f"calls must be between 1 and {MAX_CALLS:,}")
    if alpha is not None and not 0.0 < alpha <= 0.5:
        raise InputError("alpha must be above 0 and at most 0.5")
    if better not in ("higher", "lower"):
        raise InputError("better must be 'higher' or 'lower'")
    await prompt_versions(store, name)  # NotFound for an unknown prompt
    va, vb = await prompt_version(store, name, a), await prompt_version(store, name, b)
    if va.hash == vb.hash:
        raise InputError(f"versions {a} and {b} of {name!r} have the same text, so their calls cannot be told apart")
    test_id, when = new_id(), _now()
    route = q.TestRoute(id=test_id, created_at=when, prompt=name, a=a, b=b, hash_a=va.hash, hash_b=vb.hash,
                        share=float(share), calls=calls, alpha=alpha, better=better)

    def write(conn: Any) -> None:
        q.end_running_tests(conn, name, when, f"replaced by test {test_id}")
        q.insert_route(conn, route)

    await store.awrite(write)
    return await ab_report(store, test_id)


async def list_tests(store: Store, name: str | None = None) -> list[PromptTest]:
    """The A/B tests (of prompt ``name``), newest first, without their comparisons."""
    return [PromptTest(**t.model_dump()) for t in await store.aread(q.list_tests, name)]


async def stop_test(store: Store, test_id: str, version: int | None = None) -> PromptTest:
    """End a running test now; ``version`` (default: A) becomes the active one."""
    test = await _get(store, test_id)
    if not test.running:
        raise InputError(f"test {test_id} already ended ({test.ended_because})")
    keep = test.a if version is None else version
    if keep not in (test.a, test.b):
        raise InputError(f"keep version {test.a} (A) or {test.b} (B), not {keep}")
    counts = await store.aread(q.arm_call_counts, [test.hash_a, test.hash_b], test.created_at)
    await store.awrite(end_test, test, f"stopped in the lab; version {keep} kept", keep, sum(counts.values()))
    return await ab_report(store, test_id)


async def _get(store: Store, test_id: str) -> q.StoredTest:
    test = await store.aread(q.get_test, test_id)
    if test is None:
        raise NotFound(f"no A/B test {test_id!r}; list them with GET /api/prompt-tests")
    return test


async def ab_report(store: Store, test_id: str) -> PromptTest:
    """The test with its call counts and running comparison; a running test whose ``alpha`` is
    reached ends here, and the better version becomes the active one."""
    test = await _get(store, test_id)
    since = test.created_at
    counts = await store.aread(q.arm_call_counts, [test.hash_a, test.hash_b], since)
    hashes = [test.hash_a, test.hash_b]
    by_judge: dict[str, dict[str, int]] = {}
    for row in await store.aread(q.arm_call_judges, hashes, since):
        by_judge.setdefault(row.judge_model, {})[row.template_hash] = row.calls
    judges = [ArmJudge(judge_model=j, calls_a=c.get(hashes[0], 0), calls_b=c.get(hashes[1], 0))
              for j, c in by_judge.items()]
    report = PromptTest(**test.model_dump(), calls_a=counts[test.hash_a], calls_b=counts[test.hash_b],
                        calls_by_judge=judges)
    report.comparison_notice = missing_extra("analysis", "The running comparison")
    if report.comparison_notice is not None:
        return report
    from jurist.analysis.ab import comparison, compare_rows

    rows = await store.aread(q.arm_scores, hashes, since)
    result = await asyncio.to_thread(lambda: compare_rows(rows, *hashes, design="randomized"))
    alpha = test.alpha if test.alpha is not None else 0.05
    report.comparison = comparison(test.prompt, test.a, test.b, test.hash_a, test.hash_b, result,
                                   alpha=alpha)
    significant, diff = report.comparison.significant, result.difference
    if (test.running and test.alpha is not None and significant and diff is not None
            and min(result.n_a, result.n_b) >= MIN_SCORED):
        winner = test.b if (diff > 0) == (test.better == "higher") else test.a
        reason = f"significant at alpha {test.alpha:g} ({report.comparison.verdict}); version {winner} kept"
        if await store.awrite(end_test, test, reason, winner, counts[test.hash_a] + counts[test.hash_b]):
            return await ab_report(store, test_id)
    return report
