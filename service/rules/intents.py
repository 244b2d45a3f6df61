"""The guardrails per intent (docs/intents.md): recording rules per (tenant, variant, intent) and the
per-intent branch of the faithfulness, false-exclusion, latency and cost alerts.

A regression on one intent disappears in the tenant's mean (seed 001, section 12), so each of these
alerts has two branches under one name: the tenant's (as before) and each intent's, gated by a minimum
sample of that intent. The intent branch fires only while the tenant's does not (`unless on (tenant,
variant)`): one regression is one alert series, the tenant's when its mean shows it, the intents' when
the mean hides it, and Alertmanager groups both under (alertname, tenant) into one notification.

The intent label is the workers' closed set (the configured intents, the rest `other`, a trace without
one `none`), so the series an intent adds are counted, not open-ended (docs/intents.md has the count).
"""

from __future__ import annotations

from typing import Any

from service.rules.config import GuardrailsConfig
from service.rules.promql import number, selector

# The stages the metrics worker also keeps per intent (workers/metrics/metrics.py INTENT_STAGES): what the
# user waits for. Per-stage latency stays per tenant (a stage's regression shows there).
INTENT_STAGES = ("total", "ttft")
TVI = "tenant, variant, intent"
PROD = "production"

FAITHFULNESS_MEAN = "ragmon:faithfulness_by_intent:mean"
FAITHFULNESS_SAMPLES = "ragmon:faithfulness_by_intent:samples"
EXCLUSION_RATE = "ragmon:false_exclusion_by_intent:rate"
EXCLUSION_ELIGIBLE = "ragmon:false_exclusion_by_intent:eligible"
LATENCY_QUANTILE = "ragmon:latency_by_intent:quantile"
LATENCY_SAMPLES = "ragmon:latency_by_intent:samples"
COST_MEAN = "ragmon:cost_by_intent:mean"
COST_SAMPLES = "ragmon:cost_by_intent:samples"
CHECK_TRIALS = "ragmon:check_by_intent:trials"
CHECK_RATE = "ragmon:check_by_intent:rate"
CHECKED = 'ragmon_rag_check_results_total{outcome=~"pass|fail"}'
FAILED = 'ragmon_rag_check_results_total{outcome="fail"}'


def _increase(series: str, window: str, by: str = TVI) -> str:
    return f"sum by ({by}) (increase({series}[{window}]))"


def intent_recording_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    """Each guardrail's signal per (tenant, variant, intent). A window without samples of the intent is no
    data (the means and rates divide by `samples > 0`), never 0 or a perfect score."""
    fai, exc, lat, cost, chk = cfg.faithfulness, cfg.false_exclusion, cfg.latency, cfg.cost, cfg.checks
    stages = "|".join(INTENT_STAGES)
    return [
        {
            "record": FAITHFULNESS_SAMPLES,
            "expr": _increase("ragmon_faithfulness_score_ratio_count", fai.window),
        },
        {
            "record": FAITHFULNESS_MEAN,
            "expr": f"{_increase('ragmon_faithfulness_score_ratio_sum', fai.window)}\n/ ({FAITHFULNESS_SAMPLES} > 0)",
        },
        {
            "record": EXCLUSION_ELIGIBLE,
            "expr": _increase("ragmon_exclusion_eligible_queries_total", exc.window),
        },
        {
            "record": EXCLUSION_RATE,
            "expr": f"{_increase('ragmon_exclusion_falsely_excluded_queries_total', exc.window)}"
            f"\n/ ({EXCLUSION_ELIGIBLE} > 0)",
        },
        {
            "record": LATENCY_SAMPLES,
            "expr": _increase(
                selector("ragmon_rag_intent_duration_seconds_count", stage="=~" + stages),
                lat.window,
                TVI + ", stage",
            ),
        },
        {
            "record": LATENCY_QUANTILE,
            "expr": f"histogram_quantile({number(lat.quantile)}, sum by ({TVI}, stage, le) "
            f"(rate(ragmon_rag_intent_duration_seconds_bucket[{lat.window}])))"
            f"\nand on ({TVI}, stage) ({LATENCY_SAMPLES} > 0)",
        },
        {"record": COST_SAMPLES, "expr": _increase("ragmon_rag_intent_costed_queries_total", cost.window)},
        {
            "record": COST_MEAN,
            "expr": f"{_increase('ragmon_rag_intent_cost_usd_total', cost.window)}\n/ ({COST_SAMPLES} > 0)",
        },
        {"record": CHECK_TRIALS, "expr": _increase(CHECKED, chk.window, TVI + ", check")},
        {
            "record": CHECK_RATE,
            "expr": f"(\n{_increase(FAILED, chk.window, TVI + ', check')}\nor {CHECK_TRIALS} * 0\n)"
            f" / ({CHECK_TRIALS} > 0)",
        },
    ]


def tenant_or_intents(tenant: str, intents: str, on: str = "tenant, variant") -> str:
    """The tenant's branch, or the intents' while the tenant's is false: one alert series per regression."""
    return f"(\n{tenant}\n)\nor (\n(\n{intents}\n)\nunless on ({on}) (\n{tenant}\n)\n)"


# The alert texts name the intent when the intent branch fired (the tenant branch has no intent label).
ON_INTENT = "{{ with $labels.intent }} on intent {{ . }}{{ end }}"
