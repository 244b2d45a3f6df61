"""What users and reviewers say about a production answer, and when they say it.

Feedback follows quality: a refusal or an answer without its gold document
draws "incomplete", an unfaithful answer "wrong", an off-topic query
"off_topic", a slow one "slow". Shadow (candidate) answers are never shown to
users, so they get no feedback.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from service.simulate.corpus import Doc, User
from service.simulate.incidents import Active
from service.simulate.records import FeedbackFacts, LabelFacts, TraceFacts, event_id
from service.simulate.scenario import Scenario

GOOD_THUMBS_UP = 0.88
BAD_THUMBS_UP = 0.15
REVIEWERS = 5


@dataclass
class Scheduled:
    at_s: float
    type: str
    body: dict[str, Any]
    facts: FeedbackFacts | LabelFacts


def problem(facts: TraceFacts, slow_ms: float) -> str | None:
    """The reason a user would give for a bad answer, None when the answer was fine."""
    if facts.off_topic:
        return "off_topic"
    if facts.faithful is False:
        return "wrong"
    if facts.refused or not facts.gold_in_context:
        return "incomplete"
    if facts.timings["total"] > slow_ms:
        return "slow"
    return None


def user_feedback(
    rng: random.Random, scenario: Scenario, facts: TraceFacts, citations: list[str]
) -> list[Scheduled]:
    cfg = scenario.feedback
    if facts.error is not None:  # a failed request: the app showed an error, not an answer to rate
        return []
    cause = problem(facts, cfg.slow_ms)
    out: list[Scheduled] = []

    def emit(kind: str, value: Any = None, reason: str | None = None, **extra: Any) -> None:
        late = rng.random() < cfg.late_share
        at_s = facts.at_s + rng.uniform(*(cfg.late_delay_s if late else cfg.delay_s))
        body: dict[str, Any] = {"trace_id": facts.trace_id, "kind": kind, **extra}
        if value is not None:
            body["value"] = value
        if reason is not None:
            body["reason"] = reason
        fb = FeedbackFacts(event_id(rng.getrandbits(128)), facts, kind, reason, at_s, late)
        out.append(Scheduled(at_s, "feedback", body, fb))

    disliked = Active.at(scenario.incidents, facts.at_s, facts.tenant).dissatisfied_share(
        facts.variant, facts.intent
    )
    if cause is None and disliked and rng.random() < disliked:
        cause = "other"  # a fine answer the user did not like: thumbs down, not a regeneration storm
    if rng.random() < cfg.thumbs:
        up = rng.random() < (BAD_THUMBS_UP if cause else GOOD_THUMBS_UP)
        reason = None if up else cause or rng.choice(("incomplete", "other", "wrong"))
        emit("thumbs", up, reason)
    if rng.random() < (cfg.regenerate_bad if cause else cfg.regenerate):
        emit("regenerate")
    if citations and cause is None and rng.random() < cfg.citation_click:
        emit("citation_click", document_id=rng.choice(citations))
    if cause is None and rng.random() < cfg.copy_:
        emit("copy")
    if rng.random() < cfg.dwell:
        emit("dwell", round((6.0 if cause else 25.0) * math.exp(0.7 * rng.gauss(0.0, 1.0)), 1))
    if rng.random() < cfg.followup:
        emit("followup")
    return out


def review_label(
    rng: random.Random, scenario: Scenario, facts: TraceFacts, gold: list[Doc], user: User
) -> Scheduled | None:
    """A human review of a sampled share of production traces, some minutes later."""
    sampling = scenario.sampling
    if rng.random() >= sampling.label:
        return None
    answerable = any(d.access_group in user.groups for d in gold)
    body: dict[str, Any] = {
        "trace_id": facts.trace_id,
        "gold_ids": sorted(d.id for d in gold),
        "answerable": answerable,
        "reviewer": f"reviewer-{rng.randrange(REVIEWERS)}",
    }
    if facts.faithful is not None:
        body["faithful"] = facts.faithful
    at_s = facts.at_s + rng.uniform(*sampling.label_delay_s)
    facts.labelled_gold = True
    label = LabelFacts(event_id(rng.getrandbits(128)), facts, at_s, True, facts.faithful, answerable)
    return Scheduled(at_s, "label", body, label)
