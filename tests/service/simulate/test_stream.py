"""The event stream: determinism, the wire contract, variants, feedback and label timing."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from service.contracts import BODY_MODELS, EventEnvelope, IngestBatch
from service.contracts import vocabulary as L
from service.simulate import run_generate

EVERYTHING = {
    "candidate": {"name": "rerank-v2", "share": 0.3, "model": "gpt-4o-mini"},
    "sampling": {
        "exclusion_sample": 0.5,
        "embedding": 0.5,
        "label": 0.2,
        "trace_lag": 0.2,
        "label_delay_s": [5, 20],
        "trace_lag_s": [3, 10],
    },
    "feedback": {"late_share": 0.2, "late_delay_s": [20, 40]},
    "incidents": [
        {"kind": "filter_regression", "start_s": 5, "end_s": 10, "release": "v2"},
        {"kind": "slow_stage", "start_s": 10, "end_s": 15, "factor": 8},
        {"kind": "unfaithful_answers", "start_s": 15, "end_s": 20},
        {"kind": "topic_shift", "start_s": 20, "end_s": 25},
        {"kind": "cost_spike", "start_s": 25, "end_s": 30, "factor": 100},
        {"kind": "entitlement_leak", "start_s": 0, "end_s": 30, "share": 0.1, "tenants": ["acme"]},
        {"kind": "embedding_model_change", "start_s": 20, "end_s": 30, "dim": 384},
    ],
}


@pytest.fixture(scope="module")
def stream(small, events_of):
    return events_of(small(**EVERYTHING))


def _jsonl(scenario, start) -> bytes:
    out = io.BytesIO()
    run_generate(scenario, out, start)
    return out.getvalue()


def test_same_seed_gives_byte_identical_stream(small, start):
    first = _jsonl(small(**EVERYTHING), start)
    assert first == _jsonl(small(**EVERYTHING), start)
    assert first.count(b"\n") > 1000


def test_different_seed_or_start_gives_a_different_stream(small, start):
    base = _jsonl(small(**EVERYTHING), start)
    assert _jsonl(small(**EVERYTHING, seed=6), start) != base
    shifted = _jsonl(small(**EVERYTHING), start + timedelta(hours=1))
    assert shifted != base
    # A later start moves timestamps (and document dates) but keeps the ids: they come from the seed.
    assert shifted.split(b'"timestamp"')[0] == base.split(b'"timestamp"')[0]


def test_every_event_validates_against_the_contract(stream, start):
    events = stream
    assert set(Counter(e.type for e in events)) == {"trace", "feedback", "release", "label"}
    for ev in events:
        envelope = EventEnvelope.model_validate(ev.envelope(start))
        assert envelope.timestamp.utcoffset() is not None
        BODY_MODELS[ev.type].model_validate(ev.body)
    envelopes = [ev.envelope(start) for ev in events]
    for lo in range(0, len(envelopes), L.MAX_EVENTS_PER_BATCH):
        IngestBatch.model_validate({"events": envelopes[lo : lo + L.MAX_EVENTS_PER_BATCH]})


def test_event_ids_are_unique_uuid4(stream):
    ids = [ev.id for ev in stream]
    assert len(set(ids)) == len(ids)
    assert {uuid.UUID(i).version for i in ids} == {4}


def test_trace_timings_are_consistent_with_their_stages(stream):
    for ev in stream:
        if ev.type != "trace":
            continue
        t = ev.body["timings"]
        stages = t["retrieval"] + t["rerank"] + t["generation"] + t["postprocess"]
        assert stages <= t["total"] <= stages + 5
        assert t["retrieval"] + t["rerank"] < t["ttft"] < t["total"]


def test_candidate_variant_shares_request_with_production(stream):
    traces = [e.body for e in stream if e.type == "trace"]
    production = {b["request_id"]: b for b in traces if b["variant"] == "production"}
    candidates = [b for b in traces if b["variant"] == "rerank-v2"]
    assert 0.2 < len(candidates) / len(production) < 0.4
    for cand in candidates:
        prod = production[cand["request_id"]]
        assert cand["trace_id"] != prod["trace_id"]
        assert (cand["query"], cand["session_id"], cand["intent"]) == (
            prod["query"],
            prod["session_id"],
            prod["intent"],
        )
        assert cand["release"] == "cand-1" and cand["usage"]["model"] == "gpt-4o-mini"


def test_feedback_comes_before_and_after_its_trace(stream):
    events = stream
    sent_at = {e.body["trace_id"]: i for i, e in enumerate(events) if e.type == "trace"}
    trace_time = {e.body["trace_id"]: e.at_s for e in events if e.type == "trace"}
    variant = {e.body["trace_id"]: e.body["variant"] for e in events if e.type == "trace"}
    before = after = 0
    for i, ev in enumerate(events):
        if ev.type not in ("feedback", "label"):
            continue
        trace_id = ev.body["trace_id"]
        assert variant[trace_id] == "production"  # shadow answers are never shown to users
        assert ev.at_s > trace_time[trace_id]  # stamped after the answer, whenever it is sent
        if ev.type == "feedback":
            before += i < sent_at[trace_id]
            after += i > sent_at[trace_id]
            assert ev.facts.before_trace == (i < sent_at[trace_id])
    assert before >= 10 and after > before


def test_late_feedback_and_labels_arrive_minutes_later(stream):
    events = stream
    trace_time = {e.body["trace_id"]: e.at_s for e in events if e.type == "trace"}
    late = [e for e in events if e.type == "feedback" and e.facts.late]
    assert late and all(e.at_s - trace_time[e.body["trace_id"]] >= 20 for e in late)
    labels = [e for e in events if e.type == "label"]
    assert labels and all(5 <= e.at_s - trace_time[e.body["trace_id"]] <= 20 for e in labels)
    assert all(e.body["gold_ids"] is not None for e in labels)


def test_emission_order_is_by_send_time(stream):
    emits = [e.emit_s for e in stream]
    assert emits == sorted(emits)


@pytest.mark.parametrize("kind", ["thumbs", "regenerate", "citation_click", "copy", "dwell", "followup"])
def test_each_feedback_kind_occurs(stream, kind):
    kinds = Counter(e.body["kind"] for e in stream if e.type == "feedback")
    assert kinds[kind] > 0


def test_release_markers_at_start_and_at_an_incident_with_a_release(stream):
    events = stream
    releases = [
        (e.at_s, e.tenant, e.body["release"], e.body["variant"]) for e in events if e.type == "release"
    ]
    assert releases[:4] == [
        (0.0, "acme", "v1", "production"),
        (0.0, "acme", "cand-1", "rerank-v2"),
        (0.0, "globex", "v1", "production"),
        (0.0, "globex", "cand-1", "rerank-v2"),
    ]
    assert sorted(releases[4:]) == [(5.0, "acme", "v2", "production"), (5.0, "globex", "v2", "production")]
    served = {
        (e.body["release"], e.at_s >= 5)
        for e in events
        if e.type == "trace" and e.body["variant"] == "production"
    }
    assert served == {("v1", False), ("v2", True)}


@pytest.mark.slow
def test_stream_does_not_depend_on_the_process_hash_seed(tmp_path):
    # Set iteration order changes with PYTHONHASHSEED; a stream that leaked it would differ between runs.
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"run{hash_seed}.jsonl"
        argv = [
            sys.executable,
            "-m",
            "service.simulate.cli",
            "generate",
            "clean",
            "--duration",
            "5",
            "--start",
            "2026-03-01T00:00:00Z",
            "--out",
            str(out),
        ]
        subprocess.run(
            argv,
            check=True,
            cwd=Path(__file__).parents[3],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            timeout=60,
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and outputs[0]
