"""Tests of the offline judge's text splitting (jurist.models.texts): sentences,
comparison windows and the parts of a question, on any text."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jurist.models.texts import (
    MAX_PARTS,
    MAX_SENTENCE_CHARS,
    MAX_WINDOW_SENTENCES,
    WHOLE_TEXT_CHARS,
    clean_text,
    split_question,
    split_sentences,
    text_windows,
)

# --- the parts of a question ------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        # context, then the question: the context is no part
        (
            "Our class grew bean plants on the windowsill for three weeks. Some plants leaned toward the glass. "
            "Why did the plants lean toward the window?",
            ["Why did the plants lean toward the window?"],
        ),
        (
            "When Tom heated the ice, it melted. What happened to the mass of the water?",
            ["What happened to the mass of the water?"],
        ),
        # context inside the question's own sentence stays with it
        (
            "Since both teams measured the same rope, what made their numbers differ?",
            ["Since both teams measured the same rope, what made their numbers differ?"],
        ),
        # a request that names two things is one part
        (
            "Explain why the lamp lights when switch 1 and the red wire are connected.",
            ["Explain why the lamp lights when switch 1 and the red wire are connected."],
        ),
        ("What are the inputs and outputs of a steam engine?", ["What are the inputs and outputs of a steam engine?"]),
        # two questions in one sentence, two requests in two sentences
        ("What is a bond and how does it pay interest?", ["What is a bond", "how does it pay interest?"]),
        ("Describe the water cycle. Then explain the role of the sun.",
         ["Describe the water cycle.", "explain the role of the sun."]),
        ("Summarize the plot, then compare the two endings.", ["Summarize the plot", "compare the two endings."]),
        ("What is a lever? Also, where would you find one at home?",
         ["What is a lever?", "where would you find one at home?"]),
        ("1. What is a prime number? 2. Is 91 prime?", ["What is a prime number?", "Is 91 prime?"]),
        # an embedded "and what" inside a request is no new part
        ("Describe what you would add to the soil and what you would expect to see.",
         ["Describe what you would add to the soil and what you would expect to see."]),
        # instructions are no parts
        ("What does a thermometer measure? Answer in one sentence.", ["What does a thermometer measure?"]),
        ("Use the table above. Which town had the most rain?", ["Which town had the most rain?"]),
        ("Look at the map and answer the questions below. Which river is the longest?",
         ["Which river is the longest?"]),
        ("Read the story carefully and answer this question: Why did the fox run away?",
         ["Why did the fox run away?"]),
        ("Draw the circuit in your notebook. Label each part. Why does the bulb stay dark?",
         ["Why does the bulb stay dark?"]),
        # a colon followed by no question stays inside the request
        ("Give the job of each part of the flower: the petal.",
         ["Give the job of each part of the flower: the petal."]),
        # follow-ups that ask for reasons join the part they follow
        ("Is glass a good conductor? Why or why not?", ["Is glass a good conductor? Why or why not?"]),
        ("Which jar cooled fastest? Explain your answer.", ["Which jar cooled fastest? Explain your answer."]),
        ("Which rock is harder, A or B? How do you know?", ["Which rock is harder, A or B? How do you know?"]),
        ("The kite would not fly on Tuesday. Explain why.", ["The kite would not fly on Tuesday. Explain why."]),
        # ... but a question about something else is a part of its own
        ("What is a solution? How do you know when sugar has dissolved in water?",
         ["What is a solution?", "How do you know when sugar has dissolved in water?"]),
        # requests in other forms
        ("Tell me about Lisbon and list three places to eat.", ["Tell me about Lisbon", "list three places to eat."]),
        ("I want you to write a haiku about rain.", ["I want you to write a haiku about rain."]),
        ("Can you check my essay for spelling mistakes.", ["Can you check my essay for spelling mistakes."]),
        ("how do magnets work", ["how do magnets work"]),
        # questions asked with a full stop, or none
        ("Is it safe to swim after eating. What about running?",
         ["Is it safe to swim after eating.", "What about running?"]),
        ("We land at noon. what's the fastest way into town", ["what's the fastest way into town"]),
        ("Do the exercises on page 5. Have fun. Why is the sky blue?", ["Why is the sky blue?"]),
    ],
)
def test_split_question_takes_the_questions_and_requests(question: str, parts: list[str]) -> None:
    assert split_question(question) == parts


def test_statements_that_open_with_a_request_verb_are_no_requests() -> None:
    # "List prices", "Complete sentences", "Outline of": nouns and adjectives, not requests
    text = "List prices rose in May. Complete sentences are required. Outline of the talk: costs. Why did prices rise?"
    assert split_question(text) == ["Why did prices rise?"]


@pytest.mark.parametrize(
    "text",
    ["Answer in one sentence.", "Use the table above.", "The sky is blue.", "because", "?", "...", "Объясни это."],
)
def test_when_nothing_is_asked_the_whole_text_is_the_one_part(text: str) -> None:
    assert split_question(text) == [text]


@pytest.mark.parametrize("text", ["", " ", "\n\t ", "\x00\x01\x1f"])
def test_blank_text_has_no_parts(text: str) -> None:
    assert split_question(text) == []


def test_questions_in_other_scripts_split_at_their_question_marks() -> None:
    assert split_question("这是什么？那是什么？") == ["这是什么？", "那是什么？"]
    assert split_question("ما هذا؟ لماذا؟") == ["ما هذا؟", "لماذا؟"]


def test_a_question_has_at_most_max_parts_parts() -> None:
    parts = split_question(" ".join(f"What is item {i}?" for i in range(MAX_PARTS + 10)))
    assert len(parts) == MAX_PARTS
    assert parts[0] == "What is item 0?"


# --- sentences and windows ------------------------------------------------------------


def test_split_sentences() -> None:
    text = ('Bees see ultraviolet, e.g. on petals. "Look!" she said. Steps: 1. Mix the flour. '
            "(B. Add water.) Wait... it rose?! 北京很大。上海也很大。")
    assert split_sentences(text) == [
        "Bees see ultraviolet, e.g. on petals.",
        '"Look!"',
        "she said.",
        "Steps:",
        "1. Mix the flour.",
        "(B. Add water.)",
        "Wait...",
        "it rose?!",
        "北京很大。",
        "上海也很大。",
    ]


def test_pieces_without_letters_join_a_sentence() -> None:
    assert split_sentences("Done . . . Next one.") == ["Done . . .", "Next one."]
    assert split_sentences("... so it goes.") == ["... so it goes."]
    assert split_sentences("?! ...") == ["?! ..."]


def test_a_long_sentence_is_cut_at_a_space() -> None:
    words = " ".join(["word"] * 1000)  # 4,999 characters, no full stop
    sentences = split_sentences(words)
    assert len(sentences) > 1
    assert all(len(s) <= MAX_SENTENCE_CHARS for s in sentences)
    assert " ".join(sentences) == words
    assert [len(s) for s in split_sentences("x" * 2500)] == [1000, 1000, 500]


def test_text_windows() -> None:
    assert text_windows("One two. Three four.") == ["One two.", "Three four.", "One two. Three four."]
    assert text_windows("A b. C d. E f.") == ["A b.", "C d.", "E f.", "A b. C d.", "C d. E f.", "A b. C d. E f."]
    assert text_windows("") == []


def test_a_long_text_has_a_bounded_number_of_windows_over_all_of_it() -> None:
    sentences = [f"Sentence number {i} is here." for i in range(1000)]
    windows = text_windows(" ".join(sentences))
    assert len(windows) <= 2 * MAX_WINDOW_SENTENCES
    joined = " ".join(windows)
    assert all(s in joined for s in sentences)  # coarser windows, nothing left out
    # the whole text is a window only while it is short
    medium = " ".join(sentences[:200])
    assert len(medium) > WHOLE_TEXT_CHARS
    assert medium not in text_windows(medium)


def test_clean_text() -> None:
    assert clean_text("a\x00b\x1fc\r\nd\u2028e") == "a b c\nd\ne"
    assert clean_text("half \ud83d of a smile") == "half \ufffd of a smile"
    assert clean_text("😀 naïve Привет مرحبا 你好") == "😀 naïve Привет مرحبا 你好"


# --- any text ------------------------------------------------------------------

ODD_TEXTS = [
    "", " ", "\n\n", "?", "...", "!?!", "because", "so", "but", ";", ":", "(", ")", "1.", "A.", "e.g.",
    "??? !!! ...", "\u2026", "\u3002", "\u061f", "😀", "😀😀 ? 😀.", "\x00", "\x00what?\x07", "\ud800",
    "why?\udfff", "what \ud83d\ude00 is this?", "Что это? Объясни.", "这是什么？", "ما هذا؟ لماذا؟",
    "\u200b", "\ufeff?", "a" * 5000, "and " * 500, "Why? " * 200,
]


def _check_pieces(pieces: list[str]) -> None:
    assert isinstance(pieces, list)
    for piece in pieces:
        assert isinstance(piece, str) and piece.strip(), pieces
        piece.encode("utf-8")  # no lone surrogate left


@pytest.mark.parametrize("text", ODD_TEXTS)
def test_odd_texts(text: str) -> None:
    for split in (split_sentences, text_windows, split_question):
        _check_pieces(split(text))
    has_text = bool(clean_text(text).strip())
    assert bool(split_question(text)) == has_text
    assert bool(split_sentences(text)) == has_text


# Fragments that make the splitter's cases meet: questions, requests, connectives, markers.
_FRAGMENTS = st.sampled_from(
    ["What", "why", "How", "and", "then", "also", "or", "Explain", "describe", "list", "Use", "Answer", "your",
     "answer", "the", "it", "?", ".", "!", ";", ":", ",", "...", "1.", "A.", "(", ")", "[", "]", '"', "e.g.",
     " ", "  ", "\n", "\t", "\r", "\x00", "\ud800", "😀", "这", "？", "。", "؟", "Что", "Why or why not?"]
)
_ANY_CHAR = st.characters(exclude_categories=())  # every category, lone surrogates included
ANY_TEXT = st.one_of(
    st.text(_ANY_CHAR, max_size=200),
    st.lists(st.one_of(_FRAGMENTS, st.text(_ANY_CHAR, max_size=5)), max_size=60).map(" ".join),
    st.lists(_FRAGMENTS, max_size=80).map("".join),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ANY_TEXT)
def test_any_text_splits_without_failing(text: str) -> None:
    sentences = split_sentences(text)
    windows = text_windows(text)
    parts = split_question(text)
    for pieces in (sentences, windows, parts):
        _check_pieces(pieces)
    has_text = bool(clean_text(text).strip())
    assert bool(parts) == has_text and bool(sentences) == has_text
    assert len(parts) <= MAX_PARTS
    assert len(windows) <= 2 * MAX_WINDOW_SENTENCES
    assert all(len(s) <= MAX_SENTENCE_CHARS for s in sentences)
    # nothing of the text is lost between the sentences, only white space
    assert "".join("".join(sentences).split()) == "".join(clean_text(text).split())
    if len(sentences) <= MAX_WINDOW_SENTENCES:
        assert windows[: len(sentences)] == sentences


HUNDRED_KB = 100_000
LONG_TEXTS = {
    "prose": "The cat sat on the mat. ",
    "questions": "What is X and how does it work? ",
    "question marks": "?",
    "dots": "... ",
    "no spaces": "a",
    "no sentence end": "and how is it ",
    "abbreviations": "e.g. ",
    "list markers": "1. ",
    "follow-ups": "Why? ",
    "brackets": "(",
    "white space": " \n",
    "Chinese": "这是什么。",
    "semicolons": "a; ",
}


@pytest.mark.parametrize("name", sorted(LONG_TEXTS))
def test_100_kb_of_text_splits_in_linear_time(name: str) -> None:
    # A quadratic step would take minutes on 100 KB; linear takes well under a second.
    text = (LONG_TEXTS[name] * HUNDRED_KB)[:HUNDRED_KB]
    for split in (split_sentences, text_windows, split_question):
        started = time.perf_counter()
        pieces = split(text)
        assert time.perf_counter() - started < 5.0, split.__name__
        _check_pieces(pieces)
    assert len(text_windows(text)) <= 2 * MAX_WINDOW_SENTENCES
