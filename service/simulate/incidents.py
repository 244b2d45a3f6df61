"""Scheduled incidents: what each one breaks, when, and for whom.

An incident is active on [start_s, end_s) of scenario time, optionally
repeating every `every_s` (the demo's periodic incidents), for some tenants
(default all) and variants (default production: a regression ships in one
release). Topic shift and an embedding model change act on the request
itself, so they reach every variant that answers it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.contracts.vocabulary import ErrorType

Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", min_length=1, max_length=64)]
Identifier = Annotated[str, Field(pattern=r"^[A-Za-z0-9._:/@#+=-]+$", min_length=1, max_length=128)]
Share = Annotated[float, Field(ge=0, le=1)]
Factor = Annotated[float, Field(gt=1, le=100)]
STAGES = ("retrieval", "rerank", "generation", "postprocess")


class IncidentBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    start_s: Annotated[float, Field(ge=0)]
    end_s: Annotated[float, Field(gt=0)] | None = None  # null: until the run ends
    every_s: Annotated[float, Field(gt=0)] | None = None
    tenants: list[str] | None = None
    variants: Annotated[list[str], Field(min_length=1)] = Field(default_factory=lambda: ["production"])
    # A release marker for the affected tenants at each start: the triage hint's "deployed just before".
    release: Identifier | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "name" not in data and "kind" in data:
            return {**data, "name": str(data["kind"]).replace("_", "-")}
        return data

    def check_against(
        self, loc: str, duration_s: float | None, tenants: set[str], variants: set[str]
    ) -> None:
        if self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"{loc}.end_s: must be greater than start_s ({self.start_s})")
        if duration_s is not None and self.start_s >= duration_s:
            raise ValueError(
                f"{loc}.start_s: {self.start_s} is not before the scenario's duration_s ({duration_s})"
            )
        if self.every_s is not None:
            if self.end_s is None:
                raise ValueError(f"{loc}.end_s: a repeating incident (every_s) needs an end_s")
            if self.every_s <= self.end_s - self.start_s:
                raise ValueError(
                    f"{loc}.every_s: must be longer than the incident ({self.end_s - self.start_s} s)"
                )
        unknown = sorted(set(self.tenants or ()) - tenants)
        if unknown:
            raise ValueError(
                f"{loc}.tenants: unknown tenant(s) {unknown}; scenario tenants are {sorted(tenants)}"
            )
        unknown = sorted(set(self.variants) - variants)
        if unknown:
            raise ValueError(
                f"{loc}.variants: unknown variant(s) {unknown}; scenario variants are {sorted(variants)}"
            )

    def applies_to(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants

    def active_at(self, t: float, tenant: str) -> bool:
        if t < self.start_s or not self.applies_to(tenant):
            return False
        if self.end_s is None:
            return True
        if self.every_s is None:
            return t < self.end_s
        return (t - self.start_s) % self.every_s < self.end_s - self.start_s

    def last_start_before(self, t: float) -> float | None:
        """Start of the latest occurrence at or before t (None before the first)."""
        if t < self.start_s:
            return None
        if self.every_s is None:
            return self.start_s
        return self.start_s + math.floor((t - self.start_s) / self.every_s) * self.every_s

    def starts_between(self, lo: float, hi: float) -> Iterator[float]:
        """Occurrence starts s with lo < s <= hi (lo may be negative to include a start at 0)."""
        first = self.last_start_before(hi)
        while first is not None and first > lo:
            yield first
            first = first - self.every_s if self.every_s is not None else None
            if first is not None and first < self.start_s:
                break

    def windows(self, until: float) -> list[tuple[float, float]]:
        """Every [start, end) occurrence that starts before `until`."""
        if self.every_s is None or self.end_s is None:
            return (
                [(self.start_s, self.end_s if self.end_s is not None else until)]
                if self.start_s < until
                else []
            )
        length = self.end_s - self.start_s
        count = max(0, math.ceil((until - self.start_s) / self.every_s))
        return [
            (self.start_s + k * self.every_s, self.start_s + k * self.every_s + length) for k in range(count)
        ]


class FilterRegression(IncidentBase):
    """A relevance predicate starts excluding gold documents (the named field breaks)."""

    kind: Literal["filter_regression"]
    field: Literal["locale", "product", "updated_at"] = "locale"
    share: Share = 1.0


class SlowStage(IncidentBase):
    kind: Literal["slow_stage"]
    stage: Literal["retrieval", "rerank", "generation", "postprocess"] = "retrieval"
    factor: Factor = 5.0


class UnfaithfulAnswers(IncidentBase):
    """Answers stop using their context: confident claims no document supports. `intent`: only that
    intent's answers (a prompt or tool change for one kind of question); the tenant's mean faithfulness
    moves by that intent's share of traffic only, so it can stay above the floor while the intent's mean
    is far below it (the per-intent guardrail, docs/intents.md). None: every intent."""

    kind: Literal["unfaithful_answers"]
    share: Share = 0.7
    intent: Name | None = None
    figures: bool = Field(
        True, description="false: the invented claims carry no figures, so no deterministic check sees them"
    )


class TopicShift(IncidentBase):
    kind: Literal["topic_shift"]
    share: Share = 0.5


class CostSpike(IncidentBase):
    """Token counts (and so cost) multiplied, e.g. a prompt template that stuffs every document."""

    kind: Literal["cost_spike"]
    factor: Factor = 4.0


class EntitlementLeak(IncidentBase):
    """A context document the caller is not entitled to (another tenant's, or staff-only)."""

    kind: Literal["entitlement_leak"]
    share: Share = 0.05


class EmbeddingModelChange(IncidentBase):
    """The app's query encoder changes model. `index_follows`: the index was rebuilt with the same model (a
    coordinated migration: traces name the new model for both); false, the index keeps the old one, a
    half-done migration whose queries search an index of another model (RagmonEncoderMismatch)."""

    kind: Literal["embedding_model_change"]
    model: Identifier = "app-embed-v2"
    dim: Annotated[int, Field(ge=2, le=4096)] = 96
    index_follows: bool = True
    # true: the app declares the migration, its `release` marker naming component embedding_model, from
    # the scenario's model to `model` (docs/markers.md); false: ragmon must notice it in the traces
    declared: bool = False

    @model_validator(mode="after")
    def _declared_needs_a_release(self) -> EmbeddingModelChange:
        if self.declared and self.release is None:
            raise ValueError("release: a declared embedding_model_change needs the release its marker names")
        return self


class GenerationModelChange(IncidentBase):
    """The provider serves another model behind the same deployment name, with no release of the app: the
    traces' `usage.model` names `model` for a `share` of requests (1: all of them, 0.1: a canary). ragmon
    records it as a detected generator_model change (docs/markers.md); a canary records nothing."""

    kind: Literal["generation_model_change"]
    model: Identifier = "provider-gen-v2"
    share: Share = 1.0


class Dissatisfaction(IncidentBase):
    """Users dislike a share of otherwise fine answers on one intent (a prompt change that made them terse,
    a retriever that favours stale pages): thumbs-down rises there while faithfulness and the filters look
    unchanged. None: every intent."""

    kind: Literal["dissatisfaction"]
    intent: Name | None = None
    share: Share = 0.5


class StaleCorpus(IncidentBase):
    """The documents one intent needs went stale or missing (an index rebuilt without a source, an
    expired sync): the app refuses a share of that intent's otherwise answerable queries, so the refusal
    rate rises on that intent while the others and the tenant's faithfulness look unchanged. None: every
    intent."""

    kind: Literal["stale_corpus"]
    intent: Name | None = None
    share: Share = 0.3


OUTAGE_MIX: dict[ErrorType, float] = {"provider_error": 0.5, "timeout": 0.3, "rate_limit": 0.2}


class ProviderOutage(IncidentBase):
    """The LLM provider fails a share of requests (5xx, timeouts, rate limits): the traces carry an `error`
    and no answer. An outage, not a quality drop: only the error alert may fire."""

    kind: Literal["provider_outage"]
    share: Share = 0.5
    stage: Literal["retrieval", "rerank", "generation", "postprocess"] = "generation"
    types: dict[ErrorType, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: dict(OUTAGE_MIX),
        min_length=1,
        description="relative weights of the error types",
    )


class TruncationSpike(IncidentBase):
    """A share of answers stops at the token limit (a lower max_tokens, a longer prompt): finish_reason
    `length` and the text cut in half."""

    kind: Literal["truncation_spike"]
    share: Share = 0.3


class PhantomCitations(IncidentBase):
    """Answers cite a document that was never retrieved (a citation formatter that lost its mapping, a
    model citing from memory): the deterministic check `citations_known` fails on them (docs/checks.md)."""

    kind: Literal["phantom_citations"]
    share: Share = 0.3


class Reformulations(IncidentBase):
    """Answers on one intent stop helping in a way no score sees (a prompt that answers a neighbouring
    question): a share of that intent's users ask the same thing again, in other words, as their next
    query of the session. Reformulations rise on that intent (docs/reformulations.md). None: every intent."""

    kind: Literal["reformulations"]
    intent: Name | None = None
    share: Share = 0.6


Incident = Annotated[
    FilterRegression
    | SlowStage
    | UnfaithfulAnswers
    | TopicShift
    | CostSpike
    | EntitlementLeak
    | EmbeddingModelChange
    | GenerationModelChange
    | Dissatisfaction
    | StaleCorpus
    | ProviderOutage
    | TruncationSpike
    | PhantomCitations
    | Reformulations,
    Field(discriminator="kind"),
]

INCIDENT_KINDS: tuple[str, ...] = (
    "filter_regression",
    "slow_stage",
    "unfaithful_answers",
    "topic_shift",
    "cost_spike",
    "entitlement_leak",
    "embedding_model_change",
    "generation_model_change",
    "dissatisfaction",
    "stale_corpus",
    "provider_outage",
    "truncation_spike",
    "phantom_citations",
    "reformulations",
)


@dataclass(frozen=True)
class Active:
    """The incidents active for one request (one tenant, one instant)."""

    incidents: tuple[IncidentBase, ...]

    @classmethod
    def at(cls, incidents: list[Any], t: float, tenant: str) -> Active:
        return cls(tuple(i for i in incidents if i.active_at(t, tenant)))

    @property
    def phase(self) -> str:
        return "+".join(i.name for i in self.incidents) or "clean"

    def _for(self, kind: type[IncidentBase], variant: str | None = None) -> list[Any]:
        return [
            i for i in self.incidents if isinstance(i, kind) and (variant is None or variant in i.variants)
        ]

    def filter_break(self, variant: str) -> FilterRegression | None:
        found = self._for(FilterRegression, variant)
        return found[-1] if found else None

    def stage_factor(self, variant: str, stage: str) -> float:
        return math.prod(i.factor for i in self._for(SlowStage, variant) if i.stage == stage)

    def unfaithful_share(self, variant: str, intent: str) -> float:
        found = [i.share for i in self._for(UnfaithfulAnswers, variant) if i.intent in (None, intent)]
        return max(found, default=0.0)

    def unfaithful_figures(self, variant: str, intent: str) -> bool:
        """Whether this intent's unfaithful answers may invent figures (false only when every incident
        active on it says so)."""
        found = [i.figures for i in self._for(UnfaithfulAnswers, variant) if i.intent in (None, intent)]
        return all(found)

    def topic_shift_share(self) -> float:
        return max((i.share for i in self._for(TopicShift)), default=0.0)

    def cost_factor(self, variant: str) -> float:
        return math.prod(i.factor for i in self._for(CostSpike, variant))

    def leak_share(self, variant: str) -> float:
        return max((i.share for i in self._for(EntitlementLeak, variant)), default=0.0)

    def dissatisfied_share(self, variant: str, intent: str) -> float:
        found = [i.share for i in self._for(Dissatisfaction, variant) if i.intent in (None, intent)]
        return max(found, default=0.0)

    def stale_share(self, variant: str, intent: str) -> float:
        found = [i.share for i in self._for(StaleCorpus, variant) if i.intent in (None, intent)]
        return max(found, default=0.0)

    def outage(self, variant: str) -> ProviderOutage | None:
        found = self._for(ProviderOutage, variant)
        return found[-1] if found else None

    def phantom_share(self, variant: str) -> float:
        return max((i.share for i in self._for(PhantomCitations, variant)), default=0.0)

    def truncation_share(self, variant: str) -> float:
        return max((i.share for i in self._for(TruncationSpike, variant)), default=0.0)

    def reformulation_share(self, intent: str) -> float:
        found = [i.share for i in self._for(Reformulations, "production") if i.intent in (None, intent)]
        return max(found, default=0.0)

    def generation_change(self, variant: str) -> GenerationModelChange | None:
        found = self._for(GenerationModelChange, variant)
        return found[-1] if found else None

    def embedding_change(self) -> EmbeddingModelChange | None:
        found = self._for(EmbeddingModelChange)
        return found[-1] if found else None


def release_at(incidents: list[Any], default: str, t: float, tenant: str) -> str:
    """The production release serving `tenant` at t: the latest incident release started by then."""
    best: tuple[float, str] | None = None
    for inc in incidents:
        if inc.release is None or not inc.applies_to(tenant):
            continue
        started = inc.last_start_before(t)
        if started is not None and (best is None or started >= best[0]):
            best = (started, inc.release)
    return best[1] if best else default
