"""Response models and the OpenAPI description of POST /v1/events.

The endpoint validates event by event (to answer 207 with one result per
event), so it reads the body itself; the request schema is still published
from the contract models for clients and for schema-driven fuzzing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from service.contracts import IngestBatch

REF_TEMPLATE = "#/components/schemas/{model}"


class Accepted(BaseModel):
    accepted: int


class EventResultModel(BaseModel):
    index: int
    id: str | None
    status: Literal["accepted", "rejected"]
    error: str | None


class MultiStatus(BaseModel):
    accepted: int
    rejected: int
    results: list[EventResultModel]


class ErrorBody(BaseModel):
    error: str
    field: str | None = None
    rule: str | None = None
    accepted: int | None = None
    rejected: int | None = None
    results: list[EventResultModel] | None = None


def _resp(description: str, model: type[BaseModel] = ErrorBody, retry_after: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description, "model": model}
    if retry_after:
        out["headers"] = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}
    return out


INGEST_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: _resp("every event validated and acknowledged by Kafka", Accepted),
    207: _resp("some events rejected; one result per event; the accepted ones are durable", MultiStatus),
    400: _resp("malformed envelope, or no event in the batch is valid"),
    401: _resp("missing or unknown API key"),
    403: _resp("the key lacks the scope, or the body names another tenant"),
    408: _resp("the body did not arrive within body_timeout_s"),
    413: _resp("body, decompressed body or event count over the limit"),
    415: _resp("wrong Content-Type or Content-Encoding"),
    429: _resp("tenant over its rate", retry_after=True),
    503: _resp("broker cannot acknowledge, or the API is shedding load; nothing accepted", retry_after=True),
}


def batch_schema_components() -> tuple[dict[str, Any], dict[str, Any]]:
    schema = IngestBatch.model_json_schema(ref_template=REF_TEMPLATE)
    defs = schema.pop("$defs", {})
    return schema, defs


def ingest_openapi_extra() -> dict[str, Any]:
    schema, _ = batch_schema_components()
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
