"""The offline ``local/minilm`` judge: meaning questions answered by sentence embeddings.

:class:`LocalJudge` answers the four :class:`~jurist.models.base.MeaningJudge`
questions (expresses, coverage, relevance, support) with the all-MiniLM-L6-v2
sentence-embedding model, run on the CPU by jurist's own numpy encoder
(:mod:`jurist.models.minilm`: the weights ship inside jurist, tokenised by
``tokenizers``; no torch, no sentence-transformers). Nothing is downloaded: the
model is read from the package directory the first time the judge is used
(never at import of jurist), with the Hugging Face offline switches set.

How it decides (details and measured accuracy: ``docs/local-judge.md``):

* a text is cut into *windows*: each sentence, each pair of adjacent sentences,
  and the whole text when it has more than two sentences;
* a statement (or question part, or answer sentence) gets the best cosine
  similarity over those windows; the best window is the evidence;
* for ``expresses`` and ``support`` the cosine is lowered by the share of the
  statement's content word-pieces that have no counterpart in the evidence
  window (no token of the window within ``TOKEN_MATCH`` cosine, on MiniLM's own
  token embeddings from the same forward pass), and by ``CONFLICT_WEIGHT`` when
  the window contradicts the statement with its own words (a negation, another
  number, terms that trade places: :func:`jurist.models.alignment.find_conflict`):
  ``score = cosine - UNMATCHED_WEIGHT * unmatched - CONFLICT_WEIGHT * conflict``.
  A same-topic text that makes a different point shares the topic words but
  leaves the statement's other words unanswered;
* yes/no = score >= a threshold calibrated by
  ``benchmarks/local_judge_accuracy.py``;
* confidence = ``min(1, 0.5 + |score - threshold| / (2 * CONFIDENCE_MARGIN))``,
  so 0.5 on the threshold and 1.0 once the margin reaches ``CONFIDENCE_MARGIN``.

It cannot generate text: :meth:`LocalJudge.complete` and :meth:`LocalJudge.stream`
raise :class:`~jurist.errors.ConfigError` so a registry handing it out as a chat
model fails with a clear message.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections import OrderedDict
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable, Sequence

from jurist.errors import ConfigError, Unsupported
from jurist.extras import require_extra
from jurist.models.alignment import TOKEN_MATCH, find_conflict, unmatched_share
from jurist.models.base import (
    ChatRequest,
    Completion,
    CoverageResult,
    RelevanceScore,
    StatementCheck,
    SupportResult,
)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from jurist.models.minilm import Encoding, MiniLM

MODEL_NAME = "local/minilm"

# Calibrated by `python benchmarks/local_judge_accuracy.py` on the calibration
# half (203 pairs) of tests/data/local_judge_pairs.jsonl: the unmatched weight
# (grid 0.0..1.0) without the contradiction checks, then the conflict weight
# (grid 0.0..1.0) with it, then the threshold (grid 0.30..0.90), each maximising
# F1. That run printed, on the held-out half (201 pairs): precision 0.874, recall
# 0.792, F1 0.831 (0.773 without the checks); on its 162 pairs of the original
# kinds F1 0.857 (0.872 without). See docs/local-judge.md.
EXPRESSED_THRESHOLD = 0.32
UNMATCHED_WEIGHT = 0.7
CONFLICT_WEIGHT = 0.7
# TOKEN_MATCH (imported above from jurist.models.alignment): a statement
# word-piece has a counterpart in a window at token cosine >= 0.5.

# Calibrated by the same run on the calibration half (38 pairs) of
# tests/data/local_judge_coverage.jsonl (question part vs answer). It printed, on
# the held-out half (37 pairs): precision 0.833, recall 0.882, F1 0.857,
# accuracy 0.865. Question-to-answer cosines run lower than statement-to-
# paraphrase ones, hence a threshold of its own.
COVERAGE_THRESHOLD = 0.54

# Margin (in cosine) from the threshold at which confidence reaches 1.0.
CONFIDENCE_MARGIN = 0.25

_WHAT = "The local judge (local/minilm)"
_NO_TEXT_HINT = (
    "The local judge (local/minilm) only answers meaning questions (expresses, coverage, "
    "relevance, support) with sentence embeddings; it cannot generate free text. "
    "Configure an LLM judge for this purpose, e.g. JURIST_JUDGE=openai/gpt-4o-mini "
    "(with OPENAI_API_KEY), anthropic/claude-haiku-4-5 (with ANTHROPIC_API_KEY) "
    "or ollama/qwen3:14b, or pass model=... explicitly."
)

# --- text splitting ------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "etc.", "vs.", "dr.", "mr.", "mrs.", "ms.", "prof."})
_QUESTION_START = (
    r"(?:what|how|why|when|where|who|whom|whose|which|whether|is|are|was|were|do|does|did|"
    r"can|could|should|would|will|may|might|has|have|had)\b"
)
_LEADING_CONNECTIVE = re.compile(r"^(?:and|also|or|plus)\b[\s,]*", re.I)
_PART_SPLIT = re.compile(rf"(?:,\s*|\s+)(?:and|also|or|plus)\s+(?={_QUESTION_START})", re.I)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (also at ``;``, ``:`` and line breaks), keeping
    common abbreviations such as "e.g." inside their sentence."""
    pieces = [p.strip() for p in _SENTENCE_END.split(text.strip()) if p and p.strip()]
    out: list[str] = []
    for piece in pieces:
        if out and out[-1].lower().rsplit(None, 1)[-1] in _ABBREVIATIONS:
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def text_windows(text: str) -> list[str]:
    """The passages a statement is compared with: each sentence, each pair of
    adjacent sentences, and the whole text when it has more than two sentences."""
    sentences = split_sentences(text)
    windows = list(sentences)
    windows += [f"{a} {b}" for a, b in zip(sentences, sentences[1:])]
    if len(sentences) > 2:
        windows.append(" ".join(sentences))
    return windows


def split_question(question: str) -> list[str]:
    """Split a question into parts: sentences (also at ";" and ":"), then clauses
    joined by "and", "also", "or" or "plus" when the next clause starts like a question
    ("What is X and how does it work?" -> two parts; "inputs and outputs" stays one)."""
    parts: list[str] = []
    for sentence in split_sentences(question.replace("?", "?\n")):
        for part in _PART_SPLIT.split(sentence):
            part = _LEADING_CONNECTIVE.sub("", part.strip(" ,;:-"))
            if len(part.split()) >= 2 or (part and not parts):
                parts.append(part)
    return parts or ([question.strip()] if question.strip() else [])


# --- scoring helpers -----------------------------------------------------------


def confidence(score: float, threshold: float) -> float:
    """Confidence of a yes/no taken at ``threshold``: 0.5 on the threshold,
    rising linearly with the margin, 1.0 from ``CONFIDENCE_MARGIN`` on."""
    return min(1.0, 0.5 + abs(score - threshold) / (2 * CONFIDENCE_MARGIN))


def relevance_from_cosine(cosine: float, threshold: float = COVERAGE_THRESHOLD) -> float:
    """Map a cosine to a 0..1 relevance score, piecewise linear: cosine <= 0 -> 0,
    the coverage threshold -> 0.5, cosine 1 -> 1. So score >= 0.5 exactly when
    the passage would count as answering the query."""
    if cosine <= threshold:
        return max(0.0, 0.5 * cosine / threshold)
    return min(1.0, 0.5 + 0.5 * (cosine - threshold) / (1.0 - threshold))


@dataclass(frozen=True)
class Match:
    """Best cosine of one query against a set of windows, and that window.

    ``unmatched`` is the share of the query's content word-pieces that have no
    counterpart (token cosine >= ``TOKEN_MATCH``) in that window; ``conflict``
    says how that window contradicts the query, if it does
    (:func:`~jurist.models.alignment.find_conflict`). Both are only measured
    when asked for (``align=True``); otherwise 0.0 and None."""

    score: float
    evidence: str | None
    unmatched: float = 0.0
    conflict: str | None = None


def expressed_score(match: Match, weight: float = UNMATCHED_WEIGHT, conflict_weight: float = CONFLICT_WEIGHT) -> float:
    """The score ``expresses`` and ``support`` compare with their threshold: the
    best window cosine lowered by ``weight`` times the unmatched share and, when
    the window contradicts the query, by ``conflict_weight``."""
    return match.score - weight * match.unmatched - (conflict_weight if match.conflict else 0.0)


# --- the shared model ----------------------------------------------------------

_model: "MiniLM | None" = None
_load_lock = threading.Lock()
_encode_lock = threading.Lock()  # one encoding at a time: it already uses every core
_load_count = 0
# Encodings of the most recent texts: rubric items, checklist points and a
# session's windows come back call after call (a few MB per hundred texts).
CACHE_SIZE = 1024
_cache: "OrderedDict[str, Encoding]" = OrderedDict()

LoadNotice = Callable[[], AbstractContextManager[object]]
_load_notice: LoadNotice | None = None


def set_load_notice(notice: LoadNotice | None) -> LoadNotice | None:
    """Have the model's load (once per process) run inside ``notice()``, e.g. a
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


def _load_model() -> "MiniLM":
    """Load the bundled MiniLM model once per process (thread-safe)."""
    global _model, _load_count
    if _model is not None:
        return _model
    with _load_lock:
        if _model is None:
            with (_load_notice or nullcontext)():
                _set_offline_switches()
                require_installed()
                from jurist.models.minilm import MODEL_DIR, WEIGHTS_FILE, MiniLM

                if not (MODEL_DIR / WEIGHTS_FILE).is_file():
                    raise ConfigError(f"The MiniLM model files are missing under {MODEL_DIR}: reinstall jurist "
                                      '(pip install --force-reinstall "jurist[local]").')
                _model = MiniLM()
            _load_count += 1
        return _model


def _encodings(texts: list[str]) -> list["Encoding"]:
    """The encodings of ``texts``, from the cache of recent texts or one batched
    forward pass for those it lacks."""
    model = _load_model()
    with _encode_lock:
        missing = [t for t in dict.fromkeys(texts) if t not in _cache]
        if missing:
            _cache.update(zip(missing, model.encode(missing)))
        out = []
        for t in texts:
            _cache.move_to_end(t)
            out.append(_cache[t])
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return out


def _encode(texts: list[str]) -> "np.ndarray":
    """Unit-length embeddings of ``texts`` (one batched call)."""
    import numpy as np

    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.stack([e.sentence for e in _encodings(texts)])


@dataclass(frozen=True)
class _Encoded:
    """Sentence embedding plus unit-length token embeddings and word-pieces of
    one text, special tokens ([CLS], [SEP]) and padding removed."""

    sentence: "np.ndarray"
    tokens: "np.ndarray"
    pieces: list[str]


def _encode_with_tokens(texts: list[str]) -> list[_Encoded]:
    """Sentence and token embeddings (one batched forward pass for the texts not cached)."""
    import numpy as np

    encoded: list[_Encoded] = []
    for e in _encodings(texts):
        tokens = e.tokens[1:-1]
        tokens = tokens / np.maximum(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-12)
        encoded.append(_Encoded(e.sentence, tokens, e.pieces[1:-1]))
    return encoded


def _best_matches(queries: list[str], groups: list[list[str]], align: bool = False) -> list[list[Match]]:
    """For each query and each group of windows, the best cosine and window
    (and, with ``align``, the unmatched share of the query in that window and
    how that window contradicts it, if it does).
    Everything is encoded in one batch; returns ``result[query][group]``."""
    import numpy as np

    windows = [w for g in groups for w in g]
    if not queries:
        return []
    if not windows:
        return [[Match(0.0, None, 1.0 if align else 0.0) for _ in groups] for _ in queries]
    unique = list(dict.fromkeys(queries + windows))
    index = {t: i for i, t in enumerate(unique)}
    if align:
        encoded = _encode_with_tokens(unique)
        emb = np.stack([e.sentence for e in encoded])
    else:
        emb = _encode(unique)
    q = emb[[index[t] for t in queries]]
    w = emb[[index[t] for t in windows]]
    sims = q @ w.T
    out: list[list[Match]] = []
    for qi, query in enumerate(queries):
        row: list[Match] = []
        start = 0
        for g in groups:
            if not g:
                row.append(Match(0.0, None, 1.0 if align else 0.0))
                continue
            seg = sims[qi, start : start + len(g)]
            best = int(seg.argmax())
            unmatched, conflict = 0.0, None
            if align:
                qe, we = encoded[index[query]], encoded[index[g[best]]]
                unmatched = unmatched_share(qe.tokens, qe.pieces, we.tokens)
                conflict = find_conflict(qe.tokens, qe.pieces, we.tokens, we.pieces)
            row.append(Match(float(seg[best]), g[best], unmatched, conflict))
            start += len(g)
        out.append(row)
    return out


# --- the judge -----------------------------------------------------------------


class LocalJudge:
    """Offline meaning judge on all-MiniLM-L6-v2 (``local/minilm``).

    Also offers the ChatModel surface (``complete``, ``stream``, ``aclose``) so
    the model registry can hand it out; generating text raises ConfigError.
    """

    name: str = MODEL_NAME
    endpoint: str = "local"
    chats = False  # answers meaning questions; writes no text

    def __init__(
        self,
        expressed_threshold: float = EXPRESSED_THRESHOLD,
        coverage_threshold: float = COVERAGE_THRESHOLD,
    ) -> None:
        self.expressed_threshold = expressed_threshold
        self.coverage_threshold = coverage_threshold

    async def load(self) -> None:
        """Load the shared model now (off the event loop) instead of on first use."""
        await asyncio.to_thread(_load_model)

    async def similarity(self, text: str | Sequence[str], queries: list[str], *, align: bool = False) -> list[Match]:
        """Best cosine of each query against the windows of ``text`` (or of each
        text in a sequence; windows never span two texts), with the best window;
        with ``align``, also the query's unmatched share in that window."""
        texts = [text] if isinstance(text, str) else list(text)
        windows = [w for t in texts for w in text_windows(t)]
        rows = await asyncio.to_thread(_best_matches, list(queries), [windows], align)
        return [row[0] for row in rows]

    async def expresses(self, text: str, statements: list[str]) -> list[StatementCheck]:
        """Does ``text`` express each statement? Expressed if the score of its
        best window (:func:`expressed_score`) reaches ``expressed_threshold``;
        evidence is that window."""
        matches = await self.similarity(text, statements, align=True)
        t = self.expressed_threshold
        scores = [expressed_score(m) for m in matches]
        return [
            StatementCheck(
                statement=s,
                expressed=score >= t,
                confidence=confidence(score, t),
                judge_model=self.name,
                evidence=m.evidence,
            )
            for s, m, score in zip(statements, matches, scores)
        ]

    async def coverage(self, question: str, answer: str, parts: list[str] | None = None) -> CoverageResult:
        """Which parts of ``question`` the answer covers (see :func:`split_question`
        when ``parts`` is None); a part is covered if some window of the answer
        reaches ``coverage_threshold``."""
        parts = split_question(question) if parts is None else list(parts)
        matches = await self.similarity(answer, parts)
        t = self.coverage_threshold
        covered = [p for p, m in zip(parts, matches) if m.score >= t]
        uncovered = [p for p, m in zip(parts, matches) if m.score < t]
        conf = {p: confidence(m.score, t) for p, m in zip(parts, matches)}
        return CoverageResult(covered=covered, uncovered=uncovered, confidence=conf, judge_model=self.name)

    async def relevance(self, query: str, passages: list[str]) -> list[RelevanceScore]:
        """Relevance of each passage to ``query``, 0..1, from the best cosine over
        the passage's windows (mapping: :func:`relevance_from_cosine`)."""
        groups = [text_windows(p) for p in passages]
        rows = await asyncio.to_thread(_best_matches, [query], groups)
        if not rows:
            return []
        return [
            RelevanceScore(passage=p, score=relevance_from_cosine(m.score, self.coverage_threshold), judge_model=self.name)
            for p, m in zip(passages, rows[0])
        ]

    async def support(self, answer: str, sources: list[str]) -> SupportResult:
        """Which sentences of ``answer`` the sources support: a sentence is
        supported if the sources express it, scored as in :meth:`expresses`."""
        sentences = split_sentences(answer)
        matches = await self.similarity(sources, sentences, align=True)
        t = self.expressed_threshold
        scores = [expressed_score(m) for m in matches]
        return SupportResult(
            supported=[s for s, v in zip(sentences, scores) if v >= t],
            unsupported=[s for s, v in zip(sentences, scores) if v < t],
            confidence={s: confidence(v, t) for s, v in zip(sentences, scores)},
            judge_model=self.name,
        )

    # --- ChatModel surface -----------------------------------------------------

    async def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        """Always raises Unsupported (a ConfigError): the local judge cannot generate text."""
        raise Unsupported(_NO_TEXT_HINT)

    def stream(self, request: ChatRequest, *, timeout: float | None = None,
               into: Completion | None = None) -> AsyncIterator[str]:
        """Always raises Unsupported (a ConfigError): the local judge cannot generate text."""
        raise Unsupported(_NO_TEXT_HINT)

    async def aclose(self) -> None:
        """Nothing to release; the shared model stays loaded for the process."""


def get_local_judge() -> LocalJudge:
    """A :class:`LocalJudge` with the default thresholds (a new one each time: a judge holds only
    its thresholds; the MiniLM weights it reads are loaded once per process and only read)."""
    return LocalJudge()
