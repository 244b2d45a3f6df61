"""The probes worker's processor: store replayed probe results, accept baselines, export the comparison.

Probe traces come only from the probes topic (the API routes every trace with a `probe` mark there, so no
production worker ever reads one); release markers from the releases topic declare changes. Per batch, in
one transaction: store both (once per event id), accept as baselines the versions that are a set's first
or follow a declared change, then for each touched set compare the serving version's latest result of
every probe with its baseline: overlap@k, RBO_ext and gold recall@k (docs/probes.md).
"""

from __future__ import annotations

import contextlib
import logging
from statistics import fmean

import psycopg
from prometheus_client import Gauge

from service.contracts.neighbours import overlap_at_k, rbo, recall_at_k
from service.contracts.topics import Topics
from workers.probes.config import ProbesConfig
from workers.probes.metrics import ProbesMetrics
from workers.probes.store import PRODUCTION, Change, Compared, ProbeStore, Result
from workers.probes.views import VIEWS, ProbeTrace, Release
from workers.runtime.contract import Processor
from workers.runtime.labels import FirstSeenCap
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.records import native_subscription
from workers.runtime.reviewstore import MigratedFirst
from workers.runtime.types import Event, Readiness, Rejection

log = logging.getLogger("ragmon.worker.probes")
# The release components whose change moves what the probes measure (the query encoder and the index it
# searches); an app release is one too, as before components existed (docs/probes.md). A generator, prompt,
# reranker or provider change retrieves the same neighbours: it declares nothing.
INDEX_SIDE_COMPONENTS = frozenset({"app", "embedding_model", "index"})
NOT_A_PROBE = "probe: a trace on the probes topic needs its probe mark {set, query_id}"


class ProbesProcessor(Processor):
    name = "probes"
    event_types: tuple[str, ...] = ("release",)
    views = VIEWS

    def __init__(
        self, config: ProbesConfig, metrics: ProbesMetrics, store: ProbeStore, topics: Topics
    ) -> None:
        self.config = config
        self.m = metrics
        self.store = store
        self.subscriptions = (native_subscription(topics.probes, "trace", ProbeTrace),)
        self._sets = FirstSeenCap(config.max_sets_per_tenant, always=())
        self._exported: dict[tuple[str, str], tuple[str, str, str, str]] = {}
        self.store_ready = MigratedFirst("probe store", store.migrate, log)

    def readiness(self) -> Readiness:
        """Not ready until the store is reachable and migrated: a down PostgreSQL is not a crash loop."""
        return self.store_ready.readiness()

    def process(self, events: list[Event]) -> list[Rejection]:
        results: list[Result] = []
        changes: list[Change] = []
        rejections: list[Rejection] = []
        for event in events:
            body = event.body
            if isinstance(body, Release):
                if body.variant != PRODUCTION:
                    continue  # a candidate's release changes nothing the probes of production measure
                if body.component not in INDEX_SIDE_COMPONENTS:
                    continue  # e.g. a new generation model: the same neighbours, no new baseline
                changes.append(
                    Change(event.tenant, event.id, body.release, body.variant, event.stored.timestamp)
                )
            elif isinstance(body, ProbeTrace) and body.probe is not None:
                results.append(_result(event, body))
            elif isinstance(body, ProbeTrace):
                rejections.append(Rejection(event, DeadLetterReason.INVALID_BODY, NOT_A_PROBE))
            else:
                rejections.append(Rejection(event, DeadLetterReason.UNEXPECTED_TYPE, f"type: {event.type!r}"))
        if not results and not changes:
            return rejections
        with self.store.batch() as cur:
            declared = self.store.add(cur, results, changes)
            tenants = declared | {r.tenant for r in results if r.variant == PRODUCTION}
            for tenant in sorted(tenants):
                self.store.accept(cur, tenant)
            touched = {(r.tenant, r.probe_set) for r in results if r.variant == PRODUCTION}
            touched |= {key for key in self._exported if key[0] in declared}
            for tenant, probe_set in sorted(touched):
                self._export(cur, tenant, probe_set)
        for r in results:
            self.m.results.labels(r.tenant).inc()
        return rejections

    def _export(self, cur: psycopg.Cursor, tenant: str, probe_set: str) -> None:
        if self._sets(tenant, probe_set) != probe_set:
            self.m.untracked_sets.labels(tenant).inc()
            return
        version = self.store.serving(cur, tenant, probe_set)
        if version is None:
            return
        ref, rows = self.store.compare(cur, tenant, probe_set, version)
        labels = (tenant, probe_set, *version)
        old = self._exported.get((tenant, probe_set))
        if old is not None and old != labels:
            for gauge in (self.m.overlap, self.m.rbo, self.m.gold_recall, self.m.compared):
                _remove(gauge, old)
        self._exported[(tenant, probe_set)] = labels
        if ref is None:
            return
        self._set(labels, rows)

    def _set(self, labels: tuple[str, str, str, str], rows: list[Compared]) -> None:
        k, p = self.config.k, self.config.rbo_p
        overlaps, rbos, recalls = [], [], []
        for row in rows:
            if row.gold:
                recall = recall_at_k(row.gold, row.current, k)
                if recall is not None:
                    recalls.append(recall)
            if row.baseline is None:
                continue
            overlap = overlap_at_k(row.baseline, row.current, k)
            similarity = rbo(row.baseline, row.current, p, k)
            if overlap is not None:
                overlaps.append(overlap)
            if similarity is not None:
                rbos.append(similarity)
        self.m.compared.labels(*labels).set(len(overlaps))
        # An empty denominator is no data: the series is absent, never 0 (docs/probes.md, "No data").
        for gauge, values in ((self.m.overlap, overlaps), (self.m.rbo, rbos), (self.m.gold_recall, recalls)):
            if values:
                gauge.labels(*labels).set(fmean(values))
            else:
                _remove(gauge, labels)

    def close(self) -> None:
        self.store.close()


def _result(event: Event, body: ProbeTrace) -> Result:
    assert body.probe is not None
    return Result(
        tenant=event.tenant,
        event_id=event.id,
        probe_set=body.probe.set,
        query_id=body.probe.query_id,
        variant=body.variant,
        embedding_model=body.embedding_model,
        index_version=body.retrieval.index_version or "",
        retrieved_ids=[d.id for d in body.retrieval.documents],
        observed_at=event.stored.timestamp,
    )


def _remove(gauge: Gauge, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):  # not exported yet
        gauge.remove(*labels)
