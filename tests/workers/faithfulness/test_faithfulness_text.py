"""The premise follows the token budget; answers without claims are recognised; sentences split predictably."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from service.contracts.vocabulary import MAX_ANSWER_CHARS
from workers.faithfulness.loader import LoadedModel
from workers.faithfulness.premise import DOCUMENT_SEPARATOR, build_premise
from workers.faithfulness.sentences import has_claims, split_sentences

DOCS = [
    "The refund window is 30 days from delivery.",
    "Premium plans include phone support on weekdays.",
    "Invoices are sent by email at the start of each month.",
]


def counts(loaded: LoadedModel, texts: list[str]) -> list[int]:
    return [len(loaded.tokenizer.encode(text, add_special_tokens=False).ids) for text in texts]


def test_whole_documents_are_kept_in_order_until_the_budget(loaded: LoadedModel) -> None:
    sizes = counts(loaded, DOCS)
    budget = sizes[0] + sizes[1] + sizes[2] - 1  # the third no longer fits
    premise, cut = build_premise(DOCS, loaded.tokenizer, budget)
    assert premise == DOCS[0] + DOCUMENT_SEPARATOR + DOCS[1]
    assert (cut.documents_total, cut.documents_kept) == (3, 2)
    assert (cut.tokens_total, cut.tokens_kept, cut.truncated_tokens) == (
        sum(sizes),
        sizes[0] + sizes[1],
        sizes[2],
    )
    assert cut.truncated and not cut.partial_document


def test_a_budget_that_fits_everything_truncates_nothing(loaded: LoadedModel) -> None:
    premise, cut = build_premise(DOCS, loaded.tokenizer, sum(counts(loaded, DOCS)))
    assert premise == DOCUMENT_SEPARATOR.join(DOCS)
    assert not cut.truncated and cut.truncated_tokens == 0 and cut.documents_kept == 3


def test_a_later_short_document_is_not_pulled_past_a_long_one(loaded: LoadedModel) -> None:
    docs = [DOCS[0], " ".join(DOCS * 5), "Short."]
    budget = counts(loaded, [docs[0]])[0] + 5
    premise, cut = build_premise(docs, loaded.tokenizer, budget)
    assert premise == docs[0] and cut.documents_kept == 1  # prompt order: stop at the first that does not fit


def test_a_first_document_over_budget_is_cut_at_a_token_boundary(loaded: LoadedModel) -> None:
    long_document = " ".join(DOCS * 4)
    premise, cut = build_premise([long_document, DOCS[0]], loaded.tokenizer, budget=16)
    assert long_document.startswith(premise) and len(premise) < len(long_document)
    assert cut.partial_document and cut.tokens_kept == 16 and cut.documents_kept == 1
    assert counts(loaded, [premise])[0] == 16
    expected_tokens = loaded.tokenizer.encode(long_document, add_special_tokens=False).tokens[:16]
    assert loaded.tokenizer.encode(premise, add_special_tokens=False).tokens == expected_tokens


def test_documents_without_text_are_not_counted(loaded: LoadedModel) -> None:
    premise, cut = build_premise(["", "  ", DOCS[0]], loaded.tokenizer, 512)
    assert premise == DOCS[0] and (cut.documents_total, cut.documents_kept) == (1, 1)
    empty, nothing = build_premise([" "], loaded.tokenizer, 512)
    assert empty == "" and nothing.tokens_total == 0 and not nothing.truncated


@pytest.mark.parametrize(
    ("answer", "claims"),
    [
        ("", False),
        ("   \n", False),
        ("...", False),
        ("—?!", False),
        ("42", True),
        ("Não.", True),
        ("Tak", True),
    ],
)
def test_an_answer_without_a_letter_or_digit_has_no_claims(answer: str, claims: bool) -> None:
    assert has_claims(answer) is claims


@pytest.mark.parametrize(
    ("answer", "sentences"),
    [
        (
            "Mars has two moons. Phobos and Deimos orbit Mars! Is it cold? Yes.",
            ["Mars has two moons.", "Phobos and Deimos orbit Mars!", "Is it cold?", "Yes."],
        ),
        (
            "Dr. Smith said so, e.g. in 2012. J. Smith agreed.",
            ["Dr. Smith said so, e.g. in 2012.", "J. Smith agreed."],
        ),
        ("Growth was 3.5 percent. Costs fell.", ["Growth was 3.5 percent.", "Costs fell."]),
        ('She said "it works." Then it broke.', ['She said "it works."', "Then it broke."]),
        (
            "Plans:\n- Basic: 5 users\n- Premium: 50 users\n2. Call us.",
            ["Plans:", "Basic: 5 users", "Premium: 50 users", "Call us."],
        ),
        ("lowercase after a period. stays together", ["lowercase after a period. stays together"]),
        ("Zwroty w ciągu 30 dni. Źródło: regulamin.", ["Zwroty w ciągu 30 dni.", "Źródło: regulamin."]),
        ("Done.\n...", ["Done."]),
    ],
)
def test_answers_split_into_sentences(answer: str, sentences: list[str]) -> None:
    assert split_sentences(answer) == sentences


# Answer shapes aimed at the splitter's boundary scan and its look at the word before a period.
HOSTILE_ANSWERS: dict[str, Callable[[int], str]] = {
    "dot_run": lambda n: "a" + "." * n + "a",
    "long_word_then_boundaries": lambda n: "x" * (n // 2) + " a. B" * (n // 10),
    "boundaries": lambda n: "ab. C" * (n // 5),
    "initials": lambda n: "J. " * (n // 3),
    "closing_quotes_run": lambda n: "a." + "'" * n + "a",
}


def _fastest_split(text: str) -> float:
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        split_sentences(text)
        samples.append(time.perf_counter() - started)
    return min(samples)


@pytest.mark.parametrize("shape", sorted(HOSTILE_ANSWERS))
def test_splitting_takes_time_linear_in_the_answer(shape: str) -> None:
    """The answer is the client's: a 4x longer one may take about 4x as long, never 16x (quadratic) or 64x.
    Before, 8,192 characters of `long_word_then_boundaries` took 63 s and grew 8x per doubling (`\\S+$`
    searched in the whole line before each period); a run of 8,192 dots 0.9 s, 4x per doubling."""
    make = HOSTILE_ANSWERS[shape]
    small, large = _fastest_split(make(1024)), _fastest_split(make(4096))
    assert large < 8 * max(small, 1e-5), f"{shape}: {small:.5f}s for 1,024 characters, {large:.5f}s for 4,096"
    assert _fastest_split(make(MAX_ANSWER_CHARS)) < 0.5
