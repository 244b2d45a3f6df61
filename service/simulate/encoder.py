"""The app's own query encoder, faked: a unit topic centroid plus Gaussian noise.

Centroids depend on the model name and dimension, so a model change moves
every vector to an unrelated basis (what a real model swap does) and a drift
test that compared across models would see nonsense. Same topic and model
give nearby vectors; different topics are nearly orthogonal.
"""

from __future__ import annotations

import hashlib

import numpy as np


class FakeEncoder:
    def __init__(self, model: str, dim: int, noise: float) -> None:
        self.model = model
        self.dim = dim
        self.noise = noise
        self._centroids: dict[str, np.ndarray] = {}

    def centroid(self, topic_key: str) -> np.ndarray:
        found = self._centroids.get(topic_key)
        if found is None:
            digest = hashlib.sha256(f"{self.model}/{self.dim}/{topic_key}".encode()).digest()
            vec = np.random.default_rng(int.from_bytes(digest[:8], "big")).standard_normal(self.dim)
            found = vec / np.linalg.norm(vec)
            self._centroids[topic_key] = found
        return found

    def encode(self, topic_key: str, seed: int) -> list[float]:
        """A deterministic embedding for one query of `topic_key`; `seed` draws its noise."""
        noise = np.random.default_rng(seed).standard_normal(self.dim) * (self.noise / np.sqrt(self.dim))
        vec = self.centroid(topic_key) + noise
        vec = vec / np.linalg.norm(vec)
        # Rounded: six decimals keep cosine similarities exact to ~1e-6 at a third of the JSON size.
        return list(np.round(vec, 6).tolist())
