"""Sending to a real HTTP server on 127.0.0.1: batching, keys, gzip, retries, 207, client errors, pacing."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from service.contracts import vocabulary as L
from service.simulate import SendConfig, run_send, send_anchor
from service.simulate.cli import main
from service.simulate.delivery import PACE_EVERY_S, wall_time_at

KEYS = {"acme": "key-acme", "globex": "key-globex"}


def config(api, **fields) -> SendConfig:
    return SendConfig(api=api.url, keys=KEYS, **({"fast": True, "batch_size": 50, "senders": 2} | fields))


def test_every_event_arrives_once_with_its_tenants_key(recording_api, small, tmp_path):
    manifest_path = tmp_path / "m.json"
    manifest = run_send(small(duration_s=10), config(recording_api, gzip=True), manifest_path)
    key_of = {f"Bearer {k}": t for t, k in KEYS.items()}
    by_type_tenant: Counter[tuple[str, str]] = Counter()
    for req in recording_api.received:
        assert req.headers["Content-Encoding"] == "gzip"
        assert 1 <= len(req.events) <= 50
        tenant = key_of[req.headers["Authorization"]]
        by_type_tenant.update((e["type"], tenant) for e in req.events)
    ids = recording_api.accepted_ids()
    assert len(ids) == len(set(ids)) > 300
    expected = {
        t: dict(sorted((ten, n) for (ty, ten), n in by_type_tenant.items() if ty == t))
        for t in {t for t, _ in by_type_tenant}
    }
    assert manifest["events"]["by_type_tenant"] == expected
    assert manifest["events"]["accepted"] == manifest["events"]["sent"]
    assert manifest["events"]["rejected"] == {} and manifest["http"]["by_status"] == {
        "202": len(recording_api.received)
    }
    assert json.loads(manifest_path.read_text()) == manifest


def test_503_with_retry_after_resends_the_same_batch(recording_api, small):
    def responder(index, events):
        if index % 2 == 0:
            return 503, {"Retry-After": "0"}, {"detail": "broker unavailable"}
        return 202, {}, {"accepted": len(events)}

    recording_api.responder = responder
    manifest = run_send(small(duration_s=5), config(recording_api, senders=1), None)
    first, second = recording_api.received[0], recording_api.received[1]
    assert first.status == 503 and second.status == 202
    assert [e["id"] for e in first.events] == [e["id"] for e in second.events]  # same ids: idempotent resend
    assert manifest["http"]["retries"] == manifest["http"]["by_status"]["503"] > 0
    assert manifest["events"]["accepted"] == manifest["events"]["sent"]


@pytest.mark.parametrize("keyed_by", ["index", "id"])
def test_207_partial_rejection_counts_only_accepted_events(recording_api, small, keyed_by):
    rejected: set[str] = set()

    def responder(index, events):
        bad = [e for e in events if e["type"] == "feedback"]
        rejected.update(e["id"] for e in bad)
        # The ragmon API answers with the batch position; an id alone must work too.
        results = [
            {
                "index": pos if keyed_by == "index" else None,
                "id": e["id"] if keyed_by == "id" else None,
                "status": "rejected" if e in bad else "accepted",
                "error": "body.kind: not allowed" if e in bad else None,
            }
            for pos, e in enumerate(events)
        ]
        return (207 if bad else 202), {}, {"accepted": len(events) - len(bad), "results": results}

    recording_api.responder = responder
    manifest = run_send(small(duration_s=5), config(recording_api), None)
    assert manifest["events"]["rejected"] == {"feedback": len(rejected)} and rejected
    assert "feedback" not in manifest["events"]["accepted"]
    assert manifest["feedback"]["total"] == 0
    assert manifest["traces"]["total"] == manifest["events"]["accepted"]["trace"]
    assert manifest["http"]["inconsistent_207"] == 0
    assert any("body.kind: not allowed" in error for error in manifest["events"]["errors"])


def test_client_error_is_not_retried_and_fails_the_command(recording_api, capsys):
    recording_api.responder = lambda i, events: (401, {}, {"detail": "invalid API key"})
    argv = ["send", "clean", "--duration", "2", "--fast", "--api", recording_api.url, "--api-key", "wrong"]
    assert main(argv) == 1
    assert {r.status for r in recording_api.received} == {401}
    ids = [e["id"] for r in recording_api.received for e in r.events]
    assert len(ids) == len(set(ids))  # nothing was resent
    assert "HTTP 401" in capsys.readouterr().err


def test_persistent_429_fails_after_bounded_retries(recording_api, small):
    recording_api.responder = lambda i, events: (429, {"Retry-After": "0"}, {"detail": "slow down"})
    manifest = run_send(
        small(duration_s=1), config(recording_api, senders=1, batch_size=1000, max_retries=2), None
    )
    assert manifest["http"]["by_status"] == {"429": 3 * manifest["http"]["failed_batches"]}
    assert manifest["events"]["accepted"] == {} and manifest["events"]["failed"] == manifest["events"]["sent"]
    assert manifest["traces"]["total"] == 0


def test_unreachable_api_fails_after_bounded_retries(small):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    cfg = SendConfig(
        api=f"http://127.0.0.1:{port}", default_key="k", fast=True, max_retries=1, batch_size=1000
    )
    manifest = run_send(small(duration_s=1), cfg, None)
    assert manifest["http"]["network_errors"] == 2 * manifest["http"]["failed_batches"] > 0
    assert manifest["events"]["failed"] == manifest["events"]["sent"]


def test_missing_key_for_a_tenant_is_refused_before_sending(recording_api, capsys):
    argv = [
        "send",
        "clean",
        "--duration",
        "2",
        "--fast",
        "--api",
        recording_api.url,
        "--tenant-key",
        "acme=k",
    ]
    assert main(argv) == 2
    assert "no API key for tenant 'globex'" in capsys.readouterr().err
    assert recording_api.received == []


def test_real_time_pacing_with_speed(recording_api, small):
    # Short tails: the run lasts until the last late feedback and label are sent.
    scenario = small(
        duration_s=4,
        rate=10,
        sampling={"label_delay_s": [1, 3], "trace_lag_s": [0.5, 1]},
        feedback={"delay_s": [0.5, 2], "late_delay_s": [2, 4]},
    )
    assert scenario.tail_s() == 4
    began = time.monotonic()
    before = datetime.now(UTC)
    manifest = run_send(scenario, config(recording_api, fast=False, speed=8.0, batch_ms=50), None)
    elapsed = time.monotonic() - began
    assert 0.4 < elapsed < 3.0  # 4 s of requests and up to 4 s of tail, played 8x faster
    stamps = [datetime.fromisoformat(e["timestamp"]) for r in recording_api.received for e in r.events]
    assert max(stamps) <= datetime.now(UTC) + timedelta(seconds=1)
    assert min(stamps) >= before - timedelta(seconds=scenario.duration_s + scenario.tail_s() + 1)
    assert len(recording_api.received) > 5  # paced: many small batches, not one big one
    assert manifest["run"]["speed"] == 8.0
    # The pace record: hand-out times follow the schedule (scenario seconds / 8) within the run.
    pace = manifest["http"]["pace"]
    points = pace["points"]
    assert len(points) >= 2 and points[0][0] <= 1.0
    assert all(e1 - e0 >= PACE_EVERY_S for (e0, _), (e1, _) in zip(points, points[1:], strict=False))
    for (e0, u0), (e1, u1) in zip(points, points[1:], strict=False):
        assert (u1 - u0) == pytest.approx((e1 - e0) / 8.0, abs=0.5)
    assert 0 <= pace["max_late_s"] < 2.0


def test_wall_time_at_interpolates_the_pace_record():
    points = [[0.0, 100.0], [10.0, 102.0], [20.0, 110.0]]  # fell 6 s behind between 10 and 20
    assert wall_time_at(points, 0.0) == 100.0
    assert wall_time_at(points, 5.0) == pytest.approx(101.0)
    assert wall_time_at(points, 15.0) == pytest.approx(106.0)
    assert wall_time_at(points, 25.0) == pytest.approx(115.0)  # past the end: the last offset carried
    assert wall_time_at(points, -2.0) == pytest.approx(98.0)
    with pytest.raises(ValueError, match="empty pace record"):
        wall_time_at([], 1.0)


def test_anchor_keeps_timestamps_inside_the_api_window(small):
    now = datetime(2026, 3, 1, tzinfo=UTC)
    scenario = small(duration_s=600)
    assert send_anchor(scenario, SendConfig(api="x"), now) == now  # real time: anchored at the real start
    fast = send_anchor(scenario, SendConfig(api="x", fast=True), now)
    assert fast == now - timedelta(seconds=600 + scenario.tail_s())
    compressed = send_anchor(scenario, SendConfig(api="x", speed=10), now)
    # The scenario's last second is stamped at most "now" when it is sent (600 s / 10 after the start).
    assert compressed + timedelta(seconds=600) <= now + timedelta(seconds=60)
    with pytest.raises(ValueError, match="window"):
        send_anchor(small(duration_s=L.MAX_EVENT_AGE_S), SendConfig(api="x", fast=True), now)


def test_stop_ends_an_endless_run_and_settles_what_was_handed_out(recording_api, small):
    stop = threading.Event()
    timer = threading.Timer(2.5, stop.set)  # a trace is sent when its answer is done, ~2 s after the request
    timer.start()
    try:
        manifest = run_send(small(duration_s=None), config(recording_api, fast=False, batch_ms=50), stop=stop)
    finally:
        timer.cancel()
    assert manifest["run"]["interrupted"] is True
    assert (
        manifest["basis"].startswith("counts only") and "traces" not in manifest
    )  # endless: memory stays flat
    assert sum(manifest["events"]["sent"].values()) == len(recording_api.accepted_ids()) > 5
    assert manifest["events"]["accepted"] == manifest["events"]["sent"]


@pytest.mark.slow
def test_sigterm_stops_the_command_and_writes_the_manifest(recording_api, tmp_path):
    manifest_path = tmp_path / "m.json"
    argv = [
        sys.executable,
        "-m",
        "service.simulate.cli",
        "send",
        "demo",
        "--api",
        recording_api.url,
        "--api-key",
        "k",
        "--batch-ms",
        "50",
        "--manifest",
        str(manifest_path),
    ]
    proc = subprocess.Popen(argv, cwd=Path(__file__).parents[3], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not recording_api.received and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    manifest = json.loads(manifest_path.read_text())
    assert manifest["run"]["interrupted"] is True
    assert sum(manifest["events"]["accepted"].values()) == len(recording_api.accepted_ids()) > 0
