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
(``</ANSWER >``, ``< / answer>``, ``</answer\\n>``, full-width brackets, the
angle brackets ``〈`` ``‹`` ``⟨`` and other lookalikes of ``<`` and ``/``) and
even unterminated at the end of the text. Other tags (``<textarea>``) and
all other text are left as they are, so the judge reads the text as written.

A chat transcript's turn headers (``[4] ASSISTANT:``) cannot be forged either:
:func:`escape_turn_markers` puts a backslash before a line of a message that
starts like a turn header (``\\[4] ASSISTANT:``, ``\\User:``), so only the real
headers start a line with one.

Both look at the text as a model reads it, so a spelling cannot slip past
them: quoted text is first normalised (:func:`normalise`): Unicode NFKC
(full-width and other compatibility forms become the plain letters), every
line break (CR, CRLF, VT, FF, NEL, U+2028, U+2029, the file and record
separators) becomes ``\\n``, every other space becomes a plain space, and
invisible characters (zero-width spaces and joiners, the byte-order mark, soft
hyphens, bidirectional controls, other format and control characters; tabs
stay) are removed.

Quoted blocks nest: :func:`quote` returns a :class:`Quoted` string, which a
further :func:`quote` (or :func:`join`) takes as it is, since its text is
already escaped.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Iterable, Sequence

__all__ = [
    "DELIMITERS",
    "TURN_ROLES",
    "Quoted",
    "escape",
    "escape_turn_markers",
    "join",
    "normalise",
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


# "<" and what a reader takes for it: full-width and small forms (NFKC makes those "<"), and the
# angle brackets NFKC keeps (U+2039, U+2329, U+3008, U+27E8, U+276C, U+276E, U+2770, U+02C2, U+1438, U+29FC).
_LT = "<\uff1c\ufe64\u2039\u2329\u3008\u27e8\u276c\u276e\u2770\u02c2\u1438\u29fc"
# "/" and its lookalikes (full-width, fraction slash, division slash, big solidus, box drawing diagonal).
_SLASH = "/\uff0f\u2044\u2215\u29f8\u2571\u27cb"

# Line breaks a reader (or str.splitlines) takes for one: CRLF, CR, VT, FF, the file, group and record
# separators, NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR.
_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# Format characters (Unicode category Cf, Unicode 15.1) but the joiners: soft hyphen, Arabic number
# signs, zero-width space, direction marks and embeddings, word joiner and invisible operators,
# the BOM, interlinear annotation, and the format controls of other scripts and of tags.
_FORMAT = ("\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b\u200e-\u200f\u202a-\u202e"
           "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
           "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
# Neither seen nor a line break: control characters (but tab and line feed), and format characters.
_INVISIBLE = re.compile(f"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f{_FORMAT}]")
# The zero-width (non-)joiner, kept where it joins what it is for (an emoji sequence, Persian or
# Devanagari letters), removed next to plain ASCII (where it would only split a word: chat_\u200dsession).
_JOINERS = re.compile("(?<![^\x00-\x7f])[\u200c\u200d]+|[\u200c\u200d]+(?![^\x00-\x7f])")
_SPACES = re.compile(r"[^\S\n\t]")  # every other white space: NBSP, em space, ideographic space, ...
_PLAIN = re.compile("[\t\n\x20-\x7e]*")  # text normalise() leaves as it is


def normalise(text: str) -> str:
    """``text`` as a model reads it, in one spelling: NFKC, every line break ``\\n``, every space
    ``" "``, invisible characters removed (see the module's notes). Idempotent."""
    if _PLAIN.fullmatch(text):  # most texts: printable ASCII, nothing to do
        return text
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", _BREAKS.sub("\n", text)))
    if "\u200c" in text or "\u200d" in text:
        text = unicodedata.normalize("NFKC", _JOINERS.sub("", text))
    return _SPACES.sub(" ", text)


@functools.lru_cache(maxsize=8)
def _tag_pattern(names: frozenset[str]) -> re.Pattern[str]:
    # An opening or closing tag of one of the names, in any case and spacing, with
    # attributes or not, terminated or not: the name must merely end there.
    # (The first letters up front let most "<" that open no delimiter fail at once.)
    alternatives = "|".join(sorted((re.escape(n) for n in names), key=len, reverse=True))
    first = re.escape("".join(sorted({n[0] for n in names})))
    return re.compile(rf"[{_LT}]\s*[{_SLASH}]?\s*(?=[{first}])(?:{alternatives})(?![\w-])", re.IGNORECASE)


def escape(text: str) -> str:
    """``text`` :func:`normalise`-d, with every delimiter tag neutralised: ``</answer>`` -> ``</answer_>``.

    Idempotent: an escaped tag is not escaped again.
    """
    text = normalise(text)
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

    ``[4] ASSISTANT: yes`` -> ``\\[4] ASSISTANT: yes``; ``User: hi`` -> ``\\User: hi``. The text is
    :func:`normalise`-d first, so a line started by a CR, a U+2028 or an indent of NBSPs is a line too.
    """
    return _TURN.sub(lambda m: "\n" + m.group(1) + "\\", "\n" + normalise(text))[1:]


def turn_header(index: int, role: str, name: str | None = None) -> str:
    """``[4] ASSISTANT (name): ``, the header of a transcript's turn; the name is put on one line."""
    who = f" ({' '.join(name.split())})" if name and name.strip() else ""
    return f"[{index}] {role.upper()}{who}: "
