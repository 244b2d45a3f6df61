"""Which fields are redacted (docs/security.md, "What is redacted"), on both /v1/events paths and OTLP.

Native events: free texts get fixed marks; metadata values and the predicate values matched against
them get keyed marks (equal stays equal, different stays different); the session id a keyed hash.
OTLP: the same rules for string values inside arrays and key-value lists, span and event names,
status messages, and the JSON metadata, filters and exclusion-sample attributes.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import orjson
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from service.api.ingest import BatchPreparer
from service.api.otlp import SpanPreparer
from service.api.redaction import REPLACEMENT, Pseudonymizer, Redactor
from service.contracts import Topics
from service.contracts import vocabulary as L
from service.contracts.events import TraceBody
from service.contracts.spans import decode_span_record
from service.contracts.vocabulary import MAX_CLOCK_SKEW_S, MAX_EVENT_AGE_S
from tests.service.api.api_events import label_event, trace_event
from tests.service.api.otlp_builders import export_of, new_trace_id, span
from tests.service.api.test_plain_batch import PSEUDONYM_KEY, TENANT, _agree, _batch, _plain

EMAIL = REPLACEMENT["email"]
KEY = PSEUDONYM_KEY


def _preparer() -> BatchPreparer:
    return BatchPreparer(
        Topics("t"), Redactor(pseudonyms=Pseudonymizer(KEY)), MAX_EVENT_AGE_S, MAX_CLOCK_SKEW_S, 20
    )


def _stored_plain(*events: dict[str, Any]) -> list[dict[str, Any]]:
    batch = _plain(_preparer(), _batch(*events))
    assert batch is not None, "the plain path declined the batch"
    return [orjson.loads(r.value)["body"] for r in batch.records]


def pii_trace() -> dict[str, Any]:
    ev = trace_event(session_id="sess-jane@example.com")
    retrieval = ev["body"]["retrieval"]
    retrieval["documents"][0]["metadata"] = {
        "owner": "jane@example.com",
        "cc": ["bob@example.org", 3],
        "doc_id": "kb-4155550132",
        "locale": "en-US",
    }
    retrieval["documents"][1]["metadata"] = {"owner": "bob@example.org"}
    retrieval["filters"] = {
        "entitlement": [{"field": "owner", "op": "eq", "value": "jane@example.com"}],
        "relevance": [{"field": "cc", "op": "in", "value": ["bob@example.org"]}],
    }
    retrieval["exclusion_sample"] = {
        "candidates": [{"id": "kb-9", "metadata": {"owner": "jane@example.com"}}]
    }
    ev["body"]["query"]["text"] = "write to jane\\u0040example.com please"
    return ev


def test_both_paths_redact_metadata_predicates_candidates_and_the_session_alike() -> None:
    ev = pii_trace()
    assert _agree(_batch(ev, label_event(note="from qa@acme.io")))
    # the full path agrees (above); what it stores:
    [body] = _stored_plain(ev)
    raw = json.dumps(body)
    assert "jane" not in raw and "bob@" not in raw, raw
    docs = body["retrieval"]["documents"]
    owner = docs[0]["metadata"]["owner"]
    assert owner.startswith("[REDACTED_EMAIL_") and owner != docs[1]["metadata"]["owner"]
    assert docs[0]["metadata"]["cc"][1] == 3 and docs[0]["metadata"]["locale"] == "en-US"
    assert docs[0]["metadata"]["doc_id"] == "kb-4155550132"  # identifiers are kept (joined on)
    # a predicate still matches exactly the metadata it matched before
    assert body["retrieval"]["filters"]["entitlement"][0]["value"] == owner
    assert body["retrieval"]["filters"]["relevance"][0]["value"] == [docs[1]["metadata"]["owner"]]
    assert body["retrieval"]["exclusion_sample"]["candidates"][0]["metadata"]["owner"] == owner
    assert body["query"]["text"] == f"write to {EMAIL} please"  # an escaped '@' is still an address
    assert body["session_id"] == Pseudonymizer(KEY).identifier(TENANT, "sess-jane@example.com")
    TraceBody.model_validate(body)  # still a valid body (the session pseudonym is an identifier)


def test_pseudonyms_are_keyed_per_tenant_and_stable() -> None:
    a, b = Pseudonymizer(KEY), Pseudonymizer(b"another-key-0123456789")
    assert a.identifier("acme", "s1") == Pseudonymizer(KEY).identifier("acme", "s1")
    assert a.identifier("acme", "s1") != b.identifier("acme", "s1")
    assert a.identifier("acme", "s1") != a.identifier("globex", "s1")
    assert Pseudonymizer().identifier("acme", "s1") != Pseudonymizer().identifier(
        "acme", "s1"
    )  # unset: random
    mark = a.finding("acme", "email", "jane@example.com")
    assert (
        Redactor(pseudonyms=a).redact_value(mark, Counter(), "acme") == mark
    )  # marks are not redacted again


def test_a_text_at_its_limit_still_fits_it_once_redacted() -> None:
    query = ("a@b.io " * (L.MAX_QUERY_CHARS // 7))[: L.MAX_QUERY_CHARS]
    note = ("a@b.io " * (L.MAX_NOTE_CHARS // 7))[: L.MAX_NOTE_CHARS]
    ev = trace_event(query={"text": query})
    ev["body"]["retrieval"]["documents"][0]["metadata"] = {"m": ("a@b.io " * 200)[: L.MAX_METADATA_STR_LEN]}
    assert _agree(_batch(ev, label_event(note=note)))
    body, label = _stored_plain(ev, label_event(note=note))
    assert len(body["query"]["text"]) == L.MAX_QUERY_CHARS and "a@b.io" not in body["query"]["text"]
    assert len(body["retrieval"]["documents"][0]["metadata"]["m"]) == L.MAX_METADATA_STR_LEN
    assert len(label["note"]) == L.MAX_NOTE_CHARS
    TraceBody.model_validate(body)


def _kv(key: str, value: AnyValue) -> KeyValue:
    out = KeyValue(key=key)
    out.value.CopyFrom(value)
    return out


def _strings(*items: str) -> AnyValue:
    out = AnyValue()
    for item in items:
        out.array_value.values.add().string_value = item
    return out


def test_otlp_arrays_kvlists_names_status_and_json_attributes_are_redacted() -> None:
    nested = AnyValue()
    inner = nested.kvlist_value.values.add()
    inner.key, inner.value.string_value = "note", "call jane@example.com"
    deep = nested.kvlist_value.values.add()
    deep.key = "tags"
    deep.value.CopyFrom(_strings("x" * 70_000, "bob@example.org"))
    metadata = {
        "owner": "jane@example.com",
        "doc_id": "d-1",
        "ragmon.retrieval.filters": {
            "entitlement": [{"field": "owner", "op": "eq", "value": "jane@example.com"}]
        },
    }
    root = span(
        new_trace_id(),
        name="GET /users/jane@example.com",
        attrs={
            "metadata": json.dumps(metadata),
            "retrieval.documents.0.document.metadata": json.dumps({"owner": "jane@example.com"}),
            "ragmon.retrieval.exclusion_sample": json.dumps(
                {"candidates": [{"id": "c", "metadata": {"owner": "jane@example.com"}}]}
            ),
            "session.id": "s-1",
            "enduser.id": "jane",
        },
    )
    root.attributes.append(_kv("llm.input_messages", _strings("hi, I am jane@example.com")))
    root.attributes.append(_kv("extra", nested))
    root.status.message = "timeout for jane@example.com"
    event = root.events.add()
    event.name = "sent to jane@example.com"
    pseudonyms = Pseudonymizer(KEY)
    preparer = SpanPreparer(Topics("t"), Redactor(pseudonyms=pseudonyms), 65_536)
    batch = preparer.prepare(export_of([root]), TENANT, None)
    [record] = batch.records
    [(_, _, stored)] = list(decode_span_record(record.value, record.headers).spans())
    text = stored.SerializeToString()
    assert b"jane" not in text.replace(b"enduser", b"") and b"bob@" not in text
    assert stored.name == f"GET /users/{EMAIL}" and stored.status.message == f"timeout for {EMAIL}"
    assert stored.events[0].name == f"sent to {EMAIL}"
    attrs = {kv.key: kv.value for kv in stored.attributes}
    assert attrs["llm.input_messages"].array_value.values[0].string_value == f"hi, I am {EMAIL}"
    kvs = {kv.key: kv.value for kv in attrs["extra"].kvlist_value.values}
    assert kvs["note"].string_value == f"call {EMAIL}"
    tags = kvs["tags"].array_value.values
    assert (
        len(tags[0].string_value) == 65_536 and tags[1].string_value == EMAIL and batch.truncated_values == 1
    )
    owner = pseudonyms.finding(TENANT, "email", "jane@example.com")
    meta = json.loads(attrs["metadata"].string_value)
    assert meta["owner"] == owner and meta["doc_id"] == "d-1"
    assert meta["ragmon.retrieval.filters"]["entitlement"][0]["value"] == owner
    assert json.loads(attrs["retrieval.documents.0.document.metadata"].string_value) == {"owner": owner}
    sample = json.loads(attrs["ragmon.retrieval.exclusion_sample"].string_value)
    assert sample["candidates"][0] == {"id": "c", "metadata": {"owner": owner}}
    assert attrs["session.id"].string_value == pseudonyms.identifier(TENANT, "s-1")
    assert attrs["enduser.id"].string_value == pseudonyms.identifier(TENANT, "jane")


def test_otlp_deep_kvlists_of_long_keys_keep_their_rules_and_short_keys() -> None:
    """A key-value list 25 levels deep under 10 kB keys: the innermost email is still redacted and the
    innermost session id still pseudonymized (the key's tail is kept), under a `ragmon.` root no prose is
    touched (its head is kept), and no key walked is longer than nested_key's bound."""
    from service.api.otlp import nested_key

    def deep(leaf_key: str, leaf: str) -> AnyValue:
        value = AnyValue(string_value=leaf)
        value = _kvlist(leaf_key, value)
        for level in range(25):
            value = _kvlist(f"{level}" + "k" * 10_000, value)
        return value

    root = span(new_trace_id(), attrs={})
    root.attributes.append(_kv("extra", deep("note", "call jane@example.com")))
    root.attributes.append(_kv("ctx", deep("session.id", "s-1")))
    root.attributes.append(_kv("ragmon.kept", deep("note", "call jane@example.com")))
    pseudonyms = Pseudonymizer(KEY)
    batch = SpanPreparer(Topics("t"), Redactor(pseudonyms=pseudonyms), 65_536).prepare(
        export_of([root]), TENANT, None
    )
    [record] = batch.records
    [(_, _, stored)] = list(decode_span_record(record.value, record.headers).spans())
    leaves = {kv.key: _innermost(kv.value) for kv in stored.attributes}
    assert leaves["extra"] == f"call {EMAIL}"
    assert leaves["ctx"] == pseudonyms.identifier(TENANT, "s-1")
    assert leaves["ragmon.kept"] == "call jane@example.com"
    key = "extra"
    for level in range(25):
        key = nested_key(key, f"{level}" + "k" * 10_000)
        assert len(key) <= 64 + 1 + 256
    assert nested_key(key, "session.id").endswith(".session.id") and key.startswith("extra.0kkk")
    assert nested_key("a", "b") == "a.b"


def _kvlist(key: str, value: AnyValue) -> AnyValue:
    out = AnyValue()
    kv = out.kvlist_value.values.add()
    kv.key = key
    kv.value.CopyFrom(value)
    return out


def _innermost(value: AnyValue) -> str:
    while value.WhichOneof("value") == "kvlist_value":
        value = value.kvlist_value.values[0].value
    return value.string_value
