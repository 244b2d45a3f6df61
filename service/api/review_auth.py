"""Who is reviewing: a signed session cookie (or a Bearer key with the `review` scope), and CSRF tokens.

A browser signs in once with its review key; the cookie holds tenant,
reviewer, the id of the key that signed in, a random session id and the
expiry, signed with HMAC-SHA256 under the configured review secret
(RAGMON_REVIEW_SECRET: never derived from other settings, so holding the key
digests of a config file forges nothing). A session is good only while the
key that opened it is still configured with the `review` scope for the same
tenant and name, and until its id is revoked (logout). Every form post
carries a CSRF token that is the HMAC of a random per-browser cookie, so
another site can neither read nor forge it (double submit, signed); the
cookies are HttpOnly and SameSite=Strict on top.

Everything a client sends here is parsed strictly: a cookie or token that is
not the exact shape we issue is simply not a session (never an exception).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

SESSION_COOKIE = "ragmon_review"
CSRF_COOKIE = "ragmon_csrf"
MIN_SECRET_CHARS = 32
_UNSAFE = re.compile(r"[^A-Za-z0-9._:/@#+=-]")
# What we issue: base64url of an ASCII payload, a dot, 64 hex digits. Anything else is no session.
_COOKIE_SHAPE = re.compile(r"^([A-Za-z0-9_-]{8,1024}={0,2})\.([0-9a-f]{64})$")
_PAYLOAD_SHAPE = re.compile(
    r"^v1\|([a-z0-9][a-z0-9_.-]{0,127})\|([A-Za-z0-9._:/@#+=-]{1,128})\|([0-9a-f]{16})"
    r"\|([A-Za-z0-9_-]{16,64})\|([0-9]{1,12})$"
)
_TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ReviewSecretMissing(RuntimeError):
    """The review page is configured (a database) but nothing signs its sessions."""


@dataclass(frozen=True)
class Reviewer:
    tenant: str
    name: str
    via_cookie: bool
    key_id: str = ""  # which key signed in: the first 16 hex digits of its digest
    session_id: str = ""
    expires: int = 0


def reviewer_name(key_name: str) -> str:
    """Key names become label `reviewer` identifiers (no whitespace or other characters)."""
    return _UNSAFE.sub("_", key_name)[:128] or "reviewer"


def key_id(key_sha256: str) -> str:
    return key_sha256[:16]


def check_secret(secret: str | None) -> bytes:
    """The configured review secret, or a refusal that says how to fix it."""
    if not secret:
        raise ReviewSecretMissing(
            "the review page is on (RAGMON_DATABASE_URL is set) but RAGMON_REVIEW_SECRET is not: set it to a "
            f"random string of at least {MIN_SECRET_CHARS} characters, the same in every API process "
            "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`); `ragmon up` generates one "
            "in its workdir"
        )
    if len(secret) < MIN_SECRET_CHARS:
        raise ReviewSecretMissing(
            f"RAGMON_REVIEW_SECRET: at least {MIN_SECRET_CHARS} characters (got {len(secret)})"
        )
    return secret.encode()


class SessionSigner:
    def __init__(self, secret: bytes, lifetime_s: int) -> None:
        self.secret = secret
        self.lifetime_s = lifetime_s

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self.secret, payload, hashlib.sha256).hexdigest()

    def issue(self, tenant: str, reviewer: str, key: str, now: float | None = None) -> str:
        """A cookie for `reviewer` of `tenant`, signed in with the key whose id is `key`."""
        expires = int((now or time.time()) + self.lifetime_s)
        payload = f"v1|{tenant}|{reviewer}|{key}|{secrets.token_urlsafe(18)}|{expires}".encode()
        return base64.urlsafe_b64encode(payload).decode() + "." + self._mac(payload)

    def verify(self, cookie: str | None, now: float | None = None) -> Reviewer | None:
        """The cookie's reviewer when it is one we signed and it has not expired; else None."""
        if not cookie or len(cookie) > 2048:
            return None
        shape = _COOKIE_SHAPE.match(cookie)
        if shape is None:
            return None
        encoded, mac = shape.groups()
        try:
            payload = base64.urlsafe_b64decode(encoded.encode("ascii"))
        except (ValueError, binascii.Error):
            return None
        if not hmac.compare_digest(mac.encode("ascii"), self._mac(payload).encode("ascii")):
            return None
        try:
            fields = _PAYLOAD_SHAPE.match(payload.decode("ascii"))
        except UnicodeDecodeError:
            return None
        if fields is None:
            return None
        tenant, reviewer, key, session_id, expires = fields.groups()
        if int(expires) < (now or time.time()):
            return None
        return Reviewer(tenant, reviewer, True, key, session_id, int(expires))

    # -- CSRF ---------------------------------------------------------------------

    @staticmethod
    def new_browser_token() -> str:
        return secrets.token_urlsafe(24)

    def csrf_token(self, browser_token: str) -> str:
        return self._mac(b"csrf\0" + browser_token.encode("ascii", "replace"))

    def csrf_ok(self, browser_token: str | None, submitted: str | None) -> bool:
        if not browser_token or not submitted:
            return False
        if not _TOKEN_SHAPE.match(browser_token) or not _HEX64.match(submitted):
            return False
        return hmac.compare_digest(self.csrf_token(browser_token).encode("ascii"), submitted.encode("ascii"))


def usable_browser_token(cookie: str | None) -> str | None:
    """The browser's CSRF cookie when it has the shape we issue (else the page sets a new one)."""
    return cookie if cookie and _TOKEN_SHAPE.match(cookie) else None
