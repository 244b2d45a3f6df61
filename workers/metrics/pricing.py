"""Cost of one query: what the app reported, else tokens x the configured price table."""

from __future__ import annotations

from workers.metrics.config import ModelPrice

REPORTED, ESTIMATED, UNKNOWN = "reported", "estimated", "unknown"


class PriceTable:
    def __init__(self, prices: dict[str, ModelPrice]) -> None:
        self._prices = {name: p.model_dump() for name, p in prices.items()}

    def knows(self, model: str) -> bool:
        """Models in the price table are the closed set of model label values."""
        return model in self._prices

    def cost(
        self, model: str | None, tokens: dict[str, int], reported: float | None
    ) -> tuple[float | None, str]:
        """(cost in USD, source). An estimate needs a price for every token kind the trace used."""
        if reported is not None:
            return reported, REPORTED
        if model is None or model not in self._prices or not tokens:
            return None, UNKNOWN
        price = self._prices[model]
        total = 0.0
        for kind, n in tokens.items():
            if n == 0:
                continue
            per_million = price.get(kind)
            if per_million is None:
                return None, UNKNOWN
            total += n * per_million / 1_000_000
        return total, ESTIMATED


def cap_stages(timings: dict[str, float], stages: frozenset[str]) -> list[tuple[str, float]]:
    """(stage label, seconds) per timing; unknown stage names become 'other', ttft and total keep theirs."""
    out = []
    for name, ms in timings.items():
        if name in ("ttft", "total") or name in stages:
            out.append((name, ms / 1000.0))
        else:
            out.append(("other", ms / 1000.0))
    return out
