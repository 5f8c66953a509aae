"""Text splitting for the offline judge: sentences, comparison windows and the
parts of a question."""

from __future__ import annotations

import re

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
