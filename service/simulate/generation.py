"""The generator side of a trace: answer text, per-stage timings, token usage and cost."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any

from service.simulate.retrieval import Scored
from service.simulate.scenario import ModelConfig
from service.simulate.topics import ANSWER_LEADS, REFUSALS, UNSUPPORTED_CLAIMS

CLAIMS_WITHOUT_FIGURES = tuple(c for c in UNSUPPORTED_CLAIMS if "{n" not in c)

SYSTEM_PROMPT_TOKENS = 150
_SENTENCE_END = re.compile(r"(?<=\.)\s+")


@dataclass
class AnswerOutcome:
    body: dict[str, Any]
    refused: bool
    faithful: bool | None  # None: a refusal has no claims to be faithful to
    gold_in_context: bool


def _facts_of(doc_text: str) -> list[str]:
    # The first sentence is the article's title line; the rest are its facts.
    return _SENTENCE_END.split(doc_text)[1:]


def compose_answer(
    rng: random.Random,
    context: list[Scored],
    gold_ids: set[str],
    product: str,
    refuse: bool,
    unfaithful: bool,
    figures: bool = True,
) -> AnswerOutcome:
    """`figures`: an unfaithful answer may invent figures (which figures_grounded also catches); false,
    its claims are wrong in words only, which no deterministic check sees (only the judge does)."""
    gold_in_context = any(c.doc.id in gold_ids for c in context)
    if refuse or not context:
        return AnswerOutcome(
            {"text": rng.choice(REFUSALS), "refused": True, "citations": []}, True, None, gold_in_context
        )
    used = context[: 1 + (rng.random() < 0.4 and len(context) > 1)]
    if unfaithful:
        numbers = {"n1": rng.randint(2, 99), "n2": rng.randint(2, 99)}
        claims = rng.sample(UNSUPPORTED_CLAIMS if figures else CLAIMS_WITHOUT_FIGURES, 2)
        text = " ".join(c.format(product=product, **numbers) for c in claims)
    else:
        sentences = []
        for item in used:
            facts = _facts_of(item.doc.text)
            sentences.extend(rng.sample(facts, min(len(facts), 2)))
        text = rng.choice(ANSWER_LEADS) + " ".join(sentences)
    body = {"text": text, "refused": False, "citations": [c.doc.id for c in used]}
    return AnswerOutcome(body, False, not unfaithful, gold_in_context)


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(sigma * rng.gauss(0.0, 1.0))


def stage_timings(
    rng: random.Random, completion_tokens: int, factor: dict[str, float], latency_factor: float
) -> dict[str, float]:
    """Milliseconds per stage; ttft and total follow from the stages, whatever the factors."""
    first_token = _lognormal(rng, 280.0, 0.3)
    raw = {
        "retrieval": _lognormal(rng, 45.0, 0.35),
        "rerank": _lognormal(rng, 30.0, 0.3),
        "generation": first_token + completion_tokens * rng.uniform(12.0, 20.0),
        "postprocess": _lognormal(rng, 8.0, 0.4),
    }
    stages = {name: round(ms * factor.get(name, 1.0) * latency_factor, 1) for name, ms in raw.items()}
    gen_scale = stages["generation"] / raw["generation"]
    ttft = stages["retrieval"] + stages["rerank"] + first_token * gen_scale
    total = sum(stages.values()) + rng.uniform(1.0, 4.0)  # request handling outside the stages
    return {**stages, "ttft": round(ttft, 1), "total": round(total, 1)}


@dataclass
class UsageOutcome:
    body: dict[str, Any]
    tokens: dict[str, int]
    cost_usd: float | None


def token_usage(
    model: ModelConfig, query: str, context: list[Scored], answer_text: str, cost_factor: float
) -> UsageOutcome:
    prompt = SYSTEM_PROMPT_TOKENS + len(query) // 4 + sum(len(c.doc.text) // 4 for c in context)
    completion = completion_tokens(answer_text)
    tokens = {"prompt": round(prompt * cost_factor), "completion": round(completion * cost_factor)}
    body: dict[str, Any] = {"model": model.name, "tokens": tokens}
    cost = None
    if model.reports_cost:
        cost = round(
            (
                tokens["prompt"] * model.prompt_usd_per_mtok
                + tokens["completion"] * model.completion_usd_per_mtok
            )
            / 1e6,
            9,
        )
        body["cost_usd"] = cost
    return UsageOutcome(body, tokens, cost)


def completion_tokens(answer_text: str) -> int:
    return max(4, len(answer_text) // 4)
