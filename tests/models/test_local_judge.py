"""Tests of the offline local/minilm judge (jurist.models.local).

The model is loaded once for the module, by the ``loaded`` fixture, under a
socket guard that refuses every non-loopback connection, through concurrent
asyncio calls: the load is shared, offline and from the package only. Tests that
need the model are marked ``slow`` (deselect with ``-m "not slow"``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

import jurist.models.local as local
from jurist.errors import ConfigError
from jurist.models.base import ChatModel, ChatRequest, MeaningJudge, StatementCheck

SRC = Path(__file__).resolve().parents[2] / "src"

CAFFEINE = "Caffeine keeps you awake by blocking adenosine receptors."
TOLERANCE = "Tolerance to caffeine develops because the brain makes more adenosine receptors."


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
    """Unload the shared model, block the network, then load it through 8
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
        judge = local.LocalJudge()
        text = "Caffeine occupies the adenosine receptors, so adenosine cannot make you sleepy."

        async def burst() -> list[list[StatementCheck]]:
            return await asyncio.gather(*(judge.expresses(text, [CAFFEINE]) for _ in range(8)))

        results = asyncio.run(burst())
        yield Loaded(judge=judge, guard=guard, loads=local._load_count - before, results=results)


@pytest.fixture
def judge(loaded: Loaded) -> local.LocalJudge:
    return loaded.judge


# --- loading ---------------------------------------------------------------------


def test_import_sets_nothing_and_loads_nothing() -> None:
    code = (
        "import os, sys\n"
        "for v in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'HF_HUB_DISABLE_TELEMETRY'):\n"
        "    os.environ.pop(v, None)\n"
        "import jurist.models.local\n"
        "assert 'HF_HUB_OFFLINE' not in os.environ, 'offline switch set at import'\n"
        "assert 'sentence_transformers' not in sys.modules and 'torch' not in sys.modules\n"
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
def test_loads_and_encodes_from_the_package_offline(loaded: Loaded) -> None:
    assert loaded.loads == 1
    assert loaded.guard.attempts == []
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
    emb = local._encode(["one sentence", "another sentence"])
    assert emb.shape == (2, 384)


@pytest.mark.slow
def test_concurrent_calls_share_one_load(loaded: Loaded) -> None:
    assert loaded.loads == 1
    assert len(loaded.results) == 8
    first = loaded.results[0][0]
    assert first.expressed
    assert all(r[0].confidence == pytest.approx(first.confidence) for r in loaded.results)


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


def test_loading_and_encoding_import_no_torch() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "import jurist.models.local as local\n"
        "emb = local._encode(['one sentence', 'another one'])\n"
        "assert emb.shape == (2, 384), emb.shape\n"
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


# --- expresses -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.asyncio
async def test_paraphrase_expressed_near_miss_and_unrelated_not(judge: local.LocalJudge) -> None:
    text = (
        "I've been drinking coffee every morning for a year. "
        "My brain has responded by growing extra adenosine receptors, "
        "so the same cup does less for me now."
    )
    near = "If you drink coffee every day your body just gets used to it and you need more."
    unrelated = "Knead the dough for about ten minutes until it is smooth and elastic."
    (hit,) = await judge.expresses(text, [TOLERANCE])
    (miss,) = await judge.expresses(near, [TOLERANCE])
    (far,) = await judge.expresses(unrelated, [TOLERANCE])
    assert hit.expressed and hit.evidence and "adenosine receptors" in hit.evidence
    assert not miss.expressed
    assert not far.expressed
    assert far.confidence >= miss.confidence  # at least as far from the threshold
    (m_miss,) = await judge.similarity(near, [TOLERANCE], align=True)
    (m_far,) = await judge.similarity(unrelated, [TOLERANCE], align=True)
    assert local.expressed_score(m_far) < local.expressed_score(m_miss) < local.EXPRESSED_THRESHOLD
    for check in (hit, miss, far):
        assert check.judge_model == "local/minilm"
        assert 0.5 <= check.confidence <= 1.0


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("statement", "paraphrase", "neighbour"),
    [
        (
            "Insulin lowers blood sugar by helping cells absorb glucose.",
            "Insulin lets your cells pull sugar out of the blood, so blood sugar goes down.",
            "Insulin is produced by beta cells in the pancreas.",
        ),
        (
            "A Python tuple cannot be changed after it is created.",
            "Once you make a tuple in Python you can't modify it.",
            "Python tuples are written with parentheses and can hold items of different types.",
        ),
    ],
)
async def test_neighbouring_fact_rejected_by_unmatched_words(
    judge: local.LocalJudge, statement: str, paraphrase: str, neighbour: str
) -> None:
    # The neighbouring fact is as close as a paraphrase by cosine alone (at least
    # 0.6), but leaves most of the statement's content words without a counterpart.
    (near,) = await judge.similarity(neighbour, [statement], align=True)
    (para,) = await judge.similarity(paraphrase, [statement], align=True)
    assert near.score >= 0.6
    assert near.unmatched >= 0.5 > para.unmatched
    (yes,) = await judge.expresses(paraphrase, [statement])
    (no,) = await judge.expresses(neighbour, [statement])
    assert yes.expressed and not no.expressed
    assert no.confidence == pytest.approx(local.confidence(local.expressed_score(near), local.EXPRESSED_THRESHOLD))


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("text", "statement", "kind"),
    [
        # the text negates the statement in its own words, either way round
        ("Vitamin C does not cure the flu, although it is often sold that way.", "Vitamin C cures the flu.", "negation"),
        ("Vitamin C cures the flu.", "Vitamin C cannot cure the flu.", "negation"),
        # another number for the same thing
        ("Most adults need seven to nine hours of sleep a night.", "Adults need about four hours of sleep a night.",
         "number"),
        ("A marathon is about 42 kilometres long and most runners train for 16 weeks.", "A marathon is 50 kilometres long.",
         "number"),
        # the same terms in other roles, in one clause or across two
        ("The cat chased the dog around the garden.", "The dog chased the cat around the garden.", "order"),
        ("Red blood cells carry oxygen, while white blood cells fight infection.",
         "White blood cells carry oxygen, while red blood cells fight infection.", "order"),
    ],
)
async def test_contradictions_in_the_statements_own_words_are_rejected(
    judge: local.LocalJudge, text: str, statement: str, kind: str
) -> None:
    (match,) = await judge.similarity(text, [statement], align=True)
    assert match.score >= 0.75  # by cosine alone these pass (threshold 0.32 after the unmatched share)
    assert match.conflict is not None and match.conflict.startswith(f"{kind}:")
    (check,) = await judge.expresses(text, [statement])
    assert not check.expressed
    assert local.expressed_score(match) == pytest.approx(
        match.score - local.UNMATCHED_WEIGHT * match.unmatched - local.CONFLICT_WEIGHT)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("Vitamin C doesn't cure the flu.", "Vitamin C does not cure the flu."),  # negated on both sides
        ("Never store raw chicken above cooked food in the fridge.",
         "You should not store raw chicken above cooked food in the fridge."),
        ("The dog was chased around the garden by the cat.", "The cat chased the dog around the garden."),  # passive
        ("Red blood cells carry oxygen, while white blood cells fight infection.",
         "White blood cells fight infection and red blood cells carry oxygen."),  # clauses swapped, roles kept
        ("Most adults need seven to nine hours of sleep a night.", "Most adults need seven to nine hours of sleep."),
        ("The bridge opened in 1937 after four years of construction.", "The bridge took four years to build."),
    ],
)
async def test_agreeing_negations_passives_and_numbers_still_pass(
    judge: local.LocalJudge, text: str, statement: str
) -> None:
    (match,) = await judge.similarity(text, [statement], align=True)
    assert match.conflict is None
    (check,) = await judge.expresses(text, [statement])
    assert check.expressed


def test_unmatched_share_counts_content_pieces_without_a_counterpart() -> None:
    import numpy as np

    e = np.eye(4)
    pieces = ["the", "cat", "##s", "sleep"]  # "the" is a function word and does not count
    window = np.stack([e[0], e[1], (e[2] + e[3]) / np.sqrt(2)])  # "##s" and "sleep" at cosine 0.707
    assert local.unmatched_share(e, pieces, window) == 0.0
    window = np.stack([e[0], e[1]])  # nothing for "##s" and "sleep"
    assert local.unmatched_share(e, pieces, window) == pytest.approx(2 / 3)
    assert local.unmatched_share(e[:1], ["the"], np.stack([e[1]])) == 1.0  # no content piece: all pieces count
    assert local.unmatched_share(e, pieces, np.zeros((0, 4))) == 1.0
    assert local.unmatched_share(e[:0], [], window) == 0.0
    match = local.Match(score=0.7, evidence="x", unmatched=0.5)
    assert local.expressed_score(match) == pytest.approx(0.7 - local.UNMATCHED_WEIGHT * 0.5)
    assert local.expressed_score(match, weight=0.0) == 0.7
    contradicted = local.Match(score=0.7, evidence="x", unmatched=0.5, conflict="negation: ...")
    assert local.expressed_score(contradicted) == pytest.approx(0.7 - local.UNMATCHED_WEIGHT * 0.5 - local.CONFLICT_WEIGHT)
    assert local.expressed_score(contradicted, conflict_weight=0.0) == local.expressed_score(match)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_evidence_is_the_best_window(judge: local.LocalJudge) -> None:
    text = "Photosynthesis happens in chloroplasts. Separately, the French Revolution began in 1789."
    (check,) = await judge.expresses(text, ["The French Revolution started in 1789."])
    assert check.expressed
    assert check.evidence == "Separately, the French Revolution began in 1789."


@pytest.mark.slow
@pytest.mark.asyncio
async def test_empty_inputs(judge: local.LocalJudge) -> None:
    assert await judge.expresses("Some text.", []) == []
    (check,) = await judge.expresses("", [CAFFEINE])
    assert not check.expressed and check.evidence is None
    assert await judge.relevance("query", []) == []
    result = await judge.support("", ["a source"])
    assert result.supported == [] and result.unsupported == []


def test_confidence_rises_with_margin_and_is_clipped() -> None:
    t = local.EXPRESSED_THRESHOLD
    assert local.confidence(t, t) == 0.5
    values = [local.confidence(t + d, t) for d in (0.0, 0.05, 0.1, 0.2, 0.3, 0.6)]
    assert values == sorted(values)
    assert values[-1] == 1.0
    assert local.confidence(t - 0.1, t) == pytest.approx(local.confidence(t + 0.1, t))
    assert all(0.5 <= v <= 1.0 for v in values)


# --- coverage, support, relevance ------------------------------------------------


def test_split_question() -> None:
    q = "What is compound interest and how is it different from simple interest? Also, what rate do savings accounts pay?"
    assert local.split_question(q) == [
        "What is compound interest",
        "how is it different from simple interest?",
        "what rate do savings accounts pay?",
    ]
    assert local.split_question("What are the inputs and outputs of photosynthesis?") == [
        "What are the inputs and outputs of photosynthesis?"
    ]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_coverage(judge: local.LocalJudge) -> None:
    question = "What is compound interest and how is it different from simple interest? Also, what rate do savings accounts pay?"
    answer = (
        "Compound interest is interest calculated on both the original deposit and the interest already added. "
        "Simple interest, by contrast, is only ever paid on the original deposit."
    )
    result = await judge.coverage(question, answer)
    assert result.covered == ["What is compound interest", "how is it different from simple interest?"]
    assert result.uncovered == ["what rate do savings accounts pay?"]
    assert set(result.confidence) == set(result.covered + result.uncovered)
    assert result.judge_model == "local/minilm"

    given = await judge.coverage(question, answer, parts=["Why is the sky blue?"])
    assert given.uncovered == ["Why is the sky blue?"]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_support(judge: local.LocalJudge) -> None:
    sources = [
        "The Allied invasion of Normandy began on 6 June 1944. It opened a second front in Western Europe.",
        "Paris was liberated in August 1944.",
    ]
    answer = "The Normandy landings took place on June 6, 1944. The landings were commanded by Napoleon."
    result = await judge.support(answer, sources)
    assert result.supported == ["The Normandy landings took place on June 6, 1944."]
    assert result.unsupported == ["The landings were commanded by Napoleon."]
    assert all(0.5 <= c <= 1.0 for c in result.confidence.values())
    assert result.judge_model == "local/minilm"
    # a sentence the sources contradict in its own words is not supported
    result = await judge.support("The landings took place on 6 June 1945.", sources)
    assert result.unsupported == ["The landings took place on 6 June 1945."]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_relevance_ordering(judge: local.LocalJudge) -> None:
    query = "How does caffeine keep you awake?"
    passages = [
        "Mortgage rates rose again this month.",
        "Coffee is one of the most traded commodities in the world.",
        "Caffeine blocks adenosine receptors, so the sleepiness signal cannot get through.",
    ]
    scores = await judge.relevance(query, passages)
    assert [s.passage for s in scores] == passages
    values = [s.score for s in scores]
    assert values[2] > values[1] > values[0]
    assert values[2] >= 0.5 > values[1]
    assert all(0.0 <= v <= 1.0 and s.judge_model == "local/minilm" for v, s in zip(values, scores))


def test_relevance_mapping() -> None:
    t = local.COVERAGE_THRESHOLD
    assert local.relevance_from_cosine(-0.2) == 0.0
    assert local.relevance_from_cosine(t) == pytest.approx(0.5)
    assert local.relevance_from_cosine(1.0) == pytest.approx(1.0)
    xs = [i / 20 for i in range(-4, 21)]
    ys = [local.relevance_from_cosine(x) for x in xs]
    assert ys == sorted(ys)


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
    model = local._load_model()
    asked: list[list[str]] = []
    real = model.encode

    def encode(texts: list[str], batch_size: int = 64) -> Any:
        asked.append(list(texts))
        return real(texts, batch_size)

    monkeypatch.setattr(model, "encode", encode)
    monkeypatch.setattr(local, "CACHE_SIZE", 3)
    first = local._encode(["cache one", "cache two", "cache one"])
    again = local._encode(["cache two", "cache three"])
    assert asked == [["cache one", "cache two"], ["cache three"]]
    assert (first[1] == again[0]).all()
    assert list(local._cache)[-3:] == ["cache one", "cache two", "cache three"] and len(local._cache) == 3
