"""One batch of traces, scores and feedback -> the items to queue and the scores to attach.

A trace's display content waits in Redis (lz4-compressed, TTL `stash_ttl_s`) for
the score or feedback that may select it; a selection that arrives before its
trace waits there too, as a trigger the trace picks up. All of a batch's Redis
work is one pipeline, run in event order, so a trace and its score in one
batch meet as if sent one by one. Every write is idempotent (HSET of fixed
fields), so a retried batch repeats it harmlessly.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import lz4.frame
import orjson
import redis

from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from service.contracts.vocabulary import IMPLICIT_SIGNALS
from workers.checks.answer import check_answer
from workers.checks.config import ChecksConfig
from workers.review.config import ReviewConfig, Stratum
from workers.review.sampler import Sampler, Trigger, display_content
from workers.review.views import ReviewFeedback, ReviewTrace
from workers.runtime.types import Event

CONTENT, FAITH, EXCL = "c", "f", "x"
TRIGGERS = ("q:low_confidence", "q:negative_feedback")
# The implicit signals seen for a trace before its item exists (the first time each), picked up with it.
SIGNALS = tuple(f"s:{name}" for name in IMPLICIT_SIGNALS)
# When one trace qualifies several ways in one batch, the blind sample wins (it must stay a probability
# sample), then negative feedback (a user told us), then low confidence, then a failed deterministic
# check, then a drifted window.
PRIORITY: dict[str, int] = {
    "blind": 0,
    "negative_feedback": 1,
    "low_confidence": 2,
    "failed_check": 3,
    "drift": 4,
}


def stash_key(tenant: str, trace_id: str) -> str:
    return f"ragmon:review:t:{tenant}:{trace_id}"


@dataclass
class NewItem:
    tenant: str
    trace_id: str
    stratum: Stratum
    reason: str
    inclusion_probability: float
    trace_timestamp: datetime
    content: dict[str, Any]
    faithfulness: dict[str, Any] | None
    exclusion: dict[str, Any] | None
    reviews_wanted: int
    signals: dict[str, str] = field(default_factory=dict)  # implicit signal -> first seen (ISO time)


@dataclass
class Plan:
    items: dict[tuple[str, str], NewItem] = field(default_factory=dict)
    faithfulness: list[FaithfulnessScoreEvent] = field(default_factory=list)
    exclusions: list[ExclusionResultEvent] = field(default_factory=list)
    score_totals: Counter[tuple[str, date, str]] = field(
        default_factory=Counter
    )  # (tenant, day, scored|faithful)
    parked: Counter[tuple[str, str]] = field(default_factory=Counter)
    # (tenant, trace id, signal, ISO time) of the batch's feedback: recorded where the trace has an item
    signals: list[tuple[str, str, str, str]] = field(default_factory=list)

    def offer(self, item: NewItem) -> None:
        key = (item.tenant, item.trace_id)
        held = self.items.get(key)
        if held is None or PRIORITY[item.stratum] < PRIORITY[held.stratum]:
            self.items[key] = item


def faithfulness_fields(e: FaithfulnessScoreEvent) -> dict[str, Any]:
    return {
        "score": e.score,
        "threshold": e.threshold,
        "outcome": e.outcome,
        "scorer_version": f"{e.model.source}@{e.model.revision[:12]}",
    }


def exclusion_fields(e: ExclusionResultEvent) -> dict[str, Any]:
    return {"falsely_excluded": e.falsely_excluded, "gold_source": e.gold_source}


def _pack_trigger(t: Trigger) -> bytes:
    return orjson.dumps({"stratum": t.stratum, "reason": t.reason, "p": t.base_probability})


@dataclass
class _Step:
    """One event's Redis commands: how many write replies to skip, which fields its read returns."""

    event: Event
    trigger: Trigger | None
    writes: int
    reads: tuple[str, ...] = ()
    content: dict[str, Any] | None = None  # a trace's own display content
    opens_run: bool = False  # the first trace of a run: its reply holds the whole run's replies
    drift: Trigger | None = None  # a trace of a flagged drift window (chosen with the trace, like blind)
    checked: Trigger | None = None  # an answer a deterministic check failed (chosen with the trace too)


# Each trace of a run of consecutive traces: stash its content, set the TTL, read what waits for it (nil when
# only the content is there, almost always). One script call per run instead of three commands per trace:
# the sampler does this for every trace, and building and parsing commands was most of its Redis time.
_STASH_TRACES = """
local out = {}
for i, key in ipairs(KEYS) do
  redis.call('HSET', key, 'c', ARGV[i + 1])
  redis.call('EXPIRE', key, ARGV[1])
  if redis.call('HLEN', key) == 1 then
    out[i] = false
  else
    out[i] = redis.call('HMGET', key, 'f', 'x', 'q:low_confidence', 'q:negative_feedback', SIGNAL_FIELDS)
  end
end
return out
""".replace("SIGNAL_FIELDS", ", ".join(f"'{f}'" for f in SIGNALS))


class Planner:
    def __init__(self, config: ReviewConfig, client: redis.Redis, checks: ChecksConfig | None = None) -> None:
        self.config = config
        self.checks = checks if checks is not None else ChecksConfig()
        self.sampler = Sampler(config)
        self.redis = client
        self._stash_traces = client.register_script(_STASH_TRACES)
        self._drifting: dict[str, frozenset[str]] = {}

    def plan(self, events: list[Event], drifting: dict[str, frozenset[str]] | None = None) -> Plan:
        """`drifting`: tenant -> intents of its flagged query-drift windows (service/contracts/driftflags.py)."""
        self._drifting = drifting or {}
        plan = Plan()
        pipe = self.redis.pipeline(transaction=False)
        steps: list[_Step] = []
        run: tuple[list[str], list[Any]] = ([], [self.config.stash_ttl_s])  # keys and args of a run of traces
        for e in events:
            body = e.body
            if e.type == "trace" and body is not None and body.variant == "production":
                steps.append(self._queue_trace(run, e, body))
                continue
            self._flush_run(pipe, run)  # the traces before this event reach Redis before its commands
            step = self._queue(pipe, plan, e)
            if step is not None:
                steps.append(step)
        self._flush_run(pipe, run)
        replies = iter(pipe.execute() if steps else ())
        run_replies: Any = iter(())
        for step in steps:
            for _ in range(step.writes):
                next(replies)
            if step.opens_run:
                run_replies = iter(next(replies))
            if step.reads:
                values = next(run_replies if step.content is not None else replies)
                values = values or [None] * len(step.reads)  # nil: nothing waits for this trace
                self._resolve(plan, step, dict(zip(step.reads, values, strict=True)))
        return plan

    def _flush_run(self, pipe: Any, run: tuple[list[str], list[Any]]) -> None:
        keys, args = run
        if keys:
            self._stash_traces(keys=list(keys), args=list(args), client=pipe)
            keys.clear()
            del args[1:]

    def _queue(self, pipe: Any, plan: Plan, e: Event) -> _Step | None:
        body = e.body
        if e.type == "feedback":
            signal = implicit_signal(body, self.config.short_dwell_s)
            if signal is not None:
                at = e.stored.timestamp.isoformat()
                plan.signals.append((e.tenant, body.trace_id, signal, at))
                pipe.hsetnx(stash_key(e.tenant, body.trace_id), f"s:{signal}", at)
            trigger = self.sampler.feedback(e.tenant, body)
            return self._select(pipe, e, e.tenant, body.trace_id, trigger, 0 if signal is None else 1)
        if body is None or body.variant != "production":
            return None  # shadow candidates are compared by the shadow worker, not reviewed
        key = stash_key(e.tenant, body.trace_id)
        if isinstance(body, FaithfulnessScoreEvent):
            if body.outcome == "scored" and body.score is not None:
                day = body.trace_timestamp.astimezone(UTC).date()
                plan.score_totals[(e.tenant, day, "scored")] += 1
                plan.score_totals[(e.tenant, day, "faithful")] += body.score >= body.threshold
            plan.faithfulness.append(body)
            pipe.hset(key, FAITH, orjson.dumps(faithfulness_fields(body)))
            return self._select(pipe, e, e.tenant, body.trace_id, self.sampler.faithfulness(body), 1)
        if isinstance(body, ExclusionResultEvent):
            plan.exclusions.append(body)
            pipe.hset(key, EXCL, orjson.dumps(exclusion_fields(body)))
            return self._select(pipe, e, e.tenant, body.trace_id, self.sampler.exclusion(body), 1)
        return None

    def _queue_trace(self, run: tuple[list[str], list[Any]], e: Event, t: ReviewTrace) -> _Step:
        content = display_content(t)
        content["timestamp"] = e.stored.timestamp.isoformat()
        keys, args = run
        keys.append(stash_key(e.tenant, t.trace_id))
        args.append(lz4.frame.compress(orjson.dumps(content)))
        flagged = self._drifting.get(e.tenant)
        return _Step(
            e,
            self.sampler.blind(e.tenant, t),
            0,
            (FAITH, EXCL, *TRIGGERS, *SIGNALS),
            content,
            opens_run=len(keys) == 1,
            drift=self.sampler.drift(e.tenant, t, flagged) if flagged else None,
            checked=self.sampler.failed_check(e.tenant, t, self._failed_checks(e.tenant, t)),
        )

    def _failed_checks(self, tenant: str, t: ReviewTrace) -> list[str]:
        """The deterministic checks the answer failed (the same function the metrics worker counts)."""
        if not self.checks.enabled or t.error is not None or t.answer.refused:
            return []
        return check_answer(self.checks, tenant, t.answer, t.retrieval.documents, t.response_format).failed

    def _select(
        self, pipe: Any, e: Event, tenant: str, trace_id: str, trigger: Trigger | None, writes: int
    ) -> _Step:
        key = stash_key(tenant, trace_id)
        if trigger is None:
            if writes:
                pipe.expire(key, self.config.stash_ttl_s)
            return _Step(e, None, writes + (1 if writes else 0))
        pipe.hset(key, f"q:{trigger.stratum}", _pack_trigger(trigger))
        pipe.expire(key, self.config.stash_ttl_s)
        pipe.hmget(key, CONTENT, FAITH, EXCL, *SIGNALS)
        return _Step(e, trigger, writes + 2, (CONTENT, FAITH, EXCL, *SIGNALS))

    # -- turning replies into items -------------------------------------------

    def _resolve(self, plan: Plan, step: _Step, fields: dict[str, Any]) -> None:
        e = step.event
        if step.content is not None:
            content = step.content
            triggers = [t for t in (step.trigger, step.drift, step.checked) if t is not None]
            triggers += [_unpack_trigger(fields[k]) for k in TRIGGERS if fields.get(k)]
        else:
            if not fields.get(CONTENT):
                plan.parked[(e.tenant, step.trigger.stratum if step.trigger else "")] += 1
                return
            content = orjson.loads(lz4.frame.decompress(fields[CONTENT]))
            triggers = [step.trigger] if step.trigger else []
        for trigger in triggers:
            plan.offer(self._item(e.tenant, content, trigger, fields))

    def _item(
        self, tenant: str, content: dict[str, Any], trigger: Trigger, fields: dict[str, Any]
    ) -> NewItem:
        trace_id = content["trace_id"]
        return NewItem(
            tenant=tenant,
            trace_id=trace_id,
            stratum=trigger.stratum,
            reason=trigger.reason,
            inclusion_probability=min(1.0, trigger.base_probability * content["sample_rate"]),
            trace_timestamp=datetime.fromisoformat(content["timestamp"]),
            content=content,
            faithfulness=orjson.loads(fields[FAITH]) if fields.get(FAITH) else None,
            exclusion=orjson.loads(fields[EXCL]) if fields.get(EXCL) else None,
            reviews_wanted=self.sampler.reviews_wanted(tenant, trace_id),
            signals={
                name: _text(fields[f"s:{name}"]) for name in IMPLICIT_SIGNALS if fields.get(f"s:{name}")
            },
        )


def implicit_signal(f: ReviewFeedback, short_dwell_s: float) -> str | None:
    """The implicit signal a feedback event is (docs/review.md), or None (a citation click, a follow-up)."""
    if f.kind == "thumbs":
        return "thumbs_up" if f.thumbs_up else "thumbs_down"
    if f.kind in ("regenerate", "copy", "edit"):
        return f.kind
    if f.kind == "dwell" and isinstance(f.value, int | float) and f.value < short_dwell_s:
        return "short_dwell"
    return None


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _unpack_trigger(raw: bytes) -> Trigger:
    d = orjson.loads(raw)
    return Trigger(d["stratum"], d["reason"], d["p"])
