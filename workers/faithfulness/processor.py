"""The faithfulness worker's processor: HHEM scores for a sampled stream of traces.

decide (plan.py) -> score every pair of the batch at once (scorer.py) -> count
and emit. Nothing is counted or emitted until the whole batch has been scored,
so a batch that fails and is retried by the runtime is not counted twice.
A model that cannot load leaves the worker up and not ready (readiness says
why and how to fix it, `scorer_up` is 0), and tick() retries the load.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from service.contracts import Topics
from service.contracts.scores import (
    FaithfulnessScoreEvent,
    ModelRef,
    TruncationRecord,
    UnsupportedSentence,
    encode_record,
    score_event_id,
)
from workers.checks.answer import check_answer
from workers.checks.config import ChecksConfig
from workers.faithfulness.config import FaithfulnessConfig
from workers.faithfulness.kernels import MatmulChoice
from workers.faithfulness.loader import LoadedModel, LoadError, load_hhem
from workers.faithfulness.metrics import FaithfulnessMetrics
from workers.faithfulness.plan import Planner, TracePlan
from workers.faithfulness.sampling import PairBudget
from workers.faithfulness.scorer import HHEMScorer, PairScore
from workers.faithfulness.views import VIEWS, FaithfulnessTrace
from workers.runtime.contract import Processor
from workers.runtime.labels import ClosedSet, WindowedCap
from workers.runtime.types import READY, Emitter, Event, Readiness, Rejection, split_by_body

SWEEP_S = 60.0  # how often the series of variants that left the window are looked for
log = logging.getLogger(__name__)
Loader = Callable[[str, str | None, str | None, str, MatmulChoice], LoadedModel]


class ScorerUnavailable(RuntimeError):
    """The model is not loaded: an outage, so the runtime retries the batch instead of dead-lettering it."""


@dataclass(frozen=True)
class TraceOutcome:
    score: float
    below_threshold: bool
    sentences_supported: int | None = None
    unsupported: tuple[UnsupportedSentence, ...] = ()


def trace_outcome(
    mode: str, hypotheses: list[str], scores: list[float], threshold: float, min_supported_fraction: float
) -> TraceOutcome:
    """answer: the pair's score against the threshold; sentences: the fraction of supported sentences."""
    if mode == "answer":
        return TraceOutcome(scores[0], scores[0] < threshold)
    unsupported = tuple(
        UnsupportedSentence(index=i, text=text, score=score)
        for i, (text, score) in enumerate(zip(hypotheses, scores, strict=True))
        if score < threshold
    )
    supported = len(scores) - len(unsupported)
    fraction = supported / len(scores)
    return TraceOutcome(fraction, fraction < min_supported_fraction, supported, unsupported)


class FaithfulnessProcessor(Processor):
    name = "faithfulness"
    event_types: tuple[str, ...] = ("trace",)
    views = VIEWS

    def __init__(
        self,
        config: FaithfulnessConfig,
        emitter: Emitter,
        metrics: FaithfulnessMetrics,
        topics: Topics,
        loader: Loader = load_hhem,
        clock: Callable[[], float] = time.monotonic,
        checks: ChecksConfig | None = None,
    ) -> None:
        self.config = config
        self.checks = checks if checks is not None else ChecksConfig()
        self._emitter = emitter
        self._metrics = metrics
        self._topic = topics.scores
        self._loader = loader
        self._clock = clock
        self._variants = WindowedCap(
            config.max_variants,
            config.variant_window_s,
            always=("production",),
            on_fold=lambda tenant: metrics.folded.labels(tenant, "variant").inc(),
        )
        self._next_sweep = clock() + SWEEP_S
        self._intents = ClosedSet(config.intents)
        self._budget = PairBudget(config.pairs_per_second, config.burst_seconds, clock())
        self._scorer: HHEMScorer | None = None
        self._planner: Planner | None = None
        self._model: LoadedModel | None = None
        self._load_error = ""
        self._retry_at: float | None = None
        self._tenants_seen: set[str] = set()
        for tenant in sorted(config.configured_tenants()):
            self._publish_settings(tenant)
        self._load()

    # -- lifecycle ---------------------------------------------------------

    def _publish_settings(self, tenant: str) -> None:
        if tenant not in self._tenants_seen:
            self._tenants_seen.add(tenant)
            self._metrics.sample_rate.labels(tenant).set(self.config.sample_rate_for(tenant))
            self._metrics.threshold.labels(tenant).set(self.config.threshold_for(tenant))

    def _load(self) -> bool:
        c = self.config
        try:
            model = self._loader(c.model, c.foundation, c.model_revision, c.device, c.matmul)
        except LoadError as exc:
            self._load_error = str(exc)
        except Exception as exc:  # e.g. a truncated safetensors file: reported, never a crash loop
            self._load_error = (
                f"faithfulness.model: loading {c.model!r} failed ({type(exc).__name__}: {exc}). "
                f"Fix: re-download the checkpoint; its files are incomplete or unreadable"
            )
        else:
            self._install(model)
            return True
        self._metrics.model_failed()
        log.error("faithfulness scorer not ready: %s", self._load_error)
        return False

    def _install(self, model: LoadedModel) -> None:
        c = self.config
        self._model = model
        self._scorer = HHEMScorer(model, c.batch_size, c.batch_tokens, c.cache_size, self._metrics.inference)
        self._planner = Planner(c, self._scorer, self._budget)
        self._load_error = ""
        self._metrics.model_loaded(model.revision, c.mode)
        log.info(
            "faithfulness scorer ready: %s (%s) on %s, %s products",
            model.source, model.revision, model.device, model.encoder.kernel,
        )  # fmt: skip

    def readiness(self) -> Readiness:
        if self._scorer is None:
            return Readiness(False, self._load_error or "faithfulness: the HHEM model is not loaded")
        return READY

    def tick(self, now: float) -> None:
        # Retry times are kept on the runtime's clock (`now`), whatever clock that is.
        if self._scorer is not None:
            return
        if self._retry_at is None:
            self._retry_at = now + self.config.load_retry_seconds
        elif now >= self._retry_at:
            self._retry_at = None if self._load() else now + self.config.load_retry_seconds

    def close(self) -> None:
        self._scorer = self._planner = self._model = None

    # -- batches -----------------------------------------------------------

    def process(self, events: list[Event]) -> list[Rejection]:
        if self._scorer is None or self._planner is None or self._model is None:
            raise ScorerUnavailable(self._load_error or "faithfulness: the HHEM model is not loaded")
        now = self._clock()
        traces, rejections = split_by_body(events, FaithfulnessTrace)
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_S
            for tenant, variant in self._variants.expire(now):
                self._metrics.forget(tenant, variant)
        fresh = [self._new_plan(event, body, now) for event, body in traces]
        # The answers a deterministic check failed are planned first: the pairs budget goes to them first.
        fresh.sort(key=lambda plan: not plan.failed_checks)
        plans = [self._planner.plan(plan, now) for plan in fresh]
        scored = self._score(self._scorer, [plan for plan in plans if plan.to_score])
        for plan in plans:
            self._record(plan, scored.get(id(plan), []), self._model)
        return rejections

    def _new_plan(self, event: Event, body: FaithfulnessTrace, now: float) -> TracePlan:
        tenant = event.tenant
        variant = self._variants(tenant, body.variant, now)
        self._publish_settings(tenant)
        self._metrics.touch(tenant, variant)
        return TracePlan(
            event=event,
            body=body,
            tenant_label=tenant,
            variant_label=variant,
            intent_label=self._intents(body.intent),
            sample_rate=self.config.sample_rate_for(tenant),
            failed_checks=self._failed_checks(tenant, body),
        )

    def _failed_checks(self, tenant: str, body: FaithfulnessTrace) -> list[str]:
        """The same checks the metrics worker counts (workers/checks), on the same answer."""
        if not self.checks.enabled or body.error is not None or body.answer.refused:
            return []
        return check_answer(
            self.checks, tenant, body.answer, body.retrieval.documents, body.response_format
        ).failed

    def _score(self, scorer: HHEMScorer, plans: list[TracePlan]) -> dict[int, list[PairScore]]:
        pairs = [(plan.premise, hypothesis) for plan in plans for hypothesis in plan.hypotheses]
        if not pairs:
            return {}
        try:
            scores = scorer.score(pairs)
        except Exception:
            for plan in plans:
                self._metrics.errors.labels(plan.tenant_label, plan.variant_label, "inference").inc()
            raise
        by_plan: dict[int, list[PairScore]] = {}
        start = 0
        for plan in plans:
            by_plan[id(plan)] = scores[start : start + len(plan.hypotheses)]
            start += len(plan.hypotheses)
        return by_plan

    # -- accounting and output -------------------------------------------

    def _record(self, plan: TracePlan, scores: list[PairScore], model: LoadedModel) -> None:
        m, labels = self._metrics, (plan.tenant_label, plan.variant_label)
        m.traces.labels(*labels).inc()
        if plan.errored:
            m.errored.labels(*labels).inc()
            return
        if plan.no_claims is not None:
            m.no_claims.labels(*labels, plan.no_claims).inc()
            if plan.emits:
                self._emit(plan, model, None)
            return
        m.eligible.labels(*labels).inc()
        if plan.skipped is not None:
            m.skipped.labels(*labels, plan.skipped).inc()
            return
        threshold = self.config.threshold_for(plan.event.tenant)
        outcome = trace_outcome(
            self.config.mode,
            plan.hypotheses,
            [s.score for s in scores],
            threshold,
            self.config.min_supported_fraction,
        )
        m.scored.labels(*labels).inc()
        m.score.labels(*labels, plan.intent_label).observe(outcome.score)
        if outcome.below_threshold:
            m.below_threshold.labels(*labels).inc()
        if plan.truncation is not None and plan.truncation.truncated:
            m.truncated.labels(*labels).inc()
            m.truncated_tokens.labels(*labels).inc(plan.truncation.truncated_tokens)
        m.scored_tokens.labels(*labels).inc(sum(s.tokens for s in scores))
        m.scoring_seconds.labels(*labels).observe(sum(s.seconds for s in scores))
        for pair in scores:
            m.pairs.labels("cache" if pair.cached else "model").inc()
        self._emit(plan, model, outcome)

    def _emit(self, plan: TracePlan, model: LoadedModel, outcome: TraceOutcome | None) -> None:
        body, stored, mode = plan.body, plan.event.stored, self.config.mode
        truncation = plan.truncation
        event = FaithfulnessScoreEvent(
            event_id=score_event_id(stored.id, mode, model.revision),
            source_event_id=stored.id,
            tenant=stored.tenant,
            trace_id=body.trace_id,
            request_id=body.request_id,
            variant=body.variant,
            release=body.release,
            intent=body.intent,
            trace_timestamp=stored.timestamp,
            scored_at=datetime.now(UTC),
            outcome="no_claims" if outcome is None else "scored",
            no_claims_reason=plan.no_claims,
            mode=mode,
            score=None if outcome is None else outcome.score,
            threshold=self.config.threshold_for(stored.tenant),
            below_threshold=None if outcome is None else outcome.below_threshold,
            sentences_total=len(plan.hypotheses) if outcome is not None and mode == "sentences" else None,
            sentences_supported=None if outcome is None else outcome.sentences_supported,
            unsupported_sentences=[] if outcome is None else list(outcome.unsupported),
            truncation=None if truncation is None else TruncationRecord.model_validate(truncation.as_dict()),
            model=ModelRef(source=model.source, revision=model.revision),
            app_sample_rate=body.sample_rate,
            scorer_sample_rate=plan.sample_rate,
        )
        key, value, headers = encode_record(event)
        self._emitter.emit(self._topic, key, value, headers)
