"""The v1 wire contract's hard limits (service/contracts), and the JSON Schema that `ragmon schema` exports."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from service.contracts import (
    EventEnvelope,
    FeedbackBody,
    IngestBatch,
    LabelBody,
    Predicate,
    Query,
    ReleaseBody,
    StoredEvent,
    Topics,
    TraceBody,
    record_key,
)
from service.contracts import vocabulary as L


def trace(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "trace_id": "tr-1",
        "request_id": "req-1",
        "query": {"text": "how do refunds work?"},
    }
    body.update(overrides)
    return body


def doc(i: int = 0, **overrides: Any) -> dict[str, Any]:
    return {"id": f"kb-{i}", "text": "Refunds take five days.", **overrides}


def rejects(model: type[BaseModel], data: dict[str, Any], loc: str, error_type: str) -> None:
    """`model` refuses `data` with an error of `error_type` at dotted location `loc`."""
    with pytest.raises(ValidationError) as refused:
        model.model_validate(data)
    found = {(".".join(str(p) for p in e["loc"]), e["type"]) for e in refused.value.errors()}
    assert (loc, error_type) in found, found


# -- sample_rate and finite numbers ------------------------------------------------


@pytest.mark.parametrize("rate", [1e-9, 0.01, 0.5, 1, 1.0])
def test_sample_rate_in_the_half_open_unit_interval_is_accepted(rate: float) -> None:
    assert TraceBody.model_validate(trace(sample_rate=rate)).sample_rate == rate


@pytest.mark.parametrize(
    ("rate", "error_type"),
    [
        (0, "greater_than"),
        (-0.5, "greater_than"),
        (1.0000001, "less_than_equal"),
        (2, "less_than_equal"),
        (math.nan, "finite_number"),
        (math.inf, "finite_number"),
        ("half", "float_parsing"),
    ],
)
def test_sample_rate_outside_the_interval_is_refused(rate: Any, error_type: str) -> None:
    rejects(TraceBody, trace(sample_rate=rate), "sample_rate", error_type)


def test_sample_rate_defaults_to_one() -> None:
    assert TraceBody.model_validate(trace()).sample_rate == 1.0


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        (trace(retrieval={"documents": [doc(score=math.nan)]}), "retrieval.documents.0.score"),
        (
            trace(query={"text": "q", "embedding": [0.1, math.inf], "embedding_model": "m"}),
            "query.embedding.1",
        ),
        (trace(timings={"retrieval": math.inf}), "timings.retrieval"),
        (trace(usage={"cost_usd": math.nan}), "usage.cost_usd"),
        (
            trace(retrieval={"exclusion_sample": {"candidates": [{"id": "c", "score": -math.inf}]}}),
            "retrieval.exclusion_sample.candidates.0.score",
        ),
    ],
)
def test_non_finite_numbers_are_refused(data: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as refused:
        TraceBody.model_validate(data)
    assert any(".".join(str(p) for p in e["loc"]).startswith(loc) for e in refused.value.errors())


def test_non_finite_feedback_values_are_refused() -> None:
    with pytest.raises(ValidationError) as refused:
        FeedbackBody.model_validate({"trace_id": "t", "kind": "dwell", "value": math.inf})
    assert "finite_number" in {e["type"] for e in refused.value.errors()}


# -- text limits -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "limit", "build"),
    [
        ("query.text", L.MAX_QUERY_CHARS, lambda s: trace(query={"text": s})),
        ("answer.text", L.MAX_ANSWER_CHARS, lambda s: trace(answer={"text": s})),
        (
            "retrieval.documents.0.text",
            L.MAX_DOCUMENT_CHARS,
            lambda s: trace(retrieval={"documents": [doc(text=s)]}),
        ),
    ],
)
def test_trace_texts_are_bounded(path: str, limit: int, build: Any) -> None:
    TraceBody.model_validate(build("x" * limit))
    rejects(TraceBody, build("x" * (limit + 1)), path, "string_too_long")


def test_notes_and_descriptions_are_bounded() -> None:
    LabelBody.model_validate({"trace_id": "t", "faithful": True, "note": "n" * L.MAX_NOTE_CHARS})
    rejects(
        LabelBody,
        {"trace_id": "t", "faithful": True, "note": "n" * (L.MAX_NOTE_CHARS + 1)},
        "note",
        "string_too_long",
    )
    rejects(
        ReleaseBody,
        {"release": "r1", "description": "d" * (L.MAX_NOTE_CHARS + 1)},
        "description",
        "string_too_long",
    )


def test_an_empty_query_is_refused() -> None:
    rejects(TraceBody, trace(query={"text": ""}), "query.text", "string_too_short")


@pytest.mark.parametrize(
    ("field", "value", "error_type"),
    [
        ("trace_id", "has space", "string_pattern_mismatch"),
        ("trace_id", "t" * (L.MAX_ID_LEN + 1), "string_too_long"),
        ("variant", "Production", "string_pattern_mismatch"),
        ("intent", "i" * (L.MAX_NAME_LEN + 1), "string_too_long"),
    ],
)
def test_identifiers_and_names_have_a_shape(field: str, value: str, error_type: str) -> None:
    rejects(TraceBody, trace(**{field: value}), field, error_type)


# -- list limits -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "limit", "build"),
    [
        (
            "retrieval.documents",
            L.MAX_DOCUMENTS,
            lambda n: trace(retrieval={"documents": [doc(i) for i in range(n)]}),
        ),
        (
            "retrieval.exclusion_sample.candidates",
            L.MAX_CANDIDATES,
            lambda n: trace(
                retrieval={"exclusion_sample": {"candidates": [{"id": f"c{i}"} for i in range(n)]}}
            ),
        ),
        (
            "retrieval.exclusion_sample.gold_ids",
            L.MAX_GOLD_IDS,
            lambda n: trace(
                retrieval={"exclusion_sample": {"candidates": [], "gold_ids": [f"g{i}" for i in range(n)]}}
            ),
        ),
        (
            "answer.citations",
            L.MAX_CITATIONS,
            lambda n: trace(answer={"citations": [f"d{i}" for i in range(n)]}),
        ),
        (
            "retrieval.filters.relevance",
            L.MAX_PREDICATES,
            lambda n: trace(retrieval={"filters": {"relevance": [{"field": "f", "op": "exists"}] * n}}),
        ),
        (
            "query.embedding",
            L.MAX_EMBEDDING_DIM,
            lambda n: trace(query={"text": "q", "embedding": [0.0] * n, "embedding_model": "m"}),
        ),
    ],
)
def test_lists_are_bounded(path: str, limit: int, build: Any) -> None:
    TraceBody.model_validate(build(limit))
    rejects(TraceBody, build(limit + 1), path, "too_long")


def test_timing_stages_are_bounded_in_count_and_duration() -> None:
    TraceBody.model_validate(trace(timings={f"s{i}": 1.0 for i in range(L.MAX_TIMING_STAGES)}))
    rejects(
        TraceBody,
        trace(timings={f"s{i}": 1.0 for i in range(L.MAX_TIMING_STAGES + 1)}),
        "timings",
        "too_long",
    )
    rejects(
        TraceBody, trace(timings={"generation": L.MAX_TIMING_MS + 1}), "timings.generation", "less_than_equal"
    )
    rejects(TraceBody, trace(timings={"generation": -1}), "timings.generation", "greater_than_equal")
    rejects(
        TraceBody,
        trace(timings={"Generation Time": 1}),
        "timings.Generation Time.[key]",
        "string_pattern_mismatch",
    )


def test_token_kinds_are_a_closed_set_and_counts_are_bounded() -> None:
    rejects(TraceBody, trace(usage={"tokens": {"bogus": 1}}), "usage.tokens.bogus.[key]", "literal_error")
    rejects(
        TraceBody,
        trace(usage={"tokens": {"prompt": L.MAX_TOKENS + 1}}),
        "usage.tokens.prompt",
        "less_than_equal",
    )


# -- metadata --------------------------------------------------------------------


def with_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    return trace(retrieval={"documents": [doc(metadata=metadata)]})


def metadata_error(metadata: dict[str, Any]) -> str:
    """The message of the error that refuses this metadata, which must be located at the metadata."""
    with pytest.raises(ValidationError) as refused:
        TraceBody.model_validate(with_metadata(metadata))
    [error] = refused.value.errors()
    assert ".".join(str(p) for p in error["loc"]).startswith("retrieval.documents.0.metadata")
    return str(error["msg"])


def test_metadata_key_count_is_bounded() -> None:
    TraceBody.model_validate(with_metadata({f"k{i}": i for i in range(L.MAX_METADATA_KEYS)}))
    assert str(L.MAX_METADATA_KEYS) in metadata_error({f"k{i}": i for i in range(L.MAX_METADATA_KEYS + 1)})


def test_metadata_keys_and_values_are_bounded() -> None:
    TraceBody.model_validate(
        with_metadata(
            {
                "k" * L.MAX_METADATA_KEY_LEN: "v" * L.MAX_METADATA_STR_LEN,
                "tags": ["a"] * L.MAX_METADATA_LIST_LEN,
                "none": None,
                "n": 3,
                "x": 0.5,
                "flag": True,
            }
        )
    )
    assert str(L.MAX_METADATA_KEY_LEN) in metadata_error({"k" * (L.MAX_METADATA_KEY_LEN + 1): 1})
    assert str(L.MAX_METADATA_STR_LEN) in metadata_error({"long": "v" * (L.MAX_METADATA_STR_LEN + 1)})
    assert str(L.MAX_METADATA_LIST_LEN) in metadata_error({"tags": ["a"] * (L.MAX_METADATA_LIST_LEN + 1)})
    assert "nested" in metadata_error({"nested": {"a": 1}})
    assert "finite" in metadata_error({"boost": math.nan})


# -- rules between fields ----------------------------------------------------------


def test_an_embedding_names_its_model() -> None:
    Query.model_validate({"text": "q", "embedding": [0.1], "embedding_model": "all-minilm-l6-v2"})
    rejects(Query, {"text": "q", "embedding": [0.1]}, "", "value_error")


@pytest.mark.parametrize(
    ("predicate", "ok"),
    [
        ({"field": "locale", "op": "eq", "value": "en-US"}, True),
        ({"field": "locale", "op": "in", "value": ["en-US", "en-GB"]}, True),
        ({"field": "published", "op": "gte", "value": "2024-01-01"}, True),
        ({"field": "version", "op": "lt", "value": 3}, True),
        ({"field": "archived", "op": "exists", "value": False}, True),
        ({"field": "locale", "op": "like", "value": "en%"}, False),
        ({"field": "locale", "op": "in", "value": "en-US"}, False),
        ({"field": "locale", "op": "eq", "value": ["en-US"]}, False),
        ({"field": "published", "op": "gt", "value": "last week"}, False),
        ({"field": "published", "op": "gt", "value": True}, False),
        ({"field": "archived", "op": "exists", "value": 1}, False),
    ],
)
def test_predicate_values_fit_their_operator(predicate: dict[str, Any], ok: bool) -> None:
    if ok:
        Predicate.model_validate(predicate)
    else:
        with pytest.raises(ValidationError):
            Predicate.model_validate(predicate)


@pytest.mark.parametrize(
    ("body", "ok"),
    [
        ({"trace_id": "t", "kind": "thumbs", "value": True, "reason": "wrong"}, True),
        ({"trace_id": "t", "kind": "thumbs", "value": -1}, True),
        ({"trace_id": "t", "kind": "thumbs", "value": 0.5}, False),
        ({"trace_id": "t", "kind": "dwell", "value": 12.5}, True),
        ({"trace_id": "t", "kind": "dwell", "value": -1}, False),
        ({"trace_id": "t", "kind": "regenerate"}, True),
        ({"trace_id": "t", "kind": "thumbs", "value": True, "reason": "meh"}, False),
        ({"trace_id": "t", "kind": "stars", "value": 5}, False),
    ],
)
def test_feedback_values_fit_their_kind(body: dict[str, Any], ok: bool) -> None:
    if ok:
        FeedbackBody.model_validate(body)
    else:
        with pytest.raises(ValidationError):
            FeedbackBody.model_validate(body)


def test_a_label_must_say_something() -> None:
    rejects(LabelBody, {"trace_id": "t", "reviewer": "qa"}, "", "value_error")
    LabelBody.model_validate({"trace_id": "t", "answerable": False})


def test_unknown_fields_are_refused_at_every_level() -> None:
    rejects(TraceBody, trace(qurey={"text": "x"}), "qurey", "extra_forbidden")
    rejects(TraceBody, trace(query={"text": "x", "lang": "en"}), "query.lang", "extra_forbidden")
    rejects(
        TraceBody,
        trace(retrieval={"documents": [doc(url="u")]}),
        "retrieval.documents.0.url",
        "extra_forbidden",
    )


def test_the_envelope_needs_a_uuid_and_an_offset() -> None:
    ok = {"type": "trace", "id": str(uuid.uuid4()), "timestamp": "2026-01-01T12:00:00Z", "body": {}}
    assert EventEnvelope.model_validate(ok).timestamp.tzinfo is not None
    rejects(EventEnvelope, ok | {"timestamp": "2026-01-01T12:00:00"}, "timestamp", "value_error")
    rejects(EventEnvelope, ok | {"id": "42"}, "id", "uuid_parsing")
    rejects(EventEnvelope, ok | {"type": "span"}, "type", "literal_error")


def envelope(**body: Any) -> dict[str, Any]:
    return {
        "type": "trace",
        "id": str(uuid.uuid4()),
        "timestamp": datetime.now(UTC).isoformat(),
        "body": trace(**body),
    }


def test_a_batch_holds_between_one_and_the_maximum_events() -> None:
    IngestBatch.model_validate({"events": [envelope()]})
    rejects(IngestBatch, {"events": []}, "events", "too_short")
    with pytest.raises(ValidationError):
        IngestBatch.model_validate({"events": [envelope()] * (L.MAX_EVENTS_PER_BATCH + 1)})


def test_a_stored_event_round_trips_to_its_body_model() -> None:
    stored = StoredEvent.model_validate(
        {
            "id": str(uuid.uuid4()),
            "type": "trace",
            "tenant": "acme",
            "timestamp": "2026-01-01T12:00:00Z",
            "received_at": "2026-01-01T12:00:01Z",
            "body": trace(variant="cand-a"),
        }
    )
    parsed = stored.parsed_body()
    assert isinstance(parsed, TraceBody) and parsed.variant == "cand-a"


def test_record_keys_keep_a_request_on_one_partition() -> None:
    assert record_key("trace", "acme", trace(request_id="r-9")) == b"acme/r-9"
    assert record_key("feedback", "acme", {"trace_id": "t-3"}) == b"acme/t-3"
    assert record_key("label", "acme", {"trace_id": "t-3"}) == b"acme/t-3"
    assert record_key("release", "acme", {"release": "r"}) == b"acme/production"
    assert Topics("p").all() == [
        "p.traces",
        "p.feedback",
        "p.releases",
        "p.labels",
        "p.dlq",
        "p.scores",
        "p.spans",
        "p.logs",
        "p.probes",
    ]


# -- the exported JSON Schema ------------------------------------------------------


@pytest.fixture(scope="module")
def exported_schema() -> dict[str, Any]:
    """What `ragmon schema` prints (run as the command's module, in a child process)."""
    out = subprocess.run(
        [sys.executable, "-m", "service.cli", "schema"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    schema = json.loads(out.stdout)
    assert isinstance(schema, dict)
    return schema


def schema_validator(schema: dict[str, Any]) -> Any:
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - jsonschema_rs comes with schemathesis
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.Draft202012Validator.check_schema(schema)
        return jsonschema.Draft202012Validator(schema)
    assert jsonschema_rs.meta.is_valid(schema)
    return jsonschema_rs.validator_for(schema)


@pytest.mark.slow
def test_the_exported_schema_is_a_json_schema_that_carries_the_limits(
    exported_schema: dict[str, Any],
) -> None:
    defs = exported_schema["$defs"]
    assert exported_schema["type"] == "object" and exported_schema["required"] == ["events"]
    assert exported_schema["additionalProperties"] is False
    events = exported_schema["properties"]["events"]
    assert (events["minItems"], events["maxItems"]) == (1, L.MAX_EVENTS_PER_BATCH)
    assert defs["Query"]["properties"]["text"]["maxLength"] == L.MAX_QUERY_CHARS
    assert defs["TraceBody"]["properties"]["sample_rate"] == {
        "default": 1.0,
        "exclusiveMinimum": 0,
        "maximum": 1,
        "title": "Sample Rate",
        "type": "number",
    }
    refs = {m for m in json.dumps(exported_schema).split('"$ref": "')[1:]}
    for ref in refs:
        name = ref.split('"')[0].removeprefix("#/$defs/")
        assert name in defs, f"dangling $ref {ref}"
    schema_validator(exported_schema)


@pytest.mark.slow
def test_the_exported_schema_accepts_a_valid_batch_and_refuses_bad_ones(
    exported_schema: dict[str, Any],
) -> None:
    validator = schema_validator(exported_schema)
    feedback = {
        "type": "feedback",
        "id": str(uuid.uuid4()),
        "timestamp": "2026-01-01T12:00:00Z",
        "body": {"trace_id": "tr-1", "kind": "thumbs", "value": False, "reason": "wrong"},
    }
    full = envelope(
        variant="production",
        release="2026.01.3",
        sample_rate=0.25,
        intent="billing",
        retrieval={
            "documents": [doc(score=0.8, metadata={"locale": "en-US", "tags": ["a"]})],
            "filters": {"entitlement": [{"field": "tenant", "op": "eq", "value": "acme"}]},
            "exclusion_sample": {"candidates": [{"id": "c1", "score": 0.7}], "gold_ids": ["c1"]},
        },
        answer={"text": "five days", "citations": ["kb-0"]},
        timings={"retrieval": 40.0},
        usage={"model": "gpt-4o-mini", "tokens": {"prompt": 10}, "cost_usd": 0.001},
    )
    good = {"events": [full, feedback]}
    IngestBatch.model_validate(good)  # the models agree
    assert validator.is_valid(good)
    assert not validator.is_valid({"events": []})
    assert not validator.is_valid({"events": [envelope(sample_rate=0)]})
    assert not validator.is_valid({"events": [envelope(query={"text": ""})]})
    assert not validator.is_valid({"events": [envelope()], "tenant": "acme"})
    assert not validator.is_valid({"events": [envelope(retrieval={"documents": [doc(url="u")]})]})


def test_a_release_marker_names_its_component_and_versions() -> None:
    app = ReleaseBody.model_validate({"release": "2026.12.1"})
    assert (app.component, app.from_, app.to) == ("app", None, None)  # existing clients unchanged
    change = ReleaseBody.model_validate(
        {"release": "emb-migration", "component": "embedding_model", "from": "emb-v1", "to": "emb-v2"}
    )
    assert change.model_dump(mode="json")["from"] == "emb-v1"  # stored under its wire name
    rejects(ReleaseBody, {"release": "r", "component": "vibes", "to": "v2"}, "component", "literal_error")
    rejects(ReleaseBody, {"release": "r", "component": "index", "to": "v 2"}, "to", "string_pattern_mismatch")
    rejects(
        ReleaseBody,
        {"release": "r", "component": "index", "from": "i" * (L.MAX_ID_LEN + 1), "to": "i2"},
        "from",
        "string_too_long",
    )
    with pytest.raises(ValidationError, match="'to': required when component is 'index'"):
        ReleaseBody.model_validate({"release": "r", "component": "index", "from": "idx-1"})
    with pytest.raises(ValidationError, match="a change needs two different versions"):
        ReleaseBody.model_validate({"release": "r", "component": "prompt", "from": "p1", "to": "p1"})
