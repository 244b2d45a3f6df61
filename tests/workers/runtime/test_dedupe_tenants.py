"""Idempotency per tenant: an event id is done for the tenant that sent it, not for every tenant.

Before: the done key was `ragmon:done:<worker>:<id>`, so tenant B's event was dropped as a duplicate
when tenant A had used its id first. Keys written by that version are still read for one TTL after
the upgrade (see dedupe.py), so an event finished just before the upgrade is not counted twice.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import redis

from tests.support.kafka import stored, trace_body
from tests.support.records import FakeRecord
from workers.runtime.decode import decode_record
from workers.runtime.dedupe import Dedupe
from workers.runtime.types import Event

TTL = 3600


def event(tenant: str, event_id: str, n: int = 1) -> Event:
    doc: dict[str, Any] = stored("trace", trace_body(n))
    doc["tenant"], doc["id"] = tenant, event_id
    out = decode_record(FakeRecord(orjson.dumps(doc)), "trace")
    assert isinstance(out, Event)
    return out


def test_the_same_event_id_from_two_tenants_is_processed_once_for_each(redis_client: redis.Redis) -> None:
    dedupe = Dedupe(redis_client, "probe", TTL)
    shared = str(uuid.uuid4())
    a, b = event("tenant-a", shared), event("tenant-b", shared)
    fresh, dupes = dedupe.split_new([a])
    assert fresh == [a] and dupes == []
    dedupe.mark_done(fresh)
    fresh, dupes = dedupe.split_new([a, b, event("tenant-a", shared)])
    assert [e.tenant for e in fresh] == ["tenant-b"], "B's event is new; A's again is a duplicate"
    assert [e.tenant for e in dupes] == ["tenant-a", "tenant-a"]
    fresh, dupes = dedupe.split_new([event("tenant-c", shared), event("tenant-c", shared)])
    assert len(fresh) == 1 and len(dupes) == 1, "a repeat inside one batch is still a duplicate"


def test_done_keys_carry_the_tenant(redis_client: redis.Redis) -> None:
    dedupe = Dedupe(redis_client, "probe", TTL)
    e = event("tenant-a", str(uuid.uuid4()))
    dedupe.mark_done([e])
    assert redis_client.exists(f"ragmon:done:probe:tenant-a:{e.id}")
    assert 0 < int(redis_client.ttl(f"ragmon:done:probe:tenant-a:{e.id}")) <= TTL


def test_a_key_of_the_old_version_is_honoured_for_one_ttl_after_the_upgrade(
    redis_client: redis.Redis,
) -> None:
    e = event("tenant-a", str(uuid.uuid4()))
    redis_client.set(f"ragmon:done:probe:{e.id}", "1", ex=TTL)  # written by the version before tenant scoping
    clock = [1_000_000.0]
    dedupe = Dedupe(redis_client, "probe", TTL, clock=lambda: clock[0])
    fresh, dupes = dedupe.split_new([e])
    assert fresh == [] and dupes == [e], "finished before the upgrade: not processed again"
    clock[0] += TTL + 1  # one TTL after the first upgraded process started: no old key can be left
    fresh, dupes = Dedupe(redis_client, "probe", TTL, clock=lambda: clock[0]).split_new([e])
    assert fresh == [e], "old keys are no longer read"
