"""Each incident changes what it should, seen on the wire and in the manifest's truth.

Where possible the wire data is re-evaluated here independently (predicates
on candidate metadata, answer sentences against the context), so the
manifest's truth is checked against what a worker could compute.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter

import pytest

from service.contracts import parse_instant
from service.simulate import Ledger
from service.simulate.manifest import build_manifest
from service.simulate.topics import ANSWER_LEADS, PRODUCTS

CLEAN_UNTIL, INCIDENT_FROM = 20.0, 20.0


def run(small, events_of, start, incident, **fields):
    scenario = small(
        duration_s=40,
        incidents=[{"start_s": INCIDENT_FROM, "end_s": 40, "name": "incident"} | incident],
        **fields,
    )
    events = events_of(scenario)
    ledger = Ledger()
    for ev in events:
        ledger.handed_out(ev)
    return events, build_manifest(scenario, ledger, start, "generate", {})


def production(events, during: bool):
    return [
        e.body
        for e in events
        if e.type == "trace" and e.body["variant"] == "production" and (e.at_s >= INCIDENT_FROM) == during
    ]


def holds(pred, metadata) -> bool:
    """The test's own predicate evaluation, for the operators the simulator emits."""
    have, want = metadata.get(pred["field"]), pred["value"]
    if pred["op"] == "eq":
        return have == want
    if pred["op"] == "in":
        return have in want
    if pred["op"] == "gte":
        return parse_instant(have) >= parse_instant(want)
    raise AssertionError(f"unexpected op {pred['op']}")


def recompute_exclusion(traces):
    eligible = excluded = 0
    fields: Counter[str] = Counter()
    for body in traces:
        sample = body["retrieval"]["exclusion_sample"]
        by_id = {c["id"]: c for c in sample["candidates"]}
        for cand in sample["candidates"]:  # candidates are retrieved under the entitlement filters
            assert all(holds(p, cand["metadata"]) for p in body["retrieval"]["filters"]["entitlement"])
        gold = [by_id[g] for g in sample["gold_ids"] if g in by_id]
        if not gold:
            continue
        eligible += 1
        relevance = body["retrieval"]["filters"]["relevance"]
        if not any(all(holds(p, g["metadata"]) for p in relevance) for g in gold):
            excluded += 1
        for g in gold:
            fields.update(p["field"] for p in relevance if not holds(p, g["metadata"]))
    return eligible, excluded, fields


@pytest.mark.parametrize("field", ["locale", "product", "updated_at"])
def test_filter_regression_excludes_gold_through_the_named_predicate(small, events_of, start, field):
    events, manifest = run(
        small,
        events_of,
        start,
        {"kind": "filter_regression", "field": field},
        candidate={"share": 0.3},
        sampling={"exclusion_sample": 1.0, "gold_ids_in_sample": 1.0},
    )
    truth = manifest["exclusion"]["by_phase"]
    clean, broken = truth["clean"]["production"]["sampled"], truth["incident"]["production"]["sampled"]
    assert clean["eligible_queries"] > 100 and clean["rate"] < 0.15
    assert broken["eligible_queries"] > 100 and broken["rate"] > 0.9
    assert max(broken["excluded_by_field"], key=broken["excluded_by_field"].get) == field
    assert (
        truth["incident"]["candidate"]["sampled"]["rate"] < 0.15
    )  # the regression shipped in production only
    for during, phase in ((False, clean), (True, broken)):
        eligible, excluded, fields = recompute_exclusion(production(events, during))
        assert (eligible, excluded) == (phase["eligible_queries"], phase["excluded_queries"])
        assert dict(fields) == phase["excluded_by_field"]


def test_slow_stage_multiplies_only_its_stage(small, events_of, start):
    events, manifest = run(small, events_of, start, {"kind": "slow_stage", "stage": "rerank", "factor": 10})
    for stage, expected in (("rerank", 10.0), ("retrieval", 1.0), ("generation", 1.0)):
        before = statistics.median(b["timings"][stage] for b in production(events, False))
        after = statistics.median(b["timings"][stage] for b in production(events, True))
        assert expected * 0.75 < after / before < expected * 1.3, stage
    latency = manifest["latency"]["by_phase"]
    assert (
        latency["incident"]["production"]["rerank"]["p95"]
        > 5 * latency["clean"]["production"]["rerank"]["p95"]
    )


def uses_context(body) -> bool:
    context = " ".join(d["text"] for d in body["retrieval"]["documents"])
    text = body["answer"]["text"]
    for lead in sorted(filter(None, ANSWER_LEADS), key=len, reverse=True):
        text = text.removeprefix(lead)
    return all(s in context for s in re.split(r"(?<=\.)\s+", text) if s)


def test_unfaithful_answers_stop_using_the_context(small, events_of, start):
    events, manifest = run(small, events_of, start, {"kind": "unfaithful_answers", "share": 1.0})
    answered = {
        during: [b for b in production(events, during) if not b["answer"]["refused"]]
        for during in (False, True)
    }
    assert all(uses_context(b) for b in answered[False])
    assert not any(uses_context(b) for b in answered[True])
    quality = manifest["quality"]["by_phase"]
    assert quality["clean"]["production"]["unfaithful"] == 0
    assert quality["incident"]["production"]["unfaithful"] == len(answered[True])


def test_unfaithful_answers_on_one_intent_only_without_figures(small, events_of, start):
    """The masked regression (docs/intents.md): one intent's answers stop using their context, the others
    do not, and with `figures: false` the invented claims carry no figure a deterministic check could see."""
    incident = {"kind": "unfaithful_answers", "share": 1.0, "intent": "troubleshooting", "figures": False}
    events, manifest = run(small, events_of, start, incident, rate=60)
    answered = [b for b in production(events, True) if not b["answer"]["refused"]]
    hit = [b for b in answered if b["intent"] == "troubleshooting"]
    rest = [b for b in answered if b["intent"] != "troubleshooting"]
    assert len(hit) >= 20 and len(rest) >= 60
    assert not any(uses_context(b) for b in hit)
    assert all(uses_context(b) for b in rest)
    assert not any(re.search(r"[0-9]", b["answer"]["text"]) for b in hit)
    assert manifest["quality"]["by_phase"]["incident"]["production"]["unfaithful"] == len(hit)


def test_topic_shift_draws_queries_from_the_off_topic_pool(small, events_of, start):
    events, _ = run(small, events_of, start, {"kind": "topic_shift", "share": 0.5})
    assert not any(b["intent"] == "other" for b in production(events, False))
    shifted = [b for b in production(events, True) if b["intent"] == "other"]
    assert 0.4 < len(shifted) / len(production(events, True)) < 0.6
    assert not any(p in b["query"]["text"] for b in shifted for p in PRODUCTS)


def test_cost_spike_multiplies_tokens_and_reported_cost(small, events_of, start):
    events, manifest = run(small, events_of, start, {"kind": "cost_spike", "factor": 5})
    before, after = production(events, False), production(events, True)
    ratio = statistics.mean(b["usage"]["tokens"]["prompt"] for b in after) / statistics.mean(
        b["usage"]["tokens"]["prompt"] for b in before
    )
    assert 4.0 < ratio < 6.0
    assert {b["usage"]["model"] for b in before + after if "cost_usd" not in b["usage"]} == {
        "llama-3.1-70b-instruct"
    }
    usage = manifest["traces"]["usage"]
    traces = [e.body for e in events if e.type == "trace"]
    assert usage["tokens"]["prompt"] == sum(b["usage"]["tokens"]["prompt"] for b in traces)
    assert usage["cost_usd_reported"] == pytest.approx(sum(b["usage"].get("cost_usd", 0) for b in traces))


def test_entitlement_leak_puts_a_forbidden_document_in_context(small, events_of, start):
    events, manifest = run(small, events_of, start, {"kind": "entitlement_leak", "share": 0.3})

    def leaks(bodies):
        return sum(
            any(
                not all(holds(p, d["metadata"]) for p in b["retrieval"]["filters"]["entitlement"])
                for d in b["retrieval"]["documents"]
            )
            for b in bodies
        )

    assert leaks(production(events, False)) == 0
    leaked = leaks(production(events, True))
    assert 0.2 < leaked / len(production(events, True)) < 0.4
    assert manifest["quality"]["by_phase"]["incident"]["production"]["leaks"] == leaked


def test_embedding_model_change_switches_name_and_dimension(small, events_of, start):
    events, manifest = run(
        small,
        events_of,
        start,
        {"kind": "embedding_model_change", "model": "embed-v9", "dim": 128},
        candidate={"share": 0.3},
    )
    for during, model, dim in ((False, "app-embed-v1", 64), (True, "embed-v9", 128)):
        traces = [e.body for e in events if e.type == "trace" and (e.at_s >= INCIDENT_FROM) == during]
        queries = [b["query"] for b in traces if "embedding" in b["query"]]
        assert queries and {(q["embedding_model"], len(q["embedding"])) for q in queries} == {(model, dim)}
    assert set(manifest["traces"]["embeddings_by_model"]) == {"app-embed-v1", "embed-v9"}


def test_manifest_counts_match_the_stream(small, events_of, start):
    events, manifest = run(small, events_of, start, {"kind": "slow_stage"}, candidate={"share": 0.3})
    traces = [e for e in events if e.type == "trace"]
    feedback = [e for e in events if e.type == "feedback"]
    assert manifest["basis"] == "generated"
    assert manifest["events"]["sent"] == dict(sorted(Counter(e.type for e in events).items()))
    assert manifest["traces"]["by_variant"] == dict(
        sorted(Counter(e.body["variant"] for e in traces).items())
    )
    assert manifest["traces"]["by_intent"] == dict(sorted(Counter(e.body["intent"] for e in traces).items()))
    assert manifest["feedback"]["by_kind"] == dict(sorted(Counter(e.body["kind"] for e in feedback).items()))
    phases = manifest["phases"]
    assert {t for ids in phases["incident"]["trace_ids"].values() for t in ids} == {
        e.body["trace_id"] for e in traces if e.at_s >= INCIDENT_FROM
    }
    assert manifest["incidents"][0]["windows"][0]["start"] == "2026-03-01T12:00:20.000+00:00"


def test_dissatisfaction_raises_thumbs_down_on_its_intent_only(small, events_of, start):
    events, _ = run(
        small,
        events_of,
        start,
        {"kind": "dissatisfaction", "intent": "billing", "share": 0.8},
        rate=60,
        feedback={"thumbs": 1.0},
    )
    intent_of = {e.body["trace_id"]: e.body.get("intent") for e in events if e.type == "trace"}
    at_of = {e.body["trace_id"]: e.at_s for e in events if e.type == "trace"}

    def down_rate(billing: bool, during: bool) -> float:
        votes = [
            e.body["value"]
            for e in events
            if e.type == "feedback"
            and e.body["kind"] == "thumbs"
            and (intent_of.get(e.body["trace_id"]) == "billing") == billing
            and (at_of.get(e.body["trace_id"], 0.0) >= INCIDENT_FROM) == during
        ]
        assert len(votes) >= 30
        return sum(v is False for v in votes) / len(votes)

    assert down_rate(True, True) > down_rate(True, False) + 0.3
    assert abs(down_rate(False, True) - down_rate(False, False)) < 0.15


def test_stale_corpus_raises_refusals_on_its_intent_only(small, events_of, start):
    events, manifest = run(
        small, events_of, start, {"kind": "stale_corpus", "intent": "billing", "share": 0.5}, rate=60
    )

    def refusal_rate(billing: bool, during: bool) -> float:
        traces = [t for t in production(events, during) if (t.get("intent") == "billing") == billing]
        assert len(traces) >= 30
        return sum(t["answer"]["refused"] for t in traces) / len(traces)

    assert refusal_rate(True, True) > refusal_rate(True, False) + 0.3
    assert abs(refusal_rate(False, True) - refusal_rate(False, False)) < 0.1
    assert manifest["incidents"][0]["kind"] == "stale_corpus"


def test_a_provider_outage_fails_requests_without_answers(small, events_of, start):
    events, manifest = run(small, events_of, start, {"kind": "provider_outage", "share": 0.5}, rate=60)
    during, before = production(events, True), production(events, False)
    failed = [t for t in during if "error" in t]
    assert not any("error" in t for t in before)
    assert 0.35 < len(failed) / len(during) < 0.65
    assert {t["error"]["type"] for t in failed} == {"provider_error", "timeout", "rate_limit"}
    assert all(t["answer"] == {"text": "", "refused": False, "citations": []} for t in failed)
    assert all(set(t["usage"]["tokens"]) == {"prompt"} and "cost_usd" not in t["usage"] for t in failed)
    assert all(t["error"]["stage"] == "generation" and t["error"]["retryable"] for t in failed)
    # no feedback on a failed request; the manifest counts it as an error, not a query
    failed_ids = {t["trace_id"] for t in failed}
    assert not any(e.type == "feedback" and e.body["trace_id"] in failed_ids for e in events)
    traces = manifest["traces"]
    assert sum(r["count"] for r in traces["errors"]) == len(failed)
    assert sum(r["count"] for r in traces["rows"]) + len(failed) == traces["total"]


def test_a_truncation_spike_cuts_answers_at_the_token_limit(small, events_of, start):
    events, manifest = run(small, events_of, start, {"kind": "truncation_spike", "share": 0.5}, rate=60)

    def cut(during: bool) -> float:
        answers = [t["answer"] for t in production(events, during) if not t["answer"]["refused"]]
        return sum(a["finish_reason"] == "length" for a in answers) / len(answers)

    assert cut(False) == 0.0 and 0.35 < cut(True) < 0.65
    assert all(t["answer"]["finish_reason"] in ("stop", "length") for t in production(events, True))
    rows = manifest["traces"]["finish_reasons"]
    assert {r["reason"] for r in rows} == {"stop", "length"}


def test_phantom_citations_cite_documents_never_retrieved(small, events_of, start):
    events, _ = run(small, events_of, start, {"kind": "phantom_citations", "share": 0.5}, rate=60)

    def phantom(during: bool) -> float:
        answered = [t for t in production(events, during) if not t["answer"]["refused"]]
        given = [{d["id"] for d in t["retrieval"]["documents"]} for t in answered]
        return sum(
            any(c not in g for c in t["answer"]["citations"]) for t, g in zip(answered, given, strict=True)
        ) / len(answered)

    assert phantom(False) == 0.0 and 0.35 < phantom(True) < 0.65


@pytest.mark.parametrize("follows", [True, False])
def test_an_embedding_migration_with_or_without_its_index(small, events_of, start, follows):
    incident = {"kind": "embedding_model_change", "model": "app-embed-v2", "index_follows": follows}
    events, _ = run(small, events_of, start, incident, rate=60)
    embedded = [t for t in production(events, True) if "embedding_model" in t["query"]]
    assert embedded and all(t["query"]["embedding_model"] == "app-embed-v2" for t in embedded)
    index = {t["retrieval"]["index_embedding_model"] for t in embedded}
    assert index == ({"app-embed-v2"} if follows else {"app-embed-v1"})
    before = [t for t in production(events, False) if "embedding_model" in t["query"]]
    assert all(t["retrieval"]["index_embedding_model"] == t["query"]["embedding_model"] for t in before)
