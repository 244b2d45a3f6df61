"""Metrics of the probes worker: each probe set's neighbour stability against its baseline (docs/probes.md).

One series per (tenant, probe set), labelled with the embedding model and index version currently serving
the probes; when that version changes the old series leave /metrics.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.families import Families

SERIES = ["tenant", "probe_set", "embedding_model", "index_version"]


class ProbesMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry, SERIES)
        self.overlap = f.gauge(
            "ragmon_rag_probe_overlap_ratio",
            "Mean overlap@k of each probe's latest retrieved ids with its baseline's",
        )
        self.rbo = f.gauge(
            "ragmon_rag_probe_rbo_ratio",
            "Mean rank-biased overlap (RBO_ext) of each probe's latest retrieved ids with its baseline's",
        )
        self.gold_recall = f.gauge(
            "ragmon_rag_probe_gold_recall_ratio",
            "Mean recall@k of the registered gold ids over the probes that have gold",
        )
        self.compared = f.gauge(
            "ragmon_rag_probe_compared_queries",
            "Probes of the set whose latest result was compared with a baseline result",
        )
        self.results = f.counter(
            "ragmon_rag_probe_stored_traces_total",
            "Probe traces stored (production and candidate variants), by tenant",
            ["tenant"],
        )
        self.untracked_sets = f.counter(
            "ragmon_rag_probe_untracked_traces_total",
            "Probe traces of a set over the tenant's cap of exported sets (stored, not exported)",
            ["tenant"],
        )
