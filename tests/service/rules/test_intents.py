"""The guardrails per intent (service/rules/intents.py): the series one intent adds, counted from the metric
and rule definitions, are the numbers docs/intents.md states; every per-intent recording rule groups by
intent; each per-intent alert branch is gated by its own minimum and muted while the tenant's fires."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram

from service.contracts.vocabulary import CHECK_NAMES, DEFAULT_INTENTS
from service.rules import intents
from service.rules.config import GuardrailsConfig
from service.rules.render import guardrail_alerts, recording_rules
from workers.faithfulness.metrics import FaithfulnessMetrics
from workers.metrics.metrics import INTENT_STAGES, MetricsWorkerMetrics

DOC = Path(__file__).resolve().parents[3] / "docs" / "intents.md"
PER_INTENT_ALERTS = (
    "RagmonFaithfulnessLow",
    "RagmonFalseExclusionHigh",
    "RagmonLatencyAboveSLO",
    "RagmonCostPerQueryOverBudget",
)


def _histogram_series(h: Histogram) -> int:
    """Series one child of a classic histogram exposes: its buckets (with +Inf), sum and count."""
    return len(h._upper_bounds) + 2  # _upper_bounds includes +Inf


def _scraped_per_intent() -> dict[str, int]:
    m = MetricsWorkerMetrics(CollectorRegistry())
    f = FaithfulnessMetrics(CollectorRegistry())
    return {
        "duration": len(INTENT_STAGES) * _histogram_series(m.intent_seconds),
        "cost": 2,  # ragmon_rag_intent_cost_usd_total, ragmon_rag_intent_costed_queries_total
        "faithfulness": _histogram_series(f.score),
    }


def _recorded_per_intent() -> int:
    """Recorded series per (tenant, variant, intent): one per rule, times the stages or checks it splits by."""
    total = 0
    for rule in intents.intent_recording_rules(GuardrailsConfig()):
        record = rule["record"]
        if record.startswith("ragmon:latency_by_intent:"):
            total += len(INTENT_STAGES)
        elif record.startswith("ragmon:check_by_intent:"):
            total += len(CHECK_NAMES)
        else:
            total += 1
    return total


def _documented(row: str) -> int:
    match = re.search(rf"^\|[^\n]*{re.escape(row)}[^\n]*\| \**(\d[\d,]*)\**\s*\|$", DOC.read_text(), re.M)
    assert match, f"docs/intents.md has no row for {row!r}"
    return int(match.group(1).replace(",", ""))


def test_the_series_one_intent_adds_are_the_documented_numbers() -> None:
    scraped = _scraped_per_intent()
    assert INTENT_STAGES == intents.INTENT_STAGES  # the rules' copy of the worker's stages
    assert _documented("`ragmon_rag_intent_duration_seconds`") == scraped["duration"] == 46
    assert _documented("`ragmon_rag_intent_cost_usd_total`") == scraped["cost"]
    assert _documented("`ragmon_faithfulness_score_ratio`") == scraped["faithfulness"] == 19
    assert _documented("recording rules") == _recorded_per_intent() == 22
    per_intent = sum(scraped.values()) + _recorded_per_intent()
    assert _documented("this change, in all") == per_intent
    values = len(DEFAULT_INTENTS) + 2  # plus `other` and `none`
    assert f"{values} × {per_intent} = **{values * per_intent:,}**" in DOC.read_text()


def test_every_per_intent_recording_rule_groups_by_intent_and_is_no_data_without_samples() -> None:
    for rule in intents.intent_recording_rules(GuardrailsConfig()):
        assert "by (tenant, variant, intent" in rule["expr"], rule
        if rule["record"].endswith((":mean", ":rate", ":quantile")):
            assert "> 0)" in rule["expr"], f"{rule['record']}: an empty window must be no data, not 0"
    recorded = {r["record"] for r in recording_rules(GuardrailsConfig())}
    assert {r["record"] for r in intents.intent_recording_rules(GuardrailsConfig())} <= recorded


def test_each_alert_has_an_intent_branch_gated_by_its_own_minimum_and_muted_by_the_tenants() -> None:
    cfg = GuardrailsConfig.model_validate(
        {
            "faithfulness": {"min_samples_per_intent": 41},
            "false_exclusion": {"min_eligible_per_intent": 42},
            "latency": {"min_samples_per_intent": 43},
            "cost": {"min_samples_per_intent": 44},
        }
    )
    alerts = {a["alert"]: a for a in guardrail_alerts(cfg)}
    for name, samples, minimum in zip(
        PER_INTENT_ALERTS,
        (
            intents.FAITHFULNESS_SAMPLES,
            intents.EXCLUSION_ELIGIBLE,
            intents.LATENCY_SAMPLES,
            intents.COST_SAMPLES,
        ),
        (41, 42, 43, 44),
        strict=True,
    ):
        expr = alerts[name]["expr"]
        assert f'{samples}{{variant="production"}} >= {minimum})' in expr, (name, expr)
        assert "\nunless on (tenant, variant" in expr, (name, expr)
        assert intents.ON_INTENT in alerts[name]["annotations"]["summary"], name


def test_latency_per_intent_only_for_the_stages_with_an_slo() -> None:
    cfg = GuardrailsConfig.model_validate({"latency": {"slo_seconds": {"total": 5.0, "retrieval": 1.0}}})
    (latency,) = [a for a in guardrail_alerts(cfg) if a["alert"] == "RagmonLatencyAboveSLO"]
    assert 'ragmon:latency_by_intent:quantile{variant="production", stage="total"} > 5' in latency["expr"]
    assert 'stage="ttft"' not in latency["expr"]
