"""Rules that hold across the events of one batch, shared by the API's two paths.

An embedding model has one dimension: two traces of one batch that give the
same `embedding_model` vectors of different lengths cannot both be right, and
the drift worker never compares vectors of different dimensions. The first
accepted trace of a batch fixes the model's dimension; a later one that
disagrees is refused alone (rule `embedding_dims`). Across batches a new
dimension is a model change, which the drift worker reports as one.
"""

from __future__ import annotations

EMBEDDING_DIMS_RULE = "embedding_dims"


class EmbeddingDimensions:
    """The dimension each embedding model has in one batch, fixed by its first accepted trace."""

    def __init__(self) -> None:
        self._first: dict[str, tuple[int, int]] = {}

    def conflict(self, index: int, model: str | None, embedding: list[float] | None) -> str | None:
        """Why events[index]'s embedding disagrees with the batch (None when it agrees or has none).

        Call only for an event that is otherwise accepted, then `accept` it."""
        if model is None or embedding is None:
            return None
        first = self._first.get(model)
        if first is None or first[0] == len(embedding):
            return None
        dims, where = first
        return (
            f"events[{index}].body.query.embedding: {len(embedding)} dimensions, but embedding_model "
            f"{model!r} has {dims} in events[{where}] of this batch; one model has one dimension "
            f"({EMBEDDING_DIMS_RULE})"
        )

    def accept(self, index: int, model: str | None, embedding: list[float] | None) -> None:
        if model is not None and embedding is not None:
            self._first.setdefault(model, (len(embedding), index))
