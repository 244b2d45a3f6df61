"""`ragmon simulate validate|generate|send|probe-set`: the traffic simulator's command line.

Exit codes: 0 done (when sending: every event accepted), 1 some events were
rejected or failed, 2 a bad scenario or bad arguments.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from service.simulate.run import run_generate, run_send
from service.simulate.scenario import Scenario, ScenarioError, load_scenario
from service.simulate.sender import SendConfig

TENANT_KEYS_ENV = "RAGMON_TENANT_KEYS"


def _datetime(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise argparse.ArgumentTypeError("needs a timezone offset, e.g. 2026-01-01T00:00:00Z")
    return parsed


def _tenant_key(value: str) -> tuple[str, str]:
    tenant, sep, key = value.partition("=")
    if not sep or not tenant or not key:
        raise argparse.ArgumentTypeError("expected TENANT=KEY")
    return tenant, key


def _env_tenant_keys() -> list[tuple[str, str]]:
    raw = os.environ.get(TENANT_KEYS_ENV, "")
    try:
        return [_tenant_key(item.strip()) for item in raw.split(",") if item.strip()]
    except argparse.ArgumentTypeError as exc:
        raise SystemExit(f"ragmon simulate: ${TENANT_KEYS_ENV}: {exc}") from exc


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario file (.yaml/.json) or bundled name: demo, clean, incidents")
    p.add_argument("--seed", type=int, help="override the scenario's seed")
    p.add_argument("--duration", type=float, help="override duration_s (seconds of scenario time)")
    p.add_argument("--endless", action="store_true", help="ignore duration_s: run until interrupted")
    p.add_argument("--rate", type=float, help="override rate (production requests per second)")
    p.add_argument("--max-events", type=int, help="stop after this many events")
    p.add_argument("--manifest", help="write the ground-truth manifest (JSON) here at the end")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragmon simulate", description="Simulated RAG traffic for ragmon.")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check a scenario file and print what it schedules")
    v.add_argument("scenario")
    g = sub.add_parser("generate", help="write events as JSON lines, no network")
    _common(g)
    g.add_argument("--out", default="-", help="output file, '-' for stdout (default)")
    g.add_argument("--start", type=_datetime, help="timestamp of scenario second 0 (default: now)")
    ps = sub.add_parser(
        "probe-set",
        help="write a scenario's probe set as JSON lines for `ragmon probes add` (docs/probes.md)",
    )
    ps.add_argument("scenario")
    ps.add_argument("--tenant", required=True)
    ps.add_argument("--start", type=_datetime, help="timestamp of scenario second 0 (default: now)")
    s = sub.add_parser("send", help="send events to the ragmon API")
    _common(s)
    s.add_argument(
        "--api", default=os.environ.get("RAGMON_API_URL", "http://127.0.0.1:8000"), help="API base URL"
    )
    s.add_argument(
        "--api-key",
        default=os.environ.get("RAGMON_API_KEY"),
        help="key for tenants without --tenant-key (default $RAGMON_API_KEY)",
    )
    s.add_argument(
        "--tenant-key",
        type=_tenant_key,
        action="append",
        default=_env_tenant_keys(),
        metavar="TENANT=KEY",
        help=f"API key of one tenant (the API takes the tenant from the key); repeatable; "
        f"also ${TENANT_KEYS_ENV}=TENANT=KEY,TENANT=KEY (keeps keys out of the process list)",
    )
    pace = s.add_mutually_exclusive_group()
    pace.add_argument("--speed", type=float, default=1.0, help="time compression: 10 plays 10 minutes in 1")
    pace.add_argument(
        "--fast", action="store_true", help="as fast as possible (timestamps still follow the scenario)"
    )
    s.add_argument("--batch-size", type=int, default=100, help="events per request, at most 1000")
    s.add_argument("--batch-ms", type=float, default=250.0, help="send a partial batch after this many ms")
    s.add_argument("--senders", type=int, default=2, help="concurrent HTTP senders")
    s.add_argument("--gzip", action="store_true", help="gzip request bodies")
    s.add_argument("--max-retries", type=int, default=5, help="resends after 429/503/5xx/network errors")
    s.add_argument("--timeout", type=float, default=10.0, help="HTTP timeout per request, seconds")
    return parser


def _scenario(args: argparse.Namespace) -> Scenario:
    scenario = load_scenario(args.scenario)
    given = {"seed": args.seed, "duration_s": args.duration, "rate": args.rate}
    changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if args.endless:
        changes["duration_s"] = None
    return scenario.with_overrides(**changes)


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM stop the run gracefully: flush, settle, write the manifest. A second one ends it."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous: dict[int, Any] = {}

    def first_signal(signum: int, _frame: Any) -> None:
        # Graceful on the first signal; the second one gets the default behaviour (a stuck API cannot hold us).
        stop.set()
        signal.signal(signum, previous[signum])

    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, first_signal)
    try:
        yield stop
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)


def _validate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    duration = "endless" if scenario.duration_s is None else f"{scenario.duration_s:g} s"
    print(
        f"{scenario.name}: seed {scenario.seed}, {duration} at {scenario.rate:g} requests/s, "
        f"tenants {[t.name for t in scenario.tenants]}, variants {scenario.variants}"
    )
    for inc in scenario.incidents:
        end = "end" if inc.end_s is None else f"{inc.end_s:g}"
        every = f" every {inc.every_s:g} s" if inc.every_s else ""
        print(f"  {inc.name} ({inc.kind}) {inc.start_s:g}-{end} s{every}")
    return 0


def _generate(args: argparse.Namespace) -> int:
    scenario = _scenario(args)
    if scenario.duration_s is None and args.max_events is None:
        raise ScenarioError("duration_s: an endless scenario needs --max-events to generate a file")
    if args.out == "-":
        run_generate(scenario, sys.stdout.buffer, args.start, args.max_events, args.manifest)
    else:
        with open(args.out, "wb") as fh:
            run_generate(scenario, fh, args.start, args.max_events, args.manifest)
    return 0


def _probe_set(args: argparse.Namespace) -> int:
    import json

    from service.simulate.stream import EventStream

    scenario = load_scenario(args.scenario)
    if scenario.probes is None:
        raise ScenarioError("probes: the scenario replays no probe set (add a `probes:` section)")
    stream = EventStream(scenario, args.start or datetime.now().astimezone())
    if args.tenant not in stream.probes:
        raise ScenarioError(
            f"--tenant: {args.tenant!r} is not one of the scenario's tenants {sorted(stream.probes)}"
        )
    for probe in stream.probes[args.tenant]:
        print(json.dumps(probe.line(scenario.probes.set)))
    return 0


def _send(args: argparse.Namespace) -> int:
    scenario = _scenario(args)
    try:
        cfg = SendConfig(
            api=args.api,
            keys=dict(args.tenant_key),
            default_key=args.api_key,
            batch_size=args.batch_size,
            batch_ms=args.batch_ms,
            senders=args.senders,
            gzip=args.gzip,
            max_retries=args.max_retries,
            timeout_s=args.timeout,
            speed=args.speed,
            fast=args.fast,
        )
    except ValueError as exc:
        raise ScenarioError(str(exc)) from exc
    with _stop_on_signals() as stop:
        manifest = run_send(scenario, cfg, args.manifest, stop, args.max_events)
    ev = manifest["events"]
    print(
        f"sent {sum(ev['sent'].values())} events: accepted {ev['accepted']}, rejected {ev['rejected']}, "
        f"failed {ev['failed']}; HTTP {manifest['http']['by_status']}, {manifest['http']['retries']} retries"
        + (f"; manifest {args.manifest}" if args.manifest else ""),
        file=sys.stderr,
    )
    for error, count in list(ev["errors"].items())[:5]:
        print(f"  {count} x {error}", file=sys.stderr)
    return 1 if ev["rejected"] or ev["failed"] else 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        commands = {"validate": _validate, "generate": _generate, "send": _send, "probe-set": _probe_set}
        return commands[args.command](args)
    except ScenarioError as exc:
        print(f"ragmon simulate: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
