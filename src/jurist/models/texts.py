"""Text splitting for the offline judge: sentences, comparison windows and the
parts of a question.

* :func:`split_sentences`: sentences, also cut at ``;``, ``:`` and line breaks;
* :func:`text_windows`: the passages a statement is compared with;
* :func:`split_question`: what a question asks, one part per question or request.

All three take any text and never raise: empty or blank text gives no pieces,
and every piece they return holds something besides white space. Control
characters become spaces and a lone surrogate (half of a character, which no
encoder takes) becomes U+FFFD (:func:`clean_text`). Their time is linear in
the length of the text, and the number of windows and parts is capped
(``MAX_WINDOW_SENTENCES``, ``MAX_PARTS``).
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_PARTS",
    "MAX_SENTENCE_CHARS",
    "MAX_WINDOW_SENTENCES",
    "WHOLE_TEXT_CHARS",
    "clean_text",
    "split_question",
    "split_sentences",
    "text_windows",
]

# A sentence longer than this is cut at a space (at the limit where it has none): the
# encoder reads 256 word-pieces of a passage, about 1,000 characters of English.
MAX_SENTENCE_CHARS = 1000
# A text of more sentences than this is compared as this many runs of adjacent
# sentences (windows: the runs, the pairs of adjacent runs and at most the whole
# text, so at most 2 * MAX_WINDOW_SENTENCES windows, whatever the text's length).
MAX_WINDOW_SENTENCES = 64
# The whole text is a window of its own only up to this length (beyond it the
# encoder would read its beginning only, which the first windows already hold).
WHOLE_TEXT_CHARS = 2000
# At most this many parts of one question; those after it are left out.
MAX_PARTS = 32

# --- cleaning --------------------------------------------------------------------

# Control characters (but tab, line feed and carriage return), and lone surrogates.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE_BREAKS = re.compile("\r\n?|[\u2028\u2029]")


def clean_text(text: str) -> str:
    """``text`` with line breaks as ``\\n``, control characters as spaces and each lone
    surrogate as U+FFFD (the replacement character); otherwise unchanged."""
    text = _LINE_BREAKS.sub("\n", text)
    text = _CONTROL.sub(" ", text)
    return _SURROGATE.sub("\ufffd", text)


# --- sentences ---------------------------------------------------------------------

_CLOSERS = "\"'\u201d\u2019\u00bb)\\]"
# Where a sentence ends: ., !, ? or an ellipsis followed by white space (after any
# closing quotes or brackets); the full stops of Chinese and Japanese and the Arabic
# question mark wherever they are; and line breaks.
_WIDE_ENDS = "\u3002\uff01\uff1f\u061f"  # 。！？ and the Arabic question mark
_SENTENCE_END = re.compile(
    rf"(?<![.!?\u2026])[.!?\u2026]++[{_CLOSERS}]*+(?=\s)|(?<![{_WIDE_ENDS}])[{_WIDE_ENDS}]++[{_CLOSERS}]*+|\n"
)
_CLAUSE_END = re.compile(rf"[;:][{_CLOSERS}]*+(?=\s)")
_ABBREVIATIONS = frozenset(
    "e.g. i.e. etc. vs. dr. mr. mrs. ms. prof. fig. approx. cf. al. jr. sr. st. inc. ltd. vol. pp.".split()
)
# A piece that is only a list marker: "1.", "A.", "(C.", "b)", "iv."
_MARKER = re.compile(r"\(?(?:[A-Za-z]|\d{1,3}|[ivxIVX]{2,4})[.)]")


def _has_word(text: str) -> bool:
    return any(c.isalnum() for c in text)


def _cut(text: str, pattern: re.Pattern[str]) -> list[str]:
    """``text`` cut after each match of ``pattern`` (the match stays with the piece
    before it), pieces stripped, blank ones dropped."""
    pieces, start = [], 0
    for m in pattern.finditer(text):
        pieces.append(text[start : m.end()].strip())
        start = m.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def _limit(sentence: str) -> list[str]:
    """``sentence`` in pieces of at most ``MAX_SENTENCE_CHARS``, cut at white space where it has some."""
    out = []
    while len(sentence) > MAX_SENTENCE_CHARS:
        at = sentence.rfind(" ", MAX_SENTENCE_CHARS // 2, MAX_SENTENCE_CHARS + 1)
        at = at if at > 0 else MAX_SENTENCE_CHARS
        head, sentence = sentence[:at].strip(), sentence[at:].strip()
        if head:
            out.append(head)
    if sentence:
        out.append(sentence)
    return out


def _join_pieces(pieces: list[str]) -> list[str]:
    """Pieces put back together where a cut was no sentence end: after a common
    abbreviation ("e.g."), after a list marker alone ("1.", "(C."), and around a
    piece with no letter or digit in it ("...", "?!", an emoji), which joins the
    sentence before it (the one after it, when it comes first)."""
    groups: list[list[str]] = []
    glue_next = False
    worded = False  # whether the last group holds a letter or digit
    for piece in pieces:
        has_word = _has_word(piece)
        if groups and (glue_next or not has_word):
            groups[-1].append(piece)
            worded = worded or has_word
        else:
            groups.append([piece])
            worded = has_word
        tail = piece.rsplit(None, 2)
        last = tail[-1].lower()
        opens_list = bool(_MARKER.fullmatch(last)) and (len(tail) == 1 or tail[-2].endswith(":"))
        glue_next = last in _ABBREVIATIONS or opens_list or not worded
    return [" ".join(g) for g in groups]


def _sentences(text: str, clauses: bool) -> list[str]:
    pieces = _cut(clean_text(text), _SENTENCE_END)
    if clauses:
        pieces = [c for p in pieces for c in _cut(p, _CLAUSE_END)]
    return [s for sentence in _join_pieces(pieces) for s in _limit(sentence)]


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (also at ``;``, ``:`` and line breaks), keeping
    common abbreviations such as "e.g." and list markers such as "1." inside their
    sentence; a sentence longer than ``MAX_SENTENCE_CHARS`` is cut at a space.
    Blank text gives ``[]``; every sentence holds something besides white space."""
    return _sentences(text, clauses=True)


def text_windows(text: str) -> list[str]:
    """The passages a statement is compared with: each sentence, each pair of
    adjacent sentences, and the whole text when it has more than two sentences
    and at most ``WHOLE_TEXT_CHARS`` characters. A text of more than
    ``MAX_WINDOW_SENTENCES`` sentences is taken as that many runs of adjacent
    sentences instead, so there are never more than ``2 * MAX_WINDOW_SENTENCES``
    windows."""
    sentences = split_sentences(text)
    if len(sentences) > MAX_WINDOW_SENTENCES:
        size = -(-len(sentences) // MAX_WINDOW_SENTENCES)
        sentences = [" ".join(sentences[i : i + size]) for i in range(0, len(sentences), size)]
    windows = list(sentences)
    windows += [f"{a} {b}" for a, b in zip(sentences, sentences[1:])]
    if len(sentences) > 2:
        whole = " ".join(sentences)
        if len(whole) <= WHOLE_TEXT_CHARS:
            windows.append(whole)
    return windows


# --- the parts of a question ----------------------------------------------------------

_QUESTION_MARKS = "?\uff1f\u061f"
_WH_WORDS = frozenset("what why how which who whom whose".split())
_AUXILIARIES = frozenset(
    "is are was were am do does did can could should would will shall may might must has have had".split()
)
# A subject after an auxiliary: "and is it ...", "or does the ..." (not "and is then connected").
_PRONOUNS = frozenset("i you he she it we they there this that these those".split())
_SUBJECTS = _PRONOUNS | frozenset("the a an my your his her its our their".split())
# Auxiliaries that open a question before a noun ("Is the ...", "Can a ..."), not those
# that open imperatives and dates ("Do the exercises", "Have a look", "May 2020 ...").
_INVERTING = frozenset("is are was were does did can could should would will".split())
# Verbs that ask for an answer when they open a sentence ("Explain why ...", "Compare A and B").
# Verbs of drawing and marking (draw, label, mark, trace, circle, plot) ask for something
# an answer's text cannot hold, and "use", "look", "answer", "note", "try" open instructions.
_REQUEST_VERBS = frozenset(
    """explain describe compare contrast tell give write summarize summarise define identify predict calculate
    compute estimate outline discuss evaluate assess justify suggest propose recommend determine solve classify
    provide prove derive translate rewrite create analyze analyse interpret illustrate elaborate clarify convert
    simplify demonstrate infer decide choose select explore brainstorm generate paraphrase rephrase argue
    critique distinguish differentiate relate specify mention enumerate find""".split()
)
# Verbs that open as many statements as requests ("List three causes" but "List prices rose";
# "Complete the table" but "Complete sentences are required"): a request only when an
# object follows them (a determiner, a pronoun, a number, a question word).
_OBJECT_VERBS = frozenset(
    "list name state show check review design plan complete help draft detail rank fix edit cite".split()
)
_OBJECTS = frozenset(
    """the a an this that these those my our your his her their its me us him them it each every all some any
    both one two three four five six seven eight nine ten several few how what why which who where when whether
    if""".split()
)
_VERB_ALTERNATIVES = "|".join(sorted(_REQUEST_VERBS | _OBJECT_VERBS))
# Words that open a sentence without changing what it is: "Also, what ...", "Then explain ...".
_CONNECTIVES = frozenset(
    "and also or plus then so now next finally lastly first second third additionally moreover furthermore "
    "please ok okay".split()
)
_LEADING_CONNECTIVE = re.compile(r"^(?:and|also|or|plus|then)\b[\s,]*", re.I)
# Declarative requests: "I want you to ...", "I'd like to know ...", "I wonder ...".
_DECLARED_REQUEST = re.compile(
    r"^i(?:\s+(?:want|would\s+like|need)|'d\s+like|\u2019d\s+like)\s+(?:you\s+to|to\s+(?:know|understand|learn|see))\b"
    r"|^i(?:\s+am|'m|\u2019m|\s+was)?\s+wonder(?:ing)?\b",
    re.I,
)
# "Use X to write Y": an instruction that carries a request.
_USE_TO_REQUEST = re.compile(rf"^(?:use|using)\b[^.?!]{{0,200}}?\bto\s+(?:{_VERB_ALTERNATIVES})\b", re.I)
# A follow-up that asks for the reasons of the part before it and says nothing of its
# own: "Why?", "Why or why not?", "Explain your answer.", "How do you know?".
_FOLLOW_UP_WORDS = frozenset(
    """why not or how so come explain justify your you answer answers choice choices reasoning reason reasons
    evidence proof that this it is was the what do does did know think and briefly please""".split()
)
_FOLLOW_UP = re.compile(
    r"^(?:(?:please\s+)?(?:explain|justify|support)\s+(?:your\b|why\s+you\s+(?:chose|picked|think|said|selected)\b"
    r"|how\s+you\s+know\b)"
    r"|(?:how|why)\s+(?:do|did|would|can|could)\s+you\s+(?:know|tell|decide|think\s+so)"
    r"(?:\s+(?:that|this|it|which|what)\b|\W*$)"
    r"|what\s+(?:is|was|are)\s+(?:your|the)\s+(?:evidence|reason|reasons|reasoning|proof)\b"
    r"|what\s+evidence\s+(?:supports?|do\s+you\s+have|is\s+there)\b)",
    re.I,
)
_LEADING_ASIDE = re.compile(r"^(?:\([^()]{0,200}\)|\[[^\[\]]{0,200}\])\s*")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")


def _body(clause: str) -> str:
    """``clause`` without what opens it and does not change what it is: asides in
    brackets ("(6 Celsius) How ..."), a list marker ("2. What ..."), connectives
    ("Also, what ...", "Please explain ...")."""
    text = clause
    for _ in range(8):
        before = text
        text = _LEADING_ASIDE.sub("", text)
        marker = _MARKER.match(text)
        if marker and text[marker.end() : marker.end() + 1].isspace():
            text = text[marker.end() :].lstrip()
        words = text.split(None, 1)
        if words and words[0].strip(",;:-").lower() in _CONNECTIVES:
            text = words[1] if len(words) > 1 else ""
        if text == before:
            break
    return text.strip()


def _unmarked(clause: str) -> str:
    """``clause`` without the list marker that opens it ("2. What is Y?" -> "What is Y?")."""
    marker = _MARKER.match(clause)
    if marker and clause[marker.end() : marker.end() + 1].isspace() and _has_word(clause[marker.end() :]):
        return clause[marker.end() :].lstrip()
    return clause


def _words(text: str, n: int) -> list[str]:
    """The first ``n`` words of ``text``, lower-cased (letters and digits; "don't" is one word)."""
    out = []
    for m in _WORD.finditer(text):
        out.append(m.group().lower())
        if len(out) == n:
            break
    return out


def _asks(text: str) -> bool:
    """Whether ``text`` ends with a question mark (before closing quotes and brackets)."""
    return text.rstrip(_CLOSERS.replace("\\", "") + " ").endswith(tuple(_QUESTION_MARKS))


def _is_request(body: str) -> bool:
    head = body.split(None, 2)
    first = head[0].lower().strip("\"'") if head else ""
    after = head[1].lower().strip("\"'(,") if len(head) > 1 else ""
    if first.endswith(":"):  # "Name: ...", "List: ..." name things; they ask nothing
        return False
    first = first.rstrip(",")
    if first in _REQUEST_VERBS:
        return after not in {"of", "is", "was", "are", "were"}  # "Outline of ...", "Estimate is ..."
    if first in _OBJECT_VERBS:
        return after in _OBJECTS or after[:1].isdigit()
    words = _words(body, 2)
    if len(words) == 2 and words[0] in {"can", "could", "would", "will"} and words[1] == "you":
        return True
    return bool(_DECLARED_REQUEST.match(body) or _USE_TO_REQUEST.match(body))


def _kind(clause: str) -> str | None:
    """"question", "request" or None (context, an instruction) for one clause."""
    body = _body(clause)
    if not _has_word(body):
        return None
    if _asks(body):
        return "question"
    words = _words(body, 2)
    first = re.sub(r"['\u2019](?:s|re|d|ll)$", "", words[0]) if words else ""  # "what's" -> "what"
    second = words[1] if len(words) > 1 else ""
    if first in _WH_WORDS:
        return "question"
    if first in _AUXILIARIES and second != "not":
        # "Is it safe to fly." and "Can the tank leak." ask with a full stop; "is python fast" with nothing.
        if second in _PRONOUNS or (first in _INVERTING and second in _SUBJECTS) or body[-1:].isalnum():
            return "question"
    if _is_request(body):
        return "request"
    return None


def _follow_up(clause: str) -> str | None:
    """"bare" for a follow-up that says nothing of its own ("Why?", "Explain your
    answer."), "reasons" for one that asks how the answer before it was found ("How
    did you know which direction was west?"), None for anything else."""
    body = _body(clause[:400])
    words = [m.group().lower() for m in _WORD.finditer(body)]
    if len(clause) <= 200 and words and all(w in _FOLLOW_UP_WORDS for w in words):
        return "bare"
    return "reasons" if _FOLLOW_UP.match(body) else None


def _clause_start(kind: str) -> re.Pattern[str]:
    verbs = rf"(?:{_VERB_ALTERNATIVES})\b(?!\s+of\b)"
    if kind == "request":  # "Describe what X does and what Y does" is one request
        start = verbs
    else:
        wh = "|".join(sorted(_WH_WORDS))
        aux = "|".join(sorted(_AUXILIARIES))
        subjects = "|".join(sorted(_SUBJECTS))
        start = rf"(?:{wh})\b|(?:{aux})\s+(?:{subjects}|[A-Z0-9])\b|{verbs}"
    return re.compile(rf"(?:,\s*+|(?<!\s)\s++)(?:and\s++then|and|also|or|plus|then)\s++(?=(?i:{start}))")


_CLAUSE_STARTS = {kind: _clause_start(kind) for kind in ("question", "request")}


def _clauses(segment: str, kind: str) -> list[str]:
    """``segment`` cut where "and", "also", "or", "plus" or "then" opens a new question
    or request ("What is X and how does it work?"); a cut is kept only when both
    sides have two words or more and the new clause is no follow-up ("and why not?")."""
    out, start = [], 0
    for m in _CLAUSE_STARTS[kind].finditer(segment):
        left, right = segment[start : m.start()], segment[m.end() : m.end() + 400]
        if len(left.split()) >= 2 and len(right.split()) >= 2 and not _follow_up(right):
            out.append(left)
            start = m.end()
    out.append(segment[start:])
    return [c for c in (_LEADING_CONNECTIVE.sub("", c.strip(" ,;:-")) for c in out) if _has_word(c)]


def split_question(question: str) -> list[str]:
    """The parts of what ``question`` asks: each question (it ends with "?" or opens
    with what, why, how, which, who) and each request (it opens with a verb such as
    explain, describe, list, name, give, compare, tell, write, summarize, define,
    identify, predict or calculate, or with "I want you to", "Can you").

    * Context ("You used several methods to ...") and instructions ("Answer in
      one sentence.", "Use the table above.", "Look at the graph.") are no parts.
    * A sentence is cut at "and", "also", "or", "plus" or "then" where a new
      question or request opens: "What is X and how does it work?" gives two parts
      ("What is X", "how does it work?"); "What are the inputs and outputs?" stays one.
    * A follow-up that asks for the reasons of the answer before it ("Why?", "Why or
      why not?", "Explain your answer.", "How do you know?") joins the part before it.
      With no part before it, one that says nothing of its own ("Explain why.")
      takes the sentence before it: "The motors will not run. Explain why." is one part.
    * When nothing qualifies, the whole text is the one part; blank text (nothing but
      white space and control characters) gives ``[]``. At most ``MAX_PARTS`` parts.
    """
    text = clean_text(question).strip()
    if not text:
        return []
    sentences = _sentences(text, clauses=False)
    parts: list[list[str]] = []
    previous: str | None = None
    for sentence in sentences:
        # Cut at ";" and ":" only where a question or request follows: "the parts: cotyledon" stays.
        segments: list[str] = []
        for piece in _cut(sentence, _CLAUSE_END):
            if segments and _kind(piece) is None:
                segments[-1] = f"{segments[-1]} {piece}"
            else:
                segments.append(piece)
        for segment in segments:
            kind = _kind(segment)
            if kind is None:
                previous = segment
                continue
            follow_up = _follow_up(segment)
            if follow_up and parts:
                parts[-1].append(segment)
                previous = None
                continue
            if follow_up == "bare" and previous:  # "The motors will not run. Explain why."
                parts.append([previous, segment])
                previous = None
                continue
            for clause in _clauses(segment, kind):
                if len(parts) < MAX_PARTS:
                    parts.append([_unmarked(clause)])
            previous = None
    return [" ".join(p) for p in parts] or [text]
