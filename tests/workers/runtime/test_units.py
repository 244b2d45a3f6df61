"""Pure parts of the runtime: decoding, the dead-letter limit, closed label sets."""

from __future__ import annotations

import orjson
import pytest

from tests.support.kafka import stored, trace_body
from tests.support.records import FakeRecord
from workers.exclusion.views import VIEWS as EXCLUSION_VIEWS
from workers.metrics.views import VIEWS as METRICS_VIEWS
from workers.metrics.views import MetricsTrace
from workers.runtime.app import WorkerContext, WorkerSpec, run_worker
from workers.runtime.config import NoConfig
from workers.runtime.contract import Processor
from workers.runtime.decode import RecordDecoder, Undecodable, decode_record
from workers.runtime.dlq import DlqLimit, DlqLimitExceeded, dlq_headers
from workers.runtime.labels import ClosedSet, FirstSeenCap
from workers.runtime.types import Event, SourceRecord


def test_decodes_a_valid_trace() -> None:
    ev = stored("trace", trace_body(1))
    out = decode_record(FakeRecord(orjson.dumps(ev), headers=[("traceparent", b"00-abc-def-01")]), "trace")
    assert isinstance(out, Event)
    assert out.id == ev["id"] and out.tenant == "acme" and out.body.trace_id == "trace-1"
    assert out.traceparent == "00-abc-def-01"
    assert out.raw == orjson.dumps(ev)


@pytest.mark.parametrize(
    ("value", "expected_type", "reason", "detail_part"),
    [
        (b"\x00\x01not json", "trace", "undecodable", "not JSON"),
        (b"[1, 2]", "trace", "undecodable", "not a JSON object"),
        (orjson.dumps({"id": "x"}), "trace", "invalid_envelope", "record."),
        (orjson.dumps(stored("trace", {"trace_id": "t"})), "trace", "invalid_body", "record.body.request_id"),
        (
            orjson.dumps(stored("feedback", {"trace_id": "t", "kind": "copy"})),
            "trace",
            "unexpected_event_type",
            "feedback",
        ),
        (orjson.dumps(stored("trace", trace_body(1, sample_rate=0))), "trace", "invalid_body", "sample_rate"),
    ],
)
def test_undecodable_records_name_their_reason(
    value: bytes, expected_type: str, reason: str, detail_part: str
) -> None:
    out = decode_record(FakeRecord(value), expected_type)
    assert isinstance(out, Undecodable)
    assert out.reason == reason
    assert detail_part in out.detail
    assert out.source == SourceRecord("p.traces", 0, 0, None, 0)


def test_a_view_decodes_only_what_the_worker_reads() -> None:
    ev = stored("trace", trace_body(1, query={"text": "q", "surprise": "not read, not built"}))
    out = RecordDecoder(METRICS_VIEWS).decode(
        FakeRecord(orjson.dumps(ev), headers=[("traceparent", b"tp")]), "trace"
    )
    assert isinstance(out, Event) and isinstance(out.body, MetricsTrace)
    assert out.id == ev["id"] and out.tenant == "acme" and out.body.timings["total"] == 450.0
    assert out.traceparent == "tp" and out.raw == orjson.dumps(ev)


def test_a_view_reads_what_the_contract_coerces_as_the_contract_does() -> None:
    # The API accepts these spellings (pydantic coerces them) and stores the body as sent.
    body = trace_body(
        1,
        sample_rate="0.5",
        answer={"text": "a", "refused": "yes"},
        usage={"tokens": {"prompt": 100.0}},
        timings={"total": "12"},
    )
    out = RecordDecoder(METRICS_VIEWS).decode(FakeRecord(orjson.dumps(stored("trace", body))), "trace")
    assert isinstance(out, Event)
    assert (out.body.sample_rate, out.body.answer.refused, out.body.usage.tokens, out.body.timings) == (
        0.5,
        True,
        {"prompt": 100},
        {"total": 12.0},
    )


@pytest.mark.parametrize(
    ("value", "expected_type", "reason", "detail_part"),
    [
        (b"\x00\x01not json", "trace", "undecodable", "not JSON"),
        (b"[1, 2]", "trace", "undecodable", "not a JSON object"),
        (orjson.dumps({"id": "x"}), "trace", "invalid_envelope", "record."),
        (orjson.dumps(stored("trace", trace_body(1, sample_rate=0))), "trace", "invalid_body", "sample_rate"),
        (
            orjson.dumps(stored("trace", trace_body(1, timings={"total": -1}))),
            "trace",
            "invalid_body",
            "record.body.timings.total",
        ),
        (
            orjson.dumps(stored("feedback", {"trace_id": "t", "kind": "copy"})),
            "trace",
            "unexpected_event_type",
            "'feedback' on the topic of 'trace' events",
        ),
        (orjson.dumps(stored("trace", trace_body(1))), "label", "unexpected_event_type", "'trace'"),
        (
            orjson.dumps(stored("trace", trace_body(1)) | {"received_at": "2026-01-01T00:00:00"}),
            "trace",
            "invalid_envelope",
            "record.received_at: Expected `datetime` with a timezone",
        ),
    ],
)
def test_view_decode_failures_name_their_reason(
    value: bytes, expected_type: str, reason: str, detail_part: str
) -> None:
    views = METRICS_VIEWS | {"label": EXCLUSION_VIEWS["label"]}  # a label view reads a trace's trace_id
    out = RecordDecoder(views).decode(FakeRecord(value), expected_type)
    assert isinstance(out, Undecodable)
    assert (out.reason, out.value) == (reason, value)
    assert detail_part in out.detail


def test_dlq_headers_carry_reason_and_source() -> None:
    h = dict(
        dlq_headers(
            SourceRecord("p.traces", 3, 42, None, 0),
            [("traceparent", b"tp")],
            "undecodable",
            "value is not JSON",
            "metrics",
        )
    )
    assert h["ragmon-dlq-reason"] == b"undecodable"
    assert h["ragmon-dlq-source-topic"] == b"p.traces"
    assert h["ragmon-dlq-source-partition"] == b"3"
    assert h["ragmon-dlq-source-offset"] == b"42"
    assert h["ragmon-dlq-worker"] == b"metrics"
    assert h["traceparent"] == b"tp"


def test_dlq_limit_allows_a_trickle_and_halts_a_flood() -> None:
    limit = DlqLimit(max_ratio=0.5, window=100, min_messages=20)
    for _ in range(10):
        limit.check(good=9, dead=1)  # 10% dead letters: normal life
    with pytest.raises(DlqLimitExceeded, match="over the limit of 50%"):
        for _ in range(10):
            limit.check(good=0, dead=10)


def test_dlq_limit_needs_a_minimum_sample() -> None:
    limit = DlqLimit(max_ratio=0.5, window=100, min_messages=20)
    limit.check(good=0, dead=5)  # 100% but only 5 records: not evidence of a bad deploy
    with pytest.raises(DlqLimitExceeded):
        limit.check(good=0, dead=20)


def test_dlq_limit_does_not_count_a_refused_batch() -> None:
    limit = DlqLimit(max_ratio=0.5, window=10, min_messages=10)
    limit.check(good=6, dead=0)
    with pytest.raises(DlqLimitExceeded):
        limit.check(good=0, dead=10)
    limit.check(good=4, dead=0)  # the refused batch left no trace in the window


def test_closed_set_and_first_seen_cap() -> None:
    intents = ClosedSet(["billing", "account"])
    assert [intents("billing"), intents("weird"), intents(None)] == ["billing", "other", "none"]
    cap = FirstSeenCap(2)
    assert [cap("t", "production"), cap("t", "a"), cap("t", "b"), cap("t", "c"), cap("t", "a")] == [
        "production",
        "a",
        "b",
        "other",
        "a",
    ]
    assert cap("u", "c") == "c"  # caps are per tenant


def test_a_bad_worker_setting_fails_at_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RAGMON_WORKER_MAX_BATCH", "0")

    def never_built(_ctx: WorkerContext[NoConfig]) -> Processor:
        raise AssertionError("no processor is built with invalid settings")

    assert run_worker(WorkerSpec("probe", never_built, NoConfig)) == 2
    assert (
        "invalid settings: RAGMON_WORKER_MAX_BATCH: Input should be greater than or equal to 1" in caplog.text
    )
