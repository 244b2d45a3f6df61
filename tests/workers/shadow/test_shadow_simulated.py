"""The simulator's shadow scenarios through the worker's outcome code and the comparison (no broker):
equal, a regression hidden by the average, slower, more expensive."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import msgspec
import orjson
import pytest

from service.simulate import generate_events, load_scenario
from workers.shadow.bootstrap import BootstrapSettings
from workers.shadow.compare import CompareSettings, compare
from workers.shadow.config import ShadowConfig
from workers.shadow.outcomes import pair_row, trace_outcome
from workers.shadow.results import Comparison
from workers.shadow.table import build_table
from workers.shadow.views import ShadowTrace

pytestmark = pytest.mark.slow  # each scenario is ~2,000 simulated requests (a few seconds)
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SETTINGS = CompareSettings(bootstrap=BootstrapSettings(resamples=1000))


def _comparison(scenario: str) -> Comparison:
    loaded = load_scenario(scenario)
    config = ShadowConfig()
    fields: dict[str, dict[str, bytes]] = defaultdict(dict)
    for event in generate_events(loaded, START):
        if event.type == "trace":
            body = msgspec.convert(event.body, ShadowTrace)
            fields[body.request_id][f"trace:{body.variant}"] = orjson.dumps(trace_outcome(body, config))
    candidate = loaded.variants[1]
    rows = [pair_row(f, candidate) for f in fields.values() if len(f) == 2]
    return compare(build_table(rows), SETTINGS)


def _by_metric(c: Comparison) -> dict[str, Any]:
    return {r.metric: r for r in c.metrics}


def test_equal_candidate_has_no_better_or_worse_verdict() -> None:
    c = _comparison("shadow_equal")
    assert c.pairs > 1700
    verdicts = {m: r.verdict for m, r in _by_metric(c).items()}
    assert not {"better", "worse"} & set(verdicts.values()), verdicts
    assert verdicts["latency_total_seconds"] == "equivalent"


def test_masked_regression_is_better_overall_and_flags_the_intent() -> None:
    c = _comparison("shadow_masked")
    refusal = _by_metric(c)["refusal"]
    assert refusal.verdict == "better"
    flagged = {(s.dimension, s.value) for s in c.masked_regressions if s.metric == "refusal"}
    assert flagged == {("intent", "policy")}
    policy = next(s for s in c.masked_regressions if s.value == "policy")
    assert policy.losses > policy.wins and policy.strength == "significant"


@pytest.mark.parametrize(
    ("scenario", "metrics"),
    [("shadow_slower", ("latency_total_seconds",)), ("shadow_costlier", ("cost_usd", "tokens_total"))],
)
def test_resource_regressions_are_worse_as_non_inferiority(scenario: str, metrics: tuple[str, ...]) -> None:
    by = _by_metric(_comparison(scenario))
    for metric in metrics:
        assert by[metric].verdict == "worse", (metric, by[metric].reason)
    assert by["refusal"].verdict in ("equivalent", "inconclusive")
