"""A statement against its evidence window, word-piece by word-piece.

The local judge (:mod:`jurist.models.local`) finds a statement's best window by
sentence-embedding cosine. That cosine says "same topic, same words"; it does not
say whether the window *agrees* with the statement. The checks here work on what
the same forward pass already gives: the word-pieces of both texts and MiniLM's
unit-length token embeddings (special tokens removed). Each statement piece is
aligned to the window token with the highest token cosine.

* :func:`unmatched_share`: the share of the statement's content pieces with no
  counterpart in the window (best token cosine below ``TOKEN_MATCH``);
* :func:`find_conflict`: whether the window contradicts the statement while
  reusing its words. Three checks, no list of antonyms:

  - **negation**: a clause of the statement most of whose content pieces
    (``REUSED_SHARE``, and at least ``REUSED_WORDS`` words) recur, by token
    cosine >= ``REUSED_MATCH``, in one clause of the window, where one of the
    two clauses has an odd number of negation
    words ("not", "no", "never", "cannot", "n't", ...) and the other an even
    number ("Antibiotics can treat the common cold" against "Antibiotics cannot
    treat the common cold");
  - **number**: a number of the statement aligned to a different number of the
    window that counts the same thing (the content word just before or just
    after the two numbers is reused), the statement's value appearing nowhere
    in the window ("eight cups" against "four cups");
  - **order**: key terms (statement pieces whose aligned window token is the same
    word-piece) that trade places. Either A ... R ... B inside one clause of the
    statement appears as B ... R ... A inside one clause of the window, with no
    "by" between them (the passive voice turns roles round legitimately):
    "Adenosine blocks caffeine receptors" against "Caffeine blocks adenosine
    receptors"; or two clauses of the statement each have a key term found only
    in the window clause the other one matches: "Glucagon lowers blood sugar,
    while insulin raises it" against "Insulin lowers blood sugar, while
    glucagon raises it".

A clause is a run of pieces between punctuation and the conjunctions in
``CLAUSE_BREAKS``. Each check returns a short explanation, quoting pieces, that
the judge reports; the local judge lowers the score of a contradicted statement
(see ``CONFLICT_WEIGHT`` in :mod:`jurist.models.local`).
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

# A statement word-piece has a counterpart in a window when some token of the
# window has token-embedding cosine >= TOKEN_MATCH with it (fixed, not fitted).
TOKEN_MATCH = 0.5
# A statement word-piece is *reused* in a window clause when its best token
# cosine there is at least REUSED_MATCH (mostly the same word in a similar
# context); the negation check needs REUSED_SHARE of a clause's content pieces,
# and REUSED_WORDS words at least, reused in one window clause. Fixed, chosen
# on the calibration half (docs/local-judge.md).
REUSED_MATCH = 0.7
REUSED_SHARE = 0.7
REUSED_WORDS = 3

# Function words: word-pieces that say nothing about what a statement claims.
FUNCTION_WORDS = frozenset(
    """a an the is are was were be been being am do does did of to in on at by for with from as and or but
    if so that this these those it its it's you your yours i me my we our they their them he she his her
    than then there here which who whom what when where why how can could should would will may might
    must has have had not no just very also only into out up down over about because while such some any
    all each more most other own same too s t don't can't isn't""".split()
)
NEGATION_WORDS = frozenset(
    "not no never cannot nothing none nobody neither nor without nowhere".split()
)
# "n't" is the piece "t" after an apostrophe ("can't" -> can ' t) or "##t" after
# one of these stems when the apostrophe is left out ("dont" -> don ##t).
_NT_STEMS = frozenset("don doesn didn can won isn aren wasn weren shouldn wouldn couldn hasn haven hadn mustn".split())
_APOSTROPHES = frozenset({"'", "\u2019", "`"})
CLAUSE_BREAKS = frozenset(
    list(",.;:!?()[]\u2013\u2014")
    + "but because so since while although though whereas which unless until when if that".split()
)
PASSIVE_MARKERS = frozenset({"by"})
NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
} | {w: 10 * i for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), start=3)}


def content_mask(pieces: Sequence[str]) -> "np.ndarray":
    """Mask of the word-pieces that carry content: alphanumeric and not a function word."""
    import numpy as np

    return np.array([p.strip("#").isalnum() and p.lower() not in FUNCTION_WORDS for p in pieces], dtype=bool)


def unmatched_share(query_tokens: "np.ndarray", query_pieces: list[str], window_tokens: "np.ndarray") -> float:
    """Share of the query's content word-pieces whose best token cosine against
    the window's tokens is below ``TOKEN_MATCH`` (all pieces when the query has
    no content piece). Token rows must be unit length, special tokens removed."""
    if len(query_pieces) == 0:
        return 0.0
    if len(window_tokens) == 0:
        return 1.0
    best = (query_tokens @ window_tokens.T).max(axis=1)
    mask = content_mask(query_pieces)
    if mask.any():
        best = best[mask]
    return float((best < TOKEN_MATCH).mean())


# --- pieces: clauses, negation words, numbers ---------------------------------


def is_negation(pieces: Sequence[str], k: int) -> bool:
    """Whether piece ``k`` is a negation word ("not", "never", the "t" of "n't", ...)."""
    p = pieces[k]
    if p in NEGATION_WORDS:
        return True
    prev = pieces[k - 1] if k else ""
    return (p == "t" and prev in _APOSTROPHES) or (p == "##t" and prev in _NT_STEMS)


def _joins_digits(pieces: Sequence[str], k: int) -> bool:
    """Whether piece ``k`` is the "," or "." inside a number: "1,000", "365.25"
    (a "," only before three digits, so "June 6, 1944" stays two numbers)."""
    if not (0 < k < len(pieces) - 1 and pieces[k - 1].isdigit() and pieces[k + 1].isdigit()):
        return False
    return pieces[k] == "." or (pieces[k] == "," and len(pieces[k + 1]) == 3)


def clause_ids(pieces: Sequence[str]) -> list[int]:
    """The clause of each piece (0, 1, ...); -1 for the pieces that separate clauses."""
    ids, clause = [], 0
    for k, p in enumerate(pieces):
        if p in CLAUSE_BREAKS and not _joins_digits(pieces, k):
            ids.append(-1)
            clause += 1
        else:
            ids.append(clause)
    return ids


def numbers(pieces: Sequence[str]) -> list[tuple[list[int], float]]:
    """The numbers among the pieces: (positions, value), digits ("1,000" -> 1000.0,
    "365.25") and number words up to ninety ("eight" -> 8.0)."""
    out: list[tuple[list[int], float]] = []
    k = 0
    while k < len(pieces):
        p = pieces[k]
        if p.isdigit():
            span, text = [k], p
            while _joins_digits(pieces, k + 1) and "." not in text:  # groups of a thousand, then decimals
                text += pieces[k + 1].replace(",", "") + pieces[k + 2]
                span += [k + 1, k + 2]
                k += 2
            out.append((span, float(text)))
        elif p in NUMBER_WORDS:
            out.append(([k], float(NUMBER_WORDS[p])))
        k += 1
    return out


def _text(pieces: Sequence[str]) -> str:
    """Pieces back to (lower-cased) words, for explanations: "don ' t" -> "don't"."""
    words: list[str] = []
    glue = False
    for p in pieces:
        if words and (glue or p.startswith("##") or p in _APOSTROPHES):
            words[-1] += p.removeprefix("##")
        else:
            words.append(p)
        glue = p in _APOSTROPHES
    return " ".join(words)


def _clause_text(pieces: Sequence[str], ids: list[int], clause: int) -> str:
    return _text([p for p, c in zip(pieces, ids) if c == clause])


# --- the checks ----------------------------------------------------------------


def _negation_conflict(sp: list[str], wp: list[str], best: "np.ndarray", best_sim: "np.ndarray") -> str | None:
    sc, wc = clause_ids(sp), clause_ids(wp)
    content = content_mask(sp)
    for clause in sorted(set(sc) - {-1}):
        idx = [i for i, c in enumerate(sc) if c == clause and content[i]]
        hits = Counter(wc[best[i]] for i in idx if best_sim[i] >= REUSED_MATCH and wc[best[i]] >= 0)
        if not hits:
            continue
        target, reused = hits.most_common(1)[0]
        words = sum(not sp[i].startswith("##") and best_sim[i] >= REUSED_MATCH and wc[best[i]] == target for i in idx)
        if reused < REUSED_SHARE * len(idx) or words < REUSED_WORDS:
            continue
        s_neg = sum(is_negation(sp, k) for k, c in enumerate(sc) if c == clause) % 2
        w_neg = sum(is_negation(wp, k) for k, c in enumerate(wc) if c == target) % 2
        if s_neg != w_neg:
            return (f'negation: "{_clause_text(wp, wc, target)}" says the opposite of '
                    f'"{_clause_text(sp, sc, clause)}"')
    return None


def _neighbours(pieces: list[str], span: list[int]) -> tuple[int | None, int | None]:
    """The content pieces next to a number, in its clause and not numbers
    themselves: the last one before it and the first one after it."""
    ids, content = clause_ids(pieces), content_mask(pieces)
    in_numbers = {k for s, _ in numbers(pieces) for k in s}

    def ok(k: int) -> bool:
        return bool(content[k]) and k not in in_numbers and not pieces[k].startswith("##")

    clause = ids[span[0]]
    before = [k for k in range(span[0]) if ids[k] == clause and ok(k)]
    after = [k for k in range(span[-1] + 1, len(pieces)) if ids[k] == clause and ok(k)]
    return (before[-1] if before else None), (after[0] if after else None)


def _number_conflict(sp: list[str], wp: list[str], best: "np.ndarray", sims: "np.ndarray") -> str | None:
    window_numbers = numbers(wp)
    values = {v for _, v in window_numbers}
    span_at = {k: (s, v) for s, v in window_numbers for k in s}
    for span, value in numbers(sp):
        if value in values:
            continue
        aligned = next((span_at[int(best[i])] for i in span if int(best[i]) in span_at), None)
        if aligned is None:
            continue
        other_span, other = aligned
        # The two numbers count the same thing: a word next to them is reused ("eight cups" / "four cups").
        pairs = zip(_neighbours(sp, span), _neighbours(wp, other_span))
        if any(a is not None and b is not None and sims[a, b] >= REUSED_MATCH for a, b in pairs):
            shown = sp[span[0]] if len(span) == 1 else f"{value:g}"
            return f'number: "{shown}" where the evidence says {other:g}'
    return None


def _key_chunks(sp: list[str], wp: list[str], best: "np.ndarray") -> list[list[int]]:
    """Runs of statement pieces aligned to the same piece in the window, at
    consecutive window positions; only runs holding a content piece."""
    chunks: list[list[int]] = []
    for i, p in enumerate(sp):
        if p != wp[best[i]] or p in CLAUSE_BREAKS:
            continue
        if chunks and chunks[-1][-1] == i - 1 and best[i] == best[i - 1] + 1:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    content = content_mask(sp)
    return [c for c in chunks if content[c].any()]


def _order_conflict(sp: list[str], wp: list[str], best: "np.ndarray", sims: "np.ndarray") -> str | None:
    chunks = _key_chunks(sp, wp, best)
    stop = CLAUSE_BREAKS | PASSIVE_MARKERS
    for a, r, b in itertools.combinations(chunks, 3):
        pa, pr, pb = best[a[0]], best[r[0]], best[b[0]]
        words_a, words_b = {sp[i] for i in a}, {sp[i] for i in b}
        if not pb < pr < pa or words_a == words_b:
            continue
        between = sp[a[-1] + 1 : b[0]] + wp[best[b[-1]] + 1 : pa]
        if not stop.intersection(between):
            return (f'order: "{_text([sp[i] for i in a])}" and "{_text([sp[i] for i in b])}" '
                    f'trade places around "{_text([sp[i] for i in r])}"')
    return _crossed_clauses(sp, wp, sims)


def _crossed_clauses(sp: list[str], wp: list[str], sims: "np.ndarray") -> str | None:
    """Two statement clauses, each with a key term found only in the window
    clause that the other statement clause matches best."""
    import numpy as np

    sc, wc = clause_ids(sp), clause_ids(wp)
    content = content_mask(sp)
    window_clauses = sorted(set(wc) - {-1})
    matched: dict[int, int] = {}
    for clause in sorted(set(sc) - {-1}):
        idx = [i for i, c in enumerate(sc) if c == clause and content[i]]
        if idx:
            ranked = []
            for target in window_clauses:
                cols = [j for j, c in enumerate(wc) if c == target]
                sub = sims[np.ix_(idx, cols)].max(axis=1)
                ranked.append((int((sub >= REUSED_MATCH).sum()), float(sub.sum()), target))
            matched[clause] = max(ranked)[2]
    if len(matched) < 2:
        return None
    terms = {c: {sp[i] for i, x in enumerate(sc) if x == c and content[i]} for c in matched}
    found = {c: {p for p, x in zip(wp, wc) if x == c} for c in window_clauses}
    for s1, s2 in itertools.combinations(matched, 2):
        w1, w2 = matched[s1], matched[s2]
        if w1 == w2:
            continue
        moved1 = sorted(t for t in terms[s1] - terms[s2] if t not in found[w1] and t in found[w2])
        moved2 = sorted(t for t in terms[s2] - terms[s1] if t not in found[w2] and t in found[w1])
        if moved1 and moved2:
            return (f'order: "{_text(moved1[:1])}" and "{_text(moved2[:1])}" belong to each other\'s '
                    f'clause in the evidence')
    return None


def find_conflict(
    query_tokens: "np.ndarray", query_pieces: list[str], window_tokens: "np.ndarray", window_pieces: list[str]
) -> str | None:
    """Why the window contradicts the query (statement), or None: the negation,
    number and order checks above, in that order. Token rows must be unit length,
    special tokens removed."""
    if len(query_pieces) == 0 or len(window_pieces) == 0:
        return None
    sims = query_tokens @ window_tokens.T
    best, best_sim = sims.argmax(axis=1), sims.max(axis=1)
    return (
        _negation_conflict(query_pieces, window_pieces, best, best_sim)
        or _number_conflict(query_pieces, window_pieces, best, sims)
        or _order_conflict(query_pieces, window_pieces, best, sims)
    )
