"""The processor against a real Redis: sources, late labels once, leaks, rejections, retries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.contracts import Predicate
from tests.workers.exclusion.exclusion_events import candidate, label, make_event, trace, trace_body
from workers.exclusion.processor import ExclusionProcessor, RecentKeys
from workers.exclusion.state import evaluated_key, labelled_key, sample_key

MakeProcessor = Callable[..., ExclusionProcessor]
# g1 is the best candidate but in en-GB; the app's filter forces en-US.
BROKEN = [candidate("g1", "en-GB", 0.95), candidate("x", "en-US", 0.3)]
PARTIAL = [candidate("g1", "en-GB", 0.95), candidate("g2", "en-US", 0.9), candidate("x", "en-US", 0.3)]


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(f"ragmon_exclusion_{name}", labels)


def query_counts(registry: CollectorRegistry, source: str, tenant: str = "acme") -> tuple[Any, ...]:
    labels = {"tenant": tenant, "variant": "production", "source": source, "intent": "billing"}
    names = (
        "samples_total",
        "eligible_queries_total",
        "falsely_excluded_queries_total",
        "eligible_gold_documents_total",
        "excluded_gold_documents_total",
    )
    return tuple(metric(registry, n, **labels) for n in names)


def attributed(
    registry: CollectorRegistry, source: str, field: str = "locale", op: str = "eq"
) -> float | None:
    return metric(
        registry,
        "predicate_exclusions_total",
        tenant="acme",
        variant="production",
        source=source,
        field=field,
        op=op,
    )


def test_proxy_evaluation_counts_query_and_documents(
    make_processor: MakeProcessor, registry: CollectorRegistry, redis_client: redis.Redis
) -> None:
    proc = make_processor()
    assert proc.process([trace("t1", candidates=BROKEN), trace("t2", candidates=PARTIAL)]) == []
    # t1: its one proxy gold (g1) removed; t2: g1 removed, g2 survives.
    assert query_counts(registry, "proxy") == (2, 2, 1, 3, 2)
    assert attributed(registry, "proxy") == 2
    assert query_counts(registry, "labels") == (None,) * 5
    stored = redis_client.get(sample_key("acme", "t1"))
    assert stored is not None and b"en-GB" not in stored and b"acme" not in stored  # no metadata values kept
    assert 0 < redis_client.ttl(sample_key("acme", "t1")) <= 86_400


def test_numerators_exist_at_zero_and_no_eligible_gold_stays_absent(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    healthy = [candidate("g", "en-US", 0.95)]
    unscored = [candidate("g", "en-US", 0.1)]  # nothing clears the proxy threshold: no gold
    make_processor().process(
        [trace("ok", candidates=healthy), trace("none", candidates=unscored, intent="other-x")]
    )
    assert query_counts(registry, "proxy") == (1, 1, 0, 1, 0)  # a healthy filter reads 0%, not no data
    other = {"tenant": "acme", "variant": "production", "source": "proxy", "intent": "other"}
    assert metric(registry, "samples_total", **other) == 1
    assert metric(registry, "eligible_queries_total", **other) is None  # no evidence: no rate at all
    assert metric(registry, "falsely_excluded_queries_total", **other) is None


def test_gold_sent_with_the_sample_is_source_labels(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    proc = make_processor()
    proc.process([trace("t1", candidates=PARTIAL, gold_ids=["g2", "nope"])])
    assert query_counts(registry, "labels") == (1, 1, 0, 1, 0)
    assert query_counts(registry, "proxy") == (None,) * 5
    assert (
        metric(
            registry,
            "ineligible_gold_documents_total",
            tenant="acme",
            source="labels",
            reason="not_in_sample",
        )
        == 1
    )
    proc.process([label("t1", ["g1"])])  # the trace already had its labelled evaluation
    assert metric(registry, "labels_total", tenant="acme", outcome="duplicate") == 1
    assert query_counts(registry, "labels") == (1, 1, 0, 1, 0)


def test_late_label_reevaluates_once_with_source_labels(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    proc = make_processor()
    proc.process([trace("t1", candidates=PARTIAL)])
    late = label("t1", ["g1"])  # the reviewer says g1 was the answer: the filter removed it
    proc.process([late])
    assert query_counts(registry, "labels") == (1, 1, 1, 1, 1)
    assert attributed(registry, "labels") == 1
    assert query_counts(registry, "proxy") == (1, 1, 0, 2, 1)  # the proxy evaluation is not undone
    proc.process([late])  # redelivered
    proc.process([label("t1", ["g2"])])  # a second review
    assert query_counts(registry, "labels") == (1, 1, 1, 1, 1)
    assert metric(registry, "labels_total", tenant="acme", outcome="applied") == 1
    assert metric(registry, "labels_total", tenant="acme", outcome="duplicate") == 1


def test_label_before_its_trace_waits_for_it(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    proc = make_processor()
    proc.process([label("t1", ["g1"])])
    assert metric(registry, "labels_total", tenant="acme", outcome="waiting") == 1
    proc.process([trace("t1", candidates=PARTIAL)])
    assert query_counts(registry, "labels") == (1, 1, 1, 1, 1)
    # The proxy evaluation does not depend on which of the two was consumed first.
    assert query_counts(registry, "proxy") == (1, 1, 0, 2, 1)


def test_trace_and_label_in_one_batch(make_processor: MakeProcessor, registry: CollectorRegistry) -> None:
    make_processor().process([label("t1", ["g1"]), trace("t1", candidates=PARTIAL)])
    assert query_counts(registry, "labels") == (1, 1, 1, 1, 1)
    assert metric(registry, "labels_total", tenant="acme", outcome="applied") == 1


def test_label_without_gold_ids_is_not_for_this_worker(
    make_processor: MakeProcessor, registry: CollectorRegistry, redis_client: redis.Redis
) -> None:
    make_processor().process([label("t1", None)])
    assert metric(registry, "labels_total", tenant="acme", outcome="no_gold_ids") == 1
    assert redis_client.dbsize() == 0


def test_leaks_are_counted_by_tenant_and_kind(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    leaked_doc = {"id": "c9", "text": "globex pricing", "metadata": {"tenant": "globex"}}
    unlabelled_doc = {"id": "c8", "text": "no metadata"}
    candidates = [*BROKEN, candidate("z", "en-US", 0.99, tenant="globex")]
    proc = make_processor()
    proc.process(
        [
            trace("t1", candidates=candidates, documents=[leaked_doc, unlabelled_doc]),
            trace("t2", documents=[leaked_doc]),  # no exclusion sample: the context is still checked
            trace(
                "t3", tenant="initech", documents=[{"id": "c1", "text": "", "metadata": {"tenant": "acme"}}]
            ),
        ]
    )
    assert metric(registry, "leaks_total", tenant="acme", kind="context") == 2
    assert metric(registry, "leaks_total", tenant="acme", kind="candidate") == 1
    assert metric(registry, "unverified_documents_total", tenant="acme", kind="context") == 1
    # A tenant without leaks has its series at 0, so an alert on increase() sees the first one.
    assert metric(registry, "leaks_total", tenant="initech", kind="context") == 0
    assert metric(registry, "leaks_total", tenant="initech", kind="candidate") == 0
    # The leaked candidate outscored g1 but is no proxy gold: only entitled candidates are.
    assert query_counts(registry, "proxy") == (1, 1, 1, 1, 1)
    proc.process([trace("t1", candidates=candidates, documents=[leaked_doc, unlabelled_doc])])  # resent trace
    assert metric(registry, "leaks_total", tenant="acme", kind="context") == 2


def test_invalid_predicate_is_rejected_with_field_and_rule(
    make_processor: MakeProcessor, registry: CollectorRegistry, redis_client: redis.Redis
) -> None:
    bad = trace("bad", candidates=BROKEN)
    bad.body.retrieval.filters.relevance.append(
        Predicate.model_construct(field="locale", op="like", value="en%")
    )
    good = trace("good", candidates=BROKEN)
    rejections = make_processor().process([bad, good])
    assert [(r.event.id, r.reason) for r in rejections] == [(bad.id, "invalid_predicate")]
    assert "body.retrieval.filters.relevance[1].op" in rejections[0].detail
    assert "unknown operator 'like'" in rejections[0].detail
    assert redis_client.exists(sample_key("acme", "bad")) == 0  # nothing of it was kept
    assert query_counts(registry, "proxy")[0] == 1


def test_other_event_types_are_rejected(make_processor: MakeProcessor) -> None:
    # Bodies arrive validated by the runtime's decode; the processor only refuses a type it does not read.
    feedback = make_event("feedback", {"trace_id": "t1", "kind": "copy"})
    rejections = make_processor().process([trace("t1", candidates=BROKEN), feedback])
    assert [(r.event.id, r.reason) for r in rejections] == [(feedback.id, "unexpected_event_type")]
    assert "got 'feedback'" in rejections[0].detail


def test_field_labels_are_capped(make_processor: MakeProcessor, registry: CollectorRegistry) -> None:
    # config: "locale" always kept, one further field per tenant, the rest "other".
    relevance = [{"field": f, "op": "exists"} for f in ("locale", "product", "region", "team")]
    make_processor().process([trace("t1", candidates=BROKEN, gold_ids=["g1"], relevance=relevance)])
    fields = {
        sample.labels["field"]
        for family in registry.collect()
        for sample in family.samples
        if sample.name == "ragmon_exclusion_predicate_exclusions_total"
    }
    assert fields == {"product", "other"}  # g1 has a locale; it lacks product, region and team
    assert attributed(registry, "labels", field="other", op="exists") == 2


class LosesReplies:
    """A real Redis client whose next pipeline runs on the server but whose reply is lost."""

    def __init__(self, client: redis.Redis, failing_call: int) -> None:
        self._client, self._calls, self._failing = client, 0, failing_call

    def pipeline(self, transaction: bool = False) -> Any:
        pipe = self._client.pipeline(transaction=transaction)
        self._calls += 1
        if self._calls == self._failing:
            run = pipe.execute

            def execute_then_drop() -> Any:
                run()
                raise redis.ConnectionError("connection reset while reading the reply")

            pipe.execute = execute_then_drop  # type: ignore[method-assign,assignment]
        return pipe


@pytest.mark.parametrize("failing_call", [1, 2])
def test_retry_after_a_lost_reply_counts_once(
    make_processor: MakeProcessor, registry: CollectorRegistry, redis_client: redis.Redis, failing_call: int
) -> None:
    proc = make_processor(LosesReplies(redis_client, failing_call))
    batch = [trace("t1", candidates=PARTIAL), label("t0", ["g1"]), trace("t0", candidates=BROKEN)]
    with pytest.raises(redis.ConnectionError):
        proc.process(batch)
    assert query_counts(registry, "proxy") == (None,) * 5  # nothing counted before every reply arrived
    assert proc.process(batch) == []  # the runtime's retry
    assert proc.process(batch) == []  # and a redelivery of a batch that succeeded
    assert query_counts(registry, "proxy") == (2, 2, 1, 3, 2)
    assert query_counts(registry, "labels") == (1, 1, 1, 1, 1)
    assert redis_client.get(evaluated_key("acme", "t1")) == batch[0].id.encode()


def test_two_worker_processes_share_the_once_guards(
    make_processor: MakeProcessor, registry: CollectorRegistry, redis_client: redis.Redis
) -> None:
    other_registry = CollectorRegistry()
    first, second = make_processor(), make_processor(own_registry=other_registry)
    first.process([trace("t1", candidates=PARTIAL)])
    second.process([trace("t1", candidates=PARTIAL)])  # the same trace, resent with a new event id
    applied, again = label("t1", ["g1"]), label("t1", ["g1"])
    second.process([applied])
    first.process([again])
    both = [query_counts(r, s) for r in (registry, other_registry) for s in ("proxy", "labels")]
    first_proxy, first_labels, second_proxy, second_labels = both
    assert first_proxy == (1, 1, 0, 2, 1) and second_proxy == (None,) * 5
    assert second_labels == (1, 1, 1, 1, 1) and first_labels == (None,) * 5
    assert redis_client.get(labelled_key("acme", "t1")) == applied.id.encode()
    assert metric(registry, "labels_total", tenant="acme", outcome="duplicate") == 1


def test_state_of_another_layout_is_read_as_absent(
    make_processor: MakeProcessor, registry: CollectorRegistry, redis_client: redis.Redis
) -> None:
    # After a deploy that changed the stored layout, an old entry waits like a missing trace.
    redis_client.set(sample_key("acme", "t1"), b'{"v": 0, "failures": {}}')
    make_processor().process([label("t1", ["g1"])])
    assert metric(registry, "labels_total", tenant="acme", outcome="waiting") == 1
    assert query_counts(registry, "labels") == (None,) * 5


def test_recent_keys_forget_the_oldest_first() -> None:
    keys = RecentKeys(2)
    for key in ("a", "b", "c"):
        keys.add(key)
    assert "a" not in keys and "b" in keys and "c" in keys


def test_an_errored_trace_is_no_exclusion_evidence_but_its_context_is_checked(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    """A failed request (the trace's error) is no evidence about the filters: its sample is not evaluated
    (never a false exclusion nor an eligible query); a leaked document in its context still counts."""
    leaked_doc = {"id": "c9", "text": "globex pricing", "metadata": {"tenant": "globex"}}
    body = trace_body("t1", candidates=BROKEN, documents=[leaked_doc])
    body["error"] = {"type": "provider_error"}
    make_processor().process([make_event("trace", body)])
    assert query_counts(registry, "proxy") == (None,) * 5
    assert metric(registry, "leaks_total", tenant="acme", kind="context") == 1
