"""Query samples on disk, for calibration and frozen references.

Formats, by extension:
  .txt    one query text per line (blank lines skipped)
  .jsonl  one object per line with "text", or "embedding" (and "embedding_model")
  .npy    a 2-D float array of embeddings
Texts are embedded with the pinned encoder; embeddings are taken as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from service.contracts.jsonlines import json_lines


class SampleError(ValueError):
    pass


@dataclass
class Sample:
    path: Path
    texts: list[str] | None = None
    embeddings: np.ndarray | None = None
    model: str | None = None  # embedding_model named in a .jsonl file

    def __len__(self) -> int:
        if self.texts is not None:
            return len(self.texts)
        return 0 if self.embeddings is None else len(self.embeddings)


def read_sample(path: str | Path) -> Sample:
    p = Path(path)
    if not p.is_file():
        raise SampleError(f"{p}: no such file")
    if p.suffix == ".txt":
        texts = [line.strip() for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
        return _non_empty(Sample(p, texts=texts))
    if p.suffix == ".npy":
        arr = np.load(p, allow_pickle=False)
        return _non_empty(Sample(p, embeddings=_matrix(p, arr)))
    if p.suffix == ".jsonl":
        return _non_empty(_read_jsonl(p))
    raise SampleError(
        f"{p}: unknown format {p.suffix!r}; use .txt (texts), .jsonl (text or embedding) or .npy"
    )


def _read_jsonl(p: Path) -> Sample:
    texts: list[str] = []
    rows: list[list[float]] = []
    models: set[str] = set()
    for number, obj in json_lines(p.read_text(encoding="utf-8").splitlines(), SampleError, str(p)):
        if not isinstance(obj, dict):
            raise SampleError(f"{p}: line {number}: each line must be an object with 'text' or 'embedding'")
        if isinstance(obj.get("embedding"), list):
            rows.append(obj["embedding"])
            if obj.get("embedding_model"):
                models.add(str(obj["embedding_model"]))
        elif isinstance(obj.get("text"), str) and obj["text"].strip():
            texts.append(obj["text"].strip())
        else:
            raise SampleError(f"{p}: line {number}: needs a non-empty 'text' or an 'embedding' list")
    if texts and rows:
        raise SampleError(f"{p}: mixes texts and embeddings; a sample is one or the other")
    if len(models) > 1:
        raise SampleError(
            f"{p}: embeddings of several models {sorted(models)} are never compared; split the file"
        )
    if rows:
        try:
            arr = np.asarray(rows, dtype=np.float32)
        except ValueError as exc:
            raise SampleError(f"{p}: embeddings must all have the same length") from exc
        return Sample(p, embeddings=_matrix(p, arr), model=next(iter(models), None))
    return Sample(p, texts=texts)


def _matrix(p: Path, arr: np.ndarray) -> np.ndarray:
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise SampleError(f"{p}: embeddings must be a 2-D array (rows x dimension), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)):
        raise SampleError(f"{p}: embeddings must be finite numbers")
    return arr.astype(np.float32)


def _non_empty(sample: Sample) -> Sample:
    if len(sample) == 0:
        raise SampleError(f"{sample.path}: holds no queries")
    return sample
