"""Query / embedding drift: MMD² against its permutation threshold, p-values, windows, model resets; probe sets."""

from __future__ import annotations

from dashboards.common import Board, Limits, p95_panel
from dashboards.model import Override, Panel, Row, Target, bad_above, bad_below
from dashboards.panels import (
    DASH,
    counter,
    failures_panel,
    per_second_panel,
    ratio_panel,
    seconds_panel,
    timeseries,
    up_stat,
)
from dashboards.promql import TENANT, across_replicas

UID = "ragmon-drift"
SIGNAL = "tenant, signal, intent, model"
SERIES = "{{tenant}} {{signal}} {{intent}} {{model}}"
RED_DASHED = (DASH, ("color", {"mode": "fixed", "fixedColor": "red"}))


def _signal(metric: str) -> str:
    """A drift test's result per signal: each replica exports the same shared result."""
    return across_replicas(metric, SIGNAL, TENANT)


def _tests(limits: Limits) -> list[Panel]:
    windows = across_replicas("ragmon_drift_window_size_queries", f"{SIGNAL}, window", TENANT)
    return [
        timeseries(
            "MMD² and its drift threshold",
            Target(_signal("ragmon_drift_mmd2"), "mmd² " + SERIES),
            Target(_signal("ragmon_drift_mmd2_threshold"), "threshold " + SERIES),
            description="Unbiased MMD² between the reference and current windows; the dashed line is the value the "
            "last test had to exceed at the configured alpha (from its permutations).",
            overrides=(Override("^threshold .*", RED_DASHED),),
            width=12,
            height=9,
        ),
        ratio_panel(
            f"Permutation p-value (alpha {limits.drift_alpha:g})",
            Target(_signal("ragmon_drift_p_value_ratio"), SERIES),
            description="(1 + #{perm ≥ observed}) / (1 + B). At or below alpha the test flags drift.",
            thresholds=bad_below(limits.drift_alpha),
            decimals=3,
            width=12,
            height=9,
        ),
        ratio_panel(
            "Drift detected",
            Target(_signal("ragmon_drift_detected"), SERIES),
            description=f"The RagmonQueryDrift alert fires after {limits.guardrails.drift.for_} of this at 1.",
            thresholds=bad_above(1),
            decimals=0,
        ),
        seconds_panel(
            "Time since the last test",
            Target(f"time() - {_signal('ragmon_drift_last_test_timestamp_seconds')}", SERIES),
            description="Tests run on a schedule once the reference window is full; a growing age means none ran.",
        ),
        timeseries(
            "Window sizes",
            Target(windows, "{{window}} " + SERIES),
            description="Queries in the reference and current windows of each signal.",
            decimals=0,
        ),
    ]


def _inputs() -> list[Panel]:
    resets = "ragmon_drift_model_resets_total"
    by_signal = "tenant, signal"
    return [
        per_second_panel(
            "Embeddings by outcome",
            counter("ragmon_drift_embeddings_total", "signal, outcome", "{{signal}} {{outcome}}", TENANT),
        ),
        per_second_panel(
            "Queries left out, by reason",
            counter("ragmon_drift_queries_skipped_total", "reason", "{{reason}}", TENANT, zero="reason"),
        ),
        timeseries(
            "Embedding model resets",
            counter(
                resets,
                "signal, from_model, to_model",
                "{{signal}}: {{from_model}} → {{to_model}}",
                TENANT,
                zero="signal",
                fn="increase",
            ),
            description="A new embedding model or dimension starts a new reference: reported, never compared.",
            decimals=0,
        ),
        p95_panel(
            "Test duration p95",
            "ragmon_drift_test_duration_seconds",
            by_signal,
            "{{tenant}} {{signal}}",
            TENANT,
        ),
        p95_panel("Encoder batch duration p95", "ragmon_drift_encoder_batch_duration_seconds", "", "p95"),
        timeseries(
            "Tests run, and tests left to the lease holder",
            counter(
                "ragmon_drift_tests_total", by_signal, "run {{tenant}} {{signal}}", TENANT, fn="increase"
            ),
            counter(
                "ragmon_drift_lease_busy_total",
                by_signal,
                "lease busy {{tenant}} {{signal}}",
                TENANT,
                zero="signal",
                fn="increase",
            ),
            description="Replicas share each signal's test through a Redis lease: one runs it, the others skip.",
            decimals=0,
        ),
        failures_panel(
            "Scheduled work skipped on Redis errors",
            counter("ragmon_drift_tick_errors_total", "error", "{{error}}", zero="error", fn="increase"),
        ),
        up_stat(
            "Pinned encoder up",
            Target("min(ragmon_drift_encoder_up)", "ready"),
            mappings=(("0", "not loaded", "red"), ("1", "ready", "green")),
        ),
    ]


PROBE = "tenant, probe_set, embedding_model, index_version"
PROBE_SERIES = "{{tenant}} {{probe_set}} {{embedding_model}}@{{index_version}}"


def _probe(metric: str) -> str:
    """A probe set's stability: the worst replica's, as RagmonProbeNeighboursChanged reads it."""
    return across_replicas(metric, PROBE, TENANT, agg="min")


def _probes(limits: Limits) -> list[Panel]:
    rule = limits.guardrails.probes
    compared = across_replicas("ragmon_rag_probe_compared_queries", PROBE, TENANT)
    return [
        ratio_panel(
            "Probe sets: overlap@k and RBO with the baseline",
            Target(_probe("ragmon_rag_probe_overlap_ratio"), "overlap " + PROBE_SERIES),
            Target(_probe("ragmon_rag_probe_rbo_ratio"), "rbo " + PROBE_SERIES),
            description="Replayed probe queries against their pinned baseline, labelled with the serving embedding "
            f"model and index version (docs/probes.md). RagmonProbeNeighboursChanged: overlap below "
            f"{rule.min_overlap:g} over at least {rule.min_probes} probes for {rule.for_}; a declared change "
            "re-pins the baseline.",
            thresholds=bad_below(rule.min_overlap),
            decimals=3,
            width=12,
            height=9,
        ),
        ratio_panel(
            "Probe sets: gold recall@k",
            Target(_probe("ragmon_rag_probe_gold_recall_ratio"), PROBE_SERIES),
            description="Mean recall@k of the registered gold ids over the probes that have gold; no gold, no line.",
            decimals=3,
            width=6,
            height=9,
        ),
        timeseries(
            "Probes compared",
            Target(compared, PROBE_SERIES),
            description=f"Probes with a baseline result; the alert needs {rule.min_probes}.",
            decimals=0,
            width=6,
            height=9,
        ),
    ]


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Drift",
        "Whether what users ask moved away from the reference window: MMD² with a permutation test, per tenant, "
        "signal (pinned encoder or the app's embedding), intent and embedding model. Drift has no variant.",
        [
            Row("Drift tests", _tests(limits)),
            Row("Probe sets (embedding and index migrations)", _probes(limits)),
            Row("Inputs and cost of the tests", _inputs()),
        ],
        tags=("drift",),
    )
