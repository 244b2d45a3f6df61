"""Scores are the model card's: the exact template, first position, softmax, label 1 -
whether pairs are batched, sorted, cached or scored one by one."""

from __future__ import annotations

import random

import pytest
import torch
from transformers.models.t5.modeling_t5 import T5Attention

from tests.workers.faithfulness.hhem_builder import WORDS, TinyHHEM
from workers.faithfulness.encoder import relative_position_buckets
from workers.faithfulness.loader import LoadedModel, load_hhem
from workers.faithfulness.scorer import HHEMScorer, plan_batches, render_prompt

TOLERANCE = 1e-5  # fp32, two implementations of the same arithmetic


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def mixed_pairs(count: int, seed: int = 3) -> list[tuple[str, str]]:
    """Premises from a few words to ~250 tokens: past T5's 128-token bucket distance, unequal in a batch."""
    rng = random.Random(seed)
    return [
        (sentence(rng, rng.choice([3, 20, 60, 150])), sentence(rng, rng.randint(2, 12))) for _ in range(count)
    ]


def test_the_prompt_is_the_published_template_verbatim() -> None:
    assert render_prompt("The sky is blue.", "The sky has a colour.") == (
        "<pad> Determine if the hypothesis is true given the premise?\n\n"
        "Premise: The sky is blue.\n\nHypothesis: The sky has a colour."
    )
    # Braces in user text are data, not format fields.
    assert render_prompt("{premise}", "{0}").endswith("Premise: {premise}\n\nHypothesis: {0}")


def test_the_score_is_the_first_positions_softmax_for_label_1(
    tiny_hhem: TinyHHEM, loaded: LoadedModel
) -> None:
    premise, hypothesis = "Mars has two moons, Phobos and Deimos.", "Mars has two moons."
    text = (
        "<pad> Determine if the hypothesis is true given the premise?\n\n"
        f"Premise: {premise}\n\nHypothesis: {hypothesis}"
    )
    inputs = tiny_hhem.reference_tokenizer([text], return_tensors="pt")
    assert inputs["input_ids"][0, 0].item() == 0  # the template's leading <pad> is the pad token itself
    with torch.no_grad():
        logits = tiny_hhem.reference(**inputs).logits  # (1, length, 2)
    expected = torch.softmax(logits[0, 0], dim=-1)[1].item()
    ours = HHEMScorer(loaded).score([(premise, hypothesis)])[0].score
    assert ours == pytest.approx(expected, abs=TOLERANCE)
    # Not label 0, not the last position: those are different numbers for this model.
    assert abs(ours - torch.softmax(logits[0, 0], dim=-1)[0].item()) > 1e-3
    assert abs(ours - torch.softmax(logits[0, -1], dim=-1)[1].item()) > 1e-3


def test_scores_equal_the_reference_predict_on_the_same_weights(
    tiny_hhem: TinyHHEM, loaded: LoadedModel
) -> None:
    pairs = mixed_pairs(24)
    expected = tiny_hhem.reference_scores(pairs)
    # Small micro-batches: many forward passes of different padded lengths.
    scores = [s.score for s in HHEMScorer(loaded, batch_size=4, batch_tokens=600).score(pairs)]
    assert max(abs(a - b) for a, b in zip(scores, expected, strict=True)) < TOLERANCE


def test_batched_and_one_by_one_agree(loaded: LoadedModel) -> None:
    pairs = mixed_pairs(12, seed=5)
    batched = [s.score for s in HHEMScorer(loaded, batch_size=12, batch_tokens=100_000).score(pairs)]
    single = [HHEMScorer(loaded, cache_size=0).score([pair])[0].score for pair in pairs]
    assert batched == pytest.approx(single, abs=TOLERANCE)


def test_identical_pairs_are_scored_once(loaded: LoadedModel) -> None:
    passes: list[int] = []
    scorer = HHEMScorer(loaded, observe_batch=lambda seconds, tokens: passes.append(tokens))
    pair = ("Refunds are accepted within 30 days.", "You have 30 days.")
    first, repeat = scorer.score([pair, pair])
    assert (first.cached, repeat.cached, repeat.score) == (False, True, first.score)
    assert first.tokens > 0 and repeat.tokens == 0
    again = scorer.score([pair])[0]
    assert again.cached and again.score == first.score and again.seconds == 0.0
    assert len(passes) == 1


def test_the_cache_is_bounded(loaded: LoadedModel) -> None:
    scorer = HHEMScorer(loaded, cache_size=2)
    pairs = mixed_pairs(3, seed=11)
    scorer.score(pairs)
    assert len(scorer.cache) == 2
    oldest, newest = scorer.score([pairs[0]])[0], scorer.score([pairs[2]])[0]
    assert (oldest.cached, newest.cached) == (False, True)


def test_tokens_and_model_time_are_attributed_to_pairs(loaded: LoadedModel) -> None:
    forward: list[tuple[float, int]] = []
    scorer = HHEMScorer(
        loaded, batch_size=8, batch_tokens=100_000, observe_batch=lambda s, t: forward.append((s, t))
    )
    pairs = mixed_pairs(5, seed=13)
    results = scorer.score(pairs)
    lengths = [len(loaded.tokenizer.encode(render_prompt(p, h)).ids) for p, h in pairs]
    assert [r.tokens for r in results] == lengths
    ((seconds, padded),) = forward
    assert padded == len(pairs) * max(lengths)
    assert sum(r.seconds for r in results) == pytest.approx(seconds)


def test_micro_batches_group_similar_lengths_within_the_budgets() -> None:
    lengths = [300, 12, 40, 41, 39, 5000, 42, 11]
    batches = plan_batches(lengths, batch_size=3, batch_tokens=200)
    assert batches == [[7, 1, 4], [2, 3, 6], [0], [5]]
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 3 and (len(batch) * longest <= 200 or len(batch) == 1)


def test_relative_position_buckets_match_t5(loaded: LoadedModel) -> None:
    length = 400  # distances past max_distance (128) land in the last bucket
    ours = relative_position_buckets(length, loaded.shape, torch.device("cpu"))
    position = torch.arange(length)
    theirs = T5Attention._relative_position_bucket(position[None, :] - position[:, None], True, 32, 128)
    assert torch.equal(ours, theirs)


def test_both_matmul_paths_give_the_reference_scores(tiny_hhem: TinyHHEM) -> None:
    pairs = mixed_pairs(6, seed=17)
    expected = tiny_hhem.reference_scores(pairs)
    plain = load_hhem(str(tiny_hhem.model_dir), matmul="torch")
    assert plain.encoder.kernel == "torch"
    for model in (plain, load_hhem(str(tiny_hhem.model_dir), matmul="auto")):
        scores = [s.score for s in HHEMScorer(model, batch_size=2).score(pairs)]
        assert scores == pytest.approx(expected, abs=TOLERANCE), model.encoder.kernel
