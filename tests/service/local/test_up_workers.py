"""Which workers `ragmon up` starts: the Phoenix exporter, the span forwarder and the evaluation exporter
only when configured."""

from __future__ import annotations

from service.local.discovery import worker_names
from service.local.up import default_workers


def test_phoenix_workers_start_only_with_their_endpoint() -> None:
    assert {"phoenix", "forwarder", "evaluations"} <= set(worker_names())
    plain = default_workers({})
    assert not {"phoenix", "forwarder", "evaluations"} & set(plain) and "metrics" in plain
    both = default_workers(
        {
            "RAGMON_PHOENIX_URL": "http://127.0.0.1:6006",
            "RAGMON_FORWARD_ENDPOINT": "http://127.0.0.1:6006/v1/traces",
            "RAGMON_EVALUATIONS_ENDPOINT": "http://127.0.0.1:4318/v1/logs",
        }
    )
    assert set(both) == set(worker_names())
    assert "forwarder" not in default_workers({"RAGMON_PHOENIX_URL": "http://127.0.0.1:6006"})
    alone = default_workers({"RAGMON_EVALUATIONS_ENDPOINT": "http://127.0.0.1:4318/v1/logs"})
    assert "evaluations" in alone and "phoenix" not in alone and "forwarder" not in alone
