"""Tests of the offline local/minilm judge (jurist.models.local): the bi-encoder
preselects windows, the trained cross-encoder (jurist.models.minilm.cross) decides.

The models are loaded once for the module, by the ``loaded`` fixture, under a
socket guard that refuses every non-loopback connection, through concurrent
asyncio calls: the load is shared, offline and from the package only. Tests that
need the models are marked ``slow`` (deselect with ``-m "not slow"``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

import jurist.models.local as local
from jurist.config import Settings
from jurist.errors import ConfigError, JuristError, Uncertain
from jurist.judges import builtin
from jurist.models.base import ChatModel, ChatRequest, DecidedChecks, MeaningJudge, StatementCheck
from jurist.rubrics import RubricJudge, SessionEvaluator, evaluate
from jurist.rubrics.models import Rubric, RubricSet
from jurist.rubrics.sessions import ChatSession, Message
from jurist.runtime import Runtime

SRC = Path(__file__).resolve().parents[2] / "src"
MODEL_DIR = SRC / "jurist" / "models" / "minilm"

CAFFEINE = "Caffeine keeps you awake by blocking adenosine receptors."

# Every probability strictly between 0 and 1 lies in a band of 0.5 round 0.5: a judge that
# can never decide, whatever the model says.
UNDECIDED = local.LocalThresholds(expresses=0.5, answers=0.5, band={"expresses": 0.5, "answers": 0.5})


# --- fixtures --------------------------------------------------------------------


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX path
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@dataclass
class SocketGuard:
    """Refuses (and records) any connection to a non-loopback address."""

    attempts: list[Any] = field(default_factory=list)

    def check(self, address: Any) -> None:
        if not _is_loopback(address):
            self.attempts.append(address)
            raise OSError(f"network access blocked in tests: {address!r}")


@dataclass
class Loaded:
    judge: local.LocalJudge
    guard: SocketGuard
    loads: int
    results: list[list[StatementCheck]]


@pytest.fixture(scope="module")
def loaded() -> Iterator[Loaded]:
    """Unload the shared models, block the network, then load them through 8
    concurrent ``expresses`` calls; keep the guard on for the whole module."""
    guard = SocketGuard()
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_create = socket.create_connection

    def connect(self: socket.socket, address: Any) -> Any:
        guard.check(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        guard.check(address)
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        guard.check(address)
        return real_create(address, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket.socket, "connect_ex", connect_ex)
        mp.setattr(socket, "create_connection", create_connection)
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
            mp.delenv(var, raising=False)
        local._model = None
        before = local._load_count
        judge = local.LocalJudge(local.LocalThresholds(band={"expresses": 0.0, "answers": 0.0}))
        text = "Caffeine occupies the adenosine receptors, so adenosine cannot make you sleepy."

        async def burst() -> list[list[StatementCheck]]:
            return await asyncio.gather(*(judge.expresses(text, [CAFFEINE]) for _ in range(8)))

        results = asyncio.run(burst())
        yield Loaded(judge=judge, guard=guard, loads=local._load_count - before, results=results)


@pytest.fixture
def judge(loaded: Loaded) -> local.LocalJudge:
    """The judge with the thresholds and bands shipped with the model."""
    return local.LocalJudge()


@pytest.fixture
def decisive(loaded: Loaded) -> local.LocalJudge:
    """The shipped thresholds with no band: the judge always decides (for checks of what the
    model decides, not of its band)."""
    return loaded.judge


# --- loading ---------------------------------------------------------------------


def test_import_sets_nothing_and_loads_nothing() -> None:
    code = (
        "import os, sys\n"
        "for v in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'HF_HUB_DISABLE_TELEMETRY'):\n"
        "    os.environ.pop(v, None)\n"
        "import jurist.models.local\n"
        "jurist.models.local.LocalJudge()\n"
        "assert 'HF_HUB_OFFLINE' not in os.environ, 'offline switch set at import'\n"
        "assert 'sentence_transformers' not in sys.modules and 'torch' not in sys.modules\n"
        "assert 'numpy' not in sys.modules, 'numpy imported before the first judgement'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_guard_blocks_the_network(loaded: Loaded) -> None:
    with pytest.raises(OSError, match="blocked"):
        socket.create_connection(("203.0.113.7", 443), timeout=0.1)
    loaded.guard.attempts.remove(("203.0.113.7", 443))


@pytest.mark.slow
def test_loads_both_models_from_the_package_offline(loaded: Loaded) -> None:
    assert loaded.loads == 1
    assert loaded.guard.attempts == []
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
    models = local._load_model()
    assert models.cross.record == local._load_model().cross.record
    assert local._encode(["one sentence", "another sentence"]).shape == (2, 384)


@pytest.mark.slow
def test_concurrent_calls_share_one_load(loaded: Loaded) -> None:
    assert loaded.loads == 1
    assert len(loaded.results) == 8
    first = loaded.results[0][0]
    assert all(r[0] == first for r in loaded.results)


@pytest.mark.parametrize("module", ["tokenizers", "safetensors", "threadpoolctl"])
def test_missing_dependencies_say_how_to_install(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setattr(local, "_model", None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError, match=r'pip install "jurist\[local\]"'):
        local._load_model()


def test_load_runs_inside_the_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    @contextlib.contextmanager
    def notice() -> Iterator[None]:
        seen.append("start")
        try:
            yield
        finally:
            seen.append("end")

    monkeypatch.setattr(local, "_model", None)
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    previous = local.set_load_notice(notice)
    try:
        with pytest.raises(ConfigError):
            local._load_model()
        assert seen == ["start", "end"]
        monkeypatch.setattr(local, "_model", object())  # already loaded: nothing to wait for
        local._load_model()
        assert seen == ["start", "end"]
    finally:
        assert local.set_load_notice(previous) is notice


def test_first_judgement_in_a_fresh_process_imports_no_torch() -> None:
    code = (
        "import asyncio, sys, time\n"
        "t = time.perf_counter()\n"
        "import jurist.models.local as local\n"
        "j = local.LocalJudge(local.LocalThresholds(band={'expresses': 0.0, 'answers': 0.0}))\n"
        "[check] = asyncio.run(j.expresses('Caffeine blocks adenosine. It keeps you awake. Tea has some too. '\n"
        "                                  'Decaf has little.', ['Caffeine keeps you awake.']))\n"
        "assert check.evidence, check\n"
        "heavy = {'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "print(time.perf_counter() - t)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_protocols_and_no_shared_instance() -> None:
    j = local.get_local_judge()
    assert j is not local.get_local_judge()  # a judge holds its thresholds only; the weights are loaded once
    assert isinstance(j, MeaningJudge) and isinstance(j, ChatModel)
    assert (j.name, j.endpoint) == ("local/minilm", "local")


# --- thresholds ------------------------------------------------------------------


def test_default_thresholds_are_the_models_record() -> None:
    record = json.loads((MODEL_DIR / "judge.json").read_text())
    shipped = {**record["thresholds"], "band": record["band"]}
    assert local.LocalThresholds().to_json() == shipped
    assert local.LocalJudge().thresholds == local.LocalThresholds()
    assert local.LocalThresholds.from_json(shipped) == local.LocalThresholds()
    assert local.LocalThresholds.from_json({}) == local.LocalThresholds()
    assert local.LocalJudge(UNDECIDED).thresholds is UNDECIDED
    assert len({local.LocalThresholds(), local.LocalThresholds(), UNDECIDED}) == 2  # hashable, by value
    # a field left out is the shipped one
    tuned = local.LocalThresholds(expresses=0.7, band={"expresses": 0.0})
    assert tuned.to_json() == {**shipped, "expresses": 0.7, "band": {**record["band"], "expresses": 0.0}}


@pytest.mark.parametrize(("build", "message"), [
    (lambda: local.LocalThresholds(1.5, 0.5, {"expresses": 0.1, "answers": 0.1}),
     "expresses must be a number from 0 to 1, got 1.5"),
    (lambda: local.LocalThresholds(0.5, float("nan"), {}), "answers must be a number from 0 to 1, got nan"),
    (lambda: local.LocalThresholds(0.5, 0.5, {"expresses": 0.6}), "band.expresses must be a number from 0 to 0.5"),
    (lambda: local.LocalThresholds(0.5, 0.5, {"expresses": True}), "band.expresses must be a number"),
    (lambda: local.LocalThresholds(0.5, 0.5, {"support": 0.1}), "band: unknown kind(s) support"),
    (lambda: local.LocalThresholds(0.5, 0.5, {"expreses": 0.1}), "did you mean 'expreses' -> 'expresses'?"),
    (lambda: local.LocalThresholds(0.5, 0.5, [0.1, 0.1]), "band must be a mapping"),  # type: ignore[arg-type]
    (lambda: local.LocalThresholds.from_json({"expresses": 0.5, "bands": {}}), "unknown field(s) bands"),
    (lambda: local.LocalThresholds.from_json({"expresses": "0.5"}), "expresses must be a number"),
    (lambda: local.LocalJudge({"expresses": 0.5}), "thresholds must be a LocalThresholds"),  # type: ignore[arg-type]
    (lambda: local.LocalJudge(candidates=0), "candidates must be a whole number"),
])
def test_bad_thresholds_are_refused(build: Any, message: str) -> None:
    import re

    with pytest.raises(ConfigError, match=re.escape(message)):
        build()


def test_decisions_confidence_and_the_band() -> None:
    judge = local.LocalJudge(local.LocalThresholds(0.6, 0.5, {"expresses": 0.1, "answers": 0.0}))
    assert judge._decide("expresses", "x", ["a", "b", "c"], [0.9, 0.75, 0.2]) == [
        (True, 0.9), (True, 0.75), (False, 0.8)]
    with pytest.raises(Uncertain) as caught:
        judge._decide("expresses", "the text expresses", ["a", "The assistant apologises", "c"], [0.9, 0.55, 0.65])
    err = caught.value
    assert str(err).startswith("uncertain: the local judge cannot decide whether the text expresses "
                               "'The assistant apologises': p(entails) = 0.550 lies within the band 0.500..0.700 "
                               "(threshold 0.600 ± 0.100); 1 more inside the band: 'c' (0.650)")
    assert (err.subject, err.probability, err.threshold, err.band) == ("The assistant apologises", 0.55, 0.6, 0.1)
    assert err.undecided == ("The assistant apologises", "c") and err.decided is None
    with pytest.raises(Uncertain) as caught:  # the others inside the band named, up to five
        judge._decide("expresses", "x", [f"s{n}" for n in range(8)], [0.6] * 8)
    assert str(caught.value).endswith("; 7 more inside the band: 's1' (0.600), 's2' (0.600), 's3' (0.600), "
                                      "'s4' (0.600), 's5' (0.600) and 2 more")
    with pytest.raises(Uncertain) as caught:  # what was decided comes with the undecided ones, in the order asked
        judge._decide("expresses", "x", ["a", "b", "c"], [0.9, 0.55, 0.2],
                      decided=lambda answers: DecidedChecks(tuple(
                          StatementCheck(s, a[0], a[1], "m") for s, a in zip("abc", answers) if a is not None)))
    assert caught.value.undecided == ("b",) and caught.value.decided == DecidedChecks((
        StatementCheck("a", True, 0.9, "m"), StatementCheck("c", False, 0.8, "m")))
    assert judge._decide("answers", "x", ["a", "b"], [0.5, 0.49]) == [(True, 0.5), (False, 0.51)]  # band 0: decided


@pytest.mark.slow
async def test_expresses_says_which_statements_it_cannot_decide_and_what_it_decided() -> None:
    text = "Caffeine has a half-life of about five hours in adults. It blocks adenosine so you do not feel sleepy."
    statements = ["Caffeine has a half-life of about five hours in adults.",
                  "Caffeine blocks adenosine receptors in the brain, so adenosine cannot signal sleepiness.",
                  "Stopping caffeine suddenly causes withdrawal headaches."]
    deciding = local.LocalJudge(local.LocalThresholds(band={"expresses": 0}))
    threshold = deciding.thresholds.expresses
    checks = await deciding.expresses(text, statements)
    distance = sorted((abs((c.confidence if c.expressed else 1 - c.confidence) - threshold), i)
                      for i, c in enumerate(checks))
    (near, k), (second, _) = distance[0], distance[1]
    assert second - near > 2e-4, distance
    judge = local.LocalJudge(local.LocalThresholds(band={"expresses": (near + second) / 2}))
    with pytest.raises(Uncertain) as caught:
        await judge.expresses(text, statements)
    assert caught.value.undecided == (statements[k],) and caught.value.subject == statements[k]
    assert caught.value.decided == DecidedChecks(tuple(c for i, c in enumerate(checks) if i != k))


def test_statements_about_the_assistant_are_heard_in_its_voice() -> None:
    assert local.about_assistant("The assistant apologises for the delay")
    assert local.about_assistant("  Assistant thanks the customer.")
    assert local.about_assistant("Does the AI assistant offer a refund?")
    assert not local.about_assistant("A virtual assistant can set reminders.")
    assert not local.about_assistant("Caffeine blocks adenosine.")
    assert local._speaker_premise("I'm so sorry.", "The assistant apologises") == 'The assistant says: "I\'m so sorry."'
    assert local._speaker_premise("I'm so sorry.", "The customer is upset") == "I'm so sorry."


# --- the cross-encoder -----------------------------------------------------------


@pytest.mark.slow
def test_pairs_are_tokenised_as_pairs_and_truncated_longest_first(loaded: Loaded) -> None:
    cross = local._load_model().cross
    long_premise = "The committee discussed the budget at great length. " * 40
    [enc] = cross.tokenizer.encode_batch([(long_premise, "The budget was discussed.")])
    assert len(enc.ids) == cross.record.max_seq_length
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    second = [t for t, ty in zip(enc.tokens, enc.type_ids) if ty == 1]
    assert second == ["the", "budget", "was", "discussed", ".", "[SEP]"]  # the short text kept whole


@pytest.mark.slow
def test_first_token_pass_equals_the_full_pass(loaded: Loaded) -> None:
    import numpy as np

    cross = local._load_model().cross
    encodings = cross.tokenizer.encode_batch([("A dog runs.", "An animal moves."), ("Tea.", "Coffee is hot and bitter.")])
    lengths = np.array([len(e.ids) for e in encodings])
    ids = np.zeros((2, int(lengths.max())), np.int64)
    types = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        ids[row, : len(e.ids)], types[row, : len(e.ids)] = e.ids, e.type_ids
    full = cross._forward(ids, lengths, types)[:, 0]
    first = cross._forward(ids, lengths, types, first_only=True)[:, 0]
    np.testing.assert_allclose(first, full, atol=1e-5)
    assert not np.allclose(cross._forward(ids, lengths)[:, 0], full)  # the token types count
    scores = cross.scores([("A dog runs.", "An animal moves."), ("Tea.", "Coffee is hot and bitter.")])
    np.testing.assert_allclose(scores.nli.sum(axis=1), 1.0)
    assert ((scores.answers > 0) & (scores.answers < 1)).all()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_one_call_is_one_batched_cross_encoder_pass(decisive: local.LocalJudge,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cross = local._load_model().cross
    seen: list[int] = []
    real = cross.scores

    def scores(pairs: Any, batch_size: int = 64) -> Any:
        seen.append(len(pairs))
        return real(pairs, batch_size)

    monkeypatch.setattr(cross, "scores", scores)
    text = " ".join(f"Fact number {n} is about a different animal, the {a}." for n, a in
                    enumerate(["cat", "dog", "owl", "eel", "fox", "bee"]))
    statements = [f"Something is said about the {a}, once more {n}." for n, a in enumerate(["cat", "owl", "bee"])]
    checks = await decisive.expresses(text, statements)
    assert len(checks) == 3 and all(c.evidence for c in checks)
    assert seen == [3 * local.CANDIDATES]  # the bi-encoder kept 3 of 12 windows per statement
    again = await decisive.expresses(text, statements)
    assert again == checks and seen == [3 * local.CANDIDATES]  # the pairs are cached
    # a text of two sentences is read whole, as the model was trained: one pair per statement
    checks = await decisive.expresses("I was late today.  The bus broke down.", ["The bus broke down.", "I was late."])
    assert seen[1:] == [2] and {c.evidence for c in checks} == {"I was late today. The bus broke down."}


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_assistants_words_are_framed_as_its_speech(decisive: local.LocalJudge) -> None:
    await decisive.expresses("I'm so sorry about that.", ["The assistant apologises.", "Someone is sorry."])
    assert ('The assistant says: "I\'m so sorry about that."', "The assistant apologises.") in local._pair_cache
    assert ("I'm so sorry about that.", "Someone is sorry.") in local._pair_cache


# --- never a crash ---------------------------------------------------------------

ODD_TEXTS = ["", "   ", "?", "...", "because", "so", "but", "🙂🎉👍", "\ud800 a lone surrogate", "\x00\x07", "Привет! 你好。 مرحبا. Hello 🙂.",
             "word " * 20_000, "Is it? " * 40 + "Yes." * 100]


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("odd", ODD_TEXTS, ids=[repr(t[:12]) for t in ODD_TEXTS])
async def test_any_text_gets_a_verdict_or_a_typed_failure(judge: local.LocalJudge, odd: str) -> None:
    calls = [
        lambda: judge.expresses(odd, [CAFFEINE]),
        lambda: judge.expresses(CAFFEINE, [odd]),
        lambda: judge.support(odd, [CAFFEINE]),
        lambda: judge.support(CAFFEINE, [odd, ""]),
        lambda: judge.coverage(odd, CAFFEINE),
        lambda: judge.coverage("What does caffeine do?", odd),
        lambda: judge.relevance(odd, [CAFFEINE, odd]),
    ]
    for call in calls:
        try:
            await call()
        except JuristError:
            pass


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_text_of_one_clause_word_does_not_crash(decisive: local.LocalJudge) -> None:
    # alignment._crossed_clauses raised ValueError: max() arg is an empty sequence here
    for word in ("?", "...", "because", "so", "but"):
        (check,) = await decisive.expresses(word, [CAFFEINE])
        assert not check.expressed
        result = await decisive.support(CAFFEINE, [word])
        assert result.unsupported == [CAFFEINE]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_empty_inputs(decisive: local.LocalJudge) -> None:
    assert await decisive.expresses("Some text.", []) == []
    (check,) = await decisive.expresses("", [CAFFEINE])
    assert not check.expressed and check.evidence is None and check.confidence == 1.0
    assert await decisive.relevance("query", []) == []
    result = await decisive.support("", ["a source"])
    assert result.supported == [] and result.unsupported == []
    result = await decisive.support("Caffeine is bitter.", [])
    assert result.unsupported == ["Caffeine is bitter."]
    coverage = await decisive.coverage("", "an answer")
    assert coverage.covered == coverage.uncovered == []


# --- uncertain: reported, never a guess ------------------------------------------


@pytest.mark.slow
@pytest.mark.asyncio
async def test_each_question_says_when_it_cannot_decide(loaded: Loaded) -> None:
    undecided = local.LocalJudge(UNDECIDED)
    asks = [
        (undecided.expresses("I'm so sorry about the wait.", ["The assistant apologises for the delay."]),
         "whether the text expresses 'The assistant apologises for the delay.': p(entails) = "),
        (undecided.support("Caffeine blocks adenosine.", [CAFFEINE]),
         "whether the sources support 'Caffeine blocks adenosine.': p(entails) = "),
        (undecided.coverage("What does caffeine block?", CAFFEINE),
         "whether the answer covers the part 'What does caffeine block?': p(answers) = "),
    ]
    for ask, says in asks:
        with pytest.raises(Uncertain, match="^uncertain: ") as caught:
            await ask
        assert says in str(caught.value) and "lies within the band 0.000..1.000 (threshold 0.500 ± 0.500)" in str(
            caught.value)
    scores = await undecided.relevance("What does caffeine block?", [CAFFEINE])  # a score, not a decision
    assert 0.0 < scores[0].score < 1.0


@pytest.mark.slow
async def test_coverage_and_support_carry_what_they_decided_when_one_part_is_undecided(
        decisive: local.LocalJudge) -> None:
    """A band round the threshold that holds exactly one part (one sentence): Uncertain names it
    and carries the result over the others, as the decisive judge gave them."""
    question = "When was the Eiffel Tower built? How tall is it? Who designed the Sydney Opera House?"
    answer = "The Eiffel Tower was built in 1889. It is 330 metres tall."
    sources = ["The Eiffel Tower was finished in 1889.", "Its height is 330 metres."]
    threshold = {"answers": decisive.thresholds.answers, "expresses": decisive.thresholds.expresses}

    async def one_undecided(kind: str, ask: Any, full: Any, names: list[str]) -> None:
        distance = sorted((abs((full.confidence[n] if n in yes else 1 - full.confidence[n]) - threshold[kind]), n)
                          for n in names for yes in [full.covered if kind == "answers" else full.supported])
        (near, name), (second, _) = distance[0], distance[1]
        assert second - near > 2e-4, distance
        band = {"answers": 0.0, "expresses": 0.0, kind: (near + second) / 2}
        with pytest.raises(Uncertain) as caught:
            await ask(local.LocalJudge(local.LocalThresholds(band=band)))
        partial = caught.value.decided
        assert caught.value.undecided == (name,) and type(partial) is type(full)
        assert name not in partial.confidence
        assert partial.confidence == {n: c for n, c in full.confidence.items() if n != name}
        if kind == "answers":
            assert partial.covered == [p for p in full.covered if p != name]
            assert partial.uncovered == [p for p in full.uncovered if p != name]
        else:
            assert partial.supported == [p for p in full.supported if p != name]
            assert partial.unsupported == [p for p in full.unsupported if p != name]

    cov = await decisive.coverage(question, answer)
    await one_undecided("answers", lambda j: j.coverage(question, answer), cov, cov.covered + cov.uncovered)
    sup = await decisive.support(answer, sources)
    await one_undecided("expresses", lambda j: j.support(answer, sources), sup, sup.supported + sup.unsupported)


@pytest.mark.slow
async def test_an_uncertain_item_is_evaluation_failed_in_the_rubric_record(loaded: Loaded) -> None:
    rubrics = RubricSet(rubrics=[Rubric(id="care", name="Care", items=[
        {"id": "sorry", "text": "The assistant apologises for the delay.", "points": 1}])])
    session = ChatSession("s", [Message("user", "Where is my order?"),
                                Message("assistant", "I'm so sorry about the wait.")])
    model = Runtime(Settings.load(), open_store=False).wrap(local.LocalJudge(UNDECIDED))
    evaluator = SessionEvaluator(rubrics, RubricJudge(model, builtin("rubric_judge"), builtin("rubric_items_judge")))
    [care] = (await evaluator.evaluate(session)).to_json()["rubric_scores"]
    assert care["status"] == "evaluation_failed"
    assert "uncertain: the local judge cannot decide whether the text expresses" in care["reasoning"]
    assert "'The assistant apologises for the delay.'" in care["reasoning"]


@pytest.mark.slow
async def test_an_uncertain_research_stage_is_reported_not_raised(loaded: Loaded) -> None:
    from jurist.research.local import LocalResearchEvaluator

    evaluator = LocalResearchEvaluator("answer", judge=local.LocalJudge(UNDECIDED))
    result = await evaluator.evaluate({"query": "What does caffeine block?", "answer": "It blocks adenosine.",
                                       "sources": json.dumps([{"id": "s1", "content": CAFFEINE}])})
    assert result.status == "skipped" and result.overall is None
    assert result.skip_reason and "uncertain: the local judge cannot decide" in result.skip_reason
    assert result.role_results[0].status == "failed"


# --- what the trained model decides ------------------------------------------------

# What the shipped cross-encoder still gets wrong (docs/local-judge.md, "What it is not good at"):
# strict, so a model that gets it right fails the mark and the test is kept as a plain one.
BEYOND_THE_MODEL = pytest.mark.xfail(strict=True, reason="beyond the shipped cross-encoder (development NLI "
                                     "accuracy 0.674): see docs/local-judge.md, what it is not good at")


@BEYOND_THE_MODEL
@pytest.mark.slow
@pytest.mark.asyncio
async def test_paraphrase_expressed_near_miss_and_unrelated_not(decisive: local.LocalJudge) -> None:
    text = ("I've been drinking coffee every morning for a year. My brain has responded by growing extra "
            "adenosine receptors, so the same cup does less for me now.")
    statement = "Tolerance to caffeine develops because the brain makes more adenosine receptors."
    (hit,) = await decisive.expresses(text, [statement])
    (far,) = await decisive.expresses("Knead the dough for about ten minutes until it is smooth and elastic.",
                                      [statement])
    assert hit.expressed and hit.evidence and "adenosine receptors" in hit.evidence
    assert not far.expressed
    for check in (hit, far):
        assert check.judge_model == "local/minilm" and 0.5 <= check.confidence <= 1.0


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize(("text", "statement"), [
    ("Vitamin C does not cure the flu, although it is often sold that way.", "Vitamin C cures the flu."),
    ("Most adults need seven to nine hours of sleep a night.", "Adults need about four hours of sleep a night."),
    pytest.param("The cat chased the dog around the garden.", "The dog chased the cat around the garden.",
                 marks=BEYOND_THE_MODEL),
])
async def test_contradictions_are_not_expressed(decisive: local.LocalJudge, text: str, statement: str) -> None:
    (check,) = await decisive.expresses(text, [statement])
    assert not check.expressed


@BEYOND_THE_MODEL
@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_factoid_answer_addresses_its_question_and_a_topical_sentence_does_not(
        decisive: local.LocalJudge) -> None:
    # the answers head learnt from science explanations (own question vs another): it judges the topic
    question = "Who invented the telephone?"
    answered = await decisive.coverage(question, "Alexander Graham Bell invented the telephone in 1876.",
                                       parts=[question])
    topical = await decisive.coverage(question, "The telephone is a device for talking at a distance.",
                                      parts=[question])
    assert question in answered.covered
    assert question in topical.uncovered


@BEYOND_THE_MODEL
@pytest.mark.slow
@pytest.mark.asyncio
async def test_coverage(decisive: local.LocalJudge) -> None:
    question = ("What is compound interest and how is it different from simple interest? "
                "Also, what rate do savings accounts pay?")
    answer = ("Compound interest is interest calculated on both the original deposit and the interest already "
              "added. Simple interest, by contrast, is only ever paid on the original deposit.")
    result = await decisive.coverage(question, answer)
    assert "what rate do savings accounts pay?" in result.uncovered
    assert "What is compound interest" in result.covered
    assert set(result.confidence) == set(result.covered + result.uncovered)
    assert result.judge_model == "local/minilm"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_support(decisive: local.LocalJudge) -> None:
    sources = ["The Allied invasion of Normandy began on 6 June 1944. It opened a second front in Western Europe.",
               "Paris was liberated in August 1944."]
    answer = "The Normandy landings took place on June 6, 1944. The landings were commanded by Napoleon."
    result = await decisive.support(answer, sources)
    assert result.supported == ["The Normandy landings took place on June 6, 1944."]
    assert result.unsupported == ["The landings were commanded by Napoleon."]
    assert all(0.5 <= c <= 1.0 for c in result.confidence.values())


@pytest.mark.slow
@pytest.mark.asyncio
async def test_relevance_ordering(decisive: local.LocalJudge) -> None:
    query = "How does caffeine keep you awake?"
    passages = ["Mortgage rates rose again this month.",
                "Caffeine blocks adenosine receptors, so the sleepiness signal cannot get through."]
    scores = await decisive.relevance(query, passages)
    assert [s.passage for s in scores] == passages
    assert scores[1].score > scores[0].score
    assert all(0.0 <= s.score <= 1.0 and s.judge_model == "local/minilm" for s in scores)


# A support conversation done well and one done badly, with items phrased about the assistant
# as HealthBench phrases them: judged against the assistant's own words.
SUPPORT_ITEMS = RubricSet(rubrics=[Rubric(id="support", name="Support", items=[
    {"id": "sorry", "text": "The assistant apologises for the delay.", "points": 1},
    {"id": "thanks", "text": "The assistant thanks the customer for their patience.", "points": 1},
    {"id": "when", "text": "The assistant tells the customer when the order will arrive.", "points": 1},
    {"id": "remedy", "text": "The assistant offers a refund or a replacement.", "points": 1},
])])
GOOD_SUPPORT = ChatSession("good", [
    Message("user", "My order was supposed to arrive last week and it still isn't here. This is ridiculous."),
    Message("assistant", "I'm so sorry about that. Let me look into it right away."),
    Message("user", "Fine."),
    Message("assistant", "Thanks for your patience while I checked. Your parcel was held at the depot, "
                         "and it will be delivered on Thursday."),
    Message("user", "And if it doesn't come?"),
    Message("assistant", "If it hasn't arrived by Thursday, we'll send you a replacement or refund you in full, "
                         "whichever you prefer."),
])
BAD_SUPPORT = ChatSession("bad", [
    Message("user", "My order was supposed to arrive last week and it still isn't here. This is ridiculous."),
    Message("assistant", "Orders take as long as they take. The courier is not our responsibility."),
    Message("user", "So what happens now?"),
    Message("assistant", "Look at the tracking page like everyone else."),
    Message("user", "And if it never comes?"),
    Message("assistant", "Then write to the courier."),
])


@pytest.mark.slow
async def test_behaviour_items_about_the_assistant_in_support_sessions(loaded: Loaded) -> None:
    good = (await evaluate(SUPPORT_ITEMS, GOOD_SUPPORT, judge="local/minilm"))["rubric_scores"][0]
    bad = (await evaluate(SUPPORT_ITEMS, BAD_SUPPORT, judge="local/minilm"))["rubric_scores"][0]
    assert good["status"] != "evaluation_failed", good["reasoning"]
    assert {i["id"]: i["met"] for i in good["items"]} == {"sorry": True, "thanks": True, "when": True, "remedy": True}
    evidence = {i["id"]: i["evidence"] for i in good["items"]}
    assert "sorry" in evidence["sorry"] and "patience" in evidence["thanks"]
    assert "Thursday" in evidence["when"] and "replacement" in evidence["remedy"]
    # what the assistant does (an apology, thanks) is not found where it is not done; the bad
    # session's items are reported whether or not the judge decided every one of them
    met = {i["id"]: i["met"] for i in bad["items"]}
    assert met["sorry"] is False and met["thanks"] is False


@BEYOND_THE_MODEL
@pytest.mark.slow
async def test_what_the_assistant_says_not_just_that_it_speaks_on_the_topic(loaded: Loaded) -> None:
    # "Orders take as long as they take." tells no date, and "Then write to the courier." offers
    # no remedy: the model reads both as met or cannot decide
    bad = (await evaluate(SUPPORT_ITEMS, BAD_SUPPORT, judge="local/minilm"))["rubric_scores"][0]
    assert bad["status"] != "evaluation_failed", bad["reasoning"]
    assert {i["id"]: i["met"] for i in bad["items"]} == {"sorry": False, "thanks": False, "when": False,
                                                         "remedy": False}


# --- ChatModel surface -------------------------------------------------------------


@pytest.mark.asyncio
async def test_complete_and_stream_raise_config_error() -> None:
    j = local.LocalJudge()
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(ConfigError, match="JURIST_JUDGE=openai/gpt-4o-mini"):
        await j.complete(request)
    with pytest.raises(ConfigError, match="cannot generate free text"):
        j.stream(request)
    await j.aclose()


@pytest.mark.slow
def test_recent_texts_are_encoded_once(loaded: Loaded, monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = local._load_model().encoder
    asked: list[list[str]] = []
    real = encoder.embed

    def embed(texts: list[str]) -> Any:
        asked.append(list(texts))
        return real(texts)

    monkeypatch.setattr(encoder, "embed", embed)
    monkeypatch.setattr(local, "CACHE_SIZE", 3)
    first = local._encode(["cache one", "cache two", "cache one"])
    again = local._encode(["cache two", "cache three"])
    assert asked == [["cache one", "cache two"], ["cache three"]]
    assert (first[1] == again[0]).all()
    assert list(local._cache)[-3:] == ["cache one", "cache two", "cache three"] and len(local._cache) == 3
