"""Pure parts of the metrics worker: the price table and stage capping."""

from __future__ import annotations

import pytest

from service.contracts.config import ConfigError, load_section
from workers.metrics.config import MetricsConfig, ModelPrice
from workers.metrics.pricing import ESTIMATED, REPORTED, UNKNOWN, PriceTable, cap_stages

TABLE = PriceTable({"gpt-x": ModelPrice(prompt=2.5, completion=10.0), "embed": ModelPrice(embedding=0.02)})


def test_reported_cost_wins_over_the_table() -> None:
    assert TABLE.cost("gpt-x", {"prompt": 1000}, 0.5) == (0.5, REPORTED)
    assert TABLE.cost("unknown-model", {}, 0.0) == (0.0, REPORTED)


def test_estimated_from_tokens_and_prices_per_million() -> None:
    cost, source = TABLE.cost("gpt-x", {"prompt": 1_000_000, "completion": 200_000}, None)
    assert source == ESTIMATED
    assert cost == pytest.approx(2.5 + 2.0)


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("gpt-x", {"prompt": 10, "reasoning": 5}),  # a kind without a price: never a partial sum
        ("not-in-table", {"prompt": 10}),
        (None, {"prompt": 10}),
        ("gpt-x", {}),
    ],
)
def test_unknown_when_the_table_cannot_price_every_token(model: str | None, tokens: dict[str, int]) -> None:
    assert TABLE.cost(model, tokens, None) == (None, UNKNOWN)


def test_zero_tokens_of_an_unpriced_kind_do_not_block_the_estimate() -> None:
    cost, source = TABLE.cost("gpt-x", {"prompt": 1000, "reasoning": 0}, None)
    assert source == ESTIMATED and cost == pytest.approx(0.0025)


def test_stage_capping_keeps_known_stages_and_folds_the_rest() -> None:
    stages = frozenset({"retrieval", "generation"})
    capped = cap_stages(
        {"retrieval": 12.0, "generation": 800.0, "guardrail_check": 5.0, "ttft": 300.0, "total": 900.0},
        stages,
    )
    assert sorted(capped) == sorted(
        [("retrieval", 0.012), ("generation", 0.8), ("other", 0.005), ("ttft", 0.3), ("total", 0.9)]
    )


def test_config_rejects_reserved_stage_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "ragmon.yaml"
    path.write_text("metrics:\n  stages: [retrieval, total]\n")
    with pytest.raises(ConfigError, match=r"metrics.stages: .*reserved"):
        load_section("metrics", MetricsConfig, path)


def test_config_rejects_unknown_price_kinds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "ragmon.yaml"
    path.write_text("metrics:\n  prices:\n    gpt-x: {prompt: 1, tokens: 2}\n")
    with pytest.raises(ConfigError, match=r"metrics.prices.gpt-x.tokens"):
        load_section("metrics", MetricsConfig, path)
