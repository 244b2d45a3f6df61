"""Which readers read a span: one per convention (docs/otlp.md, "Conventions read").

A new convention is one new reader (workers/assembler/neutral.py's Reader) added to CONVENTIONS; the
mapping to the trace event reads the neutral model only and does not change.
"""

from __future__ import annotations

from workers.assembler.genai import GENAI, OPERATION_KEY
from workers.assembler.neutral import NeutralSpan, Reader
from workers.assembler.openinference import OPENINFERENCE
from workers.assembler.view import SpanView

# In precedence order: on a span that carries both, the first reader's answer wins, field by field.
CONVENTIONS: tuple[Reader, ...] = (OPENINFERENCE, GENAI)
_OPENINFERENCE_ONLY: tuple[Reader, ...] = (OPENINFERENCE,)
_GENAI_ONLY: tuple[Reader, ...] = (GENAI,)
_NONE: tuple[Reader, ...] = ()
_COUNTED = {
    readers: any(r.counts_unknown for r in readers)
    for readers in (CONVENTIONS, _OPENINFERENCE_ONLY, _GENAI_ONLY)
}
_BOTH, _OI, _GENAI = _COUNTED[CONVENTIONS], _COUNTED[_OPENINFERENCE_ONLY], _COUNTED[_GENAI_ONLY]


def read(view: SpanView) -> NeutralSpan:
    """The neutral model of one span, read by every convention it carries (its kind: the first one's)."""
    genai = OPERATION_KEY in view.attrs
    if view.kind is not None:  # openinference.span.kind, read once by the view
        if genai:
            return NeutralSpan(view, CONVENTIONS, view.kind, _BOTH)
        return NeutralSpan(view, _OPENINFERENCE_ONLY, view.kind, _OI)
    if genai:
        kind = GENAI.kind(view)
        if kind is not None:
            return NeutralSpan(view, _GENAI_ONLY, kind, _GENAI)
    return NeutralSpan(view, _NONE, None, False)
