"""The exclusion worker's processor: plan each event, claim its effects in Redis, count.

A batch costs at most two Redis round trips (pipelines):

1. every trace stores its evaluated sample for a late label and reads any
   label that came first; every label stores its gold ids for a late trace
   and reads the trace's sample; every trace claims its trace-level counts.
   Each side writes before it reads, so whichever of a trace and its label
   is consumed second sees the first, even across worker processes.
2. the one evaluation with source `labels` is claimed per trace.

Every sample that came without gold ids is evaluated with proxy gold; every
trace whose gold becomes known (sent with the sample, or by a label event
consumed before or after it) is also evaluated once with source `labels`.

The same evaluation with source `labels` counts the trace's retrieval
metrics (workers/exclusion/retrieval.py) over the ranked ids kept with the
sample: once per trace, under the same claim; proxy gold never counts there.

Metrics are incremented only after both round trips succeeded, so an outage
raises before anything is counted and the runtime's retry counts it once: a
claim holds the claiming event's id, and a retry recognises its own claim.
The process remembers which claims it has already counted, so a batch that
is processed again after it succeeded is not counted twice either.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import redis

from workers.exclusion.config import ExclusionConfig
from workers.exclusion.evaluate import ProxyGold, evaluate
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.plan import LabelPlan, TracePlan, plan_label, plan_trace
from workers.exclusion.results import emit_result
from workers.exclusion.retrieval import retrieval_values
from workers.exclusion.state import (
    StoredSample,
    decode_label,
    decode_sample,
    encode_label,
    encode_sample,
    evaluated_key,
    label_key,
    labelled_key,
    sample_key,
)
from workers.exclusion.views import VIEWS
from workers.runtime.contract import Processor
from workers.runtime.pipeline import NamedPipeline
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Emitter, Event, InvalidEvent, Rejection


class RecentKeys:
    """The claims this process has counted, oldest forgotten first, in a fixed number of bytes.

    A key is remembered as a 64-bit digest: in a ring of `limit` slots (the order to forget them in)
    and in an open-addressing table of at least twice as many (linear probing, so a lookup is a
    few array reads; the oldest is removed by shifting its cluster back, no tombstones). Both
    arrays are allocated once, so memory is 8 bytes x (ring + table) from the start, whatever the
    keys' length and however many have been seen: 2.8 MiB for 100,000 keys, where a dict of the
    key strings grew by about 230 bytes of RSS a key until full. Two keys share a digest with probability
    about limit^2 / 2^65 (3e-10 at 100,000); then a new claim is taken for one already counted.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"recent_limit: must be at least 1, got {limit}")
        self._limit = limit
        size = 1 << max(3, (2 * limit - 1).bit_length())  # a power of two, at least 2 x limit
        self._mask = size - 1
        self._table = array("Q", bytes(8 * size))  # 0 = empty slot
        self._ring = array("Q", bytes(8 * limit))
        self._next = 0  # ring slot of the next key (the oldest once the ring is full)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        """Bytes held by the two arrays (fixed at construction)."""
        return (len(self._table) + len(self._ring)) * 8

    def __contains__(self, key: str) -> bool:
        digest = _digest(key)
        return self._table[self._slot(digest)] == digest

    def add(self, key: str) -> None:
        digest = _digest(key)
        slot = self._slot(digest)
        if self._table[slot] == digest:
            return
        if self._count == self._limit:
            self._remove(self._ring[self._next])
            slot = self._slot(digest)  # the removal may have shifted the cluster
        else:
            self._count += 1
        self._table[slot] = digest
        self._ring[self._next] = digest
        self._next = (self._next + 1) % self._limit

    def _slot(self, digest: int) -> int:
        """The slot holding `digest`, or the empty slot where it would go."""
        table, mask = self._table, self._mask
        slot = digest & mask
        while True:
            held = table[slot]
            if held == digest or held == 0:
                return slot
            slot = (slot + 1) & mask

    def _remove(self, digest: int) -> None:
        """Empty the digest's slot and move later members of its cluster back (Knuth's algorithm R)."""
        table, mask = self._table, self._mask
        hole = self._slot(digest)
        probe = hole
        while True:
            probe = (probe + 1) & mask
            held = table[probe]
            if held == 0:
                break
            home = held & mask
            # `held` may fill the hole unless its home lies cyclically in (hole, probe].
            if not _between(hole, home, probe):
                table[hole] = held
                hole = probe
        table[hole] = 0


def _between(low: int, x: int, high: int) -> bool:
    """Whether x lies cyclically in (low, high]."""
    if low <= high:
        return low < x <= high
    return x > low or x <= high


def _digest(key: str) -> int:
    value = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
    return value or 1  # 0 marks an empty slot


@dataclass
class _LabelClaim:
    key: str
    owner: str
    tenant: str
    stored: StoredSample
    gold_ids: list[str]
    label_event: str | None  # set when a label event (not the trace) asks for the evaluation
    plan: TracePlan | None = None  # the trace's plan when the trace itself asks (its result is emitted)


@dataclass
class _Round:
    """Effects decided so far, applied only once every Redis call has succeeded."""

    effects: list[tuple[str, Callable[[], None]]] = field(default_factory=list)
    claims: list[_LabelClaim] = field(default_factory=list)


class ExclusionProcessor(Processor):
    name = "exclusion"
    event_types: tuple[str, ...] = ("trace", "label")
    views = VIEWS

    def __init__(
        self,
        client: redis.Redis,
        metrics: ExclusionMetrics,
        config: ExclusionConfig,
        recent_limit: int = 100_000,
        emitter: Emitter | None = None,
        scores_topic: str = "",
    ) -> None:
        # One ExclusionResultEvent per evaluation made from a trace, to the scores topic (shadow pairing).
        self._emitter = emitter
        self._scores_topic = scores_topic
        self._redis = client
        self._metrics = metrics
        self._ttl = config.label_wait_ttl_s
        self._proxy = ProxyGold(config.proxy_score_threshold, config.proxy_top_k)
        self._counted = RecentKeys(recent_limit)
        self._ks = tuple(config.retrieval_ks)

    def process(self, events: list[Event]) -> list[Rejection]:
        rejections: list[Rejection] = []
        traces: list[TracePlan] = []
        labels: list[LabelPlan] = []
        for event in events:
            try:
                if event.type == "trace":
                    traces.append(plan_trace(event, self._proxy))
                elif event.type == "label":
                    labels.append(plan_label(event))
                else:
                    detail = (
                        f"type: the exclusion worker reads {', '.join(self.event_types)}, got {event.type!r}"
                    )
                    rejections.append(Rejection(event, DeadLetterReason.UNEXPECTED_TYPE, detail))
            except InvalidEvent as exc:
                rejections.append(Rejection(event, exc.reason, exc.detail))
        for t in traces:
            self._metrics.touch_tenant(t.tenant)
        traces = [t for t in traces if t.has_effects]
        work = _Round()
        if traces or labels:
            self._exchange(traces, labels, work)
        if work.claims:
            self._claim_labels(work)
        for key, effect in work.effects:
            if key not in self._counted:
                effect()
                self._counted.add(key)
        return rejections

    def _exchange(self, traces: list[TracePlan], labels: list[LabelPlan], work: _Round) -> None:
        pipe = NamedPipeline(self._redis)
        for t in traces:
            if t.sample is not None:
                pipe.set(
                    None,
                    sample_key(t.tenant, t.trace_id),
                    encode_sample(t.variant, t.intent, t.sample, t.candidate_ids, t.context_ids, t.release),
                    ex=self._ttl,
                )
                pipe.get(("label waiting for", t.event_id), label_key(t.tenant, t.trace_id))
            self._claim(pipe, ("evaluated by", t.event_id), evaluated_key(t.tenant, t.trace_id), t.event_id)
        for lab in labels:
            if lab.gold_ids is not None:
                pipe.set(
                    None,
                    label_key(lab.tenant, lab.trace_id),
                    encode_label(lab.gold_ids),
                    nx=True,
                    ex=self._ttl,
                )
                pipe.get(("sample waiting for", lab.event_id), sample_key(lab.tenant, lab.trace_id))
        replies = pipe.execute()
        for t in traces:
            pending = (
                decode_label(replies[("label waiting for", t.event_id)]) if t.sample is not None else None
            )
            if _owned(replies[("evaluated by", t.event_id)], t.event_id):
                self._plan_trace_effects(t, pending, work)
        for lab in labels:
            sample = replies.get(("sample waiting for", lab.event_id))
            self._plan_label_effects(lab, sample, work)

    def _claim(self, pipe: NamedPipeline, name: tuple[str, str], key: str, owner: str) -> None:
        """SET NX the owner, then GET who holds the claim (this owner, or whoever came first)."""
        pipe.set(None, key, owner, nx=True, ex=self._ttl)
        pipe.get(name, key)

    def _plan_trace_effects(self, t: TracePlan, pending: list[str] | None, work: _Round) -> None:
        metrics, key = self._metrics, evaluated_key(t.tenant, t.trace_id)
        sample = t.sample
        # Proxy evaluation depends only on the sample, never on whether a label
        # happened to be consumed first: the proxy series stays one count per
        # sample without gold of its own, whatever the partitions' timing.
        proxy = sample is not None and t.sample_gold is None
        # A reviewer's label event wins over gold sent with the sample: it is the later judgement.
        gold = pending if pending is not None else t.sample_gold

        def count_trace() -> None:
            metrics.record_documents(t.tenant, "context", t.context_leaks, t.context_unverified)
            if sample is not None:
                metrics.record_documents(t.tenant, "candidate", sample.leaked, sample.unverified)
            if proxy and sample is not None:
                outcome = evaluate(sample, sample.proxy_gold, "proxy")
                metrics.record_query(t.tenant, t.variant, t.intent, outcome)
                emit_result(self._emitter, self._scores_topic, t, outcome, sample.leaked)

        work.effects.append((key, count_trace))
        if sample is not None and gold is not None:
            stored = StoredSample(t.variant, t.intent, sample, t.candidate_ids, t.context_ids, t.release)
            claim_key = labelled_key(t.tenant, t.trace_id)
            work.claims.append(_LabelClaim(claim_key, t.event_id, t.tenant, stored, gold, None, t))

    def _plan_label_effects(self, lab: LabelPlan, sample: bytes | None, work: _Round) -> None:
        metrics, key = self._metrics, f"label-event:{lab.event_id}"
        if lab.gold_ids is None:
            work.effects.append((key, partial(metrics.record_label, lab.tenant, "no_gold_ids")))
            return
        stored = decode_sample(sample)
        if stored is None:
            work.effects.append((key, partial(metrics.record_label, lab.tenant, "waiting")))
            return
        claim_key = labelled_key(lab.tenant, lab.trace_id)
        work.claims.append(
            _LabelClaim(claim_key, lab.event_id, lab.tenant, stored, lab.gold_ids, lab.event_id)
        )

    def _claim_labels(self, work: _Round) -> None:
        pipe = NamedPipeline(self._redis)
        for claim in work.claims:  # an event asks for at most one labels evaluation
            self._claim(pipe, ("labelled by", claim.owner), claim.key, claim.owner)
        replies = pipe.execute()
        for claim in work.claims:
            owned = _owned(replies[("labelled by", claim.owner)], claim.owner)
            if owned:
                work.effects.append((claim.key, self._labels_effect(claim)))
            elif claim.label_event is not None:
                key = f"label-event:{claim.label_event}"
                work.effects.append((key, partial(self._metrics.record_label, claim.tenant, "duplicate")))

    def _labels_effect(self, claim: _LabelClaim) -> Callable[[], None]:
        def count_labels() -> None:
            stored = claim.stored
            outcome = evaluate(stored.sample, claim.gold_ids, "labels")
            self._metrics.record_query(claim.tenant, stored.variant, stored.intent, outcome)
            ranked = retrieval_values(stored, claim.gold_ids, self._ks)
            if ranked is not None:
                self._metrics.record_retrieval(
                    claim.tenant, stored.variant, stored.intent, ranked, stored.release
                )
            if claim.plan is not None:
                emit_result(self._emitter, self._scores_topic, claim.plan, outcome, stored.sample.leaked)
            if claim.label_event is not None:
                self._metrics.record_label(claim.tenant, "applied")

        return count_labels


def _owned(reply: bytes | str | None, owner: str) -> bool:
    # The runtime's client may or may not decode responses.
    if isinstance(reply, bytes):
        reply = reply.decode()
    return reply == owner
