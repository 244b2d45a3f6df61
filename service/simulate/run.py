"""The two ways to run a scenario, shared by the CLI, `ragmon up --demo`, tests and benchmarks."""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from service.simulate.ledger import Ledger
from service.simulate.manifest import build_manifest
from service.simulate.records import SimEvent
from service.simulate.scenario import Scenario, ScenarioError
from service.simulate.sender import SendConfig, send_anchor, send_events
from service.simulate.stream import generate_events


def write_manifest(manifest: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Atomically: a test polling for the file never reads half of it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=False)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; a manifest is read by other tools
    os.replace(tmp, target)


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _limited(events: Iterator[SimEvent], max_events: int | None) -> Iterator[SimEvent]:
    return itertools.islice(events, max_events) if max_events is not None else events


def run_generate(
    scenario: Scenario,
    out: IO[bytes],
    start: datetime | None = None,
    max_events: int | None = None,
    manifest_path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Write the event stream as JSON lines (no network); returns the manifest."""
    if scenario.duration_s is None and max_events is None:
        raise ScenarioError("duration_s: an endless scenario needs --max-events to generate a file")
    anchor = start or _now()
    ledger = Ledger()
    for event in _limited(generate_events(scenario, anchor), max_events):
        ledger.handed_out(event)
        out.write(orjson.dumps(event.line(anchor)) + b"\n")
    out.flush()
    manifest = build_manifest(scenario, ledger, anchor, "generate", {"max_events": max_events})
    if manifest_path is not None:
        write_manifest(manifest, manifest_path)
    return manifest


def run_send(
    scenario: Scenario,
    cfg: SendConfig,
    manifest_path: str | os.PathLike[str] | None = None,
    stop: threading.Event | None = None,
    max_events: int | None = None,
    now: datetime | None = None,
    keep_truth: bool | None = None,
) -> dict[str, Any]:
    """Send the scenario to the API; returns the manifest (counts over accepted events).

    The per-event truth is kept for a manifest file and for finite runs; an
    endless run without a manifest keeps only counts, so memory stays flat.
    """
    stop = stop or threading.Event()
    started = now or _now()
    anchor = send_anchor(scenario, cfg, started)
    if keep_truth is None:
        keep_truth = manifest_path is not None or scenario.duration_s is not None or max_events is not None
    ledger = Ledger(keep=keep_truth)
    events = _limited(generate_events(scenario, anchor), max_events)
    stats = send_events(events, cfg, anchor, ledger, stop, tenants=[t.name for t in scenario.tenants])
    run = {
        "api": cfg.api,
        "speed": None if cfg.fast else cfg.speed,
        "fast": cfg.fast,
        "gzip": cfg.gzip,
        "batch_size": cfg.batch_size,
        "senders": cfg.senders,
        "started_at": started.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "interrupted": stop.is_set(),
    }
    manifest = build_manifest(scenario, ledger, anchor, "send", run, stats.as_dict())
    if manifest_path is not None:
        write_manifest(manifest, manifest_path)
    return manifest
