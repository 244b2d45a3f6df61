"""Who sees what: human labels need the `label` scope and carry the key's reviewer; /metrics is not on the
ingestion port; /docs loads nothing from a CDN.

Before: any ingest key sent label events naming any reviewer, /metrics listed every tenant to anyone
who reached the ingestion port, and /docs pulled Swagger UI from cdn.jsdelivr.net.
"""

from __future__ import annotations

import httpx
import orjson

from tests.service.api.api_events import GLOBEX_KEY, label_event, trace_event
from tests.service.api.api_harness import KafkaReader, RunningApi


def test_a_key_without_the_label_scope_gets_its_labels_refused_alone(
    api: RunningApi, kafka: KafkaReader
) -> None:
    label = label_event()
    response = api.post([trace_event(), label], key=GLOBEX_KEY)  # globex's key: ingest only
    assert response.status_code == 207, response.text
    body = response.json()
    assert body["accepted"] == 1 and body["rejected"] == 1
    refused = [r for r in body["results"] if r["status"] == "rejected"]
    assert refused[0]["id"] == label["id"] and "events[1].type" in refused[0]["error"]
    assert "'label' scope" in refused[0]["error"]
    assert kafka.records(api.topics.labels) == []
    assert api.metric("ragmon_api_events_rejected_total", {"type": "label", "reason": "label_scope"}) == 1
    only_labels = api.post([label_event()], key=GLOBEX_KEY)
    assert only_labels.status_code == 400 and "label_scope" in only_labels.text


def test_the_reviewer_of_a_label_is_the_keys(api: RunningApi, kafka: KafkaReader) -> None:
    forged = label_event(reviewer="chief-medical-officer")
    unnamed = label_event(trace_id="tr-2")
    del unnamed["body"]["reviewer"]
    assert api.post([forged, unnamed]).status_code == 202  # acme's key has the label scope (name acme-app)
    stored = [orjson.loads(r.value)["body"]["reviewer"] for r in kafka.records(api.topics.labels)]
    assert stored == ["acme-app", "acme-app"]


def test_metrics_are_on_their_own_port_and_docs_load_no_cdn(api: RunningApi) -> None:
    assert api.post([trace_event()], key=GLOBEX_KEY).status_code == 202
    assert api.http.get("/metrics").status_code == 404
    assert api.app.state.metrics_port != api.port
    scraped = httpx.get(api.metrics_url, timeout=10)
    assert scraped.status_code == 200 and 'tenant="globex"' in scraped.text
    for page in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert api.http.get(page).status_code == 404
    schema = api.http.get("/openapi.json")
    assert schema.status_code == 200 and "cdn" not in schema.text.lower()
