"""Phoenix per tenant: one project per tenant on both sides, scores matched by (tenant, trace), bounded JSON."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import pytest
import redis
from prometheus_client import CollectorRegistry
from pydantic import SecretStr, ValidationError

from tests.workers.phoenix.phoenix_data import faithfulness_score, rag_trace, score_event, spans_event
from tests.workers.phoenix.test_forwarder import Collector, collector, forwarder  # noqa: F401 - the fixture
from workers.forwarder.processor import PROJECT_ATTRIBUTE
from workers.forwarder.settings import ForwarderSettings
from workers.phoenix.annotations import TraceSpans
from workers.phoenix.gateway import document_id
from workers.phoenix.metrics import PhoenixMetrics
from workers.phoenix.processor import PhoenixExporter
from workers.phoenix.settings import PhoenixSettings
from workers.phoenix.waiting import Waiting, WaitingRoom


def test_each_tenant_has_its_own_project_on_both_sides() -> None:
    exporter = PhoenixSettings(url="http://p", tenant_projects={"acme": "acme-rag"}, project_prefix="rg-")
    forward = ForwarderSettings(
        endpoint="http://p/v1/traces", tenant_projects={"acme": "acme-rag"}, project_prefix="rg-"
    )
    for settings in (exporter, forward):
        assert [settings.project_for(t) for t in ("acme", "globex", "initech")] == [
            "acme-rag",
            "rg-globex",
            "rg-initech",
        ]


@pytest.mark.parametrize("model", [PhoenixSettings, ForwarderSettings])
def test_two_tenants_may_not_share_a_project(model: type) -> None:
    with pytest.raises(ValidationError, match="each tenant needs its own"):
        model(tenant_projects={"acme": "shared", "globex": "shared"})


def test_the_forwarder_puts_a_tenants_spans_in_its_own_project_whatever_the_app_named(
    collector: Collector,  # noqa: F811 - the fixture
) -> None:
    fwd, _ = forwarder(collector, tenant_projects={"acme": "acme-rag"})
    named = rag_trace(["d"])
    for rs in named.data.resource_spans:
        rs.resource.attributes.add(key=PROJECT_ATTRIBUTE).value.string_value = "acme-rag"  # another tenant's
    fwd.process([spans_event(named, tenant="globex"), spans_event(rag_trace(["d"]), tenant="acme")])
    ((_, request),) = collector.requests
    projects = [
        [a.value.string_value for a in rs.resource.attributes if a.key == PROJECT_ATTRIBUTE]
        for rs in request.resource_spans
    ]
    assert projects == [["globex"], ["acme-rag"]]


class NoTraces:
    """A gateway whose Phoenix has no trace yet (so every score waits)."""

    def find_traces(
        self, project: str, trace_ids: Sequence[str], with_documents: Iterable[str] = ()
    ) -> dict[str, TraceSpans]:
        self.projects = [*getattr(self, "projects", []), project]
        return {}

    def write_span_annotations(self, payloads: list[dict[str, object]]) -> None:
        raise AssertionError("nothing to write: no trace was found")

    write_document_annotations = write_span_annotations

    def close(self) -> None:
        return None


def test_scores_of_two_tenants_with_the_same_event_id_wait_apart(redis_client: redis.Redis) -> None:
    settings = PhoenixSettings(url="http://p", api_key=SecretStr("k"))
    waiting = WaitingRoom(redis_client, "test-tenants", settings.retry_interval_s, settings.max_waiting)
    gateway = NoTraces()
    exporter = PhoenixExporter(settings, gateway, waiting, PhoenixMetrics(CollectorRegistry()))  # type: ignore[arg-type]
    trace_id = rag_trace([]).trace_id
    a = faithfulness_score(trace_id, tenant="tenant-a")
    b = a.model_copy(update={"tenant": "tenant-b"})  # the same client event id, so the same score event id
    exporter.process([score_event(a), score_event(b)])
    assert waiting.size() == 2, "B's score is not taken for A's"
    assert sorted(gateway.projects) == ["tenant-a", "tenant-b"], "each looked up in its tenant's project"
    due = waiting.take_due(time.time() + 3600, 10)
    assert sorted(w.event_id for w in due) == [f"tenant-a/{a.event_id}", f"tenant-b/{a.event_id}"]


def test_an_entry_parked_by_the_old_version_is_still_retried(redis_client: redis.Redis) -> None:

    settings = PhoenixSettings(url="http://p", api_key=SecretStr("k"), span_wait_s=1.0)
    waiting = WaitingRoom(redis_client, "test-old", settings.retry_interval_s, settings.max_waiting)
    score = faithfulness_score(rag_trace([]).trace_id)
    waiting.park([Waiting(str(score.event_id), time.time() - 60, score.model_dump_json())], time.time() - 60)
    exporter = PhoenixExporter(settings, NoTraces(), waiting, PhoenixMetrics(CollectorRegistry()))  # type: ignore[arg-type]
    exporter.tick(time.time())
    assert waiting.size() == 0, "retried, past span_wait_s, and closed"


def test_a_deeply_nested_metadata_string_has_no_id_and_raises_nothing() -> None:
    deep = '{"id":' * 100_000 + '"x"' + "}" * 100_000
    assert document_id({"metadata": deep, "content": "text"}) is not None  # the content hash, not a crash


def _entries(tenant: str, n: int, at: float, first: int = 0) -> list[Waiting]:
    return [Waiting(f"{tenant}/e{i}", at, "{}") for i in range(first, first + n)]


def test_a_tenant_flooding_the_waiting_room_takes_only_its_own_share(redis_client: redis.Redis) -> None:
    waiting = WaitingRoom(redis_client, "test-flood", 10.0, 100, 30)
    now = time.time()
    dropped = waiting.park(_entries("flood", 80, now) + _entries("quiet", 5, now), now)
    assert dropped == list(range(30, 80)), "the flood's own beyond its 30, none of the quiet tenant's"
    assert waiting.size() == 35
    more = _entries("quiet", 70, now, first=5)
    assert waiting.park(more, now) == list(range(25, 70)), "5 held: 25 more fit"
    assert waiting.size() == 60


def test_the_room_in_all_still_bounds_every_tenant_together(redis_client: redis.Redis) -> None:
    waiting = WaitingRoom(redis_client, "test-total", 10.0, 50, 30)
    now = time.time()
    assert waiting.park(_entries("a", 30, now), now) == []
    assert waiting.park(_entries("b", 30, now), now) == list(range(20, 30))
    assert waiting.size() == 50


def test_a_retry_takes_equal_shares_of_the_tenants_with_scores_due(redis_client: redis.Redis) -> None:
    waiting = WaitingRoom(redis_client, "test-share", 10.0, 10_000, 10_000)
    now = time.time()
    waiting.park(_entries("flood", 1000, now - 100), now - 100)  # due long before the quiet tenant's
    waiting.park(_entries("quiet", 3, now), now)
    due = waiting.take_due(now + 20, 50)
    assert sum(w.event_id.startswith("quiet/") for w in due) == 3 and len(due) == 50
    waiting.done([w.event_id for w in due])
    assert waiting.size() == 953


def test_the_one_set_of_the_older_version_is_moved_and_retried(redis_client: redis.Redis) -> None:
    waiting = WaitingRoom(redis_client, "test-legacy", 10.0, 100)
    now = time.time()
    prefix = "ragmon:phoenix:test-legacy"
    redis_client.zadd(f"{prefix}:waiting", {"acme/e1": now - 1, "bare-id": now - 1})
    redis_client.hset(
        f"{prefix}:data", mapping={m: '{"first_seen": 1, "score": "{}"}' for m in ("acme/e1", "bare-id")}
    )
    assert sorted(w.event_id for w in waiting.take_due(now, 10)) == ["acme/e1", "bare-id"]
    assert not redis_client.exists(f"{prefix}:waiting") and waiting.size() == 2
    waiting.done(["acme/e1", "bare-id"])
    assert waiting.size() == 0 and redis_client.hlen(f"{prefix}:data") == 0
