"""The scenario file: traffic shape, sampling fractions and scheduled incidents.

Validated with pydantic; every error names its field path (e.g.
`incidents.1.factor`) so a typo in a test scenario fails at load, not as a
silently clean run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from service.simulate.incidents import INCIDENT_KINDS, Incident
from service.simulate.topics import INTENTS, PRODUCTS

SCENARIO_DIR = Path(__file__).parent / "scenarios"
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", min_length=1, max_length=64)]
Identifier = Annotated[str, Field(pattern=r"^[A-Za-z0-9._:/@#+=-]+$", min_length=1, max_length=128)]
Share = Annotated[float, Field(ge=0, le=1)]


def _check_range(value: tuple[float, float]) -> tuple[float, float]:
    lo, hi = value
    if lo < 0 or hi < lo:
        raise ValueError("needs [min, max] seconds with 0 <= min <= max")
    return value


DelayRange = Annotated[tuple[float, float], AfterValidator(_check_range)]


Locale = Literal["en", "pt", "pl"]


def _all_locales() -> list[Locale]:
    return ["en", "pt", "pl"]


class ScenarioError(ValueError):
    pass


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TenantConfig(Strict):
    name: Name
    weight: Annotated[float, Field(gt=0)] = 1.0
    locales: Annotated[list[Locale], Field(min_length=1)] = Field(default_factory=lambda: _all_locales())
    products: Annotated[list[Literal[PRODUCTS]], Field(min_length=1, max_length=6)] | None = None  # type: ignore[valid-type]
    users: Annotated[int, Field(ge=1, le=10_000)] = 40
    sample_rate: Annotated[float, Field(gt=0, le=1)] | None = None


class ModelConfig(Strict):
    name: Identifier
    weight: Annotated[float, Field(ge=0)] = 1.0
    reports_cost: bool = True
    prompt_usd_per_mtok: Annotated[float, Field(ge=0)] = 0.5
    completion_usd_per_mtok: Annotated[float, Field(ge=0)] = 1.5


DEFAULT_MODELS = (
    ModelConfig(name="gpt-4o-mini", weight=3, prompt_usd_per_mtok=0.15, completion_usd_per_mtok=0.6),
    ModelConfig(name="claude-3-5-haiku", weight=2, prompt_usd_per_mtok=0.8, completion_usd_per_mtok=4.0),
    # Self-hosted: the app reports no cost, so ragmon estimates it from its own price table.
    ModelConfig(name="llama-3.1-70b-instruct", weight=1, reports_cost=False),
)


class CandidateConfig(Strict):
    """A shadow variant that answers a share of production requests (same request_id).

    Its effect against production: latency_factor (slower), cost_factor
    (more tokens, so more expensive), refusal and unfaithful rates, and per
    intent overrides of them (better overall but worse on one intent: the
    regression the average hides). The shadow_*.yaml scenarios set each.
    """

    name: Name = "candidate"
    share: Share = 0.2
    release: Identifier = "cand-1"
    latency_factor: Annotated[float, Field(gt=0, le=100)] = 1.15
    cost_factor: Annotated[float, Field(gt=0, le=100)] = 1.0
    refusal_rate: Share = 0.01
    unfaithful_rate: Share = 0.02
    refusal_rate_by_intent: dict[Name, Share] = Field(default_factory=dict)
    unfaithful_rate_by_intent: dict[Name, Share] = Field(default_factory=dict)
    model: Identifier | None = None

    def refusal_for(self, intent: str) -> float:
        return self.refusal_rate_by_intent.get(intent, self.refusal_rate)

    def unfaithful_for(self, intent: str) -> float:
        return self.unfaithful_rate_by_intent.get(intent, self.unfaithful_rate)

    @field_validator("name")
    @classmethod
    def _not_production(cls, v: str) -> str:
        if v == "production":
            raise ValueError("the candidate variant cannot be named 'production'")
        return v


class SamplingConfig(Strict):
    """Shares of traffic that carry each optional part, and delays (seconds, [min, max]).

    sample_rate is what traces report (the app's own sampling); exclusion_sample
    the share with retrieval.exclusion_sample (exclusion_candidates of them),
    gold_ids_in_sample the share of those samples that carry gold_ids; label the
    share of production traces reviewed later; trace_lag the share of traces
    whose export lags (their feedback can reach the API first).
    """

    sample_rate: Annotated[float, Field(gt=0, le=1)] = 1.0
    exclusion_sample: Share = 0.3
    exclusion_candidates: Annotated[int, Field(ge=1, le=500)] = 20
    gold_ids_in_sample: Share = 0.5
    embedding: Share = 0.5
    label: Share = 0.05
    label_delay_s: DelayRange = (30.0, 180.0)
    trace_lag: Share = 0.05
    trace_lag_s: DelayRange = (3.0, 20.0)
    context_docs: Annotated[int, Field(ge=1, le=20)] = 4
    refusal_rate: Share = 0.02


class FeedbackConfig(Strict):
    """Probability per production answer of each kind of feedback; delays in seconds.

    regenerate_bad applies to bad answers (refused, unfaithful, gold missing,
    off-topic, slower than slow_ms); late_share of feedback comes late_delay_s
    after the answer instead of delay_s.
    """

    thumbs: Share = 0.2
    regenerate: Share = 0.04
    regenerate_bad: Share = 0.3
    citation_click: Share = 0.1
    copy_: Share = Field(0.08, alias="copy")
    dwell: Share = 0.3
    followup: Share = 0.05
    delay_s: DelayRange = (2.0, 30.0)
    late_share: Share = 0.1
    late_delay_s: DelayRange = (60.0, 180.0)
    slow_ms: Annotated[float, Field(gt=0)] = 6000.0

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class EmbeddingConfig(Strict):
    model: Identifier = "app-embed-v1"
    dim: Annotated[int, Field(ge=2, le=4096)] = 64
    noise: Annotated[float, Field(ge=0, le=10)] = 0.35


class ProbeReplayConfig(Strict):
    """The app replays a fixed probe set every `every_s` (docs/probes.md; service/simulate/probes.py)."""

    set: Name = "core"
    queries: Annotated[int, Field(ge=1, le=500)] = 20
    every_s: Annotated[float, Field(gt=0)] = 60.0
    k: Annotated[int, Field(ge=1, le=50)] = 10
    index_version: Identifier = "idx-1"


class Scenario(Strict):
    name: Name = "scenario"
    seed: int = 1
    duration_s: Annotated[float, Field(gt=0)] | None = 60.0  # null: endless (real-time sending only)
    rate: Annotated[float, Field(gt=0, le=100_000)] = 5.0
    arrival: Literal["poisson", "uniform"] = "poisson"
    release: Identifier = "v1"
    tenants: Annotated[list[TenantConfig], Field(min_length=1, max_length=50)] = Field(
        default_factory=lambda: [TenantConfig(name="acme"), TenantConfig(name="globex")]
    )
    intents: dict[Literal[INTENTS], Annotated[float, Field(ge=0)]] | None = None  # type: ignore[valid-type]
    models: Annotated[list[ModelConfig], Field(min_length=1)] = Field(
        default_factory=lambda: list(DEFAULT_MODELS)
    )
    candidate: CandidateConfig | None = None
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    feedback: FeedbackConfig = Field(default_factory=lambda: FeedbackConfig.model_validate({}))
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    incidents: list[Incident] = Field(default_factory=list)
    probes: ProbeReplayConfig | None = None

    @field_validator("tenants", mode="before")
    @classmethod
    def _tenant_names(cls, v: Any) -> Any:
        # `tenants: [acme, globex]` is shorthand for objects with defaults.
        if isinstance(v, list):
            return [{"name": t} if isinstance(t, str) else t for t in v]
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        _unique([t.name for t in self.tenants], "tenants", "tenant name")
        _unique([m.name for m in self.models], "models", "model name")
        _unique([i.name for i in self.incidents], "incidents", "incident name")
        if self.intents is not None and sum(self.intents.values()) <= 0:
            raise ValueError("intents: at least one intent needs a positive weight")
        if self.candidate and self.candidate.model and self.candidate.model not in self.model_names:
            raise ValueError(
                f"candidate.model: {self.candidate.model!r} is not one of models {self.model_names}"
            )
        tenants = {t.name for t in self.tenants}
        variants = {"production"} | ({self.candidate.name} if self.candidate else set())
        for idx, inc in enumerate(self.incidents):
            inc.check_against(f"incidents.{idx}", self.duration_s, tenants, variants)
        return self

    @property
    def model_names(self) -> list[str]:
        return [m.name for m in self.models]

    @property
    def variants(self) -> list[str]:
        return ["production"] + ([self.candidate.name] if self.candidate else [])

    def tail_s(self) -> float:
        """Longest time an event can be sent after its request: bounds the run's span."""
        s, f = self.sampling, self.feedback
        return max(s.label_delay_s[1], s.trace_lag_s[1] + f.delay_s[1], f.late_delay_s[1], f.delay_s[1])

    def with_overrides(self, **changes: Any) -> Scenario:
        """A copy with top-level fields replaced (CLI --seed/--duration/--rate), re-validated."""
        if not changes:
            return self
        data = self.model_dump(by_alias=True)
        data.update(changes)
        return parse_scenario(data, source=f"{self.name} with {sorted(changes)} overridden")


def _unique(names: list[str], field: str, what: str) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{field}: duplicate {what} {dupes}")


def parse_scenario(data: Any, source: str = "scenario") -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"{source}: " + "; ".join(_describe(err) for err in exc.errors())) from exc


def _describe(err: Any) -> str:
    parts = [p for p in err["loc"] if not str(p).startswith(("function-", "tagged-union"))]
    # Drop the union tag pydantic inserts after a list index: the file says incidents.1.factor.
    kept = [
        p for i, p in enumerate(parts) if not (p in INCIDENT_KINDS and i and isinstance(parts[i - 1], int))
    ]
    loc = ".".join(str(p) for p in kept)
    msg = str(err["msg"]).removeprefix("Value error, ")
    # Cross-field checks name their own field path in the message.
    return f"{loc}: {msg}" if loc else msg


def resolve_path(name_or_path: str) -> Path:
    """A file path, or the name of a bundled scenario (`demo`, `clean`, `incidents`)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    bundled = SCENARIO_DIR / f"{name_or_path}.yaml"
    if bundled.is_file():
        return bundled
    known = sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
    raise ScenarioError(f"scenario {name_or_path!r}: no such file and not a bundled scenario {known}")


def load_scenario(name_or_path: str) -> Scenario:
    path = resolve_path(name_or_path)
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ScenarioError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}"
        ) from exc
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: the top level must be a mapping of scenario fields")
    return parse_scenario(data, source=str(path))
