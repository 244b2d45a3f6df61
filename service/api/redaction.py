"""Server-side PII redaction of query, context and answer text before anything is produced.

Prose is scanned with cheap gates first, because this runs on every text of
every event: an email needs an '@', an IPv6 address two colons, and a card
number, IPv4 address or phone number a run of digits and separators. Only
those candidate regions are classified exactly:
- card numbers are redacted only when their digits pass the Luhn check, so
  order numbers and other long digit runs survive;
- IP addresses are confirmed by the ipaddress module;
- phone numbers need at least 9 digits in a phone-like grouping, so years,
  prices and versions survive.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter, OrderedDict
from collections.abc import Iterable

KINDS = ("email", "phone", "card", "ip")
REPLACEMENT = {k: f"[REDACTED_{k.upper()}]" for k in KINDS}

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_IPV6_GATE = re.compile(r":[0-9A-Fa-f]*:")
# An IPv4-mapped tail ("::ffff:192.0.2.1") belongs to the address: without it three octets would leak.
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z:])(?=[0-9A-Fa-f]*:[0-9A-Fa-f]*:)"
    r"(?:[0-9A-Fa-f:]{2,39}(?:\.\d{1,3}){3}|[0-9A-Fa-f:]{2,39})(?![0-9A-Za-z:])"
)
# A digit run: where cards, IPv4 addresses and phone numbers can hide. Seven characters is
# the shortest IPv4 address ("8.8.8.8").
_DIGIT_RUN = re.compile(r"\d[\d ().+-]{5,}\d")
# An ISO date ("2024-06-11", also in "2024-06-11 14:05") is kept as it is and splits the run,
# so that it is neither read as part of a phone number nor hides one that follows it.
_ISO_DATE = re.compile(r"(?<!\d)(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?!\d)")
# Exact shapes, applied inside one digit run.
_IN_RUN = re.compile(
    r"(?P<ip>(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\d.]))"
    r"|(?P<phone>(?<![\d+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){2,4}(?!\d))"
)


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _card_spans(run: str) -> list[tuple[int, int]]:
    """Luhn-valid card numbers made of whole digit groups in a run, left to right.

    Whole groups, because a card is typed as groups ("4111 1111 1111 1111")
    and may follow other numbers in the same run (a year, a quantity).
    """
    groups = [(g.start(), g.end()) for g in re.finditer(r"\d+", run)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(groups):
        found = None
        digits = ""
        for j in range(i, len(groups)):
            if j > i and run[groups[j - 1][1] : groups[j][0]] not in (" ", "-"):
                break
            digits += run[groups[j][0] : groups[j][1]]
            if len(digits) > 19:
                break
            if len(digits) >= 13 and luhn_valid(digits):
                found = j
        if found is None:
            i += 1
        else:
            spans.append((groups[i][0], groups[found][1]))
            i = found + 1
    return spans


class Redactor:
    # Retrieved documents repeat (a corpus has hot documents), queries and answers
    # rarely do: documents go through a bounded cache of their redacted form.
    CACHE_ENTRIES = 8192
    CACHE_CHARS = 16 * 1024 * 1024

    def __init__(self, kinds: Iterable[str] = KINDS) -> None:
        self._cache: OrderedDict[str, tuple[str, tuple[tuple[str, int], ...]]] = OrderedDict()
        self._cache_chars = 0
        wanted = set(kinds)
        self.kinds = tuple(k for k in KINDS if k in wanted)
        self._digits = bool(wanted & {"card", "phone", "ip"})

    def redact(self, text: str, counts: Counter[str]) -> str:
        if not text or not self.kinds:
            return text
        if "email" in self.kinds and "@" in text:
            text = _EMAIL.sub(lambda m: self._count(counts, "email"), text)
        if "ip" in self.kinds and _IPV6_GATE.search(text):
            text = _IPV6.sub(lambda m: self._ip(m.group(0), counts), text)
        if self._digits:
            text = self._redact_digit_runs(text, counts)
        return text

    def redact_document(self, text: str, counts: Counter[str]) -> str:
        """redact(), remembered for repeated texts; the counts are added on every use."""
        hit = self._cache.get(text)
        if hit is not None:
            self._cache.move_to_end(text)
            for kind, n in hit[1]:
                counts[kind] += n
            return hit[0]
        own: Counter[str] = Counter()
        redacted = self.redact(text, own)
        counts.update(own)
        self._cache[text] = (redacted, tuple(own.items()))
        self._cache_chars += len(text) + len(redacted)
        while len(self._cache) > self.CACHE_ENTRIES or self._cache_chars > self.CACHE_CHARS:
            old, (old_redacted, _) = self._cache.popitem(last=False)
            self._cache_chars -= len(old) + len(old_redacted)
        return redacted

    @staticmethod
    def _count(counts: Counter[str], kind: str) -> str:
        counts[kind] += 1
        return REPLACEMENT[kind]

    def _ip(self, found: str, counts: Counter[str]) -> str:
        return self._count(counts, "ip") if _is_ip(found) else found

    def _redact_digit_runs(self, text: str, counts: Counter[str]) -> str:
        pieces: list[str] = []
        last = 0
        for m in _DIGIT_RUN.finditer(text):
            start = m.start()
            if start > 0 and text[start - 1] in "+(":
                start -= 1  # an international prefix or area code belongs to the number
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
                continue  # part of an identifier or version string, not a number on its own
            run = text[start : m.end()]
            redacted = self._redact_run(run, counts)
            if redacted != run:
                pieces.append(text[last:start])
                pieces.append(redacted)
                last = m.end()
        if not pieces:
            return text
        pieces.append(text[last:])
        return "".join(pieces)

    def _redact_run(self, run: str, counts: Counter[str]) -> str:
        if "card" in self.kinds:
            spans = _card_spans(run)
            if spans:
                out, last = [], 0
                for a, b in spans:
                    out.append(self._redact_run_rest(run[last:a], counts))
                    out.append(self._count(counts, "card"))
                    last = b
                out.append(self._redact_run_rest(run[last:], counts))
                return "".join(out)
        return self._redact_run_rest(run, counts)

    def _redact_run_rest(self, run: str, counts: Counter[str]) -> str:
        if not run:
            return run
        pieces, last = [], 0
        for date in _ISO_DATE.finditer(run):
            pieces.append(_IN_RUN.sub(lambda r: self._classify(r, counts), run[last : date.start()]))
            pieces.append(date.group(0))
            last = date.end()
        pieces.append(_IN_RUN.sub(lambda r: self._classify(r, counts), run[last:]))
        return "".join(pieces)

    def _classify(self, m: re.Match[str], counts: Counter[str]) -> str:
        kind = m.lastgroup or ""
        found = m.group(0)
        if kind == "ip":
            return self._count(counts, "ip") if "ip" in self.kinds and _is_ip(found) else found
        if kind == "phone" and "phone" in self.kinds and 9 <= sum(c.isdigit() for c in found) <= 15:
            return self._count(counts, "phone")
        return found
