"""Server-side PII redaction of client text before anything is produced.

Prose is scanned with cheap gates first, because this runs on every text of
every event: an email needs an '@' (or its JSON escape `\\u0040`), an IPv6
address two colons, and a card number, IPv4 address or phone number a run of
digits and separators. Only those candidate regions are classified exactly:
- card numbers are redacted only when their digits pass the Luhn check, so
  order numbers and other long digit runs survive;
- IP addresses are confirmed by the ipaddress module;
- phone numbers need at least 9 digits in a phone-like grouping, so years,
  prices and versions survive.

Every pattern run on client text is linear in its length: a client chooses
the text, and one quadratic pattern is a way to spend the API's event loop.
Each one either starts only where a match can start (a look-behind, a leading
literal) or consumes a long run it cannot match as a whole (possessive
quantifiers, which never give back what they took), and repetitions are
bounded where the shape allows. tests/service/api/test_redaction_linear.py
holds every pattern to linear growth on adversarial shapes;
tests/bench/bench_redaction.py measures them.

Values that are compared with each other downstream (metadata values and the
filter predicates matched against them) get a keyed pseudonym instead of the
fixed mark, so that equal values stay equal and different ones stay
different; identifiers of people (session and user ids) are replaced whole by
a keyed hash (Pseudonymizer).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable

KINDS = ("email", "phone", "card", "ip")
REPLACEMENT = {k: f"[REDACTED_{k.upper()}]" for k in KINDS}

# A mark(kind, found) gives the replacement of one finding (and counts it).
Mark = Callable[[str, str], str]

_LOCAL = r"A-Za-z0-9._%+\-"
# An address, or a long run of address characters that holds none: consuming such a run whole is
# what keeps the scan linear (without it every start inside the run is tried again, to its end).
# The local part is possessive: '@' is not in its class, so giving characters back never helps.
_EMAIL = re.compile(
    rf"(?P<email>[{_LOCAL}]++(?:@|\\u0040)[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)*\.[A-Za-z]{{2,}})"
    rf"|[{_LOCAL}]{{17,}}+"
)
_IPV6_GATE = re.compile(r":[0-9A-Fa-f]*+:")
# An IPv4-mapped tail ("::ffff:192.0.2.1") belongs to the address: without it three octets would leak.
# Only the first character of a run of hex digits and colons starts a candidate (the look-behind).
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z:])(?=[0-9A-Fa-f]*+:[0-9A-Fa-f]*+:)"
    r"(?:[0-9A-Fa-f:]{2,39}(?:\.\d{1,3}){3}|[0-9A-Fa-f:]{2,39})(?![0-9A-Za-z:])"
)
# A digit run: where cards, IPv4 addresses and phone numbers can hide. Seven characters is
# the shortest IPv4 address ("8.8.8.8"). Linear: when a start finds no digit 6 or more characters
# on, no later start in the same run does, so at most 6 starts of a run scan it to its end.
_DIGIT_RUN = re.compile(r"\d[\d ().+-]{5,}\d")
# An ISO date ("2024-06-11", also in "2024-06-11 14:05") is kept as it is and splits the run,
# so that it is neither read as part of a phone number nor hides one that follows it.
_ISO_DATE = re.compile(r"(?<!\d)(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?!\d)")
# Exact shapes, applied inside one digit run.
_IN_RUN = re.compile(
    r"(?P<ip>(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\d.]))"
    r"|(?P<phone>(?<![\d+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){2,4}(?!\d))"
)
# Digit groups joined by single spaces or dashes, 13 digits or more: where a card can be.
_CARD_CHAIN = re.compile(r"(?<!\d)(?<!\d[ -])\d(?:[ -]?\d){12,}")
_GROUP = re.compile(r"\d+")
_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


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
    and may follow other numbers in the same run (a year, a quantity). Groups
    are joined by one space or dash; from each group the longest card (13 to
    19 digits) starting there is taken.
    """
    spans: list[tuple[int, int]] = []
    for chain in _CARD_CHAIN.finditer(run):
        spans.extend(_cards_in_chain(chain.group(), chain.start()))
    return spans


def _cards_in_chain(chain: str, offset: int) -> list[tuple[int, int]]:
    groups = [(g.start(), g.end()) for g in _GROUP.finditer(chain)]
    spans: list[tuple[int, int]] = []
    segment: list[tuple[int, int]] = []
    for group in [*groups, (0, 20)]:
        if group[1] - group[0] <= 19:
            segment.append(group)
            continue
        # A group of more than 19 digits is in no card: the groups between two such are searched alone.
        if sum(b - a for a, b in segment) >= 13:
            spans.extend(_cards_in_segment(chain, segment, offset))
        segment = []
    return spans


def _cards_in_segment(chain: str, groups: list[tuple[int, int]], offset: int) -> list[tuple[int, int]]:
    # cum[g]: digits before group g. The Luhn sum of any digit range comes from two prefix sums
    # (even positions doubled, or odd ones), so each candidate is checked in constant time.
    cum = [0]
    digits: list[int] = []
    for a, b in groups:
        cum.append(cum[-1] + b - a)
        digits.extend(ord(c) - 48 for c in chain[a:b])
    even_doubled, odd_doubled = [0], [0]
    for p, d in enumerate(digits):
        even_doubled.append(even_doubled[-1] + (d if p & 1 else _DOUBLED[d]))
        odd_doubled.append(odd_doubled[-1] + (_DOUBLED[d] if p & 1 else d))
    spans: list[tuple[int, int]] = []
    i, n = 0, len(groups)
    while i < n:
        found = None
        j = i
        while j < n and cum[j + 1] - cum[i] <= 19:
            lo, hi = cum[i], cum[j + 1]
            if hi - lo >= 13:
                # The rightmost digit is never doubled: positions of its parity are kept as they are.
                sums = odd_doubled if (hi - 1) % 2 == 0 else even_doubled
                if (sums[hi] - sums[lo]) % 10 == 0:
                    found = j
            j += 1
        if found is None:
            i += 1
        else:
            spans.append((offset + groups[i][0], offset + groups[found][1]))
            i = found + 1
    return spans


def identifier_key(key: str) -> bool:
    """A metadata key whose value is an identifier (joined on, taken as a document id), or one of
    ragmon's own settings: such values are kept as sent, and so is a predicate on such a field."""
    return key in ("id", "doc_id", "document_id") or key.endswith(("_id", ".id")) or key.startswith("ragmon.")


class Pseudonymizer:
    """Keyed hashes (HMAC-SHA256) of identifiers of people and of values compared downstream.

    Keyed, because session and user ids are guessable: a plain hash of one is
    reversed by hashing the candidates. The key is RAGMON_PSEUDONYM_KEY; it
    must be the same in every API process (and kept across restarts) for a
    session's traces to share one pseudonym. Without it the process draws a
    random key of its own: nothing is stored in clear or linkable to the clear
    value, but pseudonyms then differ between processes and restarts
    (docs/security.md, "What is redacted").
    """

    def __init__(self, key: bytes | None = None) -> None:
        self.configured = bool(key)
        self._key = key or secrets.token_bytes(32)

    def _digest(self, purpose: bytes, tenant: str, value: str) -> str:
        msg = b"\0".join((purpose, tenant.encode(), value.encode("utf-8", "surrogatepass")))
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()

    def identifier(self, tenant: str, value: str) -> str:
        """A session or user id: per tenant, still a valid identifier (ID_PATTERN, 37 characters)."""
        return "hmac:" + self._digest(b"id", tenant, value)[:32]

    def finding(self, tenant: str, kind: str, found: str) -> str:
        """The mark of one finding in a compared value: equal findings, equal marks. The hash follows
        an underscore, so no digit run in it is read as a number when the value is redacted again."""
        return f"[REDACTED_{kind.upper()}_{self._digest(kind.encode(), tenant, found)[:12]}]"


class Redactor:
    # Retrieved documents repeat (a corpus has hot documents), queries and answers
    # rarely do: documents go through a bounded cache of their redacted form.
    CACHE_ENTRIES = 8192
    CACHE_CHARS = 16 * 1024 * 1024

    def __init__(self, kinds: Iterable[str] = KINDS, pseudonyms: Pseudonymizer | None = None) -> None:
        self._cache: OrderedDict[str, tuple[str, tuple[tuple[str, int], ...]]] = OrderedDict()
        self._cache_chars = 0
        wanted = set(kinds)
        self.kinds = tuple(k for k in KINDS if k in wanted)
        self._digits = bool(wanted & {"card", "phone", "ip"})
        self.pseudonyms = pseudonyms or Pseudonymizer()

    def redact(self, text: str, counts: Counter[str]) -> str:
        """Prose: each finding becomes its kind's fixed mark ([REDACTED_EMAIL])."""

        def mark(kind: str, found: str) -> str:
            counts[kind] += 1
            return REPLACEMENT[kind]

        return self._scan(text, mark)

    def redact_value(self, text: str, counts: Counter[str], tenant: str) -> str:
        """A metadata or predicate value: each finding becomes a keyed mark of what was found, so a
        predicate still matches the metadata it matched before (and no other)."""

        def mark(kind: str, found: str) -> str:
            counts[kind] += 1
            return self.pseudonyms.finding(tenant, kind, found)

        return self._scan(text, mark)

    def _scan(self, text: str, mark: Mark) -> str:
        if not text or not self.kinds:
            return text
        if "email" in self.kinds and ("@" in text or "\\u0040" in text):
            text = _EMAIL.sub(lambda m: mark("email", m.group(0)) if m.lastgroup else m.group(0), text)
        if "ip" in self.kinds and _IPV6_GATE.search(text):
            text = _IPV6.sub(lambda m: mark("ip", m.group(0)) if _is_ip(m.group(0)) else m.group(0), text)
        if self._digits:
            text = self._redact_digit_runs(text, mark)
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

    def _redact_digit_runs(self, text: str, mark: Mark) -> str:
        pieces: list[str] = []
        last = 0
        for m in _DIGIT_RUN.finditer(text):
            start = m.start()
            if start > 0 and text[start - 1] in "+(":
                start -= 1  # an international prefix or area code belongs to the number
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
                continue  # part of an identifier or version string, not a number on its own
            run = text[start : m.end()]
            redacted = self._redact_run(run, mark)
            if redacted != run:
                pieces.append(text[last:start])
                pieces.append(redacted)
                last = m.end()
        if not pieces:
            return text
        pieces.append(text[last:])
        return "".join(pieces)

    def _redact_run(self, run: str, mark: Mark) -> str:
        if "card" in self.kinds:
            spans = _card_spans(run)
            if spans:
                out, last = [], 0
                for a, b in spans:
                    out.append(self._redact_run_rest(run[last:a], mark))
                    out.append(mark("card", run[a:b]))
                    last = b
                out.append(self._redact_run_rest(run[last:], mark))
                return "".join(out)
        return self._redact_run_rest(run, mark)

    def _redact_run_rest(self, run: str, mark: Mark) -> str:
        if not run:
            return run
        pieces, last = [], 0
        for date in _ISO_DATE.finditer(run):
            pieces.append(_IN_RUN.sub(lambda r: self._classify(r, mark), run[last : date.start()]))
            pieces.append(date.group(0))
            last = date.end()
        pieces.append(_IN_RUN.sub(lambda r: self._classify(r, mark), run[last:]))
        return "".join(pieces)

    def _classify(self, m: re.Match[str], mark: Mark) -> str:
        kind = m.lastgroup or ""
        found = m.group(0)
        if kind == "ip":
            return mark("ip", found) if "ip" in self.kinds and _is_ip(found) else found
        if kind == "phone" and "phone" in self.kinds and 9 <= sum(c.isdigit() for c in found) <= 15:
            return mark("phone", found)
        return found
