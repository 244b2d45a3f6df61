"""Numbers, amounts and dates in a text, normalised per locale, for the figures-grounded check.

A figure is a run of digits with optional digit-group separators and one decimal separator: `1,250.50`
(en), `1.250,50` (pt, de, pl, ...), `1 250,50` (fr, pl, with a space or a no-break space), `1'250.50`.
The locale says which of `.` and `,` is the decimal mark; the other and the spaces and apostrophes are
digit-group separators. A figure's value is the exact decimal (`1,250.50` -> 1250.5): currency signs and
codes around it and percent signs do not change it, so `$1,250.50`, `USD 1250.5` and `1.250,50 US$` (pt)
are one value (`de-CH`, `fr-CH` and `it-CH` write a decimal point). Dates are their year, month and day as figures. Single-digit integers are left out: list
numbering and "step 2" are prose, not facts to ground. Any Unicode decimal digit counts as a digit.

A space groups digits only before exactly three of them (`30 60 90` stays three figures). A separator is
never a digit, so the pattern splits a text one way only and runs in linear time on any input.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation

# Locales whose decimal mark is a comma (the rest use a point). Language codes, as in the simulator's
# and most apps' locale tags (`pt-BR` reads as `pt`).
DECIMAL_COMMA = frozenset(
    {
        "pt",
        "de",
        "pl",
        "fr",
        "es",
        "it",
        "nl",
        "ru",
        "tr",
        "cs",
        "da",
        "sv",
        "fi",
        "nb",
        "no",
        "uk",
        "ro",
        "hu",
        "id",
        "vi",
        "el",
        "sk",
        "sl",
        "hr",
        "bg",
        "lt",
        "lv",
        "et",
    }
)
GROUP_SPACES = " \u00a0\u202f\u2009'’"
# Not inside an identifier (`gpt4`, `v2`: a Latin letter, digit, `_`, `.` or `,` right before); a unit may
# follow (`30ms`, `5GB`), and so may CJK text, which has no spaces (`30日`).
_FIGURE = re.compile(r"(?<![A-Za-z_.,\d])\d+(?:[.,'’]\d+|[ \u00a0\u202f\u2009]\d{3}(?!\d))*")
MAX_FIGURES = 200  # a text's figures read at most: an answer of 10,000 numbers costs no more than this


# Regions whose decimal mark is a point although their language's is a comma (Swiss German, French, Italian).
POINT_REGIONS = frozenset({"de-ch", "fr-ch", "it-ch", "rm-ch", "de-li"})


def _decimal_comma(locale: str) -> bool:
    tag = locale.replace("_", "-").lower()
    if "-".join(tag.split("-")[:2]) in POINT_REGIONS:
        return False
    return tag.split("-", 1)[0] in DECIMAL_COMMA


def _value(raw: str, decimal_comma: bool) -> Decimal | None:
    if raw.isdigit() and raw.isascii():  # the common case: a plain ASCII integer
        return Decimal(raw).normalize()
    text = raw if raw.isascii() else unicodedata.normalize("NFKC", raw)
    decimal_mark, group = (",", ".") if decimal_comma else (".", ",")
    for sep in (*GROUP_SPACES, group):
        text = text.replace(sep, "")
    if text.count(decimal_mark) > 1:
        return None
    text = text.replace(decimal_mark, ".")
    digits = (
        text if text.isascii() else "".join(str(unicodedata.decimal(c, c)) if c != "." else c for c in text)
    )
    try:
        return Decimal(digits).normalize()
    except InvalidOperation:
        return None


def figures(text: str, locale: str = "en") -> set[Decimal]:
    """The values of the figures in `text` (single-digit integers left out)."""
    comma = _decimal_comma(locale)
    out: set[Decimal] = set()
    for n, match in enumerate(_FIGURE.finditer(text)):
        if n >= MAX_FIGURES:
            break
        raw = match.group()
        if len(raw) == 1:
            continue
        value = _value(raw, comma)
        if value is not None and not (
            value == value.to_integral_value() and abs(value) < 10 and raw.isdigit()
        ):
            out.add(value)
    return out


CACHE_ENTRIES = 4096  # documents' figures kept: popular documents are given to the generator again and again
CACHE_MAX_CHARS = 8192  # longer texts are read each time (the cache holds at most ~32 MiB of keys)
_cache: dict[tuple[bool, str], frozenset[Decimal]] = {}


def document_figures(text: str, locale: str = "en") -> frozenset[Decimal]:
    """figures(text, locale), remembered for documents seen before (a bounded cache, oldest out first)."""
    if len(text) > CACHE_MAX_CHARS:
        return frozenset(figures(text, locale))
    key = (_decimal_comma(locale), text)
    found = _cache.get(key)
    if found is None:
        found = frozenset(figures(text, locale))
        if len(_cache) >= CACHE_ENTRIES:
            del _cache[next(iter(_cache))]
        _cache[key] = found
    return found


def ungrounded(said: set[Decimal], documents: list[str], locale: str = "en") -> list[Decimal]:
    """The figures of `said` found in none of the documents, in order; reads documents until all are found."""
    missing = set(said)
    for text in documents:
        missing -= document_figures(text, locale)
        if not missing:
            break
    return sorted(missing)
