"""Each deterministic check on hand-made answers, passing and failing: citations, length, figures with
separators, currencies and Unicode, JSON and its schema, forbidden patterns (docs/checks.md)."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from workers.checks import figures as figures_module
from workers.checks.answer import CHECKS, AnswerFacts, run_checks
from workers.checks.config import ChecksConfig
from workers.checks.figures import figures, ungrounded
from workers.checks.schema import SchemaError, compile_schema, validate

DOCS = [
    ("kb-1", "Refunds are accepted within 30 days. The fee is $1,250.50 per order."),
    ("kb-2", "Support: 24/7."),
]


def _check(
    text: str, cfg: ChecksConfig | None = None, tenant: str = "acme", **fields: object
) -> dict[str, str]:
    facts = AnswerFacts(
        text=text,
        refused=bool(fields.pop("refused", False)),
        citations=list(fields.pop("citations", [])),  # type: ignore[call-overload]
        documents=list(fields.pop("documents", DOCS)),  # type: ignore[call-overload]
        **fields,  # type: ignore[arg-type]
    )
    return run_checks(facts, cfg or ChecksConfig(), tenant).outcomes


def test_a_good_answer_passes_what_applies_and_skips_the_rest() -> None:
    out = _check("You have 30 days; the fee is $1,250.50.", citations=["kb-1"])
    assert out == {
        "citations_known": "pass",
        "answer_length": "pass",
        "figures_grounded": "pass",
        "json_valid": "skip",
        "json_schema": "skip",
        "forbidden_patterns": "skip",
    }
    assert set(out) == set(CHECKS)


def test_a_citation_to_a_document_never_given_fails() -> None:
    result = run_checks(AnswerFacts("See the policy.", False, ["kb-1", "kb-9"], DOCS), ChecksConfig(), "acme")
    assert result.outcomes["citations_known"] == "fail" and result.failed == ["citations_known"]
    assert "'kb-9'" in result.details["citations_known"]


def test_a_refusal_is_not_checked_for_length_citations_or_figures() -> None:
    out = _check("", refused=True, citations=["kb-9"])
    assert out["citations_known"] == out["answer_length"] == out["figures_grounded"] == "skip"


def test_length_bounds() -> None:
    cfg = ChecksConfig(min_answer_chars=5, max_answer_chars=20)
    assert _check("ok", cfg)["answer_length"] == "fail"
    assert _check("x" * 21, cfg)["answer_length"] == "fail"
    assert _check("just right", cfg)["answer_length"] == "pass"
    with pytest.raises(ValueError, match="min_answer_chars is over max_answer_chars"):
        ChecksConfig(min_answer_chars=30, max_answer_chars=20)


def test_figures_must_appear_in_the_context() -> None:
    assert _check("You have 45 days.")["figures_grounded"] == "fail"
    assert _check("The fee is 1250.5 dollars.")["figures_grounded"] == "pass"  # the same value, written apart
    assert _check("The fee is USD 1,250.50 and you have 30 days.")["figures_grounded"] == "pass"
    assert _check("The fee is $1,205.50.")["figures_grounded"] == "fail"
    assert (
        _check("Step 1: open the app. Step 2: tap refund.")["figures_grounded"] == "skip"
    )  # no figure to ground


@pytest.mark.parametrize(
    ("text", "locale", "expected"),
    [
        ("R$ 1.250,50", "pt-BR", {Decimal("1250.5")}),
        ("1 250,50 zł", "pl", {Decimal("1250.5")}),
        ("1\u202f250,50 €", "fr", {Decimal("1250.5")}),
        ("CHF 1'250.50", "de-CH", {Decimal("1250.5")}),  # the apostrophe groups; the locale's mark is ','
        ("$1,250.50", "en", {Decimal("1250.5")}),
        ("12.5%", "en", {Decimal("12.5")}),
        ("12,5 %", "pt", {Decimal("12.5")}),
        ("on 2024-03-15", "en", {Decimal("2024"), Decimal("15")}),
        ("٣٠ يوما", "ar", {Decimal("30")}),  # Arabic-Indic digits
        ("３０日", "ja", {Decimal("30")}),  # full-width digits
        ("30 60 90 days", "en", {Decimal("30"), Decimal("60"), Decimal("90")}),
        ("version 1.2.3 of gpt4", "en", set()),
        ("steps 1, 2 and 3", "en", set()),
    ],
)
def test_figures_are_normalised_per_locale(text: str, locale: str, expected: set[Decimal]) -> None:
    assert figures(text, locale) == expected


def test_the_tenant_locale_decides_the_decimal_mark() -> None:
    cfg = ChecksConfig(tenant_locales={"globex": "pt"})
    docs = [("kb-1", "Taxa de R$ 1.250,50.")]
    assert (
        _check("A taxa é 1250,5 reais.", cfg, tenant="globex", documents=docs)["figures_grounded"] == "pass"
    )
    assert _check("A taxa é 1.205,50.", cfg, tenant="globex", documents=docs)["figures_grounded"] == "fail"


def test_figures_are_grounded_across_documents_and_the_cache_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(figures_module, "_cache", {})
    monkeypatch.setattr(figures_module, "CACHE_ENTRIES", 3)
    docs = ["Refunds take 30 days.", "The fee is 1,250.50.", "Nothing here."]
    said = figures("30 days and 1250.5 and 45 more")
    assert ungrounded(said, docs) == [Decimal(45)]
    assert ungrounded(said, docs, "pt") == [Decimal(45), Decimal("1250.5")]  # pt reads 1,250.50 as 1.2505
    # the same text under the other decimal mark is its own entry; the oldest goes first
    assert len(figures_module._cache) <= 3
    for n in range(10):
        figures_module.document_figures(f"row {n}0 of the table")
    assert len(figures_module._cache) == 3
    assert figures_module.document_figures("row 90 of the table") == {Decimal(90)}
    # a document longer than the cache's bound is read, not kept
    long_text = "x " * figures_module.CACHE_MAX_CHARS + " 77"
    assert figures_module.document_figures(long_text) == {Decimal(77)}
    assert all(len(text) <= figures_module.CACHE_MAX_CHARS for _, text in figures_module._cache)


SCHEMA = {
    "type": "object",
    "required": ["amount", "currency"],
    "additionalProperties": False,
    "properties": {
        "amount": {"type": "number", "minimum": 0},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "lines": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
    },
}


def test_json_answers_and_their_schema() -> None:
    cfg = ChecksConfig(schemas={"invoice": SCHEMA})
    ok = '{"amount": 1250.5, "currency": "USD"}'
    assert _check(ok, cfg, response_format="json", schema_name="invoice")["json_schema"] == "pass"
    out = _check('{"amount": 12', cfg, response_format="json", schema_name="invoice")
    assert out["json_valid"] == "fail" and out["json_schema"] == "skip"
    for bad in (
        '{"amount": -1, "currency": "USD"}',
        '{"amount": 1, "currency": "usd"}',
        '{"amount": 1}',
        '{"amount": 1, "currency": "USD", "x": 1}',
        '{"amount": 1, "currency": "USD", "lines": ["a", "b", "c", "d"]}',
    ):
        assert _check(bad, cfg, response_format="json", schema_name="invoice")["json_schema"] == "fail", bad
    assert _check(ok, cfg, response_format="json")["json_schema"] == "skip"  # no schema named
    assert _check(ok, cfg, response_format="json", schema_name="unknown")["json_schema"] == "skip"
    assert _check(ok, cfg, response_format="json")["figures_grounded"] == "skip"


def test_a_schema_outside_the_subset_or_a_backtracking_pattern_is_refused_at_load() -> None:
    with pytest.raises(ValueError, match="keyword 'oneOf' is not supported"):
        ChecksConfig(schemas={"x": {"oneOf": [{"type": "string"}]}})
    with pytest.raises(ValueError, match="RE2 cannot compile"):
        ChecksConfig(schemas={"x": {"type": "string", "pattern": r"^(a)\1$"}})
    with pytest.raises(ValueError, match="forbidden.0.pattern: RE2 cannot compile"):
        ChecksConfig(forbidden=[{"name": "lookahead", "pattern": r"foo(?=bar)"}])
    with pytest.raises(SchemaError, match="'text' is not a JSON type"):
        compile_schema({"type": "text"})


def test_forbidden_patterns() -> None:
    cfg = ChecksConfig(
        forbidden=[
            {"name": "internal-host", "pattern": r"\b[a-z0-9-]+\.corp\.internal\b"},
            {"name": "card", "pattern": r"\b(?:\d[ -]?){13,16}\b"},
        ]
    )
    result = run_checks(AnswerFacts("Ask db-7.corp.internal for it.", False, [], DOCS), cfg, "acme")
    assert (
        result.outcomes["forbidden_patterns"] == "fail"
        and "internal-host" in result.details["forbidden_patterns"]
    )
    assert _check("Card 4111 1111 1111 1111 works.", cfg)["forbidden_patterns"] == "fail"
    assert _check("Nothing to hide here.", cfg)["forbidden_patterns"] == "pass"


def test_a_hostile_answer_costs_linear_time() -> None:
    """A pattern that backtracks exponentially in Python's re runs in linear time on RE2, and the figure
    extraction on a megabyte of digits and separators stays linear too."""
    cfg = ChecksConfig(forbidden=[{"name": "evil", "pattern": r"^(a+)+$"}], max_answer_chars=10_000_000)
    text = "a" * 100_000 + "!"
    started = time.process_time()
    assert _check(text, cfg)["forbidden_patterns"] == "pass"
    figures("1," * 500_000 + "x", "en")
    assert time.process_time() - started < 2.0  # Python's re would take longer than the age of the universe


def test_validate_reports_the_path() -> None:
    schema = compile_schema(SCHEMA)
    assert validate({"amount": 1, "currency": "USD", "lines": ["ok", 3]}, schema) == (
        "/lines/1: integer where the schema wants ['string']"
    )
