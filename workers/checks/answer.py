"""The deterministic checks of one answer (pure; docs/checks.md says what each catches).

Each check is `pass`, `fail` or `skip` (does not apply: a refusal has no length to bound, an answer without
figures nothing to ground, a text answer no JSON to parse). They run cheapest first on bounded inputs:
the answer and the documents are bounded by the contract, figures are read up to a bound, and the
configured patterns run on RE2.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from service.contracts.vocabulary import CHECK_NAMES
from workers.checks.config import ChecksConfig
from workers.checks.figures import figures, ungrounded
from workers.checks.schema import validate
from workers.runtime import boundedjson

CHECKS = CHECK_NAMES
Outcome = Literal["pass", "fail", "skip"]
OUTCOMES: tuple[Outcome, ...] = ("pass", "fail", "skip")


@dataclass(frozen=True)
class AnswerFacts:
    text: str
    refused: bool
    citations: Sequence[str]
    documents: Sequence[tuple[str, str]]  # (id, text) of the documents given to the generator
    response_format: str | None = None  # "json" when the app asked for JSON
    schema_name: str | None = None


@dataclass(frozen=True)
class Result:
    outcomes: dict[str, Outcome]
    details: dict[str, str]  # why each failed check failed

    @property
    def failed(self) -> list[str]:
        return [name for name in CHECKS if self.outcomes[name] == "fail"]


def run_checks(a: AnswerFacts, cfg: ChecksConfig, tenant: str) -> Result:
    out: dict[str, Outcome] = dict.fromkeys(CHECKS, "skip")
    why: dict[str, str] = {}

    def fail(name: str, detail: str) -> None:
        out[name] = "fail"
        why[name] = detail

    if not a.refused and a.citations:
        known = {doc_id for doc_id, _ in a.documents}
        unknown = [c for c in a.citations if c not in known]
        if unknown:
            fail("citations_known", f"cites {unknown[0]!r}, not among the {len(known)} documents given")
        else:
            out["citations_known"] = "pass"
    if not a.refused:
        n = len(a.text)
        if n < cfg.min_answer_chars or n > cfg.max_answer_chars:
            fail("answer_length", f"{n} characters, outside [{cfg.min_answer_chars}, {cfg.max_answer_chars}]")
        else:
            out["answer_length"] = "pass"
    parsed: object = None
    if a.response_format == "json" and not a.refused:
        try:
            parsed = boundedjson.loads(a.text)
            out["json_valid"] = "pass"
        except ValueError as exc:
            fail("json_valid", f"not JSON: {str(exc)[:120]}")
        schema = cfg.compiled_schema(a.schema_name) if a.schema_name else None
        if schema is not None and out["json_valid"] == "pass":
            problem = validate(parsed, schema)
            if problem:
                fail("json_schema", f"schema {a.schema_name}: {problem}"[:200])
            else:
                out["json_schema"] = "pass"
    if cfg.forbidden_compiled:
        hit = next((name for name, rx in cfg.forbidden_compiled if rx.search(a.text) is not None), None)
        if hit is not None:
            fail("forbidden_patterns", f"matches forbidden pattern {hit!r}")
        else:
            out["forbidden_patterns"] = "pass"
    if not a.refused and a.response_format != "json":
        locale = cfg.locale_for(tenant)
        said = figures(a.text, locale)
        if said:
            missing = ungrounded(said, [text for _, text in a.documents], locale)
            if missing:
                fail("figures_grounded", f"{len(missing)} figure(s) not in the context, e.g. {missing[0]}")
            else:
                out["figures_grounded"] = "pass"
    return Result(out, why)


def check_answer(
    cfg: ChecksConfig,
    tenant: str,
    answer: Any,
    documents: Sequence[Any],
    response_format: Any | None,
) -> Result:
    """run_checks on a worker's views: `answer` with text, refused and citations, `documents` with id and
    text, `response_format` with type and schema_name (or None)."""
    facts = AnswerFacts(
        answer.text,
        answer.refused,
        answer.citations,
        [(d.id, d.text) for d in documents],
        None if response_format is None else response_format.type,
        None if response_format is None else response_format.schema_name,
    )
    return run_checks(facts, cfg, tenant)
