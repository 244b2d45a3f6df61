"""`ragmon worker evaluations` / `python -m workers.evaluations`: evaluations -> OTLP logs.

Every faithfulness score, exclusion result, label judgement and answer check becomes a
`gen_ai.evaluation.result` log record sent to an OTLP/HTTP logs endpoint.
Off unless RAGMON_EVALUATIONS_ENDPOINT is set (`ragmon up` starts it only then); see docs/otlp.md.
"""

from __future__ import annotations

from workers.checks.config import ChecksConfig
from workers.evaluations.metrics import EvaluationsMetrics
from workers.evaluations.processor import EvaluationExporter
from workers.evaluations.roots import RootSpans
from workers.evaluations.settings import EvaluationsSettings
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[EvaluationsSettings]) -> EvaluationExporter:
    settings = ctx.config
    checks = ctx.sections.get("checks") if settings.checks else None  # docs/checks.md
    metrics = EvaluationsMetrics(ctx.registry)
    if not settings.root_spans:
        return EvaluationExporter(settings, metrics, checks=checks)
    roots = RootSpans(ctx.redis, settings.root_span_ttl_s)
    return EvaluationExporter(settings, metrics, roots, ctx.settings.topics.spans, checks=checks)


WORKER = WorkerSpec("evaluations", build, EvaluationsSettings, sections=(("checks", ChecksConfig),))

if __name__ == "__main__":
    main_for(WORKER)
