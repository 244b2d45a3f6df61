"""Settings of the ingestion API process (one pydantic-settings class, validated at start)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator

from service.api.review_lookup import check_url_template
from service.contracts import vocabulary as L
from service.contracts.errors import describe_errors
from service.contracts.settings import CommonSettings


def hash_key(key: str) -> str:
    """The SHA-256 hex digest a key is stored as."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKeyEntry(BaseModel):
    """One API key, stored as the SHA-256 hex digest of the key (never the key itself)."""

    tenant: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=L.MAX_NAME_LEN)]
    key_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    scopes: list[str] = Field(default_factory=lambda: ["ingest"])
    rate_limit_eps: float | None = Field(
        None, gt=0, description="events/s for this tenant; default from settings"
    )
    burst: int | None = Field(None, ge=1)
    name: str = ""


class RedactionSettings(BaseModel):
    enabled: bool = True
    kinds: list[str] = Field(default_factory=lambda: ["email", "phone", "card", "ip"])

    @field_validator("kinds")
    @classmethod
    def _known_kinds(cls, v: list[str]) -> list[str]:
        known = {"email", "phone", "card", "ip"}
        bad = [k for k in v if k not in known]
        if bad:
            raise ValueError(f"unknown redaction kinds {bad}; known: {sorted(known)}")
        return v


def read_key_file(path: Path) -> list[ApiKeyEntry]:
    """The entries of RAGMON_API_KEYS_FILE; a problem names the variable, the file and the entry."""
    where = f"RAGMON_API_KEYS_FILE={path}"
    try:
        raw = yaml.safe_load(path.read_text()) or []
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{where}: not readable YAML or JSON: {exc}") from exc
    if isinstance(raw, dict):
        raw = raw.get("api_keys", [])
    if not isinstance(raw, list):
        raise ValueError(f"{where}: must hold a list of {{tenant, key_sha256}} entries (or api_keys: [...])")
    entries = []
    for i, entry in enumerate(raw):
        try:
            entries.append(ApiKeyEntry.model_validate(entry))
        except ValidationError as exc:
            raise ValueError(f"{where}: {describe_errors(f'[{i}]', exc)}") from exc
    return entries


class ApiSettings(CommonSettings):
    api_host: str = "127.0.0.1"
    api_port: int = Field(8000, ge=1, le=65535)
    # /metrics names every tenant and its traffic: its own port, on loopback unless a scraper elsewhere needs it.
    api_metrics_host: str = "127.0.0.1"
    api_metrics_port: int = Field(
        9180, ge=0, le=65535, description="the API's /metrics port; 0: any free port"
    )
    api_keys: list[ApiKeyEntry] = Field(default_factory=list, description="JSON list of ApiKeyEntry")
    api_keys_file: Path | None = Field(None, description="YAML/JSON file with a list of ApiKeyEntry")
    dev_api_key: str | None = Field(
        None, description="a plain key for local use (scopes ingest and label), hashed at start"
    )
    dev_tenant: str = "demo"
    rate_limit_eps: float = Field(20_000.0, gt=0, description="default per-tenant events/s")
    rate_limit_burst: int = Field(40_000, ge=L.MAX_EVENTS_PER_BATCH)
    max_body_bytes: int = Field(L.MAX_BODY_BYTES, ge=1024)
    max_decompressed_bytes: int = Field(L.MAX_DECOMPRESSED_BYTES, ge=1024)
    max_events_per_batch: int = Field(L.MAX_EVENTS_PER_BATCH, ge=1, le=L.MAX_EVENTS_PER_BATCH)
    max_event_age_s: float = Field(L.MAX_EVENT_AGE_S, gt=0)
    max_clock_skew_s: float = Field(L.MAX_CLOCK_SKEW_S, ge=0)
    max_inflight_events: int = Field(
        50_000, ge=L.MAX_EVENTS_PER_BATCH, description="shed with 503 beyond this"
    )
    produce_timeout_s: float = Field(5.0, gt=0, description="longest wait for broker acknowledgements")
    retry_after_s: int = Field(2, ge=1)
    kafka_idempotence: bool = Field(
        False,
        description="idempotent producer; off by default because a memory-only broker that restarts "
        "forgets producer ids and kafka-python then never recovers (event ids dedupe downstream anyway)",
    )
    kafka_compression: str = Field("lz4", pattern=r"^(none|gzip|lz4|zstd)$")
    redaction: RedactionSettings = Field(default_factory=RedactionSettings)
    pseudonym_key: SecretStr | None = Field(
        None,
        min_length=16,
        description="RAGMON_PSEUDONYM_KEY: HMAC key of session and user id pseudonyms and of the "
        "marks in metadata values; the same in every API process. Unset: each process draws a random key "
        "(nothing stored in clear, but pseudonyms differ between processes and restarts)",
    )
    review_secret: str | None = Field(
        None,
        description="signs review sessions and CSRF tokens; required when "
        "database_url is set (the same in every API process; never derived)",
    )
    review_session_s: int = Field(8 * 3600, ge=60, description="how long a reviewer stays signed in")
    review_lease_s: int = Field(1800, ge=30, description="how long an offered item stays with its reviewer")
    review_document_url: str | None = Field(
        None,
        description="the app's document lookup, {id} replaced by a document id: GET answers JSON "
        '{"title": ..., "text": ...}; the review page shows it beside gold a reviewer added by id',
    )
    otlp_max_spans_per_request: int = Field(20_000, ge=1, description="POST /v1/traces: 413 beyond this")
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="a request's headers must be complete within this; "
        "else the connection is closed (slow clients)",
    )
    # Per API process: body bytes one tenant's requests hold at once (at least max_body_bytes), and
    # its bodies decoded in worker threads at once (its others wait for these, not in a shared queue).
    body_bytes_per_tenant: int = Field(64 * 1024 * 1024, ge=1024, description="429 beyond this")
    threads_per_tenant: int = Field(2, ge=1, description="a tenant's further big bodies wait")
    max_header_bytes: int = Field(65_536, ge=4096, description="request line and headers; 431 beyond")
    body_timeout_s: float = Field(
        30.0, gt=0, description="a request's body must arrive within this; else 408"
    )
    limit_concurrency: int = Field(
        1_000, ge=16, description="connections and requests per API process; 503 beyond"
    )
    keep_alive_timeout_s: float = Field(
        5.0, gt=0, description="idle keep-alive connections are closed after this"
    )
    otlp_max_attribute_chars: int = Field(
        65_536,
        ge=1024,
        description="POST /v1/traces: longer string attribute values are truncated (and reported)",
    )

    @field_validator("review_document_url")
    @classmethod
    def _lookup_template(cls, value: str | None) -> str | None:
        return None if value is None else check_url_template(value)

    @field_validator("api_keys_file")
    @classmethod
    def _key_file_exists(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_file():
            raise ValueError(
                f"RAGMON_API_KEYS_FILE={path}: no such file. Fix: point it at a YAML or JSON "
                "list of {tenant, key_sha256} entries (`ragmon keys --tenant T` prints one)"
            )
        return path

    @model_validator(mode="after")
    def _load_key_file(self) -> ApiSettings:
        if self.api_keys_file is not None:
            self.api_keys = [*self.api_keys, *read_key_file(self.api_keys_file)]
        return self

    def key_entries(self) -> list[ApiKeyEntry]:
        entries = list(self.api_keys)
        if self.dev_api_key:
            # The local key sends what the simulator sends (traces, feedback, offline gold labels); it
            # never reads the review queue (no `review` scope).
            entries.append(
                ApiKeyEntry(
                    tenant=self.dev_tenant,
                    key_sha256=hash_key(self.dev_api_key),
                    name="dev",
                    scopes=["ingest", "label"],
                )
            )
        return entries

    def dump_keys_json(self) -> str:
        return json.dumps([e.model_dump() for e in self.api_keys])
