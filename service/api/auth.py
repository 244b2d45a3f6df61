"""API keys: stored hashed, compared in constant time, each mapped to one tenant."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from service.api.ingest import PreparedBatch
from service.api.producer import OutgoingRecord
from service.api.review_auth import reviewer_name
from service.api.settings import ApiKeyEntry


@dataclass(frozen=True)
class Principal:
    tenant: str
    scopes: frozenset[str]
    rate_limit_eps: float | None
    burst: int | None
    name: str = ""  # the key's name: the reviewer's identity on the review page
    key_id: str = ""  # the first 16 hex digits of the key's digest: which key this is, never the key


# Human labels (type `label`) feed calibration and the golden set: only a key with this scope sends them.
LABEL_SCOPE = "label"


class AuthError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def key_reviewer(principal: Principal) -> str:
    """The reviewer a key labels as: its name, as a label identifier (the review page uses the same rule)."""
    return reviewer_name(principal.name)


def authorize_labels(events: list[Any], principal: Principal) -> dict[int, str]:
    """Which `label` events this key may not send (index -> why), for a 207 that refuses them alone.

    A label needs the key's `label` scope: labels feed calibration and the golden set, and an
    ingest key is in every app replica. The reviewer of every label is the key's (set here on the
    envelope objects, replacing whatever the body says), so no key speaks for another reviewer.
    """
    reviewer = key_reviewer(principal)
    refused: dict[int, str] = {}
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("type") != "label":
            continue
        if LABEL_SCOPE not in principal.scopes:
            refused[i] = (
                f"events[{i}].type: a label event needs a key with the '{LABEL_SCOPE}' scope; this key "
                f"of tenant '{principal.tenant}' has {sorted(principal.scopes)} (label_scope)"
            )
        elif isinstance(ev.get("body"), dict):
            ev["body"]["reviewer"] = reviewer
    return refused


def refuse_events(batch: PreparedBatch, refused: dict[int, str], reason: str) -> None:
    """Turn the accepted results at `refused`'s indexes into rejections (with their message) and drop their
    records: a rule checked outside the preparer (the label scope) refuses those events alone."""
    if not refused:
        return
    records = iter(batch.records)
    kept: list[OutgoingRecord] = []
    for result in batch.results:
        if result.status != "accepted":
            continue
        record = next(records)
        if result.index in refused:
            result.status, result.error, result.reason = "rejected", refused[result.index], reason
        else:
            kept.append(record)
    batch.records = kept


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
        return Principal(
            found.tenant,
            frozenset(found.scopes),
            found.rate_limit_eps,
            found.burst,
            self.name_of(found),
            found.key_sha256[:16],
        )

    @staticmethod
    def name_of(entry: ApiKeyEntry) -> str:
        return entry.name or f"key-{entry.key_sha256[:8]}"

    def entry_by_id(self, key_id: str) -> ApiKeyEntry | None:
        """The configured key whose digest starts with `key_id` (None when it was removed or is ambiguous)."""
        found = [e for _, e in self._entries if e.key_sha256.startswith(key_id)] if len(key_id) == 16 else []
        return found[0] if len(found) == 1 else None
