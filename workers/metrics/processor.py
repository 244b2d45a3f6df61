"""The metrics worker: per-stage latency, cost, tokens, query counts, feedback joins, release markers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from service.contracts.views import TraceError
from workers.checks.answer import check_answer
from workers.checks.config import ChecksConfig
from workers.metrics.changes import (
    DECLARED,
    UNKNOWN_FROM,
    ChangeDetector,
    ChangeMarker,
    ChangeMarkers,
    Hysteresis,
)
from workers.metrics.config import MetricsConfig
from workers.metrics.joins import FeedbackJoin, JoinInfo
from workers.metrics.metrics import INTENT_STAGES, MetricsWorkerMetrics
from workers.metrics.pricing import UNKNOWN, PriceTable, cap_stages
from workers.metrics.releases import ALWAYS_KEPT_VARIANT, CurrentReleases, Marker, RecentReleases
from workers.metrics.views import VIEWS, MetricsFeedback, MetricsRelease, MetricsTrace
from workers.runtime.contract import Processor
from workers.runtime.labels import NONE, OTHER, Children, ClosedSet, DeferredCounts, WindowedCap, prune
from workers.runtime.types import Event, Rejection

ANY = "any"  # ragmon_feedback_traces_total: traces with feedback of any kind


class MetricsProcessor(Processor):
    name = "metrics"
    event_types: tuple[str, ...] = ("trace", "feedback", "release")
    views = VIEWS

    def __init__(
        self,
        config: MetricsConfig,
        metrics: MetricsWorkerMetrics,
        client: redis.Redis,
        clock: Callable[[], float] = time.time,
        checks: ChecksConfig | None = None,
    ) -> None:
        self.config = config
        self.checks = checks if checks is not None else ChecksConfig()
        self.m = metrics
        self.redis = client
        self.prices = PriceTable(config.prices)
        self.stages = frozenset(config.stages)
        self.intent = ClosedSet(config.intents)
        self.variant = WindowedCap(
            config.max_variants_per_tenant,
            config.variant_window_s,
            always=(ALWAYS_KEPT_VARIANT,),
            on_fold=lambda tenant: self._fold(tenant, "variant"),
        )
        # What this process exports per release (RecentReleases decides which releases may be a label
        # value, for every replica): a release not seen for the window has its series removed here.
        self.release_labels = WindowedCap(
            config.max_releases_per_tenant,
            config.release_window_s,
            always=(NONE,),
            on_fold=lambda tenant: self._fold(tenant, "release"),
        )
        self.releases = RecentReleases(
            client, config.max_releases_per_tenant, config.release_window_s, config.release_refresh_s
        )
        self.markers = CurrentReleases(client, config.max_variants_per_tenant)
        self.changes = ChangeMarkers(client)
        self.detector = ChangeDetector(
            client,
            Hysteresis(
                config.change_min_traces,
                config.change_window_s,
                config.change_enter_share,
                config.change_exit_share,
                config.change_max_values,
            ),
            self.changes,
        )
        self._exported_changes: dict[tuple[str, str], tuple[str, str, str]] = {}
        self.clock = clock
        self.join = FeedbackJoin(client, config.join_ttl_s, config.park_s)
        self._children = Children()
        # What counts in process: the children themselves outside a batch, a DeferredCounts during one.
        self.child: Children | DeferredCounts = self._children
        self._next_sweep = 0.0
        self._next_series_sweep = clock() + config.series_sweep_s
        self._next_release_refresh = 0.0
        self._exported_releases: dict[tuple[str, str], str] = {}

    def process(self, events: list[Event]) -> list[Rejection]:
        """The batch's counts, applied in process only once all its Redis work succeeded.

        A Redis call that fails (an outage: the runtime retries the same events) or a poison record (the
        runtime processes halves again) leaves no count behind, so a retried batch counts each event once;
        the change detector drops what a failed try observed for the same reason.
        """
        counts = DeferredCounts(self._children)
        self.detector.discard_pending()
        self.child = counts
        try:
            rejections = self._process(events)
        finally:
            self.child = self._children
        counts.apply()
        return rejections

    def _process(self, events: list[Event]) -> list[Rejection]:
        """In-process counts first, then every join of the batch in one Redis round trip.

        The join scripts run in event order inside one pipeline, so a trace and
        its feedback in the same batch meet exactly as if sent one by one.
        """
        pipe = self.redis.pipeline(transaction=False)
        pending: list[tuple[str, str, Any]] = []
        now = self.clock()
        for event in events:
            if event.type == "trace":
                pending.append(
                    ("trace", event.tenant, self._trace(pipe, event.tenant, event.body, now, event.id))
                )
            elif event.type == "feedback":
                f: MetricsFeedback = event.body
                payload = self._payload(f)
                self.join.queue_feedback(pipe, event.tenant, f.trace_id, event.id, payload)
                pending.append(("feedback", event.tenant, payload))
        results = pipe.execute() if pending else []
        for (kind, tenant, context), result in zip(pending, results, strict=True):
            if kind == "trace":
                for parked in self.join.parked_from(result):
                    self._count_feedback(
                        tenant, context, parked.payload, parked.first_of_kind, parked.first_of_any, now
                    )
            else:
                joined = self.join.joined_from(result)
                if joined is None:
                    self.child(self.m.feedback_parked, tenant).inc()
                else:
                    self._count_feedback(
                        tenant, joined.info, context, joined.first_of_kind, joined.first_of_any, now
                    )
        for event in events:
            if event.type == "release":
                self._release(event, event.body, now)
        for change in self.detector.flush(now):
            self.m.detected_changes.labels(change.tenant, change.component).inc()
            self._next_release_refresh = 0.0
        return []

    # -- traces ---------------------------------------------------------------

    def _trace(self, pipe: Any, tenant: str, t: MetricsTrace, now: float, event_id: str) -> JoinInfo:
        c, m = self.child, self.m
        variant = self.variant(tenant, t.variant, now)
        intent = self.intent(t.intent)
        tv = (tenant, variant)
        weight = 1.0 / t.sample_rate
        release = self._release_label(tenant, t.release, now) if t.release else None
        if variant == ALWAYS_KEPT_VARIANT:  # a candidate's models are not the tenant's
            self.detector.observe(tenant, t)
        if t.error is not None:
            info = JoinInfo(variant, release, intent, errored=True)
            return self._errored(pipe, tenant, t, t.error, info, weight, event_id)
        for stage, seconds in cap_stages(t.timings, self.stages):
            c(m.stage_seconds, *tv, stage).observe(seconds)
            if stage in INTENT_STAGES:
                c(m.intent_seconds, *tv, intent, stage).observe(seconds)
        c(m.queries, *tv, intent).inc()
        c(m.queries_estimated, *tv, intent).inc(weight)
        if t.answer.refused:
            c(m.refusals, *tv, intent).inc()
        elif not t.answer.citations:
            c(m.uncited, *tv, intent).inc()
        else:
            c(m.cited, *tv, intent).inc()
        if t.answer.finish_reason is not None:
            c(m.finish_reasons, *tv, intent, t.answer.finish_reason).inc()
        if self.checks.enabled:
            self._check(tenant, tv, intent, t)
        mismatch = c(
            m.encoder_mismatch, *tv
        )  # at 0 from the tenant's first trace: the alert sees the first one
        index_model, query_model = t.retrieval.index_embedding_model, t.query.embedding_model
        if index_model is not None and query_model is not None and index_model != query_model:
            mismatch.inc()
        self._cost(tv, t, weight, intent=intent)
        c(m.release_queries, *tv, release or NONE).inc()
        info = JoinInfo(variant, release, intent)
        self.join.queue_trace(pipe, tenant, t.trace_id, event_id, info)
        return info

    def _release_label(self, tenant: str, release: str, now: float) -> str:
        """The shared decision (RecentReleases) is authoritative: an admitted release is live here too, the
        least recently seen one making room if this process still holds `limit` of them."""
        label = self.releases.label(tenant, release, now)
        if label == OTHER:
            self._fold(tenant, "release")
            return OTHER
        self._make_live(tenant, label, now)
        return label

    def _make_live(self, tenant: str, release: str, now: float) -> None:
        displaced = self.release_labels.force(tenant, release, now)
        if displaced is not None:
            prune(self.m.release_families, {"tenant": tenant, "release": displaced}, self._children)

    def _fold(self, tenant: str, label: str) -> None:
        self.child(self.m.folded, tenant, label).inc()

    def _check(self, tenant: str, tv: tuple[str, str], intent: str, t: MetricsTrace) -> None:
        """The deterministic answer checks (workers/checks): one count per check and outcome."""
        result = check_answer(self.checks, tenant, t.answer, t.retrieval.documents, t.response_format)
        for check, outcome in result.outcomes.items():
            self.child(self.m.checks, *tv, intent, check, outcome).inc()

    def _errored(
        self,
        pipe: Any,
        tenant: str,
        t: MetricsTrace,
        error: TraceError,
        info: JoinInfo,
        weight: float,
        event_id: str,
    ) -> JoinInfo:
        """A failed request: an error of its stage and type, its tokens and spend; no query, latency, cost per
        query or answer count, so it never moves a quality or latency signal or their denominators."""
        stage = error.stage if error.stage in self.stages else OTHER
        self.child(self.m.errors, tenant, info.variant, info.intent or NONE, stage, error.type).inc()
        self._cost((tenant, info.variant), t, weight, per_query=False)
        self.join.queue_trace(pipe, tenant, t.trace_id, event_id, info)
        return info

    def _cost(
        self, tv: tuple[str, str], t: MetricsTrace, weight: float, per_query: bool = True, intent: str = NONE
    ) -> None:
        c, m = self.child, self.m
        tokens: dict[str, int] = dict(t.usage.tokens.items())
        model = t.usage.model or NONE
        cost, source = self.prices.cost(t.usage.model, tokens, t.usage.cost_usd)
        if per_query:
            c(m.cost_queries, *tv, source).inc()
        if cost is not None and source != UNKNOWN:
            if per_query:
                c(m.cost_per_query, *tv, source).observe(cost)
                c(m.intent_cost_usd, *tv, intent).inc(cost)
                c(m.intent_costed_queries, *tv, intent).inc()
            c(m.cost_estimated_usd, *tv, source).inc(cost * weight)
        model_label = model if self.prices.knows(model) or model == NONE else "other"
        for kind, n in tokens.items():
            if n:
                c(m.tokens, *tv, kind, model_label).inc(n)

    # -- feedback -------------------------------------------------------------

    @staticmethod
    def _payload(f: MetricsFeedback) -> dict[str, Any]:
        """What a feedback needs to be counted, also what waits in Redis for its trace (kept small)."""
        payload: dict[str, Any] = {"kind": f.kind, "reason": f.reason}
        if f.kind == "thumbs":
            payload["up"] = f.thumbs_up
        elif f.kind == "dwell":
            payload["seconds"] = f.dwell_seconds
        return payload

    def _count_feedback(
        self,
        tenant: str,
        info: JoinInfo,
        payload: dict[str, Any],
        first_of_kind: bool,
        first_of_any: bool,
        now: float,
    ) -> None:
        c, m = self.child, self.m
        kind = payload["kind"]
        # The trace's labels, decided when it arrived, are live again (or folded, if they left the window
        # and their tenant filled the cap since): every series this process creates is one the caps track.
        variant = self.variant(tenant, info.variant, now)
        release = self.release_labels(tenant, info.release, now) if info.release else None
        info = JoinInfo(variant, release, info.intent, errored=info.errored)
        if info.errored:  # a retry after a failed request says nothing about an answer's quality
            c(m.feedback_on_errors, tenant, info.variant, kind).inc()
            return
        joined = (tenant, info.variant, info.release or NONE, info.intent or NONE)
        c(m.feedback, *joined, kind, payload.get("reason") or NONE).inc()
        up = payload.get("up")
        if kind == "thumbs" and isinstance(up, bool):  # parked before directions were kept: no direction
            c(m.thumbs, *joined, "up" if up else "down").inc()
        seconds = payload.get("seconds")
        if kind == "dwell" and isinstance(seconds, int | float):
            c(m.dwell_seconds, tenant, info.variant, info.intent or NONE).observe(seconds)
        if first_of_kind:
            c(m.feedback_traces, *joined, kind).inc()
        if first_of_any:
            c(m.feedback_traces, *joined, ANY).inc()

    def _sweep_unjoined(self, now: float) -> None:
        for tenant, parked in self.join.iter_claim_expired(now):
            self.m.feedback_unjoined.labels(
                tenant, str(parked.payload.get("kind")), str(parked.payload.get("reason") or NONE)
            ).inc()

    # -- releases -------------------------------------------------------------

    def _release(self, event: Event, r: MetricsRelease, now: float) -> None:
        """Kept in Redis (newest marker wins) so every replica exports the same current release."""
        variant = self.variant(event.tenant, r.variant, now)
        if variant == OTHER:  # over the tenant's variant cap: no info series of its own
            return
        ts = event.stored.timestamp.timestamp()
        self.markers.record(Marker(event.tenant, variant, r.release, ts))
        if r.component != "app" and variant == ALWAYS_KEPT_VARIANT and r.to is not None:
            self.changes.record(
                ChangeMarker(event.tenant, r.component, r.from_ or UNKNOWN_FROM, r.to, DECLARED, ts)
            )
        self.releases.announce(event.tenant, r.release, now)
        self._make_live(event.tenant, r.release, now)
        self._next_release_refresh = 0.0

    def _refresh_releases(self) -> None:
        kept: dict[tuple[str, str], str] = {}
        for marker in self.markers.read_and_trim():
            key = (marker.tenant, marker.variant)
            kept[key] = marker.release
            old = self._exported_releases.get(key)
            if old is not None and old != marker.release:
                self.m.release_info.remove(marker.tenant, marker.variant, old)
            self.m.release_info.labels(marker.tenant, marker.variant, marker.release).set(1)
            self.m.release_timestamp.labels(marker.tenant, marker.variant).set(marker.ts)
        for (tenant, variant), release in self._exported_releases.items():
            if (tenant, variant) not in kept:  # trimmed: its series go too
                self.m.release_info.remove(tenant, variant, release)
                self.m.release_timestamp.remove(tenant, variant)
        self._exported_releases = kept
        self._refresh_changes()

    def _refresh_changes(self) -> None:
        """The latest change per (tenant, component): the previous one's series is removed."""
        kept: dict[tuple[str, str], tuple[str, str, str]] = {}
        gauge = self.m.component_change
        for c in self.changes.read():
            key, labels = (c.tenant, c.component), (c.from_, c.to, c.source)
            old = self._exported_changes.get(key)
            if old is not None and old != labels:
                gauge.remove(*key, *old)
            gauge.labels(*key, *labels).set(c.ts)
            kept[key] = labels
        for key, labels in self._exported_changes.items():
            if key not in kept:
                gauge.remove(*key, *labels)
        self._exported_changes = kept

    def _sweep_series(self, now: float) -> None:
        """Remove the series of variants and releases no trace named within their window."""
        for tenant, variant in self.variant.expire(now):
            prune(self.m.variant_families, {"tenant": tenant, "variant": variant}, self._children)
        for tenant, release in self.release_labels.expire(now):
            prune(self.m.release_families, {"tenant": tenant, "release": release}, self._children)

    def tick(self, now: float) -> None:
        if now >= self._next_series_sweep:
            self._next_series_sweep = now + self.config.series_sweep_s
            self._sweep_series(now)
        if now >= self._next_sweep:
            self._next_sweep = now + 1.0
            self._sweep_unjoined(now)
        if now >= self._next_release_refresh:
            self._next_release_refresh = now + self.config.release_refresh_s
            self._refresh_releases()

    def close(self) -> None:
        return None
