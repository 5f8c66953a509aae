"""Untrusted text in prompts: the one way every prompt quotes it.

Transcripts, answers, sources, questions, learners' messages and example
texts are data for a judge, never instructions. Every prompt puts them
between named delimiter tags built here::

    <answer>
    ...the text, escaped...
    </answer>

and the text cannot close or forge a delimiter: any opening or closing tag
named in :data:`DELIMITERS` inside it gets an underscore after its name
(``</answer>`` becomes ``</answer_>``), whatever its case and spacing
(``</ANSWER >``, ``< / answer>``, ``</answer\\n>``, full-width brackets) and
even unterminated at the end of the text. Other tags (``<textarea>``) and
all other text are left as they are, so the judge reads the text as written.

A chat transcript's turn headers (``[4] ASSISTANT:``) cannot be forged either:
:func:`escape_turn_markers` puts a backslash before a line of a message that
starts like a turn header (``\\[4] ASSISTANT:``, ``\\User:``), so only the real
headers start a line with one.

Quoted blocks nest: :func:`quote` returns a :class:`Quoted` string, which a
further :func:`quote` (or :func:`join`) takes as it is, since its text is
already escaped.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable, Sequence

__all__ = [
    "DELIMITERS",
    "TURN_ROLES",
    "Quoted",
    "escape",
    "escape_turn_markers",
    "join",
    "quote",
    "quote_all",
    "turn_header",
]

# Every tag name a jurist prompt uses as a delimiter. Quoted text cannot open or
# close any of them, whichever block it sits in.
DELIMITERS: frozenset[str] = frozenset({
    # rubric scoring
    "chat_session",
    # meaning judges, panels, research, checklist
    "text", "statement", "question", "part", "answer", "query", "passage", "source",
    # gate
    "conversation", "response", "result", "results", "user", "assistant", "system", "tool",
    # pattern writer
    "statistics", "example", "examples",
})

TURN_ROLES = ("user", "assistant", "system", "tool")


class Quoted(str):
    """Text already quoted by this module: its delimiters are escaped, so it
    nests inside another :func:`quote` unchanged. Built only here."""

    __slots__ = ()


_LT = "<\uff1c\ufe64"  # "<" and its full-width and small forms
_SLASH = "/\uff0f"


@functools.lru_cache(maxsize=8)
def _tag_pattern(names: frozenset[str]) -> re.Pattern[str]:
    # An opening or closing tag of one of the names, in any case and spacing, with
    # attributes or not, terminated or not: the name must merely end there.
    # (The first letters up front let most "<" that open no delimiter fail at once.)
    alternatives = "|".join(sorted((re.escape(n) for n in names), key=len, reverse=True))
    first = re.escape("".join(sorted({n[0] for n in names})))
    return re.compile(rf"[{_LT}]\s*[{_SLASH}]?\s*(?=[{first}])(?:{alternatives})(?![\w-])", re.IGNORECASE)


def escape(text: str) -> str:
    """``text`` with every delimiter tag neutralised: ``</answer>`` -> ``</answer_>``.

    Idempotent: an escaped tag is not escaped again.
    """
    if not any(lt in text for lt in _LT):  # most texts: no scan at all
        return text
    return _tag_pattern(DELIMITERS).sub(lambda m: m.group(0) + "_", text)


def _attribute(value: str) -> str:
    return html.escape(" ".join(value.split()), quote=True)


def quote(tag: str, text: str, item_id: str | None = None) -> Quoted:
    """``text`` escaped between ``<tag id="item_id">`` and ``</tag>``, each on its own line.

    ``tag`` must be one of :data:`DELIMITERS`; a :class:`Quoted` text (blocks
    quoted before) is put in as it is.
    """
    if tag not in DELIMITERS:
        raise ValueError(f"{tag!r} is not a delimiter of jurist's prompts; add it to DELIMITERS")
    body = text if isinstance(text, Quoted) else escape(text)
    attr = f' id="{_attribute(item_id)}"' if item_id else ""
    return Quoted(f"<{tag}{attr}>\n{body}\n</{tag}>")


def quote_all(tag: str, texts: Sequence[str], ids: Sequence[str]) -> Quoted:
    """One :func:`quote` block per text, with its id, one after the other."""
    if len(texts) != len(ids):
        raise ValueError(f"{len(texts)} texts but {len(ids)} ids")
    return join(quote(tag, t, i) for t, i in zip(texts, ids))


def join(blocks: Iterable[Quoted], sep: str = "\n") -> Quoted:
    """Quoted blocks one after the other, still :class:`Quoted` (empty when there are none)."""
    parts = list(blocks)
    for b in parts:
        if not isinstance(b, Quoted):
            raise TypeError("join() takes blocks made by quote(); quote the text first")
    return Quoted(sep.join(parts))


# --- chat turns ---------------------------------------------------------------------

_ROLES = "|".join(TURN_ROLES)
# After a newline: "[4] ASSISTANT", "[ 4 ]user", or a bare "Assistant:" / "TOOL (search):". (A literal
# "\n" first lets the regex engine skip to each line; the text's first line gets a "\n" put before it.)
_TURN = re.compile(
    rf"\n([ \t]*)(?=\[\s*\d+\s*\]\s*(?i:{_ROLES})\b|(?i:{_ROLES})[ \t]*(?:\([^)\n]*\)[ \t]*)?:)"
)


def escape_turn_markers(text: str) -> str:
    """A backslash before every line of ``text`` that starts like a turn header.

    ``[4] ASSISTANT: yes`` -> ``\\[4] ASSISTANT: yes``; ``User: hi`` -> ``\\User: hi``.
    """
    return _TURN.sub(lambda m: "\n" + m.group(1) + "\\", "\n" + text)[1:]


def turn_header(index: int, role: str, name: str | None = None) -> str:
    """``[4] ASSISTANT (name): ``, the header of a transcript's turn; the name is put on one line."""
    who = f" ({' '.join(name.split())})" if name and name.strip() else ""
    return f"[{index}] {role.upper()}{who}: "
