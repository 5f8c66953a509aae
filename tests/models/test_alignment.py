"""The word-piece checks of jurist.models.alignment, on hand-made pieces and
token vectors (no model): clauses, negation words, numbers, and each conflict."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from jurist.models import alignment  # noqa: E402
from jurist.models.alignment import clause_ids, find_conflict, is_negation, numbers  # noqa: E402


def vectors(statement: list[str], window: list[str]) -> tuple["np.ndarray", "np.ndarray"]:
    """Unit token vectors standing in for MiniLM's: equal pieces at cosine 1,
    two different numbers at 0.64, anything else at 0."""
    vocab = {p: i for i, p in enumerate(dict.fromkeys(statement + window))}
    eye = np.eye(len(vocab) + 1)

    def vector(p: str) -> "np.ndarray":
        is_number = p.isdigit() or p in alignment.NUMBER_WORDS
        return 0.6 * eye[vocab[p]] + 0.8 * eye[-1] if is_number else eye[vocab[p]]

    return np.stack([vector(p) for p in statement]), np.stack([vector(p) for p in window])


def conflict(statement: str, window: str) -> str | None:
    s, w = statement.split(), window.split()
    s_vectors, w_vectors = vectors(s, w)
    return find_conflict(s_vectors, s, w_vectors, w)


def test_clauses_break_at_punctuation_and_conjunctions_not_inside_numbers() -> None:
    assert clause_ids("antibiotics can ' t treat colds , because colds are viral".split()) == [
        0, 0, 0, 0, 0, 0, -1, -1, 2, 2, 2]
    assert clause_ids("about 1 , 000 mg".split()) == [0, 0, 0, 0, 0]
    assert clause_ids("june 6 , 1944".split()) == [0, 0, -1, 1]


def test_negation_words_include_nt_with_and_without_apostrophe() -> None:
    pieces = "it doesn ' t and it don ##t and not never cannot nothing no".split()
    assert [k for k in range(len(pieces)) if is_negation(pieces, k)] == [3, 7, 9, 10, 11, 12, 13]
    assert not is_negation(["t"], 0) and not is_negation(["know", "##t"], 1)


def test_numbers_in_digits_and_words() -> None:
    assert numbers("up to 1 , 000 mg or 365 . 25 days".split()) == [([2, 3, 4], 1000.0), ([7, 8, 9], 365.25)]
    assert numbers("june 6 , 1944".split()) == [([1], 6.0), ([3], 1944.0)]
    assert numbers("eight cups , forty minutes".split()) == [([0], 8.0), ([3], 40.0)]


def test_negation_conflict_needs_the_clause_reused_with_opposite_parity() -> None:
    found = conflict("vitamin c cures flu symptoms", "vitamin c never cures flu symptoms")
    assert found == 'negation: "vitamin c never cures flu symptoms" says the opposite of "vitamin c cures flu symptoms"'
    # 2 of 5 content pieces reused: too little of the clause to compare
    assert conflict("vitamin c shortens colds quickly", "vitamin c does not cure the flu") is None
    assert conflict("vitamin c never cures flu symptoms", "no , vitamin c never cures flu symptoms") is None
    # two negation words in one clause count as none
    assert conflict("vitamin c cures flu symptoms", "nobody says vitamin c never cures flu symptoms") is None


def test_negation_conflict_needs_three_reused_words() -> None:
    assert conflict("rebase commits", "never rebase commits") is None
    assert conflict("rebase shared commits", "never rebase shared commits") is not None
    assert alignment.REUSED_WORDS == 3


def test_number_conflict_needs_the_same_thing_counted() -> None:
    found = conflict("eight cups a day is fine", "about four cups a day is fine")
    assert found == 'number: "eight" where the evidence says 4'
    assert conflict("eight cups a day is fine", "eight cups a day is fine , or 9 at most") is None  # value present
    assert conflict("a half - life of five hours", "limit it to 400 mg") is None  # hours vs mg: not the same slot
    assert conflict("four cups", "nothing numeric here") is None


def test_order_conflict_within_a_clause_unless_passive() -> None:
    found = conflict("adenosine blocks caffeine receptors", "caffeine blocks adenosine receptors")
    assert found is not None and found.startswith("order:") and "blocks" in found
    assert conflict("caffeine blocks adenosine receptors", "adenosine receptors are blocks by caffeine") is None
    assert conflict("adenosine blocks caffeine receptors", "caffeine , it blocks adenosine receptors") is None


def test_order_conflict_across_coordinated_clauses() -> None:
    found = conflict("glucagon lowers sugar , while insulin raises it", "insulin lowers sugar , while glucagon raises it")
    assert found is not None and "each other's clause" in found
    assert conflict("glucagon raises sugar , while insulin lowers it", "insulin lowers sugar ; glucagon raises it") is None


def test_no_conflict_for_empty_pieces() -> None:
    assert find_conflict(np.zeros((0, 3)), [], np.eye(3), ["a", "b", "c"]) is None
    assert find_conflict(np.eye(3), ["a", "b", "c"], np.zeros((0, 3)), []) is None
