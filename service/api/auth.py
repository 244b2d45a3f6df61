"""API keys: stored hashed, compared in constant time, each mapped to one tenant."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from service.api.settings import ApiKeyEntry


@dataclass(frozen=True)
class Principal:
    tenant: str
    scopes: frozenset[str]
    rate_limit_eps: float | None
    burst: int | None
    name: str = ""  # the key's name: the reviewer's identity on the review page
    key_id: str = ""  # the first 16 hex digits of the key's digest: which key this is, never the key


class AuthError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class KeyStore:
    """Looks a presented key up among the configured digests.

    Every stored digest is compared with hmac.compare_digest and the loop never
    exits early, so the time taken does not tell how many digest bytes matched
    or which entry did.
    """

    def __init__(self, entries: list[ApiKeyEntry]) -> None:
        self._entries = [(bytes.fromhex(e.key_sha256), e) for e in entries]

    def __len__(self) -> int:
        return len(self._entries)

    def authenticate(self, authorization: str | None, scope: str = "ingest") -> Principal:
        if not authorization:
            raise AuthError(401, "Authorization header missing: send 'Authorization: Bearer <api key>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError(401, "Authorization header must be 'Bearer <api key>'")
        digest = hashlib.sha256(token.strip().encode()).digest()
        found: ApiKeyEntry | None = None
        for stored, entry in self._entries:
            if hmac.compare_digest(stored, digest) and found is None:
                found = entry
        if found is None:
            raise AuthError(401, "API key not recognised")
        if scope not in found.scopes:
            raise AuthError(403, f"API key of tenant '{found.tenant}' lacks the '{scope}' scope")
        return Principal(found.tenant, frozenset(found.scopes), found.rate_limit_eps, found.burst,
                         self.name_of(found), found.key_sha256[:16])

    @staticmethod
    def name_of(entry: ApiKeyEntry) -> str:
        return entry.name or f"key-{entry.key_sha256[:8]}"

    def entry_by_id(self, key_id: str) -> ApiKeyEntry | None:
        """The configured key whose digest starts with `key_id` (None when it was removed or is ambiguous)."""
        found = [e for _, e in self._entries if e.key_sha256.startswith(key_id)] if len(key_id) == 16 else []
        return found[0] if len(found) == 1 else None
