"""The review page over HTTP: scopes, CSRF, escaping, blind scores, labels into PostgreSQL and Kafka."""

from __future__ import annotations

import http.server
import threading
import time
import urllib.parse
from typing import Any

import httpx
import orjson
import pytest
import redis

from service.api.settings import ApiSettings
from service.contracts import reviewdb
from tests.service.api.api_events import event, trace_body
from tests.service.api.api_harness import KafkaReader, RunningApi
from tests.service.review.review_harness import (
    ANN_KEY,
    BOB_KEY,
    GLOBEX_REVIEW_KEY,
    INGEST_KEY,
    csrf_of,
    item_ids,
    review_settings,
    seed_queue,
    signed_in,
)


def _label_form(page: str, **fields: object) -> dict[str, object]:
    return {"csrf_token": csrf_of(page), "faithful": "yes", "answerable": "yes", "action": "save", **fields}


def test_scopes_ingest_and_review_keys_stay_apart(review_api: RunningApi) -> None:
    page = review_api.http.get("/review", headers={"Authorization": f"Bearer {INGEST_KEY}"})
    assert page.status_code == 403 and "lacks the &#39;review&#39; scope" in page.text
    ingest = review_api.post([event("trace", trace_body())], key=ANN_KEY)
    assert ingest.status_code == 403 and "ingest" in ingest.json()["error"]
    with httpx.Client(base_url=review_api.url) as browser:
        login = browser.get("/review")
        assert login.status_code == 200 and 'name="key"' in login.text
        refused = browser.post("/review/login", data={"key": INGEST_KEY, "csrf_token": csrf_of(login.text)})
        assert refused.status_code == 403
    assert review_api.http.get("/review", headers={"Authorization": f"Bearer {ANN_KEY}"}).status_code == 200


def test_every_form_post_needs_the_csrf_token(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    seed_queue(review_db_url, redis_client, [1])
    (item,) = item_ids(review_db_url)
    with httpx.Client(base_url=review_api.url) as browser:
        browser.get("/review")
        assert browser.post("/review/login", data={"key": ANN_KEY}).status_code == 403
        assert browser.post("/review/login", data={"key": ANN_KEY, "csrf_token": "0" * 64}).status_code == 403
    with signed_in(review_api.url, ANN_KEY) as ann:
        page = ann.get(f"/review/items/{item}").text
        assert ann.post(f"/review/items/{item}/label", data={"faithful": "yes"}).status_code == 403
        cross = ann.post(
            f"/review/items/{item}/label", data=_label_form(page), headers={"Origin": "https://evil.example"}
        )
        assert cross.status_code == 403
        assert ann.post("/review/logout", data={}).status_code == 403
        assert ann.get("/review/next").headers["location"] == f"/review/items/{item}"  # leased to ann
        assert ann.post(f"/review/items/{item}/label", data=_label_form(page)).status_code == 303
        assert ann.post("/review/logout", data={"csrf_token": csrf_of(page)}).status_code == 303


def test_scores_hidden_until_labelled_and_the_label_reaches_kafka(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    seed_queue(review_db_url, redis_client, [1], scores={1: 0.8771})
    with signed_in(review_api.url, ANN_KEY) as ann:
        first = ann.get("/review/next")
        assert first.status_code == 303
        item_url = first.headers["location"]
        page = ann.get(item_url)
        assert page.status_code == 200
        assert "0.877" not in page.text and 'id="scores"' not in page.text and "blind" not in page.text
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        saved = ann.post(
            item_url + "/label", data=_label_form(page.text, gold_ids=["d1"], note="mail a@b.com")
        )
        assert saved.status_code == 303 and saved.headers["location"] == item_url
        revealed = ann.get(item_url).text
        assert 'id="faithfulness-score">0.877<' in revealed and "blind" in revealed, revealed[-900:]
        assert ann.get("/review/next").status_code == 200  # the queue is empty for ann now
    with reviewdb.connect(review_db_url) as conn:
        row = conn.execute(
            "SELECT reviewer, faithful, gold_ids, note, policy_version FROM review_label"
        ).fetchone()
        assert row is not None and row[:3] == ("ann", True, ["d1"]) and "a@b.com" not in row[3]
        assert row[4].startswith("review-")
    labels = _wait_for_labels(review_api, 1)
    body = labels[0]["body"]
    assert labels[0]["tenant"] == "acme" and labels[0]["type"] == "label"
    assert (
        body
        == {
            "trace_id": "trace-1",
            "faithful": True,
            "answerable": True,
            "reviewer": "ann",
            "gold_ids": ["d1"],
            "note": body["note"],
        }
        and "a@b.com" not in body["note"]
    )


def _wait_for_labels(api: RunningApi, n: int, timeout_s: float = 15) -> list[dict[str, Any]]:
    reader = KafkaReader(api.settings.kafka_bootstrap_servers)
    deadline = time.monotonic() + timeout_s
    while True:
        values = [orjson.loads(r.value) for r in reader.records(api.topics.labels)]
        if len(values) >= n or time.monotonic() > deadline:
            return values
        time.sleep(0.3)


def test_another_tenants_item_is_not_found(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    seed_queue(review_db_url, redis_client, [1])
    (item,) = item_ids(review_db_url)
    with signed_in(review_api.url, GLOBEX_REVIEW_KEY) as gus:
        page = gus.get("/review")
        # answered exactly like an id that does not exist: the id tells nothing about other tenants
        assert gus.get(f"/review/items/{item}").status_code == 404
        posted = gus.post(f"/review/items/{item}/label", data=_label_form(page.text))
        assert posted.status_code == 404 and "another tenant" not in posted.text
        assert gus.get("/review/next").status_code == 200  # nothing of acme's is offered to globex
    with reviewdb.connect(review_db_url) as conn:
        assert conn.execute("SELECT count(*) FROM review_label").fetchone() == (0,)


def test_script_in_query_answer_and_document_is_rendered_as_text(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    evil = "<script>alert(1)</script>"
    seed_queue(
        review_db_url,
        redis_client,
        [1],
        overrides={
            1: {
                "query": {"text": f"q {evil}"},
                "answer": {"text": f"a {evil}", "citations": ["d1"]},
                "retrieval": {"documents": [{"id": "d1", "text": f"doc {evil}"}]},
            }
        },
    )
    (item,) = item_ids(review_db_url)
    page = httpx.get(f"{review_api.url}/review/items/{item}", headers={"Authorization": f"Bearer {ANN_KEY}"})
    assert page.status_code == 200
    assert "<script>alert" not in page.text
    assert page.text.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 3


def test_bad_labels_name_the_field(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    seed_queue(review_db_url, redis_client, [1])
    (item,) = item_ids(review_db_url)
    with signed_in(review_api.url, ANN_KEY) as ann:
        page = ann.get(f"/review/items/{item}").text
        missing = ann.post(f"/review/items/{item}/label", data=_label_form(page, faithful=""))
        assert missing.status_code == 422 and "faithful: choose yes or no" in missing.text
        unknown = ann.post(f"/review/items/{item}/label", data=_label_form(page, gold_ids=["nope"]))
        assert unknown.status_code == 422 and "gold_ids" in unknown.text


def test_double_review_goes_to_a_second_reviewer(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    seed_queue(review_db_url, redis_client, [1, 2], double_review_share=1.0)
    index = review_api.http.get("/review", headers={"Authorization": f"Bearer {ANN_KEY}"}).text
    assert 'id="waiting">2<' in index
    seen: dict[str, list[str]] = {}
    for name, key in (("ann", ANN_KEY), ("bob", BOB_KEY)):
        with signed_in(review_api.url, key) as client:
            while (r := client.get("/review/next")).status_code == 303:
                url = r.headers["location"]
                page = client.get(url).text
                client.post(url + "/label", data=_label_form(page))
                seen.setdefault(name, []).append(url)
    assert sorted(seen["ann"]) == sorted(seen["bob"]) and len(seen["ann"]) == 2
    index = review_api.http.get("/review", headers={"Authorization": f"Bearer {BOB_KEY}"}).text
    assert 'id="waiting">0<' in index and 'id="labelled-today">2<' in index
    with reviewdb.connect(review_db_url) as conn:
        assert conn.execute("SELECT count(*) FROM review_item WHERE reviews_done = 2").fetchone() == (2,)


def test_page_is_off_without_a_store_and_says_what_to_set(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str
) -> None:
    from tests.service.api.api_harness import api_settings
    from tests.service.review.review_harness import REVIEW_KEYS

    api = RunningApi(api_settings(kafka_bootstrap, redis_url, topic_prefix, api_keys=REVIEW_KEYS)).start()
    try:
        page = api.http.get("/review", headers={"Authorization": f"Bearer {ANN_KEY}"})
        assert page.status_code == 503 and "RAGMON_DATABASE_URL" in page.text
        assert api.post([event("trace", trace_body())], key=INGEST_KEY).status_code == 202
    finally:
        api.stop()


def test_cookies_are_secure_behind_https(review_api: RunningApi) -> None:
    page = review_api.http.get("/review", headers={"X-Forwarded-Proto": "https"})
    assert "secure" in page.headers["set-cookie"].lower()
    assert "secure" not in review_api.http.get("/review").headers["set-cookie"].lower()


class _Lookup(http.server.BaseHTTPRequestHandler):
    """The app's document lookup: /docs/<id> -> {"title", "text"}; an id starting with 'gone' is a 404."""

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        doc_id = urllib.parse.unquote(self.path.rsplit("/", 1)[1])
        found = not doc_id.startswith("gone")
        body = orjson.dumps({"title": f"Title of {doc_id}", "text": "Refunds take 5 days. Mail a@b.com"})
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body if found else b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_a_reviewer_adds_gold_the_system_did_not_retrieve_and_sees_it_looked_up(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, review_db_url: str, redis_client: redis.Redis
) -> None:
    lookup = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Lookup)
    threading.Thread(target=lookup.serve_forever, daemon=True).start()
    template = f"http://127.0.0.1:{lookup.server_address[1]}/docs/{{id}}"
    api = RunningApi(
        review_settings(kafka_bootstrap, redis_url, topic_prefix, review_db_url, review_document_url=template)
    ).start()
    try:
        seed_queue(review_db_url, redis_client, [1])
        with signed_in(api.url, ANN_KEY) as ann:
            item_url = ann.get("/review/next").headers["location"]
            page = ann.get(item_url).text
            assert 'name="added_gold_ids"' in page
            form = _label_form(page, gold_ids=["d1"], added_gold_ids="kb-7, gone-1\nkb-7")
            assert ann.post(item_url + "/label", data=form).status_code == 303
            shown = ann.get(item_url).text
            assert "Title of kb-7" in shown and "Refunds take 5 days" in shown and "a@b.com" not in shown
            assert "the lookup answered 404" in shown
            assert ">kb-7\ngone-1</textarea>" in shown  # saving again keeps them
            bad = ann.post(item_url + "/label", data=_label_form(shown, added_gold_ids="kb-7 not/an id!"))
            assert bad.status_code == 422 and "added_gold_ids: &#39;id!&#39; is not a document id" in bad.text
        with reviewdb.connect(review_db_url) as conn:
            row = conn.execute("SELECT gold_ids FROM review_label").fetchone()
        assert row is not None and row[0] == ["d1", "kb-7", "gone-1"]
        (label,) = _wait_for_labels(api, 1)
        assert label["body"]["gold_ids"] == ["d1", "kb-7", "gone-1"]
    finally:
        api.stop()
        lookup.shutdown()
        lookup.server_close()


def test_the_lookup_url_must_name_the_id() -> None:
    with pytest.raises(
        ValueError, match=r"review_document_url\n.*must be an http\(s\) URL containing \{id\}"
    ):
        ApiSettings(review_document_url="https://app.example/docs/")
