"""What happens to one trace, decided before any model time is spent.

Each trace ends in exactly one bucket, so the counters add up:
traces = errored + no_claims + eligible, eligible = scored + skipped (by reason).
Checks run cheapest first and the first one that applies wins:

0. errored    - the request failed (the trace's error): not an answer to judge, so neither scored
                nor eligible (a provider outage must not read as unfaithful answers or lost coverage);
1. no_claims  - refused, or an answer without a letter or digit (never scored);
2. no_context - no document with text: nothing to be faithful to;
   failed_check - with `failed_checks: skip`, an answer a deterministic check failed (docs/checks.md):
                already known bad, no model time spent on it (with `first`, such answers are planned
                before the rest of their batch, so the pairs budget goes to them first);
3. sampled_out - the request id falls outside the tenant's sample rate;
4. hypothesis_too_long - the answer (or a sentence) exceeds max_hypothesis_tokens;
5. over_budget - the worker's pairs-per-second budget is spent.

no_context is checked before sampling so its count is complete, not an
estimate from the sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from workers.faithfulness.config import FaithfulnessConfig
from workers.faithfulness.premise import Truncation, build_premise
from workers.faithfulness.sampling import PairBudget, sampled
from workers.faithfulness.scorer import HHEMScorer
from workers.faithfulness.sentences import has_claims, split_sentences
from workers.faithfulness.views import FaithfulnessTrace
from workers.runtime.types import Event


@dataclass
class TracePlan:
    event: Event
    body: FaithfulnessTrace
    tenant_label: str
    variant_label: str
    intent_label: str
    sample_rate: float
    sampled: bool = False
    errored: bool = False
    no_claims: Literal["refused", "empty"] | None = None
    skipped: str | None = None  # one of metrics.SKIP_REASONS
    premise: str = ""
    truncation: Truncation | None = None
    hypotheses: list[str] = field(default_factory=list)
    failed_checks: list[str] = field(default_factory=list)  # the deterministic checks the answer failed

    @property
    def to_score(self) -> bool:
        return not self.errored and self.no_claims is None and self.skipped is None

    @property
    def emits(self) -> bool:
        """Scored traces, and sampled no-claims ones (a shadow twin that refused is part of the comparison)."""
        return self.to_score or (self.no_claims is not None and self.sampled)


class Planner:
    def __init__(self, config: FaithfulnessConfig, scorer: HHEMScorer, budget: PairBudget) -> None:
        self.config = config
        self.scorer = scorer
        self.budget = budget

    def plan(self, plan: TracePlan, now: float) -> TracePlan:
        body, tenant = plan.body, plan.event.tenant
        plan.sampled = sampled(tenant, body.request_id, plan.sample_rate)
        if body.error is not None:
            plan.errored = True
            return plan
        if body.answer.refused:
            plan.no_claims = "refused"
            return plan
        if not has_claims(body.answer.text):
            plan.no_claims = "empty"
            return plan
        documents = [document.text for document in body.retrieval.documents]
        if not any(text.strip() for text in documents):
            plan.skipped = "no_context"
            return plan
        if plan.failed_checks and self.config.failed_checks == "skip":
            plan.skipped = "failed_check"
            return plan
        if not plan.sampled:
            plan.skipped = "sampled_out"
            return plan
        if self.config.mode == "sentences":
            hypotheses = split_sentences(body.answer.text)
        else:
            hypotheses = [body.answer.text]
        if max(self.scorer.count_tokens(hypotheses)) > self.config.max_hypothesis_tokens:
            plan.skipped = "hypothesis_too_long"
            return plan
        if not self.budget.admit(tenant, body.request_id, len(hypotheses), now):
            plan.skipped = "over_budget"
            return plan
        plan.premise, plan.truncation = build_premise(
            documents, self.scorer.tokenizer, self.config.premise_token_budget
        )
        plan.hypotheses = hypotheses
        return plan
