"""jurist's pytest plugin: tests of an LLM app written as ordinary pytest tests.

Installed with jurist (entry point ``pytest11``), it adds :func:`assert_judged` (also
``from jurist import assert_judged``) and the ``judge`` fixture::

    from jurist import assert_judged

    def test_capital():
        answer = my_app("What is the capital of France?")
        assert_judged(answer, rubric="correctness.json", input="What is the capital of France?",
                      expected="Paris is the capital of France.", min_score=4)

The answer is judged against the rubric (a rubrics file: a path, else one shipped with jurist
such as ``correctness.json``; or an inline rubric or rubrics dict) as the last turn of a session
that starts with ``input``; the assertion fails when the weighted total is under ``min_score``
(default: 70 % of the scale's maximum, the pass mark of jurist's results) or a rubric could not
be evaluated, with every rubric's score and the judge's reasoning as the message.

* The judge: ``--jurist-judge REF``, else the configured one (``jurist.yaml``,
  ``JURIST_JUDGE``), else the offline ``local/minilm``.
* Verdicts are cached by request: judge calls are recorded in a store (the configured one, else
  ``jurist/store.db`` in pytest's cache folder, ``--jurist-store`` to choose), and a rerun with
  the same answers is answered from it with no model call. With pytest's cache off
  (``-p no:cacheprovider``) and no store configured, a temporary store is used and the summary
  says that nothing is kept.
* ``require_calibration=0.6`` (a minimum κ, or ``{"min_kappa": ...}``): the assertion fails,
  saying which calibration is missing, unless the store holds a calibration of this judge on
  these rubrics that good (see docs/calibration.md).
* Every judged assertion is a row of a table at the end of the session, and its scores are
  JUnit XML properties of its test (``jurist.1.score``, ``jurist.1.rubric.<id>``, ...).
* With pytest-xdist (``pytest -n 4``) every worker judges its own tests: with ``limiter_url``
  configured (``redis://...``) the endpoints' bounds are shared by all of them; without it, each
  worker holds an equal share of every bound (``max_concurrency``, each provider's
  ``max_in_flight``, requests and tokens per minute), and the summary says so.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import pytest

if TYPE_CHECKING:
    from jurist.config import Settings
    from jurist.rubrics.models import RubricSet
    from jurist.rubrics.results import RubricResult
    from jurist.runtime import Runtime

PROPERTY = "jurist"  # JUnit properties: jurist.<n>.score, jurist.<n>.rubric.<id>, ...; jurist.<n>: the row
STORE_FILE = "store.db"
PASS_SHARE = 0.7  # the default min_score: this share of the scale's maximum (jurist's pass mark)


@dataclass
class Row:
    """One judged assertion, as the summary table shows it."""

    test: str
    rubrics: str
    judge: str
    score: float | None
    min_score: float
    passed: bool
    cached: int  # rubric verdicts answered from the cache
    rubric_count: int

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


@dataclass
class JuristSession:
    """The plugin's state in one pytest process: its options, its runtime (built on first use)
    and the rows of the judged assertions."""

    config: pytest.Config
    judge: str | None
    store: str | None
    workers: int = 1
    runtime: "Runtime | None" = None
    item: pytest.Item | None = None
    rows: list[Row] = field(default_factory=list)

    def _base_settings(self) -> "Settings":
        from jurist.config import Settings, database_url_of

        settings = Settings.load(**({"judge": self.judge} if self.judge else {}))
        if self.store is not None:
            settings = settings.model_copy(update={"database_url": database_url_of(self.store)})
        return settings

    def _cache_folder(self) -> Path | None:
        cache = getattr(self.config, "cache", None)
        return None if cache is None else Path(cache.mkdir("jurist"))

    def settings(self) -> "Settings":
        """The runtime's settings: the configured ones, the judge and store given, a store in pytest's
        cache folder (else a temporary one) when none is configured, the bounds shared by the workers."""
        from jurist.config import database_url_of

        settings = self._base_settings()
        if settings.database_url is None:
            folder = self._cache_folder() or Path(tempfile.mkdtemp(prefix="jurist-pytest-"))
            settings = settings.model_copy(update={"database_url": database_url_of(str(folder / STORE_FILE))})
        if self.workers > 1 and not settings.limiter_url:
            settings = split_bounds(settings, self.workers)
        return settings

    def notes(self) -> list[str]:
        """What the summary says of where verdicts are cached and how the workers share the bounds."""
        try:
            settings = self._base_settings()
        except Exception as exc:  # a bad jurist.yaml: the assertions said so already
            return [f"the settings could not be read: {exc}"]
        from jurist.config import shown_url

        out = []
        if settings.database_url is not None:
            out.append(f"judge calls are recorded and cached in {shown_url(settings.database_url)}")
        elif (folder := self._cache_folder()) is not None:
            out.append(f"judge calls are recorded and cached in {folder / STORE_FILE}")
        else:
            out.append("verdicts are not kept between runs: pytest's cache is off and no store is configured, so "
                       "each process uses a temporary store (give --jurist-store to keep them)")
        if self.workers > 1:
            out.append(f"{self.workers} workers share every endpoint's bounds through {settings.limiter_url}"
                       if settings.limiter_url else
                       f"{self.workers} workers each hold 1/{self.workers} of every endpoint's bounds "
                       "(configure limiter_url: redis://... to share them instead)")
        return out

    def get_runtime(self) -> "Runtime":
        if self.runtime is None:
            from jurist.runtime import Runtime

            self.runtime = Runtime(self.settings())
        return self.runtime

    def close(self) -> None:
        if self.runtime is not None:
            from jurist.sync import run_sync

            run_sync(self.runtime.aclose())
            self.runtime = None


def split_bounds(settings: "Settings", workers: int) -> "Settings":
    """``settings`` with every endpoint bound divided among ``workers`` processes (at least 1 each)."""
    def share(value: int | None) -> int | None:
        return None if value is None else max(1, value // workers)

    providers = {name: p.model_copy(update={"max_in_flight": share(p.max_in_flight),
                                            "requests_per_minute": share(p.requests_per_minute),
                                            "tokens_per_minute": share(p.tokens_per_minute)})
                 for name, p in settings.providers.items()}
    return settings.model_copy(update={"max_concurrency": share(settings.max_concurrency),
                                       "upstream_max_concurrency": share(settings.upstream_max_concurrency),
                                       "providers": providers})


_ACTIVE: list[JuristSession] = []  # the session of this pytest process (one; empty outside pytest)


def _active() -> JuristSession:
    if not _ACTIVE:
        from jurist.errors import UsageError

        raise UsageError("assert_judged runs inside pytest, with jurist's plugin loaded (it is, once jurist is "
                         "installed, unless -p no:jurist)")
    return _ACTIVE[-1]


# -- what assert_judged judges ---------------------------------------------------------
def load_rubric_set(rubric: Any, near: Path | None = None) -> "RubricSet":
    """A rubrics file (a path; else one next to the test; else one shipped with jurist, such as
    ``correctness.json``), an inline rubric or rubrics dict, a list of rubrics, or a RubricSet."""
    from jurist.errors import InputError
    from jurist.rubrics.models import RubricSet, load_rubrics, parse_rubrics

    if isinstance(rubric, RubricSet):
        return rubric
    if isinstance(rubric, Mapping):
        data: Any = dict(rubric) if "rubrics" in rubric else [dict(rubric)]
        return parse_rubrics(data, "inline rubric", python_checks=True)
    if isinstance(rubric, Sequence) and not isinstance(rubric, str):
        return parse_rubrics(list(rubric), "inline rubrics", python_checks=True)
    if not isinstance(rubric, (str, Path)):
        raise InputError(f"rubric= takes a rubrics file, a rubric dict or a RubricSet, not {type(rubric).__name__}")
    path = Path(rubric)
    places = [path] + ([near / path] if near is not None and not path.is_absolute() else [])
    shipped = files("jurist") / "examples" / str(rubric)
    for place in places:
        if place.is_file():
            return load_rubrics(place)
    if not path.is_absolute() and shipped.is_file():
        return load_rubrics(Path(str(shipped)))
    raise InputError(f"no rubrics file {str(rubric)!r}: looked in the working folder"
                     f"{', next to the test' if near is not None else ''} and among jurist's shipped rubrics")


def session_of(answer: str, question: Any, expected: Any) -> Any:
    """The session judged: ``input`` (text, or chat messages as dicts) and the answer as the last turn."""
    from jurist.errors import InputError
    from jurist.rubrics.sessions import ChatSession, Message, parse_session

    if not isinstance(answer, str):
        raise InputError(f"assert_judged judges an answer given as text, not {type(answer).__name__}")
    if expected is None:
        wanted: tuple[str, ...] = ()
    elif isinstance(expected, str):
        wanted = (expected,)
    elif isinstance(expected, Sequence) and all(isinstance(e, str) for e in expected):
        wanted = tuple(expected)
    else:
        raise InputError("expected= takes the expected answer as text, or a list of acceptable answers")
    if question is None:
        turns: list[Message] = []
    elif isinstance(question, str):
        turns = [Message("user", question)]
    elif isinstance(question, Sequence):
        turns = parse_session([json.dumps(m) for m in question], "input=", "test").messages
    else:
        raise InputError("input= takes the user's message as text, or a list of chat messages")
    return ChatSession("test", [*turns, Message("assistant", answer)], source="assert_judged", expected=wanted)


def _requirement(value: Any) -> float | None:
    from jurist.errors import InputError

    if value is None:
        return None
    if isinstance(value, Mapping) and set(value) == {"min_kappa"}:
        value = value["min_kappa"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
        raise InputError("require_calibration= takes the minimum κ (a number from -1 to 1) or {\"min_kappa\": ...}")
    return float(value)


def describe(result: "RubricResult", min_score: float) -> str:
    """The assertion's message: the total against the bar, then every rubric's score and reasoning."""
    s = result.summary
    total = "no score" if s.total_score is None else f"{s.total_score:g}/{s.max_score:g}"
    lines = [f"judged {total}, min_score {min_score:g} (judge {result.judge_model})"]
    for r in result.rubric_scores:
        score = "evaluation_failed" if r.score is None else f"{r.score:g}/{r.max_score:g}"
        if r.score_range is not None:
            score += f" (the score lies between {r.score_range[0]:g} and {r.score_range[1]:g})"
        lines.append(f"- {r.rubric_id}: {score}: {r.reasoning or ''}".rstrip())
        for i in r.items or []:
            mark = "?" if i.met is None else "x" if i.met else " "
            lines.append(f"    [{mark}] {i.id}: {i.reasoning or i.evidence or i.text}")
    return "\n".join(lines)


def judge_answer(answer: str, *, rubric: Any, input: Any = None, expected: Any = None,  # noqa: A002
                 require_calibration: Any = None) -> "RubricResult":
    """The result of judging ``answer`` (no assertion): see :func:`assert_judged`."""
    from jurist.rubrics.api import evaluate_result
    from jurist.rubrics.calibration import with_bar
    from jurist.sync import run_sync

    state = _active()
    near = state.item.path.parent if state.item is not None else None
    rubric_set = with_bar(load_rubric_set(rubric, near), _requirement(require_calibration))
    chat = session_of(answer, input, expected)
    return run_sync(evaluate_result(rubric_set, chat, runtime=state.get_runtime()))


def assert_judged(answer: str, rubric: Any, *, input: Any = None,  # noqa: A002
                  expected: Any = None, min_score: float | None = None,
                  require_calibration: Any = None) -> "RubricResult":
    """Judge ``answer`` against ``rubric`` and fail the test, with the judge's reasoning, when the
    weighted total is under ``min_score`` (default 70 % of the scale's maximum) or a rubric could
    not be evaluated; ``require_calibration``: a minimum κ of a stored calibration of the judge on
    these rubrics (without one, the assertion fails saying so). Returns the result."""
    from jurist.errors import CalibrationRequired

    __tracebackhide__ = True
    state = _active()
    try:
        result = judge_answer(answer, rubric=rubric, input=input, expected=expected,
                              require_calibration=require_calibration)
    except CalibrationRequired as exc:
        pytest.fail(f"the judge is not calibrated well enough on these rubrics: {exc}", pytrace=False)
    s = result.summary
    bar = PASS_SHARE * s.max_score if min_score is None else float(min_score)
    failed = [r for r in result.rubric_scores if r.status != "ok"]
    passed = not failed and s.total_score is not None and s.total_score >= bar
    _record(state, result, rubric, bar, passed)
    if not passed:
        why = f"{len(failed)} rubric(s) could not be evaluated\n" if failed else ""
        pytest.fail(why + describe(result, bar), pytrace=False)
    return result


def _rubric_name(rubric: Any) -> str:
    if isinstance(rubric, (str, Path)):
        return str(rubric)
    if isinstance(rubric, Mapping) and "id" in rubric:
        return f"inline:{rubric['id']}"
    return "inline"


def _row_key(key: object) -> bool:
    """Whether a user property is one of this plugin's rows (``jurist.<n>``)."""
    head, _, n = str(key).partition(".")
    return head == PROPERTY and n.isdigit()


def _record(state: JuristSession, result: "RubricResult", rubric: Any, bar: float, passed: bool) -> None:
    """The assertion as JUnit properties of the running test and a row of the summary."""
    item = state.item
    test = item.nodeid if item is not None else "?"
    score = result.summary.total_score
    row = Row(test=test, rubrics=_rubric_name(rubric), judge=result.judge_model or "?", score=score,
              min_score=bar, passed=passed, cached=sum(1 for r in result.rubric_scores if r.cached),
              rubric_count=len(result.rubric_scores))
    if item is None:
        state.rows.append(row)
        return
    n = 1 + sum(1 for key, _ in item.user_properties if _row_key(key))
    props: list[tuple[str, object]] = [(f"{PROPERTY}.{n}", row.to_json()), (f"{PROPERTY}.{n}.score", score),
                                       (f"{PROPERTY}.{n}.min_score", bar), (f"{PROPERTY}.{n}.passed", passed),
                                       (f"{PROPERTY}.{n}.judge", row.judge)]
    props += [(f"{PROPERTY}.{n}.rubric.{r.rubric_id}", r.final_score) for r in result.rubric_scores]
    item.user_properties.extend(props)


# -- pytest hooks ------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jurist", "judging answers with jurist (assert_judged)")
    group.addoption("--jurist-judge", default=None, metavar="REF",
                    help="the judge of assert_judged (default: the configured judge, else local/minilm)")
    group.addoption("--jurist-store", default=None, metavar="URL_OR_FILE",
                    help="where judge calls are recorded and cached (default: the configured store, else "
                         "jurist/store.db in pytest's cache folder)")


def pytest_configure(config: pytest.Config) -> None:
    worker = getattr(config, "workerinput", None)
    # a pytest-xdist worker: one of workercount; the controller of pytest -n N: N (xdist has read "auto")
    count: Any = worker.get("workercount", 1) if worker is not None else getattr(config.option, "numprocesses", 1)
    workers = count if isinstance(count, int) and count > 0 else 1
    state = JuristSession(config, config.getoption("--jurist-judge"), config.getoption("--jurist-store"),
                          workers=max(1, workers))
    config.stash[_KEY] = state
    _ACTIVE.append(state)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None)
    if state is not None:
        state.close()
        if state in _ACTIVE:
            _ACTIVE.remove(state)


_KEY = pytest.StashKey[JuristSession]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    state = item.config.stash.get(_KEY, None)
    if state is not None:
        state.item = item
    try:
        return (yield)
    finally:
        if state is not None:
            state.item = None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    rows = [value for key, value in report.user_properties if _row_key(key)]
    if rows and _ACTIVE:
        _ACTIVE[-1].rows.extend(Row(**json.loads(str(v))) for v in rows)


def _cell(score: float | None) -> str:
    return "-" if score is None or not math.isfinite(score) else f"{score:g}"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None)
    if state is None or not state.rows or hasattr(config, "workerinput"):
        return
    header = ("test", "rubrics", "judge", "score", "min", "result", "cached")
    rows = [(r.test, r.rubrics, r.judge, _cell(r.score), _cell(r.min_score), "passed" if r.passed else "FAILED",
             f"{r.cached}/{r.rubric_count}") for r in state.rows]
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    tr = terminalreporter
    tr.write_sep("=", f"jurist: {len(rows)} judged assertion(s)")
    for line in (header, *rows):
        tr.write_line("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
    for note in state.notes():
        tr.write_line(f"note: {note}")


@pytest.fixture
def judge(request: pytest.FixtureRequest) -> "JudgeFixture":
    """:func:`assert_judged` as a fixture: ``judge(answer, rubric=..., min_score=4)``; ``judge.score(...)``
    returns the result without asserting; ``judge.ref`` is the judge used."""
    return JudgeFixture(_active())


class JudgeFixture:
    def __init__(self, state: JuristSession) -> None:
        self._state = state

    @property
    def ref(self) -> str:
        return self._state.get_runtime().judge_ref(announce=False)

    def __call__(self, answer: str, rubric: Any, **kwargs: Any) -> "RubricResult":
        __tracebackhide__ = True
        return assert_judged(answer, rubric, **kwargs)

    def score(self, answer: str, rubric: Any, **kwargs: Any) -> "RubricResult":
        return judge_answer(answer, rubric=rubric, **kwargs)
