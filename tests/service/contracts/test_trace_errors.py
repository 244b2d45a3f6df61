"""A trace's `error`, its answer's `finish_reason` and its `response_format`: the models, the API's fast
check and the workers' views agree on what is valid, and a refusal names the field and the rule."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from pydantic import ValidationError

from service.contracts.events import TraceBody
from service.contracts.fast import check_body
from service.contracts.views import AnswerOutcome, TraceError, View
from service.contracts.vocabulary import ERROR_TYPES, FINISH_REASONS


class _ErrorView(View):
    error: TraceError | None = None
    answer: AnswerOutcome = msgspec.field(default_factory=AnswerOutcome)


def _trace(**fields: Any) -> dict[str, Any]:
    return {"trace_id": "t-1", "request_id": "r-1", "query": {"text": "q"}, **fields}


def _view_accepts(body: dict[str, Any]) -> bool:
    try:
        msgspec.convert(body, _ErrorView)
    except msgspec.ValidationError:
        return False
    return True


VALID = (
    [_trace(error={"type": t}) for t in ERROR_TYPES]
    + [_trace(answer={"text": "", "finish_reason": r}) for r in FINISH_REASONS]
    + [
        _trace(
            error={
                "type": "rate_limit",
                "stage": "rerank",
                "retryable": True,
                "provider_request_id": "req_01J9:x",
            },
            answer={"text": "", "finish_reason": "other"},
        )
    ]
)

INVALID = [
    (_trace(error={"type": "oops"}), "error.type"),
    (_trace(error={}), "error.type"),
    (_trace(error={"type": "timeout", "stage": "Generation Step"}), "error.stage"),
    (_trace(error={"type": "timeout", "provider_request_id": "has space"}), "error.provider_request_id"),
    (_trace(error={"type": "timeout", "provider_request_id": ""}), "error.provider_request_id"),
    (_trace(error={"type": "timeout", "message": "boom"}), "error.message"),
    (_trace(error={"type": "timeout", "retryable": "sometimes"}), "error.retryable"),
    (_trace(error="timeout"), "error"),
    (_trace(answer={"finish_reason": "max_tokens"}), "answer.finish_reason"),
    (_trace(response_format={"type": "xml"}), "response_format.type"),
    (_trace(response_format={"type": "json", "schema_name": "Invoice V1"}), "response_format.schema_name"),
    (_trace(response_format={"type": "json", "schema": {}}), "response_format.schema"),
]


@pytest.mark.parametrize("body", VALID)
def test_valid_errors_and_finish_reasons_pass_everywhere(body: dict[str, Any]) -> None:
    TraceBody.model_validate(body)
    assert check_body("trace", body)
    assert _view_accepts(body)


@pytest.mark.parametrize(("body", "field"), INVALID)
def test_broken_errors_are_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TraceBody.model_validate(body)
    located = {".".join(str(p) for p in e["loc"]) for e in caught.value.errors()}
    assert any(loc == field or loc.startswith(field + ".") for loc in located), located
    assert not check_body("trace", body)


def test_the_refusal_lists_the_allowed_types() -> None:
    with pytest.raises(ValidationError) as caught:
        TraceBody.model_validate(_trace(error={"type": "oops"}))
    message = str(caught.value)
    assert all(f"'{t}'" in message for t in ERROR_TYPES), message


def test_the_stage_defaults_to_generation() -> None:
    body = TraceBody.model_validate(_trace(error={"type": "timeout"}))
    assert body.error is not None and body.error.stage == "generation" and body.error.retryable is False
