"""API keys: stored hashed, compared in constant time, each mapped to the tenant the records carry."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from service.api import auth
from service.api.app import create_app
from service.api.auth import AuthError, KeyStore
from service.api.settings import ApiKeyEntry, ApiSettings, hash_key
from tests.service.api.api_events import ACME_KEY, GLOBEX_KEY, feedback_event, headers_of, trace_event
from tests.service.api.api_harness import DEFAULT_KEYS, KafkaReader, RunningApi, key_entry


def test_hash_key_is_the_sha256_hex_digest() -> None:
    assert hash_key("rgm_abc") == hashlib.sha256(b"rgm_abc").hexdigest()


def test_the_key_store_holds_digests_never_keys() -> None:
    store = KeyStore(DEFAULT_KEYS)
    held = repr(vars(store)).encode()
    for key in (ACME_KEY, GLOBEX_KEY):
        assert key.encode() not in held
        assert hashlib.sha256(key.encode()).digest() in [digest for digest, _ in store._entries]


def test_a_configured_entry_must_be_a_digest_not_a_key() -> None:
    with pytest.raises(ValidationError, match="key_sha256"):
        ApiKeyEntry(tenant="acme", key_sha256=ACME_KEY)


def test_the_dev_key_is_hashed_at_start_and_maps_to_the_dev_tenant() -> None:
    settings = ApiSettings(dev_api_key="rgm_dev_only", dev_tenant="sandbox")
    [entry] = settings.key_entries()
    assert (entry.tenant, entry.key_sha256) == ("sandbox", hash_key("rgm_dev_only"))
    assert "rgm_dev_only" not in settings.dump_keys_json()
    assert KeyStore([entry]).authenticate("Bearer rgm_dev_only").tenant == "sandbox"


def test_keys_load_from_a_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(
        f"api_keys:\n  - tenant: initech\n    key_sha256: {hash_key('rgm_file')}\n"
        "    rate_limit_eps: 50\n    burst: 100\n"
    )
    settings = ApiSettings(api_keys_file=keys)
    principal = KeyStore(settings.key_entries()).authenticate("Bearer rgm_file")
    assert (principal.tenant, principal.rate_limit_eps, principal.burst) == ("initech", 50, 100)


def test_a_missing_key_file_fails_fast_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="RAGMON_API_KEYS_FILE=.*no such file"):
        ApiSettings(api_keys_file=tmp_path / "absent.yaml")


def test_the_app_refuses_to_start_without_keys() -> None:
    with pytest.raises(RuntimeError, match="no API keys configured: set RAGMON_API_KEYS"):
        create_app(ApiSettings(api_keys=[], dev_api_key=None), CollectorRegistry())


def test_the_tenant_and_limits_come_from_the_key() -> None:
    store = KeyStore([key_entry("acme", "k1", rate_limit_eps=5, burst=10), key_entry("globex", "k2")])
    acme, globex = store.authenticate("Bearer k1"), store.authenticate("bearer  k2 ")
    assert (acme.tenant, acme.scopes, acme.rate_limit_eps, acme.burst) == (
        "acme",
        frozenset({"ingest"}),
        5,
        10,
    )
    assert (globex.tenant, globex.rate_limit_eps, globex.burst) == ("globex", None, None)


@pytest.mark.parametrize(
    ("header", "status"),
    [
        (None, 401),
        ("", 401),
        ("Bearer", 401),
        ("Token k1", 401),
        ("Bearer k1x", 401),
        ("Bearer K1", 401),
        ("Bearer ro", 403),
    ],
)
def test_refusals(header: str | None, status: int) -> None:
    store = KeyStore([key_entry("acme", "k1"), key_entry("acme", "ro", scopes=["read"])])
    with pytest.raises(AuthError) as refused:
        store.authenticate(header)
    assert refused.value.status == status


def test_every_digest_is_compared_in_constant_time_whichever_key_is_presented(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = [key_entry(f"tenant{i}", f"key-{i}") for i in range(5)]
    store = KeyStore(entries)
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    for presented in ("key-0", "key-4", "not-a-key"):
        calls.clear()
        with contextlib.suppress(AuthError):
            store.authenticate(f"Bearer {presented}")
        # No early exit: the first, the last and an unknown key cost the same comparisons,
        # and only fixed-length digests are compared (never the presented key itself).
        assert len(calls) == len(entries)
        assert all(len(a) == len(b) == 32 for a, b in calls)
        assert all(presented.encode() not in (a, b) for a, b in calls)


def test_records_carry_the_keys_tenant(api: RunningApi, kafka: KafkaReader) -> None:
    acme_trace = trace_event()
    globex_trace = trace_event(tenant="globex")  # naming its own tenant is allowed, and dropped
    globex_feedback = feedback_event() | {"tenant": "globex"}
    assert api.post([acme_trace]).status_code == 202
    assert api.post([globex_trace, globex_feedback], key=GLOBEX_KEY).status_code == 202

    traces = {orjson.loads(r.value)["id"]: r for r in kafka.records(api.topics.traces)}
    for sent, tenant in ((acme_trace, "acme"), (globex_trace, "globex")):
        record = traces[sent["id"]]
        value = orjson.loads(record.value)
        assert value["tenant"] == tenant
        assert "tenant" not in value["body"]
        assert headers_of(record)["ragmon-tenant"] == tenant.encode()
        assert record.key.startswith(f"{tenant}/".encode())
    [feedback] = kafka.values(api.topics.feedback)
    assert feedback["tenant"] == "globex"
    assert api.metric("ragmon_api_events_accepted_total", {"tenant": "globex", "type": "trace"}) == 1
    assert api.metric("ragmon_api_events_accepted_total", {"tenant": "acme", "type": "trace"}) == 1


def test_a_dev_key_works_end_to_end(start_api: Callable[..., RunningApi], kafka: KafkaReader) -> None:
    api = start_api(api_keys=[], dev_api_key="rgm_local_dev", dev_tenant="demo")
    assert api.post([trace_event()], key="rgm_local_dev").status_code == 202
    assert api.post([trace_event()], key=ACME_KEY).status_code == 401
    assert [v["tenant"] for v in kafka.values(api.topics.traces)] == ["demo"]
