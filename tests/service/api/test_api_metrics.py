"""GET /metrics: requests by route template, events by type and reason, produce latency, load shed."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from service.local.embedded import free_port
from tests.service.api.api_events import feedback_event, now_iso, trace_event
from tests.service.api.api_harness import RunningApi


def scrape(api: RunningApi) -> tuple[str, list[Sample]]:
    assert api.http.get("/metrics").status_code == 404  # not on the ingestion port: it names every tenant
    r = httpx.get(api.metrics_url, timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return r.text, [s for f in text_string_to_metric_families(r.text) for s in f.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float | None:
    found = [s.value for s in samples if s.name == name and s.labels == labels]
    assert len(found) <= 1
    return found[0] if found else None


def test_requests_are_counted_by_route_template_never_by_raw_path(api: RunningApi) -> None:
    assert api.post([trace_event()]).status_code == 202
    assert api.post([trace_event()], key="rgm_wrong").status_code == 401
    assert api.post(content=b"{").status_code == 400
    assert api.http.get("/healthz").json() == {"status": "ok"}
    assert api.http.get("/readyz").status_code == 200
    assert api.http.get("/v1/events/3f2a9c1e-7d4b-4c55-9e0a-0c9d2b1f8e77").status_code in (404, 405)
    assert api.http.get("/wp-admin/secret-user-path").status_code == 404

    text, samples = scrape(api)
    for status in ("202", "401", "400"):
        assert (
            value(samples, "ragmon_api_requests_total", route="/v1/events", method="POST", status=status) == 1
        )
    assert value(samples, "ragmon_api_requests_total", route="/healthz", method="GET", status="200") == 1
    assert value(samples, "ragmon_api_requests_total", route="/readyz", method="GET", status="200") == 1
    unmatched = [
        s for s in samples if s.name == "ragmon_api_requests_total" and s.labels["route"] == "unmatched"
    ]
    assert (
        sum(s.value for s in unmatched) == 3
    )  # the two above and the 404 for /metrics on the ingestion port
    assert value(samples, "ragmon_api_request_duration_seconds_count", route="/v1/events", method="POST") == 3
    assert "3f2a9c1e" not in text and "secret-user-path" not in text and "wp-admin" not in text
    routes = {s.labels["route"] for s in samples if "route" in s.labels}
    assert routes <= {"/v1/events", "/healthz", "/readyz", "unmatched"}


def test_events_are_counted_accepted_by_type_and_rejected_by_type_and_reason(api: RunningApi) -> None:
    duplicate = trace_event()
    stale = feedback_event() | {"timestamp": now_iso(-30 * 24 * 3600)}
    batch = [
        duplicate,
        dict(duplicate),
        trace_event(sample_rate=7),
        feedback_event(),
        stale,
        {"type": "span", "id": "x", "timestamp": now_iso(), "body": {}},
    ]
    r = api.post(batch)
    assert r.status_code == 207 and r.json()["accepted"] == 2

    _, samples = scrape(api)
    assert value(samples, "ragmon_api_events_accepted_total", tenant="acme", type="trace") == 1
    assert value(samples, "ragmon_api_events_accepted_total", tenant="acme", type="feedback") == 1
    assert value(samples, "ragmon_api_events_rejected_total", type="trace", reason="duplicate_id") == 1
    assert value(samples, "ragmon_api_events_rejected_total", type="trace", reason="invalid") == 1
    assert (
        value(samples, "ragmon_api_events_rejected_total", type="feedback", reason="timestamp_out_of_window")
        == 1
    )
    assert value(samples, "ragmon_api_events_rejected_total", type="unknown", reason="unknown_type") == 1
    assert value(samples, "ragmon_api_inflight_events") == 0


def test_produce_latency_is_a_histogram_of_acknowledged_batches(api: RunningApi) -> None:
    for _ in range(3):
        assert api.post([trace_event(), feedback_event()]).status_code == 202
    assert api.post([trace_event(sample_rate=0)]).status_code == 400  # nothing to produce: not observed

    _, samples = scrape(api)
    assert value(samples, "ragmon_api_produce_duration_seconds_count") == 3
    total = value(samples, "ragmon_api_produce_duration_seconds_sum")
    assert total is not None and 0 < total < 15
    buckets = [s for s in samples if s.name == "ragmon_api_produce_duration_seconds_bucket"]
    assert [b.labels["le"] for b in buckets][-1] == "+Inf" and buckets[-1].value == 3
    assert [b.value for b in buckets] == sorted(b.value for b in buckets)
    assert value(samples, "ragmon_api_broker_up") == 1


def test_shed_requests_are_counted_by_reason(start_api: Callable[..., RunningApi]) -> None:
    api = start_api(kafka_bootstrap_servers=f"127.0.0.1:{free_port()}")
    for _ in range(2):
        assert api.post([trace_event()]).status_code == 503

    _, samples = scrape(api)
    assert value(samples, "ragmon_api_shed_total", reason="broker_down") == 2
    assert value(samples, "ragmon_api_requests_total", route="/v1/events", method="POST", status="503") == 2
    assert value(samples, "ragmon_api_events_accepted_total", tenant="acme", type="trace") is None
    assert value(samples, "ragmon_api_broker_up") == 0


def test_metric_names_and_labels_follow_the_conventions(api: RunningApi) -> None:
    ev = trace_event(query={"text": "a very particular question about refunds"})
    assert api.post([ev]).status_code == 202
    text, samples = scrape(api)
    names = {s.name for s in samples}
    assert all(n.startswith("ragmon_api_") for n in names)
    families = list(text_string_to_metric_families(text))
    for family in families:
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)
    # Labels come from closed sets: never a trace id, an event id or user text.
    for needle in (ev["id"], ev["body"]["trace_id"], ev["body"]["request_id"], "particular question"):
        assert needle not in text
