"""`ragmon worker evaluations` / `python -m workers.evaluations`: evaluations -> OTLP logs.

Every faithfulness score, exclusion result and label judgement becomes a
`gen_ai.evaluation.result` log record sent to an OTLP/HTTP logs endpoint.
Off unless RAGMON_EVALUATIONS_ENDPOINT is set (`ragmon up` starts it only then); see docs/otlp.md.
"""

from __future__ import annotations

from workers.evaluations.metrics import EvaluationsMetrics
from workers.evaluations.processor import EvaluationExporter
from workers.evaluations.roots import RootSpans
from workers.evaluations.settings import EvaluationsSettings
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[EvaluationsSettings]) -> EvaluationExporter:
    settings = ctx.config
    if not settings.root_spans:
        return EvaluationExporter(settings, EvaluationsMetrics(ctx.registry))
    roots = RootSpans(ctx.redis, settings.root_span_ttl_s)
    return EvaluationExporter(settings, EvaluationsMetrics(ctx.registry), roots, ctx.settings.topics.spans)


WORKER = WorkerSpec("evaluations", build, EvaluationsSettings)

if __name__ == "__main__":
    main_for(WORKER)
