"""The premise: the trace's documents in prompt order, cut to a token budget.

Whole documents are kept in order until the next one would exceed the budget,
so the model sees what the generator saw, minus a recorded tail. Only when the
first document alone exceeds the budget is it cut inside, at a token boundary
(otherwise the premise would be empty and every answer would look unsupported).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import Tokenizer

DOCUMENT_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Truncation:
    """What the budget left out. Counts are over documents that have text."""

    documents_total: int
    documents_kept: int
    tokens_total: int
    tokens_kept: int
    partial_document: bool  # the first document was cut inside

    @property
    def truncated_tokens(self) -> int:
        return self.tokens_total - self.tokens_kept

    @property
    def truncated(self) -> bool:
        return self.tokens_kept < self.tokens_total

    def as_dict(self) -> dict[str, int | bool]:
        return {
            "documents_total": self.documents_total,
            "documents_kept": self.documents_kept,
            "tokens_total": self.tokens_total,
            "tokens_kept": self.tokens_kept,
            "truncated_tokens": self.truncated_tokens,
            "partial_document": self.partial_document,
        }


def build_premise(documents: Sequence[str], tokenizer: Tokenizer, budget: int) -> tuple[str, Truncation]:
    """The premise text for `documents` (prompt order) and what the `budget` (tokens) cut."""
    texts = [text for text in documents if text.strip()]
    if not texts:
        return "", Truncation(0, 0, 0, 0, False)
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    counts = [len(encoding.ids) for encoding in encodings]
    kept, used = 0, 0
    for count in counts:
        if used + count > budget:
            break
        kept, used = kept + 1, used + count
    total = sum(counts)
    if kept > 0:
        return DOCUMENT_SEPARATOR.join(texts[:kept]), Truncation(len(texts), kept, total, used, False)
    # The first document alone is over budget: keep its first `budget` tokens,
    # cut at the character where the last kept token ends.
    end = encodings[0].offsets[budget - 1][1]
    return texts[0][:end], Truncation(len(texts), 1, total, budget, True)
