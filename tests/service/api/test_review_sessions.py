"""Review sessions over HTTP (real Kafka, Redis, PostgreSQL): nobody forges, revokes or floods them.

Each test here was written against the former behaviour and failed there: a default secret derived
from the key digests, sessions that outlived their key and their logout, unthrottled sign-ins, labels
saved on any item, 403 (not 404) for another tenant's item, forms parsed whole before any check, and a
500 for a non-ASCII cookie.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import httpx
import pytest
import redis
from prometheus_client import CollectorRegistry

from service.api.app import create_app
from service.api.review_auth import SESSION_COOKIE, ReviewSecretMissing
from service.api.review_state import LOGIN_FAILURES_ALLOWED
from service.contracts import reviewdb
from tests.service.api.api_harness import RunningApi
from tests.service.review.review_harness import (
    ANN_KEY,
    BOB_KEY,
    REVIEW_KEYS,
    csrf_of,
    item_ids,
    review_settings,
    seed_queue,
    signed_in,
)


@pytest.fixture
def review_api(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, review_db_url: str, redis_client: redis.Redis
) -> Iterator[RunningApi]:
    redis_client.flushdb()  # no login failures or revocations left by another test
    api = RunningApi(review_settings(kafka_bootstrap, redis_url, topic_prefix, review_db_url)).start()
    try:
        yield api
    finally:
        api.stop()


def _with_cookie(api: RunningApi, path: str, cookie: str) -> httpx.Response:
    return httpx.get(api.url + path, headers={"Cookie": f"{SESSION_COOKIE}={cookie}"}, timeout=20)


def _label_form(page: str) -> dict[str, str]:
    return {"csrf_token": csrf_of(page), "faithful": "yes", "answerable": "yes", "action": "save"}


def test_the_review_page_refuses_to_start_without_a_configured_secret(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, review_db_url: str
) -> None:
    settings = review_settings(kafka_bootstrap, redis_url, topic_prefix, review_db_url, review_secret=None)
    with pytest.raises(ReviewSecretMissing, match="RAGMON_REVIEW_SECRET"):
        create_app(settings, CollectorRegistry())


def test_a_cookie_forged_from_the_key_digests_is_refused(review_api: RunningApi) -> None:
    import base64
    import hmac

    digests = b"".join(bytes.fromhex(e.key_sha256) for e in REVIEW_KEYS)
    derived = hashlib.sha256(b"ragmon-review\0" + digests).digest()  # what the former default secret was
    payload = f"initech|mallory|{int(time.time()) + 3600}".encode()
    forged = (
        base64.urlsafe_b64encode(payload).decode()
        + "."
        + hmac.new(derived, payload, hashlib.sha256).hexdigest()
    )
    page = _with_cookie(review_api, "/review", forged)
    assert page.status_code == 200 and 'name="key"' in page.text  # the sign-in form: no session
    assert _with_cookie(review_api, "/review/next", forged).status_code == 401


def test_logout_revokes_the_session_everywhere(review_api: RunningApi) -> None:
    with signed_in(review_api.url, ANN_KEY) as ann:
        stolen = ann.cookies[SESSION_COOKIE]
        page = ann.get("/review")
        assert 'id="reviewer"' in page.text or "ann" in page.text
        assert ann.post("/review/logout", data={"csrf_token": csrf_of(page.text)}).status_code == 303
    # a copy of the cookie taken before the logout is dead too (not only the browser's deleted copy)
    assert _with_cookie(review_api, "/review/next", stolen).status_code == 401


def test_a_session_ends_with_the_key_that_opened_it(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, review_db_url: str, redis_client: redis.Redis
) -> None:
    redis_client.flushdb()
    settings = review_settings(kafka_bootstrap, redis_url, topic_prefix, review_db_url)
    api = RunningApi(settings).start()
    try:
        with signed_in(api.url, ANN_KEY) as ann:
            cookie = ann.cookies[SESSION_COOKIE]
            assert ann.get("/review/next").status_code in (200, 303)
    finally:
        api.stop()
    without_ann = [e for e in REVIEW_KEYS if e.name != "ann"]  # the operator removed ann's key
    api = RunningApi(settings.model_copy(update={"api_keys": without_ann})).start()
    try:
        assert _with_cookie(api, "/review/next", cookie).status_code == 401
    finally:
        api.stop()


def test_failed_sign_ins_are_throttled_per_address(review_api: RunningApi) -> None:
    with httpx.Client(base_url=review_api.url, timeout=20) as browser:
        token = csrf_of(browser.get("/review").text)
        for _ in range(LOGIN_FAILURES_ALLOWED):
            assert (
                browser.post("/review/login", data={"key": "rgm_guess", "csrf_token": token}).status_code
                == 401
            )
        throttled = browser.post("/review/login", data={"key": ANN_KEY, "csrf_token": token})
        assert throttled.status_code == 429 and int(throttled.headers["retry-after"]) > 0
        assert "too many failed sign-ins" in throttled.text


def test_a_label_is_saved_only_on_an_item_leased_to_the_reviewer(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    seed_queue(review_db_url, redis_client, [1])
    (item,) = item_ids(review_db_url)
    with signed_in(review_api.url, ANN_KEY) as ann, signed_in(review_api.url, BOB_KEY) as bob:
        assert ann.get("/review/next").headers["location"] == f"/review/items/{item}"
        page = bob.get(f"/review/items/{item}").text
        taken = bob.post(f"/review/items/{item}/label", data=_label_form(page))
        assert taken.status_code == 409 and "not assigned to you" in taken.text
        page = ann.get(f"/review/items/{item}").text
        assert ann.post(f"/review/items/{item}/label", data=_label_form(page)).status_code == 303
        assert (
            ann.post(f"/review/items/{item}/label", data=_label_form(page)).status_code == 303
        )  # own label: edit
    with reviewdb.connect(review_db_url) as conn:
        assert conn.execute("SELECT reviewer FROM review_label").fetchall() == [("ann",)]


def test_other_tenants_items_and_missing_ones_read_alike(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    seed_queue(review_db_url, redis_client, [1], tenant="globex")
    (foreign,) = item_ids(review_db_url, tenant="globex")
    with signed_in(review_api.url, ANN_KEY) as ann:
        theirs, missing = ann.get(f"/review/items/{foreign}"), ann.get(f"/review/items/{foreign + 1000}")
        assert theirs.status_code == missing.status_code == 404
        assert f"no review item {foreign}<" in theirs.text
        assert theirs.text.replace(f"item {foreign}<", "item N<") == missing.text.replace(
            f"item {foreign + 1000}<", "item N<"
        )


def test_the_sign_in_form_is_bounded_before_it_is_parsed(review_api: RunningApi) -> None:
    url = review_api.url + "/review/login"
    with httpx.Client(timeout=20) as client:
        big = client.post(
            url,
            content=b"key=" + b"a" * (20 * 1024 * 1024),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert big.status_code == 413 and "at most 2048 bytes" in big.text

        def chunks() -> Iterator[bytes]:  # no Content-Length: refused once the cap is crossed
            for _ in range(100):
                yield b"a" * 65536

        chunked = client.post(
            url, content=chunks(), headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert chunked.status_code == 413
        files = client.post(url, files={"key": ("k.txt", b"x" * 1000)})
        assert files.status_code == 415 and "multipart" in files.text
        fields = client.post(
            url,
            content="&".join(f"f{i}=1" for i in range(50)).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert fields.status_code == 413 and "fields" in fields.text
        raw = client.post(
            url, content="key=é".encode(), headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert raw.status_code == 400


def test_malformed_cookies_are_a_4xx_without_internal_text(review_api: RunningApi) -> None:
    raw = "é".encode() * 10 + b"." + b"0" * 64
    for cookie_header in (
        b"ragmon_review=" + raw,
        b"ragmon_csrf=" + raw,
        b"ragmon_review=%%%; ragmon_csrf=\xff",
    ):
        for path in ("/review", "/review/next"):
            response = httpx.get(review_api.url + path, headers={b"Cookie": cookie_header}, timeout=20)
            assert response.status_code in (200, 401), (path, cookie_header, response.status_code)
            assert "Traceback" not in response.text and "Error" not in response.text
        posted = httpx.post(
            review_api.url + "/review/login",
            headers={b"Cookie": cookie_header},
            data={"key": ANN_KEY, "csrf_token": "é" * 10},
            timeout=20,
        )
        assert posted.status_code == 403 and "csrf_token" in posted.text


@pytest.mark.slow
def test_a_note_with_a_nul_character_is_a_422_naming_the_note(
    review_api: RunningApi, review_db_url: str, redis_client: redis.Redis
) -> None:
    """PostgreSQL text cannot hold U+0000: a note with `%00` made the save raise, a 500. Now the form
    is refused naming the field and the rule, nothing is saved, and the reviewer can send it again."""
    seed_queue(review_db_url, redis_client, [1])
    (item,) = item_ids(review_db_url)
    with signed_in(review_api.url, ANN_KEY) as ann:
        assert ann.get("/review/next").headers["location"] == f"/review/items/{item}"
        page = ann.get(f"/review/items/{item}").text
        refused = ann.post(f"/review/items/{item}/label", data={**_label_form(page), "note": "a\x00b"})
        assert refused.status_code == 422 and "note:" in refused.text and "no_nul" in refused.text
        with reviewdb.connect(review_db_url) as conn:
            assert conn.execute("SELECT count(*) FROM review_label").fetchone() == (0,)
        saved = ann.post(f"/review/items/{item}/label", data={**_label_form(page), "note": "ab"})
        assert saved.status_code == 303
