"""Review session cookies and CSRF tokens as pure logic: only a configured secret signs, only our shape parses."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest

from service.api.review_auth import ReviewSecretMissing, SessionSigner, check_secret
from service.api.settings import hash_key

SECRET = b"s" * 48
KEY_ID = hash_key("rgm_some_review_key")[:16]


def _old_style_cookie(secret: bytes, tenant: str, reviewer: str) -> str:
    """What the former code accepted: tenant|reviewer|expires, signed with whatever secret it had."""
    payload = f"{tenant}|{reviewer}|{int(time.time()) + 3600}".encode()
    return (
        base64.urlsafe_b64encode(payload).decode()
        + "."
        + hmac.new(secret, payload, hashlib.sha256).hexdigest()
    )


def test_a_session_names_tenant_reviewer_key_and_a_fresh_session_id() -> None:
    signer = SessionSigner(SECRET, 3600)
    first, second = (
        signer.verify(signer.issue("acme", "ann", KEY_ID)),
        signer.verify(signer.issue("acme", "ann", KEY_ID)),
    )
    assert first is not None and second is not None
    assert (first.tenant, first.name, first.key_id, first.via_cookie) == ("acme", "ann", KEY_ID, True)
    assert first.session_id != second.session_id and len(first.session_id) >= 16


def test_a_cookie_forged_from_the_key_digests_is_no_session() -> None:
    digests = [bytes.fromhex(hash_key(k)) for k in ("rgm_a", "rgm_b")]
    derived = hashlib.sha256(b"ragmon-review\0" + b"".join(digests)).digest()  # the former default secret
    signer = SessionSigner(SECRET, 3600)
    assert signer.verify(_old_style_cookie(derived, "initech", "mallory")) is None
    # even signed with the real secret, the old payload shape (no key, no session id) is refused
    assert signer.verify(_old_style_cookie(SECRET, "initech", "mallory")) is None
    # and a well-shaped cookie under another secret too
    assert signer.verify(SessionSigner(derived, 3600).issue("initech", "mallory", KEY_ID)) is None


@pytest.mark.parametrize(
    "cookie",
    [
        "é" * 20 + "." + "0" * 64,  # non-ASCII (was a TypeError in compare_digest: a 500)
        "abc",  # no dot
        "." + "0" * 64,
        "YWJj." + "Z" * 64,  # MAC not hex
        "!!!!!!!!." + "0" * 64,  # not base64url
        "x" * 5000,  # oversized
        base64.urlsafe_b64encode(b"\xff\xfe|x|y").decode() + "." + "0" * 64,
    ],
)
def test_malformed_cookies_are_no_session_and_never_raise(cookie: str) -> None:
    assert SessionSigner(SECRET, 3600).verify(cookie) is None


def test_a_signed_payload_of_another_shape_is_no_session() -> None:
    signer = SessionSigner(SECRET, 3600)
    for payload in (
        b"v1|acme|ann|" + KEY_ID.encode() + b"|sid-too-short|99999999999",
        b"v1|Acme Corp|ann|" + KEY_ID.encode() + b"|" + b"s" * 24 + b"|99999999999",
        "v1|acme|änn|{KEY_ID}|{'s' * 24}|99999999999".encode(),
    ):
        cookie = base64.urlsafe_b64encode(payload).decode() + "." + signer._mac(payload)
        assert signer.verify(cookie) is None


def test_an_expired_session_is_none() -> None:
    signer = SessionSigner(SECRET, 60)
    cookie = signer.issue("acme", "ann", KEY_ID, now=time.time() - 120)
    assert signer.verify(cookie) is None


def test_csrf_tokens_of_any_shape_are_checked_without_raising() -> None:
    signer = SessionSigner(SECRET, 60)
    browser = signer.new_browser_token()
    assert signer.csrf_ok(browser, signer.csrf_token(browser))
    assert not signer.csrf_ok(browser, "é" * 64)
    assert not signer.csrf_ok("é" * 24, signer.csrf_token(browser))
    assert not signer.csrf_ok(browser, signer.csrf_token(browser).upper())
    assert not signer.csrf_ok(None, "0" * 64)


def test_the_secret_must_be_configured_and_long_enough() -> None:
    with pytest.raises(ReviewSecretMissing, match="RAGMON_REVIEW_SECRET"):
        check_secret(None)
    with pytest.raises(ReviewSecretMissing, match="at least 32 characters"):
        check_secret("short")
    assert check_secret("k" * 32) == b"k" * 32
