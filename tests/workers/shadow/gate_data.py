"""Simulated release-gate sets and two systems' outputs on them, for the `ragmon gate` tests.

Each golden item has one gold document. A system retrieves 10 candidates: the gold is among them with
probability `recall` (at a rank drawn uniformly from the first 6), and the context is the first 5
candidates, minus the gold with probability `drop` (a reranker or packer that loses it). The answer
cites the first context document and quotes a figure of its text, which a stray answer (probability
`stray`) does not have. Two systems drawn with the same parameters are equal in quality but answer
each item independently: the pairs disagree often, as two real retrievers do.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

INTENTS = ("billing", "returns", "account")


def golden(n: int) -> list[dict]:
    return [
        {
            "tenant": "acme",
            "item_id": i,
            "trace_id": f"t{i}",
            "session_id": f"s{i // 2}",
            "intent": INTENTS[i % len(INTENTS)],
            "gold_ids": [f"g{i}"],
            "split": "release_gate",
        }
        for i in range(n)
    ]


def outputs(n: int, seed: int, recall: float = 0.85, drop: float = 0.05, stray: float = 0.05) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        ids = [f"x{i}-{j}" for j in range(10)]
        if rng.random() < recall:
            ids[int(rng.integers(0, 6))] = f"g{i}"
        context = [c for c in ids[:5] if not (c == f"g{i}" and rng.random() < drop)]
        docs = [
            {"id": c, "text": f"Document {c} says the fee is {10 + k} euros."} for k, c in enumerate(context)
        ]
        figure = 99 if rng.random() < stray else 10
        rows.append(
            {
                "item_id": i,
                "retrieved_ids": ids,
                "context": docs,
                "answer": {"text": f"The fee is {figure} euros.", "citations": [context[0]]},
            }
        )
    return rows


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
