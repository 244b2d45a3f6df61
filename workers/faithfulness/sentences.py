"""Which answers make claims, and how an answer splits into sentences for `sentences` mode.

The splitter is deliberately small and predictable (no model, no language
data): lines are separate statements (answers are often bulleted), and inside a
line a sentence ends at . ! ? or an ellipsis followed by whitespace and an
upper-case letter, digit or opening quote, unless the word before the period
is a known abbreviation or a single initial. A wrong split costs a slightly
different hypothesis, never a lost one: apart from list markers ("- ", "2. "),
every letter and digit of the answer lands in exactly one sentence.
"""

from __future__ import annotations

import re

# Time linear in the line (the answer is the client's, up to MAX_ANSWER_CHARS): a boundary starts only at the
# first mark of a run (the look-behind; a later start would fail as the first did), and neither run gives
# back what it took (possessive: what may follow each is disjoint from it). Before, a run of 8,192 dots
# without a space took 0.9 s, quadratic (docs/security.md).
_BOUNDARY = re.compile(r"(?<![.!?…])([.!?…]++)([\"'”’)\]]*+)(\s+)")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.)])\s+")
ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "no", "fig",
        "inc", "ltd", "co", "corp", "approx", "dept", "est", "min", "max", "vol", "art", "nr", "np", "tj",
        "sra", "dra", "pág", "ex", "obs",
    }
)  # fmt: skip


def has_claims(text: str) -> bool:
    """An answer with no letter or digit states nothing that could be (un)supported."""
    return any(ch.isalnum() for ch in text)


def _ends_sentence(line: str, match: re.Match[str]) -> bool:
    following = line[match.end() : match.end() + 1]
    if not following or not (following.isupper() or following.isdigit() or following in "\"'“‘(["):
        return False
    if match.group(1) != ".":
        return True
    word = _word_before(line, match.start())
    if not word:
        return True
    token = word.lstrip("\"'“‘([").lower()
    # A single letter before the period is an initial ("J. Smith"), not a sentence.
    return token not in ABBREVIATIONS and not (len(token) == 1 and token.isalpha())


def _word_before(line: str, end: int) -> str:
    """The run of non-space characters that ends at `end` ('' when a space or the line's start is there).
    Read backwards from `end`, so it costs the word's length: the previous boundary ended in a space, so
    the words read for a line's boundaries add up to at most the line. (A search for `\\S+$` in the line
    up to `end` retried every start of that prefix, each retry walking its word: cubic on a long word
    followed by many boundaries, 63 s for 8,192 characters.)"""
    start = end
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    return line[start:end]


def _split_line(line: str) -> list[str]:
    pieces, start = [], 0
    for match in _BOUNDARY.finditer(line):
        if _ends_sentence(line, match):
            pieces.append(line[start : match.start(3)])
            start = match.end()
    pieces.append(line[start:])
    return pieces


def split_sentences(text: str) -> list[str]:
    """The answer's sentences in order, stripped; fragments without a letter or digit are dropped."""
    sentences: list[str] = []
    for line in text.splitlines():
        body = _LIST_MARKER.sub("", line, count=1)
        sentences.extend(piece.strip() for piece in _split_line(body) if has_claims(piece))
    return sentences
