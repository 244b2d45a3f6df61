"""What the drift worker reads of a trace (decoded once by the runtime)."""

from __future__ import annotations

from service.contracts import vocabulary as L
from service.contracts.events import thumbs_up
from service.contracts.views import FeedbackKind, FeedbackValue, Identifier, Name, QueryEmbedding, View


class DriftTrace(View):
    trace_id: Identifier
    query: QueryEmbedding
    variant: Name = L.DEFAULT_VARIANT
    intent: Name | None = None
    session_id: Identifier | None = None


class SessionFeedback(View):
    """What the session state needs of a feedback: thumbs (direction) and regenerate marks."""

    trace_id: Identifier
    kind: FeedbackKind
    value: FeedbackValue = None

    @property
    def mark(self) -> str | None:
        if self.kind == "regenerate":
            return "regenerate"
        up = thumbs_up(self.kind, self.value)
        if up is None:
            return None
        return "up" if up else "down"


VIEWS: dict[str, type[View]] = {"trace": DriftTrace, "feedback": SessionFeedback}
