"""`ragmon worker evaluations` / `python -m workers.evaluations`: evaluations -> OTLP logs.

Every faithfulness score, exclusion result and label judgement becomes a
`gen_ai.evaluation.result` log record sent to an OTLP/HTTP logs endpoint.
Off unless RAGMON_EVALUATIONS_ENDPOINT is set (`ragmon up` starts it only then); see docs/otlp.md.
"""

from __future__ import annotations

from workers.evaluations.metrics import EvaluationsMetrics
from workers.evaluations.processor import EvaluationExporter
from workers.evaluations.settings import EvaluationsSettings
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[EvaluationsSettings]) -> EvaluationExporter:
    return EvaluationExporter(ctx.config, EvaluationsMetrics(ctx.registry))


WORKER = WorkerSpec("evaluations", build, EvaluationsSettings)

if __name__ == "__main__":
    main_for(WORKER)
