"""Who is reviewing: a signed session cookie (or a Bearer key with the `review` scope), and CSRF tokens.

A browser signs in once with its review key; the cookie holds tenant,
reviewer and expiry signed with HMAC-SHA256, never the key. Every form post
carries a CSRF token that is the HMAC of a random per-browser cookie, so
another site can neither read nor forge it (double submit, signed); the
cookies are HttpOnly and SameSite=Strict on top.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

SESSION_COOKIE = "ragmon_review"
CSRF_COOKIE = "ragmon_csrf"
_UNSAFE = re.compile(r"[^A-Za-z0-9._:/@#+=-]")


@dataclass(frozen=True)
class Reviewer:
    tenant: str
    name: str
    via_cookie: bool


def reviewer_name(key_name: str) -> str:
    """Key names become label `reviewer` identifiers (no whitespace or other characters)."""
    return _UNSAFE.sub("_", key_name)[:128] or "reviewer"


class SessionSigner:
    def __init__(self, secret: bytes, lifetime_s: int) -> None:
        self.secret = secret
        self.lifetime_s = lifetime_s

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self.secret, payload, hashlib.sha256).hexdigest()

    def issue(self, tenant: str, reviewer: str, now: float | None = None) -> str:
        expires = int((now or time.time()) + self.lifetime_s)
        payload = f"{tenant}|{reviewer}|{expires}".encode()
        return base64.urlsafe_b64encode(payload).decode() + "." + self._mac(payload)

    def verify(self, cookie: str | None, now: float | None = None) -> Reviewer | None:
        if not cookie or "." not in cookie:
            return None
        encoded, mac = cookie.rsplit(".", 1)
        try:
            payload = base64.urlsafe_b64decode(encoded.encode())
        except (ValueError, TypeError):
            return None
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        tenant, reviewer, expires = payload.decode().split("|")
        if int(expires) < (now or time.time()):
            return None
        return Reviewer(tenant, reviewer, via_cookie=True)

    # -- CSRF ---------------------------------------------------------------------

    @staticmethod
    def new_browser_token() -> str:
        return secrets.token_urlsafe(24)

    def csrf_token(self, browser_token: str) -> str:
        return self._mac(b"csrf\0" + browser_token.encode())

    def csrf_ok(self, browser_token: str | None, submitted: str | None) -> bool:
        if not browser_token or not submitted:
            return False
        return hmac.compare_digest(self.csrf_token(browser_token), submitted)
