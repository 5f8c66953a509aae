"""The offline ``local/minilm`` judge: a bi-encoder picks the passages, a cross-encoder decides.

:class:`LocalJudge` answers the four :class:`~jurist.models.base.MeaningJudge`
questions (expresses, coverage, relevance, support) on the CPU with two models
that ship inside jurist and run in numpy (no torch; tokenised by ``tokenizers``):

* the all-MiniLM-L6-v2 sentence encoder (:mod:`jurist.models.minilm`) only
  *preselects*: for the NLI head a text of one or two sentences is read whole
  (the answers head reads each of its sentences too); a longer one is
  cut into windows (:func:`~jurist.models.texts.text_windows`: each sentence,
  each pair of adjacent sentences, the whole text when it has more than two
  and is short), and the ``candidates`` windows (default 3) closest to the
  statement or question part by cosine go on (each sentence is encoded once; a
  window of several sentences gets their word-weighted mean vector). A text
  with no more windows than that skips the encoder;
* the cross-encoder (:mod:`jurist.models.minilm.cross`: the same encoder
  fine-tuned on public human-labelled NLI, short-answer grading and
  answer-selection data) reads each (window, statement) pair whole and
  *decides*, with a calibrated probability:

  - ``expresses`` and ``support``: the NLI head, premise = the window,
    hypothesis = the statement (or answer sentence); the probability is
    p(entails) of the best window, which is the evidence. A statement about
    "the assistant" ("The assistant apologises for the delay") is checked
    against the window as the assistant's own words (``The assistant says:
    "..."``), so "I'm so sorry about that" can express it;
  - ``coverage`` and ``relevance``: the answers head, A = the question part (or
    query), B = the window; the probability is p(answers) of the best window.

Decisions: yes when the probability reaches its threshold; the confidence is
the calibrated probability of the side chosen (p for yes, 1 - p for no). When
the probability lies within the band of uncertainty round the threshold, the
judge does not guess: it raises :class:`~jurist.errors.Uncertain` ("uncertain:
..."), which a judge records as a failed verdict (``evaluation_failed``).
Thresholds and bands (:class:`LocalThresholds`) default to those fitted on
development splits when the model was trained (``judge.json``); a team can pass
its own. Relevance is a score, not a decision: it has no band.

Nothing is downloaded: both models are read from the package directory the
first time the judge is used (never at import of jurist), once per process,
with the Hugging Face offline switches set. Figures and what the judge is not
good at: ``docs/local-judge.md``.

It cannot generate text: :meth:`LocalJudge.complete` and :meth:`LocalJudge.stream`
raise :class:`~jurist.errors.ConfigError` so a registry handing it out as a chat
model fails with a clear message.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import threading
from collections import OrderedDict
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, Mapping, Sequence

from jurist.errors import ConfigError, Uncertain, Unsupported
from jurist.extras import require_extra
from jurist.models.base import (
    ChatRequest,
    Completion,
    CoverageResult,
    DecidedChecks,
    RelevanceScore,
    StatementCheck,
    SupportResult,
)
from jurist.models.texts import split_question, split_sentences, text_windows

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from jurist.models.minilm import MiniLM
    from jurist.models.minilm.cross import CrossEncoder

__all__ = ["CANDIDATES", "LocalJudge", "LocalThresholds", "MODEL_NAME", "get_local_judge",
           "require_installed", "set_load_notice", "split_question", "split_sentences", "text_windows"]

MODEL_NAME = "local/minilm"
CANDIDATES = 3  # windows per statement that the cross-encoder reads (the bi-encoder's closest)

_WHAT = "The local judge (local/minilm)"
_NO_TEXT_HINT = (
    "The local judge (local/minilm) only answers meaning questions (expresses, coverage, "
    "relevance, support) with a small trained model; it cannot generate free text. "
    "Configure an LLM judge for this purpose, e.g. JURIST_JUDGE=openai/gpt-4o-mini "
    "(with OPENAI_API_KEY), anthropic/claude-haiku-4-5 (with ANTHROPIC_API_KEY) "
    "or ollama/qwen3:14b, or pass model=... explicitly."
)

# A statement about the assistant's behaviour: "The assistant apologises ...", "Assistant thanks ...".
_ABOUT_ASSISTANT = re.compile(r"^\W*(?:the\s+)?(?:ai\s+)?assistant\b|\bthe\s+(?:ai\s+)?assistant\b", re.I)
SPEAKER_FRAME = 'The assistant says: "{}"'


# --- thresholds ------------------------------------------------------------------


KINDS = ("expresses", "answers")


def _probability(value: object, name: str, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= high:
        raise ConfigError(f"local judge thresholds: {name} must be a number from 0 to {high:g}, got {value!r}")
    return float(value)



def _refuse_unknown(names: Iterable[str], known: Sequence[str], what: str) -> None:
    """ConfigError naming the ``names`` not ``known``, each with the known name it likely meant."""
    from jurist.jsonfiles import did_you_mean

    unknown = sorted(n for n in names if n not in known)
    if unknown:
        hints = [f"{k!r} -> {m!r}" for k in unknown if (m := did_you_mean(k, known))]
        raise ConfigError(f"local judge thresholds: {what} {', '.join(unknown)} "
                          + (f"(did you mean {'; '.join(hints)}?)" if hints else f"(known: {', '.join(known)})"))


@dataclass(frozen=True)
class LocalThresholds:
    """The local judge's decision thresholds, with the fields of ``judge.json``: ``expresses``
    (the p(entails) at which expresses and support say yes), ``answers`` (the p(answers) at
    which coverage says a part is covered), and ``band``: for each of the two, the half-width
    (in probability, 0 to 0.5) of the band of uncertainty round the threshold, inside which
    the judge does not decide (0 turns it off).

    A field left out (None, or a kind missing from ``band``) takes the value fitted on
    development splits with the shipped model, read from ``judge.json``: ``LocalThresholds()``
    is the judge as it ships, ``LocalThresholds(band={"expresses": 0, "answers": 0})`` the
    same thresholds deciding everything. ``jurist calibrate`` fits them to a team's labels;
    ``LocalJudge(thresholds=...)`` takes them. ConfigError names a value out of range."""

    expresses: float = None  # type: ignore[assignment]  # filled in __post_init__
    answers: float = None  # type: ignore[assignment]
    band: Mapping[str, float] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        band = {} if self.band is None else self.band
        if not isinstance(band, Mapping):
            raise ConfigError(f"local judge thresholds: band must be a mapping of {' and '.join(KINDS)} to a "
                              f"half-width, got {band!r}")
        _refuse_unknown((str(k) for k in band), KINDS, "band: unknown kind(s)")
        record = None
        if self.expresses is None or self.answers is None or any(k not in band for k in KINDS):
            from jurist.models.minilm.cross import read_record

            record = read_record()
        for kind in KINDS:
            value = getattr(self, kind)
            object.__setattr__(self, kind, _probability(
                record.thresholds[kind] if value is None and record else value, kind))
        object.__setattr__(self, "band", {
            kind: _probability(band[kind] if kind in band else record.band[kind] if record else None,
                               f"band.{kind}", 0.5)
            for kind in KINDS})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LocalThresholds":
        """From what :meth:`to_json` writes, ``{"expresses": p, "answers": p, "band": {"expresses": w,
        "answers": w}}`` (a field left out: the shipped one); ConfigError naming a bad field."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"local judge thresholds: expected an object, got {data!r}")
        _refuse_unknown((str(k) for k in data), (*KINDS, "band"), "unknown field(s)")
        return cls(expresses=data.get("expresses"), answers=data.get("answers"),  # type: ignore[arg-type]
                   band=data.get("band"))  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        return {"expresses": self.expresses, "answers": self.answers, "band": dict(self.band)}

    def __hash__(self) -> int:
        return hash((self.expresses, self.answers, tuple(sorted(self.band.items()))))


# --- the shared models -----------------------------------------------------------


@dataclass(frozen=True)
class _Models:
    encoder: "MiniLM"  # the bi-encoder: preselection
    cross: "CrossEncoder"  # the decisions


_model: "_Models | None" = None
_load_lock = threading.Lock()
_run_lock = threading.Lock()  # one forward pass at a time: each already uses every core
_load_count = 0
# Sentence embeddings of the most recent texts and probabilities of the most recent
# pairs: rubric items, checklist points and a session's windows come back call after call.
CACHE_SIZE = 4096
PAIR_CACHE_SIZE = 8192
_cache: "OrderedDict[str, np.ndarray]" = OrderedDict()
_pair_cache: "OrderedDict[tuple[str, str], np.ndarray]" = OrderedDict()

LoadNotice = Callable[[], AbstractContextManager[object]]
_load_notice: LoadNotice | None = None


def set_load_notice(notice: LoadNotice | None) -> LoadNotice | None:
    """Have the models' load (once per process) run inside ``notice()``, e.g. a
    CLI spinner saying what it waits for; returns the notice it replaces."""
    global _load_notice
    previous, _load_notice = _load_notice, notice
    return previous


def require_installed() -> None:
    """Raise :class:`~jurist.errors.MissingExtra` naming the ``local`` extra when a
    package the judge needs is missing (imports and loads nothing)."""
    require_extra("local", _WHAT)


def _set_offline_switches() -> None:
    """Forbid any Hugging Face hub traffic, should a library of it look for files."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _load_model() -> _Models:
    """Load the bundled bi-encoder and cross-encoder once per process (thread-safe)."""
    global _model, _load_count
    if _model is not None:
        return _model
    with _load_lock:
        if _model is None:
            with (_load_notice or nullcontext)():
                _set_offline_switches()
                require_installed()
                from jurist.models.minilm import MODEL_DIR, WEIGHTS_FILE, MiniLM
                from jurist.models.minilm.cross import CrossEncoder

                if not (MODEL_DIR / WEIGHTS_FILE).is_file():
                    raise ConfigError(f"The MiniLM model files are missing under {MODEL_DIR}: reinstall jurist "
                                      '(pip install --force-reinstall "jurist[local]").')
                encoder = MiniLM()
                _model = _Models(encoder, CrossEncoder(word_embeddings=encoder.word))
            _load_count += 1
        return _model


def _encode(texts: list[str]) -> "np.ndarray":
    """Unit-length sentence embeddings of ``texts`` (n, 384): from the cache of recent
    texts, or one batched forward pass of the bi-encoder for those it lacks."""
    import numpy as np

    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    models = _load_model()
    return np.stack(_through_cache(_cache, CACHE_SIZE, texts, models.encoder.embed))


def _pair_scores(pairs: list[tuple[str, str]]) -> "np.ndarray":
    """Calibrated probabilities (n, 4) of pairs (A, B): p(entails), p(neutral),
    p(contradicts), p(answers); from the cache of recent pairs, or one batched
    forward pass of the cross-encoder for those it lacks."""
    import numpy as np

    if not pairs:
        return np.zeros((0, 4))
    models = _load_model()

    def score(missing: list[tuple[str, str]]) -> "np.ndarray":
        scores = models.cross.scores(missing)
        return np.concatenate([scores.nli, scores.answers[:, None]], axis=1)

    return np.stack(_through_cache(_pair_cache, PAIR_CACHE_SIZE, pairs, score))


def _through_cache(cache: "OrderedDict[Any, Any]", size: int, keys: Sequence[Any],
                   compute: Callable[[list[Any]], Any]) -> list[Any]:
    """The values of ``keys``: from ``cache`` (the ``size`` most recent), or ``compute`` of those it
    lacks, in one call; under the lock that serialises every forward pass."""
    with _run_lock:
        missing = [k for k in dict.fromkeys(keys) if k not in cache]
        if missing:
            cache.update(zip(missing, compute(missing)))
        out = []
        for k in keys:
            cache.move_to_end(k)
            out.append(cache[k])
        while len(cache) > size:
            cache.popitem(last=False)
    return out


def _window_vectors(windows: list[str], emb: "np.ndarray", index: Mapping[str, int]) -> "np.ndarray":
    """Unit-length vectors of ``windows`` for preselection, from the embeddings ``emb`` of their
    sentences (row ``index[sentence]``): a window of several sentences gets their word-weighted
    mean, close to what encoding the whole window gives at a fraction of the cost."""
    import numpy as np

    out = np.zeros((len(windows), emb.shape[1]), emb.dtype)
    for row, window in enumerate(windows):
        for s in split_sentences(window) or [window]:
            out[row] += max(1, len(s.split())) * emb[index[s]]
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


def _candidates(queries: list[str], groups: list[list[str]], k: int) -> list[list[list[str]]]:
    """For each query and each group of windows, the ``k`` windows closest to the query
    by the bi-encoder's cosine (all of them, unencoded, when a group has no more than ``k``);
    ``result[query][group]``. The queries and the windows' sentences are encoded in one batch
    (each sentence once)."""
    import numpy as np

    if not queries:
        return []
    if all(len(g) <= k for g in groups):
        return [[list(g) for g in groups] for _ in queries]
    windows = list(dict.fromkeys(w for g in groups if len(g) > k for w in g))
    sentences = [s for w in windows for s in (split_sentences(w) or [w])]
    texts = list(dict.fromkeys(queries + sentences))
    index = {t: i for i, t in enumerate(texts)}
    emb = _encode(texts)
    sims = emb[[index[q] for q in queries]] @ _window_vectors(windows, emb, index).T
    column = {w: i for i, w in enumerate(windows)}
    out: list[list[list[str]]] = []
    for qi in range(len(queries)):
        row: list[list[str]] = []
        for g in groups:
            if len(g) <= k:
                row.append(list(g))
                continue
            seg = sims[qi, [column[w] for w in g]]
            row.append([g[i] for i in np.argsort(-seg, kind="stable")[:k]])
        out.append(row)
    return out


def about_assistant(statement: str) -> bool:
    """Whether ``statement`` says what the assistant does ("The assistant apologises ...")."""
    return bool(_ABOUT_ASSISTANT.search(statement))


@dataclass(frozen=True)
class _Best:
    """The best candidate window of one query in one group, and its probability."""

    probability: float
    evidence: str | None


def _best(queries: list[str], groups: list[list[str]], k: int, head: str,
          premise: Callable[[str, str], str] | None = None) -> list[list[_Best]]:
    """For each query and group: the highest probability over the query's candidate windows
    in the group, and that window. ``head`` ``nli``: pair (premise(window, query), query),
    p(entails); ``answers``: pair (query, window), p(answers). A group with no window: 0.0.
    All pairs of the call go through one batched forward pass; ``result[query][group]``."""
    picked = _candidates(queries, groups, k)
    frame = premise or (lambda window, _query: window)
    pairs: list[tuple[str, str]] = []
    for query, row in zip(queries, picked):
        for windows in row:
            pairs += [(frame(w, query), query) if head == "nli" else (query, w) for w in windows]
    probabilities = _pair_scores(pairs)[:, 0 if head == "nli" else 3]
    out: list[list[_Best]] = []
    at = 0
    for row in picked:
        bests: list[_Best] = []
        for windows in row:
            if not windows:
                bests.append(_Best(0.0, None))
                continue
            seg = probabilities[at: at + len(windows)]
            i = int(seg.argmax())
            bests.append(_Best(float(seg[i]), windows[i]))
            at += len(windows)
        out.append(bests)
    return out


def _windows(text: str) -> list[str]:
    """The windows of ``text`` the NLI head may read: a text of one or two sentences whole
    (as its training pairs were: a student's whole answer against the reference); a longer
    one as :func:`~jurist.models.texts.text_windows` cuts it. The answers head reads every
    sentence and pair of sentences (``text_windows``): one sentence of an answer may address
    one part of a question that the whole answer, about two things, does not."""
    sentences = split_sentences(text)
    return [" ".join(sentences)] if 0 < len(sentences) <= 2 else text_windows(text) if sentences else []


def _speaker_premise(window: str, statement: str) -> str:
    return SPEAKER_FRAME.format(window) if about_assistant(statement) else window


def _sorted_out(items: Sequence[str], answers: Sequence[tuple[bool, float] | None],
                ) -> tuple[list[str], list[str], dict[str, float]]:
    """(yes, no, confidence) of the items decided (an answer None: undecided, left out), in the
    order asked: the fields of a CoverageResult or SupportResult, whole or partial."""
    decided = [(item, a) for item, a in zip(items, answers) if a is not None]
    return ([item for item, (yes, _) in decided if yes], [item for item, (yes, _) in decided if not yes],
            {item: round(conf, 4) for item, (_, conf) in decided})


def _shown(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# --- the judge -----------------------------------------------------------------


class LocalJudge:
    """Offline meaning judge (``local/minilm``): the bi-encoder preselects ``candidates``
    windows (default :data:`CANDIDATES`) of a text, the trained cross-encoder decides with
    ``thresholds`` (default: those fitted with the model, ``LocalThresholds()``).

    Also offers the ChatModel surface (``complete``, ``stream``, ``aclose``) so
    the model registry can hand it out; generating text raises ConfigError.
    """

    name: str = MODEL_NAME
    endpoint: str = "local"
    chats = False  # answers meaning questions; writes no text

    def __init__(self, thresholds: LocalThresholds | None = None, *, candidates: int = CANDIDATES) -> None:
        if thresholds is not None and not isinstance(thresholds, LocalThresholds):
            raise ConfigError(f"thresholds must be a LocalThresholds, got {type(thresholds).__name__}")
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
            raise ConfigError(f"candidates must be a whole number of windows, at least 1, got {candidates!r}")
        self._thresholds = thresholds
        self.candidates = candidates

    @property
    def thresholds(self) -> LocalThresholds:
        """The thresholds in use (read from ``judge.json`` on first use when none were given)."""
        if self._thresholds is None:
            self._thresholds = LocalThresholds()
        return self._thresholds

    async def load(self) -> None:
        """Load the shared models now (off the event loop) instead of on first use."""
        await asyncio.to_thread(_load_model)

    def _decide(self, kind: str, asked: str, items: list[str], probabilities: list[float],
                decided: Callable[[list[tuple[bool, float] | None]], DecidedChecks | CoverageResult | SupportResult]
                | None = None,
                ) -> list[tuple[bool, float]]:
        """(yes, confidence) per item at the ``kind`` threshold; Uncertain when one lies in the band,
        naming every item inside it and carrying ``decided`` of the answers (None for an item inside
        the band) where given."""
        threshold = getattr(self.thresholds, kind)
        band = self.thresholds.band[kind]
        answers: list[tuple[bool, float] | None] = [
            None if abs(p - threshold) < band else (p >= threshold, p if p >= threshold else 1.0 - p)
            for p in probabilities]
        undecided = [(item, p) for item, p, a in zip(items, probabilities, answers) if a is None]
        if undecided:
            item, p = undecided[0]
            others = ", ".join(f"{_shown(i, 40)} ({q:.3f})" for i, q in undecided[1:6]) + (
                f" and {len(undecided) - 6} more" if len(undecided) > 6 else "")
            more = f"; {len(undecided) - 1} more inside the band: {others}" if len(undecided) > 1 else ""
            label = "entails" if kind == "expresses" else "answers"
            raise Uncertain(
                f"uncertain: the local judge cannot decide whether {asked} {_shown(item)}: p({label}) = {p:.3f} lies "
                f"within the band {threshold - band:.3f}..{threshold + band:.3f} (threshold {threshold:.3f} ± "
                f"{band:.3f}){more}",
                subject=item, probability=p, threshold=threshold, band=band, undecided=[i for i, _ in undecided],
                decided=None if decided is None else decided(answers))
        return [a for a in answers if a is not None]

    async def expresses(self, text: str, statements: list[str]) -> list[StatementCheck]:
        """Does ``text`` express each statement? p(entails) of the best candidate window against
        the ``expresses`` threshold; evidence is that window (None for a text with no words).
        Uncertain when a statement's probability lies in the band; it carries the checks of the
        statements outside it (``decided``)."""
        statements = list(statements)
        if not statements:
            return []
        rows = await asyncio.to_thread(_best, statements, [_windows(text)], self.candidates, "nli",
                                       _speaker_premise)
        bests = [row[0] for row in rows]

        def checks(answers: Sequence[tuple[bool, float] | None]) -> list[StatementCheck]:
            return [StatementCheck(statement=s, expressed=a[0], confidence=round(a[1], 4), judge_model=self.name,
                                   evidence=b.evidence)
                    for s, b, a in zip(statements, bests, answers) if a is not None]

        return checks(self._decide("expresses", "the text expresses", statements,
                                   [b.probability for b in bests], decided=lambda a: DecidedChecks(tuple(checks(a)))))

    async def coverage(self, question: str, answer: str, parts: list[str] | None = None) -> CoverageResult:
        """Which parts of ``question`` the answer covers (:func:`split_question` when ``parts`` is
        None): p(answers) of the part against the best candidate window of the answer."""
        parts = split_question(question) if parts is None else list(parts)
        if not parts:
            return CoverageResult(covered=[], uncovered=[], confidence={}, judge_model=self.name)
        rows = await asyncio.to_thread(_best, parts, [text_windows(answer)], self.candidates, "answers")

        def result(answers: Sequence[tuple[bool, float] | None]) -> CoverageResult:  # the parts decided
            return CoverageResult(*_sorted_out(parts, answers), judge_model=self.name)

        return result(self._decide("answers", "the answer covers the part", parts, [row[0].probability for row in rows],
                                   decided=result))

    async def relevance(self, query: str, passages: list[str]) -> list[RelevanceScore]:
        """Relevance of each passage to ``query``, 0..1: p(answers) of its best candidate window
        (a score, not a decision: no band)."""
        passages = list(passages)
        if not passages:
            return []
        rows = await asyncio.to_thread(_best, [query], [text_windows(p) for p in passages], self.candidates,
                                       "answers")
        return [RelevanceScore(passage=p, score=round(b.probability, 4), judge_model=self.name)
                for p, b in zip(passages, rows[0])]

    async def support(self, answer: str, sources: list[str]) -> SupportResult:
        """Which sentences of ``answer`` the sources support: p(entails) of the sentence against
        its best candidate window of the sources (windows never span two sources), at the
        ``expresses`` threshold."""
        sentences = split_sentences(answer)
        if not sentences:
            return SupportResult(supported=[], unsupported=[], confidence={}, judge_model=self.name)
        windows = [w for s in sources for w in _windows(s)]
        rows = await asyncio.to_thread(_best, sentences, [windows], self.candidates, "nli")

        def result(answers: Sequence[tuple[bool, float] | None]) -> SupportResult:  # the sentences decided
            return SupportResult(*_sorted_out(sentences, answers), judge_model=self.name)

        return result(self._decide("expresses", "the sources support", sentences,
                                   [row[0].probability for row in rows], decided=result))

    # --- ChatModel surface -----------------------------------------------------

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        """Always raises Unsupported (a ConfigError): the local judge cannot generate text."""
        raise Unsupported(_NO_TEXT_HINT)

    def stream(self, request: ChatRequest, *, timeout: float | None = None,
               into: Completion | None = None) -> AsyncIterator[str]:
        """Always raises Unsupported (a ConfigError): the local judge cannot generate text."""
        raise Unsupported(_NO_TEXT_HINT)

    async def aclose(self) -> None:
        """Nothing to release; the shared models stay loaded for the process."""


def get_local_judge() -> LocalJudge:
    """A :class:`LocalJudge` with the default thresholds (a new one each time: a judge holds only
    its thresholds; the models it reads are loaded once per process and only read)."""
    return LocalJudge()
