"""HHEM scores for (premise, hypothesis) pairs: template, cache, length-sorted micro-batches.

The model card's predict() pads a whole batch to its longest prompt, so one
long premise makes every short pair in the batch pay for its length (and the
attention cost grows with the square of it). Here each prompt is tokenized
once, prompts are sorted by length and cut into micro-batches that are padded
only to their own longest member, within a budget of pairs and padded tokens.
Identical pairs (a shadow twin that answered like production, a retried
batch) are scored once and remembered in a bounded LRU cache.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer

from workers.faithfulness.loader import PROMPT_TEMPLATE, LoadedModel

BatchObserver = Callable[[float, int], None]  # (seconds, padded tokens) of one forward pass


@dataclass(frozen=True)
class PairScore:
    score: float  # P(consistent), softmax of the first position's logits, label 1
    tokens: int  # prompt tokens run through the model for this pair (0 when cached)
    seconds: float  # this pair's share of its forward pass, by tokens (0 when cached)
    cached: bool


def render_prompt(premise: str, hypothesis: str) -> str:
    # str.format substitutes the values verbatim: braces inside them are not re-parsed.
    return PROMPT_TEMPLATE.format(premise=premise, hypothesis=hypothesis)


def plan_batches(lengths: Sequence[int], batch_size: int, batch_tokens: int) -> list[list[int]]:
    """Indices grouped into micro-batches of similar length, shortest first.

    A batch grows while (members x longest member) stays within `batch_tokens`
    and it has fewer than `batch_size` members; a prompt longer than
    `batch_tokens` runs alone rather than not at all.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        longest = lengths[index]  # sorted ascending: the newcomer is the longest
        if current and (len(current) >= batch_size or (len(current) + 1) * longest > batch_tokens):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


class ScoreCache:
    """Bounded LRU of scores by (premise, hypothesis); keys are digests, so texts are not kept."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._scores: OrderedDict[bytes, float] = OrderedDict()

    @staticmethod
    def key(premise: str, hypothesis: str) -> bytes:
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"{len(premise)}:".encode())  # length prefix: no two pairs share a byte stream
        digest.update(premise.encode())
        digest.update(hypothesis.encode())
        return digest.digest()

    def get(self, key: bytes) -> float | None:
        score = self._scores.get(key)
        if score is not None:
            self._scores.move_to_end(key)
        return score

    def put(self, key: bytes, score: float) -> None:
        if self.size == 0:
            return
        self._scores[key] = score
        self._scores.move_to_end(key)
        while len(self._scores) > self.size:
            self._scores.popitem(last=False)

    def __len__(self) -> int:
        return len(self._scores)


class HHEMScorer:
    def __init__(
        self,
        model: LoadedModel,
        batch_size: int = 16,
        batch_tokens: int = 2048,
        cache_size: int = 4096,
        observe_batch: BatchObserver | None = None,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.cache = ScoreCache(cache_size)
        self._observe = observe_batch
        self._pad_id = model.shape.pad_token_id

    @property
    def tokenizer(self) -> Tokenizer:
        return self.model.tokenizer

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[PairScore]:
        """One PairScore per pair, in order. Raises on inference failures (an outage, not bad input)."""
        keys = [ScoreCache.key(p, h) for p, h in pairs]
        results: dict[bytes, PairScore] = {}
        pending: dict[bytes, str] = {}
        for key, (premise, hypothesis) in zip(keys, pairs, strict=True):
            cached = self.cache.get(key)
            if cached is not None:
                results[key] = PairScore(cached, 0, 0.0, True)
            elif key not in pending:
                pending[key] = render_prompt(premise, hypothesis)
        if pending:
            fresh = self._run(list(pending.values()))
            for key, result in zip(pending, fresh, strict=True):
                self.cache.put(key, result.score)
                results[key] = result
        # A pair repeated inside one call is computed once; its repeats read as cached.
        seen: set[bytes] = set()
        ordered = []
        for key in keys:
            result = results[key]
            ordered.append(result if key not in seen else PairScore(result.score, 0, 0.0, True))
            seen.add(key)
        return ordered

    def _run(self, prompts: list[str]) -> list[PairScore]:
        encodings = self.tokenizer.encode_batch(prompts, add_special_tokens=True)
        ids = [encoding.ids for encoding in encodings]
        lengths = [len(row) for row in ids]
        out: list[PairScore | None] = [None] * len(prompts)
        for members in plan_batches(lengths, self.batch_size, self.batch_tokens):
            started = time.perf_counter()
            scores = self._forward([ids[i] for i in members])
            seconds = time.perf_counter() - started
            real_tokens = sum(lengths[i] for i in members)
            if self._observe is not None:
                self._observe(seconds, len(members) * max(lengths[i] for i in members))
            for index, score in zip(members, scores, strict=True):
                out[index] = PairScore(score, lengths[index], seconds * lengths[index] / real_tokens, False)
        return [result for result in out if result is not None]

    def _forward(self, rows: list[list[int]]) -> list[float]:
        longest = max(len(row) for row in rows)
        device = self.model.device
        input_ids = torch.full((len(rows), longest), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[r, : len(row)] = 1
        # Without padding in the micro-batch the mask adds nothing but a (B, H, L, L) tensor.
        padded = any(len(row) != longest for row in rows)
        with torch.inference_mode():
            probabilities = self.model.encoder.consistent_probability(
                input_ids.to(device), mask.to(device) if padded else None
            )
        return probabilities.float().cpu().tolist()
