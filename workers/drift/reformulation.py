"""Is a follow-up a reformulation, and how did a session end (pure: no Redis, no model).

A follow-up is a query of the same session within `window_s` of the previous one.
It is compared with the previous query on the app's own embedding when both carry
one of the same embedding_model and dimension, else on the pinned encoder's when
both have it; embeddings of different models are never compared. Cosine >=
`min_cosine` makes it a reformulation, counted on the earlier query (its answer did
not help). docs/reformulations.md has the definitions and why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workers.drift.sessions import APP_FIELD, ENCODER_FIELD, Query

REFORMULATED = "reformulated"
DIFFERENT = "different"
NOT_COMPARED = "not_compared"

APP = "app"
ENCODER = "encoder"
NO_EMBEDDING = "none"

# How a session ended: resolved, or the reason its last answer did not help (first that applies).
RESOLVED = "resolved"
THUMBS_DOWN = "thumbs_down"
REGENERATED = "regenerated"
ENDED_REFORMULATED = "reformulated"


@dataclass(frozen=True)
class FollowUp:
    outcome: str  # reformulated | different | not_compared
    embedding: str  # app | encoder | none: which embeddings were compared
    cosine: float | None = None


def cosine(a: np.ndarray, b: np.ndarray) -> float | None:
    """None for vectors that cannot be compared (different dimension, or a zero vector)."""
    if a.shape != b.shape:
        return None
    aa, bb = float(np.dot(a, a)), float(np.dot(b, b))
    if aa == 0.0 or bb == 0.0:
        return None
    return float(np.dot(a, b)) / (aa * bb) ** 0.5


def _shared(previous: Query, current: Query, prefix: str) -> list[str]:
    return sorted(name for name in current.vectors if name.startswith(prefix) and name in previous.vectors)


def compare(previous: Query, current: Query, min_cosine: float) -> FollowUp:
    """The app's embedding first (same model name and dimension), then the pinned encoder's."""
    for prefix, source in ((APP_FIELD, APP), (ENCODER_FIELD, ENCODER)):
        for name in _shared(previous, current, prefix):
            c = cosine(previous.vectors[name], current.vectors[name])
            if c is not None:
                return FollowUp(REFORMULATED if c >= min_cosine else DIFFERENT, source, c)
    return FollowUp(NOT_COMPARED, NO_EMBEDDING)


def is_follow_up(previous: Query | None, current: Query, window_s: float) -> bool:
    return previous is not None and 0.0 <= current.at - previous.at <= window_s


def session_outcome(feedback: dict[str, float], reformulated: bool) -> str:
    """How a session ended, from its last answer's feedback marks (mark -> the feedback's timestamp) and
    whether its last query was itself a reformulation. A thumbs down counts unless a later thumbs up
    replaced it (a changed vote); a thumbs up on a reformulation's answer says the rephrasing worked."""
    down, up = feedback.get("down"), feedback.get("up")
    if down is not None and (up is None or down >= up):
        return THUMBS_DOWN
    if "regenerate" in feedback:
        return REGENERATED
    if reformulated and up is None:
        return ENDED_REFORMULATED
    return RESOLVED
