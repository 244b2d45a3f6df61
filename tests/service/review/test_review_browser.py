"""End to end in a real browser: traces through the API, the review sampler as a process, scores on the
scores topic, a reviewer labelling three items with the keyboard in Chromium; labels reach Kafka and the
golden set, and scores stay hidden until each item is labelled."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from kafka import KafkaProducer

from service.contracts import reviewdb
from service.contracts.scores import FaithfulnessScoreEvent, ModelRef, score_record
from service.review.golden import golden_rows
from tests.service.api.api_events import event, trace_body
from tests.service.api.api_harness import KafkaReader, RunningApi
from tests.service.review.review_harness import ANN_KEY, INGEST_KEY, review_settings
from tests.support.workers import WorkerProcess, wait_ready, worker_env

CHROMIUM = "/usr/bin/chromium"
# Playwright's own browser download is not used: the set-up step installs Debian's chromium.
if os.environ.get("CI") and not Path(CHROMIUM).is_file():
    pytest.fail("chromium missing in CI: apt-get install chromium", pytrace=False)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="Debian chromium is not installed"),
]
SCORES = (0.1234, 0.4321, 0.9876)


def _score(tenant: str, body: dict[str, Any], score: float) -> FaithfulnessScoreEvent:
    now = datetime.now(UTC)
    return FaithfulnessScoreEvent(
        event_id=uuid.uuid4(),
        source_event_id=uuid.uuid4(),
        tenant=tenant,
        trace_id=body["trace_id"],
        request_id=body["request_id"],
        variant="production",
        trace_timestamp=now,
        scored_at=now,
        outcome="scored",
        mode="answer",
        score=score,
        threshold=0.5,
        below_threshold=score < 0.5,
        model=ModelRef(source="hhem-test", revision="cd" * 32),
        app_sample_rate=1.0,
        scorer_sample_rate=1.0,
    )


def _wait(predicate: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _queued_with_scores(url: str) -> bool:
    with reviewdb.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM review_item WHERE faithfulness_score IS NOT NULL").fetchone()
    return row is not None and row[0] == 3


def _send(api: RunningApi) -> list[dict[str, Any]]:
    bodies = [trace_body() for _ in range(3)]
    bodies[0]["query"]["text"] = "<script>window.pwned = 1</script> what is the refund window?"
    response = api.post([event("trace", b) for b in bodies], key=INGEST_KEY)
    assert response.status_code == 202, response.text
    producer = KafkaProducer(bootstrap_servers=api.settings.kafka_bootstrap_servers, acks="all")
    try:
        for body, score in zip(bodies, SCORES, strict=True):
            key, value, headers = score_record(_score("acme", body, score))
            producer.send(api.topics.scores, key=key, value=value, headers=headers)
        producer.flush(30)
    finally:
        producer.close()
    return bodies


def _label_three_with_the_keyboard(base_url: str) -> list[str]:
    from playwright.sync_api import sync_playwright

    visited: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page()
            page.goto(base_url + "/review")
            page.fill("input[name=key]", ANN_KEY)
            page.keyboard.press("Enter")
            page.wait_for_selector("#next-link")
            page.keyboard.press("n")
            for i in range(3):
                page.wait_for_selector("#label-form")
                visited.append(page.url)
                assert page.locator("#scores").count() == 0
                assert not any(f"{s:.3f}" in page.content() for s in SCORES)
                assert page.evaluate("window.pwned") is None
                page.keyboard.press("y" if i != 1 else "x")
                page.keyboard.press("a")
                page.keyboard.press("1")
                assert page.locator("input[name=gold_ids]").first.is_checked()
                seen = page.url
                page.keyboard.press("Enter")
                page.wait_for_url(lambda url: url != seen)  # noqa: B023 - called before the loop moves on
            page.wait_for_selector("#queue-empty")
            for url in visited:
                page.goto(url)
                assert page.locator("#scores").is_visible()
                assert page.inner_text("#faithfulness-score") in {f"{s:.3f}" for s in SCORES}
        finally:
            browser.close()
    return visited


def test_reviewer_labels_three_items_with_the_keyboard(
    kafka_bootstrap: str,
    redis_url: str,
    topic_prefix: str,
    review_db_url: str,
    tmp_path: Path,
    redis_client: object,
) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text("review:\n  blind_rate: 1.0\n  double_review_share: 0.0\n  refresh_s: 1\n")
    api = RunningApi(review_settings(kafka_bootstrap, redis_url, topic_prefix, review_db_url)).start()
    worker = WorkerProcess(
        "workers.review",
        worker_env(kafka_bootstrap, redis_url, topic_prefix, config, RAGMON_DATABASE_URL=review_db_url),
        tmp_path / "review-worker.log",
    )
    try:
        wait_ready(worker, 60)
        bodies = _send(api)
        _wait(lambda: _queued_with_scores(review_db_url), 60, "three queued items with their scores")
        visited = _label_three_with_the_keyboard(api.url)
        assert len(set(visited)) == 3
        reader = KafkaReader(kafka_bootstrap)
        labels = _wait(
            lambda: (
                [orjson.loads(r.value) for r in reader.records(api.topics.labels)] or None
                if len(reader.records(api.topics.labels)) >= 3
                else None
            ),
            20,
            "three label events",
        )
        assert sorted(v["body"]["trace_id"] for v in labels) == sorted(b["trace_id"] for b in bodies)
        assert {v["body"]["reviewer"] for v in labels} == {"ann"} and [
            v["body"]["faithful"] for v in labels
        ].count(False) == 1
        with reviewdb.connect(review_db_url, autocommit=False) as conn:
            golden = list(golden_rows(conn, "acme"))
        assert len(golden) == 3 and all(g["versions"]["scorer"].startswith("hhem-test@") for g in golden)
        assert any(g["query"].startswith("<script>") for g in golden)  # stored as text, rendered escaped
        assert worker.total("ragmon_review_queued_total", tenant="acme", stratum="blind") == 3
    finally:
        worker.terminate()
        api.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)
