"""Every Prometheus metric of the drift worker.

Per-signal series are labelled (tenant, signal, intent, model): tenants come
from the API-key configuration, signal is 'encoder' or 'app', intent is 'all'
or one of the configured intents, and model is a configured model name
('all-minilm-l6-v2'). Each label set belongs to exactly one signal: a model
that is not configured gets no windows (counted in embeddings_total as
`unknown_model`), and of a model seen with several dimensions only the most
recently seen one is tested and exported (scheduler.py). Test results are
shared through Redis, so every replica exports the same values for a signal
(alert rules aggregate with max by those labels); counters count this
replica's work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from workers.runtime.families import Families

SIGNAL_LABELS = ("tenant", "signal", "intent", "model")
WINDOWS = ("reference", "current")


class DriftMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        s = SIGNAL_LABELS
        f = Families(registry, s)
        self.mmd2 = f.gauge("ragmon_drift_mmd2", "Unbiased MMD² between the reference and current windows")
        self.p_value = f.gauge(
            "ragmon_drift_p_value_ratio",
            "Permutation p-value of the last test, (1 + #{perm >= obs}) / (1 + B)",
        )
        self.threshold = f.gauge(
            "ragmon_drift_mmd2_threshold",
            "MMD² the last test had to exceed to flag drift at the configured alpha (from its permutations)",
        )
        self.detected = f.gauge("ragmon_drift_detected", "1 when the last test's p-value was <= alpha")
        self.window_size = f.gauge(
            "ragmon_drift_window_size_queries", "Queries in each window", (*s, "window")
        )
        self.last_test = f.gauge(
            "ragmon_drift_last_test_timestamp_seconds", "Unix time of the last drift test"
        )
        self.tests = f.counter("ragmon_drift_tests_total", "Drift tests run by this replica")
        self.test_duration = f.histogram(
            "ragmon_drift_test_duration_seconds",
            "Time to read the windows and run one test",
            s[:2],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        self.model_resets = f.counter(
            "ragmon_drift_model_resets_total",
            "A new embedding model or dimension replaced the previous one of a stream: new reference, no comparison",
            ("tenant", "signal", "intent", "from_model", "to_model"),
        )
        self.embeddings = f.counter(
            "ragmon_drift_embeddings_total",
            "Query embeddings offered to the windows, by where they went",
            ("tenant", "signal", "outcome"),
        )
        self.skipped = f.counter(
            "ragmon_drift_queries_skipped_total",
            "Trace queries left out of the windows, by why",
            ("tenant", "reason"),
        )
        self.lease_busy = f.counter(
            "ragmon_drift_lease_busy_total",
            "Due tests left to the replica that held the signal's lease",
            s[:2],
        )
        self.tick_errors = f.counter(
            "ragmon_drift_tick_errors_total",
            "Scheduled work skipped because Redis failed, by error type",
            ("error",),
        )
        self.encoder_ready = f.gauge("ragmon_drift_encoder_up", "1 when the pinned encoder is loaded", ())
        self.encoder_duration = f.histogram(
            "ragmon_drift_encoder_batch_duration_seconds",
            "Time to embed one batch of query texts",
            (),
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        self.followups = f.counter(
            "ragmon_feedback_followups_total",
            "Queries followed by another of the same session within the window, counted on the earlier one: "
            "reformulated (cosine >= min_cosine), different, or not_compared (no embeddings of one model)",
            ("tenant", "intent", "embedding", "outcome"),
        )
        self.session_queries = f.counter(
            "ragmon_feedback_session_queries_total",
            "Production queries with a session_id: first of a session, follow-up, after the window, or late "
            "or duplicate (older than the session's last query: not compared)",
            ("tenant", "outcome"),
        )
        self.sessions_ended = f.counter(
            "ragmon_feedback_sessions_ended_total",
            "Sessions ended (idle past sessions.idle_s): resolved, or why the last answer did not help "
            "(thumbs_down, regenerated, reformulated)",
            ("tenant", "intent", "outcome"),
        )
        self._published: set[tuple[str, ...]] = set()

    def publish(
        self, labels: tuple[str, ...], result: Mapping[str, float], reference: int, current: int
    ) -> None:
        """Export one signal's windows and, once it has been tested, its last result."""
        self.window_size.labels(*labels, "reference").set(reference)
        self.window_size.labels(*labels, "current").set(current)
        self._published.add(labels)
        if "mmd2" not in result:
            # No drift value before the first test of a full reference; values still there came
            # from the signal that held these labels before (the same model in another dimension).
            self._remove_result(labels)
            return
        self.mmd2.labels(*labels).set(result["mmd2"])
        self.p_value.labels(*labels).set(result["p_value"])
        self.threshold.labels(*labels).set(result["threshold"])
        self.detected.labels(*labels).set(result["drift"])
        self.last_test.labels(*labels).set(result["tested_at"])

    def published(self) -> set[tuple[str, ...]]:
        return set(self._published)

    def withdraw(self, labels: tuple[str, ...]) -> None:
        """Stop exporting a retired signal (its gauges would otherwise freeze at old values)."""
        self._remove_result(labels)
        for window in WINDOWS:
            with contextlib.suppress(KeyError):
                self.window_size.remove(*labels, window)
        self._published.discard(labels)

    def _remove_result(self, labels: tuple[str, ...]) -> None:
        for gauge in (self.mmd2, self.p_value, self.threshold, self.detected, self.last_test):
            with contextlib.suppress(KeyError):  # never tested: nothing to remove
                gauge.remove(*labels)
