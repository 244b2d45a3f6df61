"""A tiny HHEM-architecture model trained in seconds to tell faithful answers from unfaithful ones.

The real HHEM-2.1-Open weights cannot be downloaded here. Random weights give
scores that mean nothing, which is enough to test plumbing but not an alert
that must fire when answers stop using their context. So the end-to-end test
trains a tiny model of the same architecture and checkpoint layout (T5
encoder + 2-label token-classification head, the published prompt template,
a locally trained tokenizer) on pairs from the simulator, then saves it in the
HHEM layout and the worker loads it through the real loader. It learns the
simulator's notion of unfaithful (claims that appear in no document); it is
not a substitute for the real model's quality.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast, T5ForTokenClassification

from service.simulate.records import TraceFacts
from service.simulate.scenario import load_scenario, parse_scenario
from service.simulate.stream import generate_events
from tests.workers.faithfulness.hhem_builder import HHEM_PROMPT, save_hhem, small_config, train_tokenizer

CACHE = Path("/tmp/ragmon-e2e-hhem")
VERSION = "2"
PREMISE_WORDS = 48


@dataclass(frozen=True)
class TrainedHHEM:
    model_dir: Path
    foundation_dir: Path
    accuracy: float


def _pairs(n: int, seed: int) -> list[tuple[str, str, int]]:
    data = load_scenario("clean").model_dump(by_alias=True)
    data.update(
        seed=seed,
        duration_s=100_000,
        incidents=[
            {"kind": "unfaithful_answers", "name": "half", "share": 0.5, "start_s": 0, "end_s": 100_000}
        ],
    )
    scenario = parse_scenario(data, source="hhem training pairs")
    out: list[tuple[str, str, int]] = []
    for ev in generate_events(scenario, datetime(2026, 1, 1, tzinfo=UTC)):
        facts = ev.facts
        if ev.type != "trace" or not isinstance(facts, TraceFacts) or facts.faithful is None:
            continue
        # A short premise keeps training to seconds on a CPU; the answer is kept whole.
        premise = " ".join(
            " ".join(d["text"] for d in ev.body["retrieval"]["documents"]).split()[:PREMISE_WORDS]
        )
        out.append((premise, ev.body["answer"]["text"], int(facts.faithful)))
        if len(out) >= n:
            break
    return out


def _balanced(pairs: list[tuple[str, str, int]], rng: random.Random) -> list[tuple[str, str, int]]:
    good = [p for p in pairs if p[2] == 1]
    bad = [p for p in pairs if p[2] == 0]
    k = min(len(good), len(bad))
    chosen = rng.sample(good, k) + rng.sample(bad, k)
    rng.shuffle(chosen)
    return chosen


def _encode(tok: PreTrainedTokenizerFast, batch: list[tuple[str, str, int]]) -> dict[str, torch.Tensor]:
    texts = [HHEM_PROMPT.format(text1=p, text2=h) for p, h, _ in batch]
    return tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=192)


def build(root: Path = CACHE, steps: int = 120) -> TrainedHHEM:
    """Train (or reuse a cached) tiny HHEM; returns its directories and held-out accuracy."""
    key = hashlib.sha256(f"{VERSION}/{steps}".encode()).hexdigest()[:12]
    base = root / key
    model_dir, foundation = base / "hhem", base / "foundation"
    marker = base / "accuracy"
    if marker.is_file():
        return TrainedHHEM(model_dir, foundation, float(marker.read_text()))
    rng = random.Random(5)
    data = _balanced(_pairs(3000, seed=101), rng)
    held_out, train = data[:200], data[200:]
    foundation.mkdir(parents=True, exist_ok=True)
    texts = [HHEM_PROMPT.format(text1="a", text2="b")] + [t for p, h, _ in train for t in (p, h)]
    tokenizer = train_tokenizer(foundation / "tokenizer.json", texts, vocab_size=2000)
    config = small_config(tokenizer.get_vocab_size(), d_model=64, d_kv=16, d_ff=128, dropout_rate=0.0)
    config.to_json_file(str(foundation / "config.json"))
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(foundation / "tokenizer.json"),
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    torch.manual_seed(5)
    model = T5ForTokenClassification(config)
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        batch = [train[(step * 32 + i) % len(train)] for i in range(32)]
        inputs = _encode(tok, batch)
        logits = model(**inputs).logits[:, 0, :]
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor([y for _, _, y in batch]))
        optim.zero_grad()
        loss.backward()
        optim.step()
    model.eval()
    with torch.no_grad():
        correct = 0
        for i in range(0, len(held_out), 50):
            batch = held_out[i : i + 50]
            scores = torch.softmax(model(**_encode(tok, batch)).logits[:, 0, :], dim=-1)[:, 1]
            correct += sum(
                int((s >= 0.5) == bool(y)) for s, (_, _, y) in zip(scores.tolist(), batch, strict=True)
            )
    accuracy = correct / len(held_out)
    save_hhem(model, model_dir, str(foundation))
    marker.write_text(f"{accuracy}")
    return TrainedHHEM(model_dir, foundation, accuracy)


if __name__ == "__main__":
    import time

    started = time.time()
    result = build()
    print(result, f"{time.time() - started:.1f}s")
