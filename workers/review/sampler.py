"""Pure sampling decisions: which traces a tenant's reviewers should see, and with what probability.

Every random choice is a hash of (tenant, trace id, purpose) mapped to [0, 1),
so a redelivered event makes the same choice, and separate purposes (blind
sample, double review) are independent of each other and of the scorers'
own sampling (which hashes the request id).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from service.contracts import driftflags
from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from workers.review.config import ReviewConfig, Stratum
from workers.review.views import ReviewFeedback, ReviewTrace

_SCALE = float(1 << 64)


def unit(tenant: str, trace_id: str, purpose: str) -> float:
    digest = hashlib.blake2b(f"{purpose}\0{tenant}\0{trace_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


@dataclass(frozen=True)
class Trigger:
    """A reason to queue a trace, waiting for (or meeting) its content.

    `base_probability` is the chance of this trigger given the trace was in the
    app's sample; the app's sample_rate (on the trace) multiplies it.
    """

    stratum: Stratum
    reason: str
    base_probability: float


def display_content(t: ReviewTrace) -> dict[str, Any]:
    """What the review page shows, already redacted by the API; plus what calibration needs."""
    sample = t.retrieval.exclusion_sample
    return {
        "trace_id": t.trace_id,
        "request_id": t.request_id,
        "query": t.query.text,
        "documents": [{"id": d.id, "text": d.text, "score": d.score} for d in t.retrieval.documents],
        "answer": t.answer.text,
        "refused": t.answer.refused,
        "citations": list(t.answer.citations),
        "candidates": [{"id": c.id, "score": c.score} for c in sample.candidates] if sample else [],
        "gold_ids": list(sample.gold_ids or []) if sample else [],
        "sample_rate": t.sample_rate,
        "variant": t.variant,
        "release": t.release,
        "intent": t.intent,
        "session_id": t.session_id,
    }


class Sampler:
    def __init__(self, config: ReviewConfig) -> None:
        self.config = config

    def blind(self, tenant: str, t: ReviewTrace) -> Trigger | None:
        if t.error is not None:  # a failed request has no answer to judge (docs/errors.md)
            return None
        rate = self.config.blind_rate
        return Trigger("blind", "random", rate) if unit(tenant, t.trace_id, "blind") < rate else None

    def drift(self, tenant: str, t: ReviewTrace, flagged: frozenset[str]) -> Trigger | None:
        """A trace of a tenant whose query-drift window is flagged: the tenant's, or its intent's."""
        if (
            t.error is not None
            or not flagged
            or not (driftflags.ALL_INTENTS in flagged or (t.intent is not None and t.intent in flagged))
        ):
            return None
        rate = self.config.drift_rate
        return Trigger("drift", "query_drift", rate) if unit(tenant, t.trace_id, "drift") < rate else None

    def failed_check(self, tenant: str, t: ReviewTrace, failed: list[str]) -> Trigger | None:
        """An answer a deterministic check failed (workers/checks): the first failed check is the reason."""
        if not failed:
            return None
        rate = self.config.failed_check_rate
        if unit(tenant, t.trace_id, "failed_check") >= rate:
            return None
        return Trigger("failed_check", f"check_{failed[0]}", rate)

    def _low_confidence(self, tenant: str, trace_id: str, reason: str, base: float) -> Trigger | None:
        rate = self.config.low_confidence_rate
        if unit(tenant, trace_id, "low_confidence") >= rate:
            return None
        return Trigger("low_confidence", reason, rate * base)

    def faithfulness(self, e: FaithfulnessScoreEvent) -> Trigger | None:
        if e.outcome == "no_claims":
            reason = "no_claims"
        elif e.score is not None and e.score < e.threshold:
            reason = "below_threshold"
        elif e.score is not None and e.score < e.threshold + self.config.near_margin:
            reason = "near_threshold"
        else:
            return None
        return self._low_confidence(e.tenant, e.trace_id, reason, e.scorer_sample_rate)

    def exclusion(self, e: ExclusionResultEvent) -> Trigger | None:
        if e.falsely_excluded is not True:
            return None
        return self._low_confidence(e.tenant, e.trace_id, "falsely_excluded", 1.0)

    def feedback(self, tenant: str, f: ReviewFeedback) -> Trigger | None:
        if f.kind == "regenerate":
            reason = "regenerated"
        elif f.kind == "thumbs" and f.thumbs_up is False:
            reason = "thumbs_down"
        else:
            return None
        rate = self.config.negative_feedback_rate
        if unit(tenant, f.trace_id, "negative_feedback") >= rate:
            return None
        return Trigger("negative_feedback", reason, rate)

    def reviews_wanted(self, tenant: str, trace_id: str) -> int:
        return 2 if unit(tenant, trace_id, "double_review") < self.config.double_review_share else 1
