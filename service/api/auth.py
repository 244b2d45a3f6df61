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
        name = found.name or f"key-{found.key_sha256[:8]}"
        return Principal(found.tenant, frozenset(found.scopes), found.rate_limit_eps, found.burst, name)

    def secret(self) -> bytes:
        """A secret every API process derives alike: the digest of all configured key digests."""
        return hashlib.sha256(b"ragmon-review\0" + b"".join(d for d, _ in self._entries)).digest()
