"""What a drift signal is: one stream of comparable query embeddings.

A signal is keyed by (tenant, signal kind, intent scope, model name, dimension).
Two embeddings are only ever compared when every part of that key is equal, so
vectors of different models or dimensions cannot meet in one test: they live
in different Redis windows by construction.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property

ENCODER = "encoder"  # the pinned offline encoder run by this worker on query.text
APP = "app"  # the application's own query.embedding
SIGNALS = (ENCODER, APP)


@dataclass(frozen=True)
class SignalKey:
    tenant: str
    signal: str
    intent: str
    model: str  # the model name exactly as produced (pinned id, or the app's embedding_model)
    dim: int

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise ValueError(f"signal must be one of {SIGNALS}, got {self.signal!r}")
        if self.dim < 1:
            raise ValueError(f"dim must be positive, got {self.dim}")

    @cached_property
    def stream(self) -> str:
        """The comparable-or-not family: the same tenant, signal and intent, any model."""
        return f"{self.tenant}:{self.signal}:{self.intent}"

    @cached_property
    def model_id(self) -> str:
        """Model names are free text: Redis keys carry a digest, the metadata the name."""
        digest = hashlib.sha256(self.model.encode()).hexdigest()[:16]
        return f"{digest}:{self.dim}"

    @cached_property
    def id(self) -> str:
        return f"{self.stream}:{self.model_id}"

    def encode(self) -> str:
        return json.dumps(
            [self.tenant, self.signal, self.intent, self.model, self.dim], separators=(",", ":")
        )

    @classmethod
    def decode(cls, raw: str | bytes) -> SignalKey:
        tenant, signal, intent, model, dim = json.loads(raw)
        return cls(str(tenant), str(signal), str(intent), str(model), int(dim))


class ModelLabels:
    """Maps a model name to its metric label: the configured short name, or None.

    The label is the configured name alone. The dimension is the client's
    choice, so it is not a label (a new dimension of a model is a reset of its
    stream, and the newest one is exported); a model that is not configured
    has no label at all, so two unknown models can never share, and overwrite,
    one set of gauges.
    """

    def __init__(self, known: dict[str, str]) -> None:
        self.known = dict(known)  # model name as produced -> short label name

    def __call__(self, model: str) -> str | None:
        return self.known.get(model)

    def labels(self, key: SignalKey) -> tuple[str, str, str, str] | None:
        name = self(key.model)
        return None if name is None else (key.tenant, key.signal, key.intent, name)


def sampled_in(event_id: str, share: float) -> bool:
    """Deterministic per event id, so a redelivered event gets the same decision."""
    if share >= 1.0:
        return True
    bucket = int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "big")
    return bucket / 2**64 < share
