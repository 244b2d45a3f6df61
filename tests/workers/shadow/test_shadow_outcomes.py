"""A failed request (the trace's `error`) contributes no outcome to a shadow pair: neither its latency nor a
refusal, so one variant's provider outage is never read as that variant's quality (docs/errors.md)."""

from __future__ import annotations

import math

import msgspec
import orjson

from tests.workers.shadow.shadow_events import trace_body
from workers.shadow.config import ShadowConfig
from workers.shadow.outcomes import pair_row, trace_outcome
from workers.shadow.views import ShadowTrace


def _outcome(body: dict) -> bytes:  # type: ignore[type-arg]
    return orjson.dumps(trace_outcome(msgspec.convert(body, ShadowTrace), ShadowConfig()))


def test_a_failed_twin_has_no_outcome_to_compare() -> None:
    failed = {**trace_body("r1", variant="cand"), "error": {"type": "timeout"}}
    fields = {"trace:production": _outcome(trace_body("r1")), "trace:cand": _outcome(failed)}
    prod, cand, labels = pair_row(fields, "cand")
    assert prod["refusal"] == 0.0 and prod["latency_total_seconds"] == 0.8
    assert math.isnan(cand["refusal"]) and math.isnan(cand["cost_usd"]) and math.isnan(cand["tokens_total"])
    assert not any(name.startswith("latency_") for name in cand)
    assert labels["intent"] == "billing"  # the slices are the production trace's


def test_an_answered_twin_keeps_its_outcomes() -> None:
    fields = {
        "trace:production": _outcome(trace_body("r2")),
        "trace:cand": _outcome(trace_body("r2", "cand")),
    }
    _, cand, _ = pair_row(fields, "cand")
    assert cand["refusal"] == 0.0 and cand["cost_usd"] == 0.002 and cand["latency_total_seconds"] == 0.8
