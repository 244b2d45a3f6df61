"""Unit tests of service/api/redaction.py: what is PII, what is ordinary text, and the counts per kind."""

from __future__ import annotations

from collections import Counter

import pytest

from service.api.redaction import KINDS, REPLACEMENT, Redactor, luhn_valid

EMAIL, PHONE, CARD, IP = (REPLACEMENT[k] for k in ("email", "phone", "card", "ip"))


def redact(text: str, kinds: tuple[str, ...] = KINDS) -> tuple[str, dict[str, int]]:
    counts: Counter[str] = Counter()
    return Redactor(kinds).redact(text, counts), dict(counts)


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [
        # emails
        ("write to jane.doe+billing@mail.example.co.uk today", f"write to {EMAIL} today", {"email": 1}),
        ("<ops@acme.io>,support@acme.io", f"<{EMAIL}>,{EMAIL}", {"email": 2}),
        # phone numbers, international and national groupings
        ("call +1 (415) 555-0132 now", f"call {PHONE} now", {"phone": 1}),
        ("ring 415-555-0132.", f"ring {PHONE}.", {"phone": 1}),
        ("London: +44 20 7946 0958", f"London: {PHONE}", {"phone": 1}),
        ("Warszawa +48 601 234 567", f"Warszawa {PHONE}", {"phone": 1}),
        ("São Paulo (11) 91234-5678", f"São Paulo {PHONE}", {"phone": 1}),
        # card numbers that pass Luhn, grouped or not
        ("card 4111 1111 1111 1111 exp 12/27", f"card {CARD} exp 12/27", {"card": 1}),
        ("mc 5500-0000-0000-0004", f"mc {CARD}", {"card": 1}),
        ("visa 4012888888881881", f"visa {CARD}", {"card": 1}),
        ("amex 3782 822463 10005", f"amex {CARD}", {"card": 1}),
        # IPv4 and IPv6
        ("from 192.168.10.24 and 10.0.0.1", f"from {IP} and {IP}", {"ip": 2}),
        ("resolver 8.8.8.8, then 1.2.3.4.", f"resolver {IP}, then {IP}.", {"ip": 2}),
        ("v6 2001:db8::8a2e:370:7334 and fe80::1.", f"v6 {IP} and {IP}.", {"ip": 2}),
        ("loopback ::1", f"loopback {IP}", {"ip": 1}),
        ("mapped ::ffff:192.0.2.1 seen", f"mapped {IP} seen", {"ip": 1}),
        ("host 10.1.2.3:8443 refused", f"host {IP}:8443 refused", {"ip": 1}),
        # several kinds in one text, each counted
        (
            "jo@x.io paid with 4111111111111111 from 203.0.113.9, tel 415 555 0132",
            f"{EMAIL} paid with {CARD} from {IP}, tel {PHONE}",
            {"email": 1, "card": 1, "ip": 1, "phone": 1},
        ),
        # a phone number right after an ISO date is still found
        ("2024-06-11 415 555 0132", f"2024-06-11 {PHONE}", {"phone": 1}),
    ],
)
def test_pii_is_replaced_and_counted_by_kind(text: str, expected: str, counts: dict[str, int]) -> None:
    assert redact(text) == (expected, counts)


@pytest.mark.parametrize(
    "text",
    [
        "In 2023 revenue grew 12% to $1,299.99 (EUR 1.204,50) per seat; in 2019-2024 it doubled.",
        "Upgrade to v2.14.3 (Python 3.11.4, build 1.0.3) before 2025.",
        "Order #58213 and order 4471-22 shipped; ticket INC-20240611 and SKU AB-1234567 are closed.",
        "Reference 1234567812345678 is sixteen digits and fails Luhn.",
        "Deployed on 2024-06-11 14:05 UTC, at 12:30:45 local time, ISO 2024-06-11T14:05:00Z.",
        "Ratio 3:2, section 4.2.1, chapter 12, room 101, 50 ms p99, 0.75 recall@10.",
        "std::vector and Foo::bar are C++ names.",
        "",
    ],
)
def test_ordinary_text_is_left_unchanged(text: str) -> None:
    assert redact(text) == (text, {})


def test_only_the_configured_kinds_are_redacted() -> None:
    text = "mail a@b.io, call +44 20 7946 0958, card 4111 1111 1111 1111, ip 10.0.0.1"
    assert redact(text, ("email",)) == (
        f"mail {EMAIL}, call +44 20 7946 0958, card 4111 1111 1111 1111, ip 10.0.0.1",
        {"email": 1},
    )
    assert redact(text, ("card", "ip")) == (
        f"mail a@b.io, call +44 20 7946 0958, card {CARD}, ip {IP}",
        {"card": 1, "ip": 1},
    )
    assert redact(text, ()) == (text, {})


def test_counts_accumulate_across_texts() -> None:
    redactor, counts = Redactor(), Counter[str]()
    for text in ("a@b.io", "c@d.io and 8.8.4.4", "nothing here"):
        redactor.redact(text, counts)
    assert counts == {"email": 2, "ip": 1}


def test_redacting_is_idempotent() -> None:
    once, _ = redact("a@b.io 4111 1111 1111 1111 +1 415 555 0132 ::1 192.0.2.1")
    assert redact(once) == (once, {})


@pytest.mark.parametrize(
    ("digits", "valid"),
    [
        ("4111111111111111", True),
        ("4012888888881881", True),
        ("378282246310005", True),
        ("5500000000000004", True),
        ("4111111111111112", False),
        ("1234567812345678", False),
        ("0", True),
        ("18", True),
        ("19", False),
    ],
)
def test_luhn(digits: str, valid: bool) -> None:
    assert luhn_valid(digits) is valid


def test_a_long_text_is_scanned_in_linear_time() -> None:
    # A pathological run of digits and separators must not backtrack catastrophically.
    text = ("1 2-3 (4) 5." * 3000) + " end"
    redacted, _ = redact(text)
    assert redacted.endswith(" end")


def test_document_cache_returns_the_same_redaction_and_counts_every_use() -> None:
    from collections import Counter

    from service.api.redaction import Redactor

    r = Redactor()
    counts: Counter[str] = Counter()
    text = "Write to help@example.com or call +1 415 555 2671."
    first = r.redact_document(text, counts)
    second = r.redact_document(text, counts)
    assert first == second == r.redact(text, Counter())
    assert counts == Counter({"email": 2, "phone": 2})


def test_document_cache_is_bounded() -> None:
    from collections import Counter

    from service.api.redaction import Redactor

    r = Redactor()
    r.CACHE_ENTRIES = 10
    for i in range(50):
        r.redact_document(f"document {i} text", Counter())
    assert len(r._cache) == 10
