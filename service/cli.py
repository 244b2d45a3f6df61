"""The `ragmon` command: up | api | worker NAME | simulate | schema | keys | drift | shadow | gate | rules | retrieval |
incidents | calibrate | golden | probes."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.local.discovery import worker_names


def _cmd_api(args: argparse.Namespace) -> int:
    import prometheus_client
    import uvicorn
    from pydantic import ValidationError

    from service.api.app import create_app
    from service.api.connections import config as api_config
    from service.api.connections import tune_process
    from service.api.processes import run_api_processes, serve_handed_connections
    from service.api.settings import ApiSettings
    from service.contracts.settings import describe_settings_error

    prometheus_client.disable_created_metrics()
    try:
        settings = ApiSettings()
    except ValidationError as exc:
        print(describe_settings_error(exc), file=sys.stderr)
        return 2
    host = args.host or settings.api_host
    port = args.port or settings.api_port
    if args.connection_fd is not None:  # a child of `--workers N`: the parent hands it connections
        return serve_handed_connections(create_app(settings), args.connection_fd, args.log_level, settings)
    if args.workers > 1:
        return run_api_processes(
            args.workers, host, port, args.log_level, (settings.api_metrics_host, settings.api_metrics_port)
        )
    tune_process()
    uvicorn.Server(
        api_config(create_app(settings), settings, host=host, port=port, log_level=args.log_level)
    ).run()
    return 0


def _exec_module(module: str, argv: list[str]) -> int:
    """Workers run as their own process; `service` never imports `workers`."""
    os.execv(sys.executable, [sys.executable, "-m", module, *argv])
    return 0  # pragma: no cover - execv does not return


def _cmd_worker(args: argparse.Namespace) -> int:
    names = worker_names()
    if args.name not in names:
        print(f"unknown worker {args.name!r}; available: {', '.join(names) or 'none'}", file=sys.stderr)
        return 2
    return _exec_module(f"workers.{args.name}", [])


def _cmd_schema(args: argparse.Namespace) -> int:
    from service.contracts import IngestBatch

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **IngestBatch.model_json_schema()}
    text = json.dumps(schema, indent=2, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    return 0


def _cmd_keys(args: argparse.Namespace) -> int:
    from service.api.settings import hash_key

    key = args.key or f"rgm_{secrets.token_urlsafe(24)}"
    entry: dict[str, object] = {
        "tenant": args.tenant,
        "key_sha256": hash_key(key),
        "scopes": args.scope or ["ingest"],
    }
    if args.name:
        entry["name"] = args.name
    if not args.key:
        print(f"# the key (shown once; store it in the app's secret store): {key}", file=sys.stderr)
    print(json.dumps(entry))
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    from service.local.supervise import RestartPolicy
    from service.local.up import UpOptions, run_up

    return run_up(
        UpOptions(
            demo=args.demo,
            scenario=args.scenario,
            workdir=Path(args.workdir),
            prometheus=not args.no_prometheus,
            config=args.config,
            api_port=args.api_port,
            workers=args.workers,
            scrape_interval=args.scrape_interval,
            restart=RestartPolicy(args.max_crashes, args.crash_window),
        )
    )


def _hand_on(module: str, rest: list[str]) -> int:
    """Run `module`'s own command line on `rest`: a service module's main() here, a workers one by exec."""
    if module.startswith("workers."):
        return _exec_module(module, rest)
    run: Callable[[list[str]], int] = importlib.import_module(module).main
    return run(rest)


def _add_handed_on(sub: Any, name: str, module: str, help: str) -> None:
    """`ragmon NAME ARGS...`: ARGS, --help included, are `module`'s (see _hand_on)."""
    p = sub.add_parser(name, help=help, add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda args: _hand_on(module, args.rest))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragmon", description="Online monitoring for RAG applications")
    sub = p.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the embedded default: broker, Redis, API, workers (+ Prometheus)")
    up.add_argument("--demo", action="store_true", help="also run the traffic simulator")
    up.add_argument("--scenario", default=None, help="simulator scenario (default: the demo scenario)")
    up.add_argument("--workdir", default=".ragmon", help="logs and generated config go here")
    up.add_argument("--config", default=None, help="ragmon YAML config (RAGMON_CONFIG)")
    up.add_argument("--no-prometheus", action="store_true", help="do not start Prometheus even if installed")
    up.add_argument(
        "--max-crashes",
        type=int,
        default=5,
        help="give up on a process that crashes this many times within --crash-window (default 5)",
    )
    up.add_argument(
        "--crash-window",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="the window --max-crashes counts over (default 600)",
    )
    up.add_argument("--api-port", type=int, default=8000)
    up.add_argument("--workers", default=None, help="comma-separated workers to start (default: all)")
    up.add_argument("--scrape-interval", default="5s", help="Prometheus scrape and rule evaluation interval")
    up.set_defaults(func=_cmd_up)

    api = sub.add_parser("api", help="run the ingestion API (settings from RAGMON_* variables)")
    api.add_argument("--host", default=None)
    api.add_argument("--port", type=int, default=None)
    api.add_argument("--log-level", default="info")
    api.add_argument("--workers", type=int, default=1, help="API processes sharing the port (one per core)")
    api.add_argument("--connection-fd", type=int, default=None, help=argparse.SUPPRESS)
    api.set_defaults(func=_cmd_api)

    worker = sub.add_parser("worker", help="run one worker process")
    worker.add_argument("name", help=f"one of: {', '.join(worker_names())}")
    worker.set_defaults(func=_cmd_worker)

    _add_handed_on(
        sub,
        "simulate",
        "service.simulate.cli",
        "generate realistic RAG traffic (see `ragmon simulate --help`)",
    )

    schema = sub.add_parser("schema", help="print the JSON Schema of POST /v1/events")
    schema.add_argument("--out", default=None)
    schema.set_defaults(func=_cmd_schema)

    keys = sub.add_parser("keys", help="make an API key entry (tenant + SHA-256 digest)")
    keys.add_argument("--tenant", required=True)
    keys.add_argument("--key", default=None, help="hash this key instead of generating one")
    keys.add_argument(
        "--scope",
        action="append",
        choices=["ingest", "review", "label"],
        help="what the key may do (repeatable; default ingest); reviewers get 'review'; a tool "
        "that sends `label` events gets 'ingest' and 'label' (its name is the labels' reviewer)",
    )
    keys.add_argument("--name", default=None, help="who holds the key (a reviewer's name on the review page)")
    keys.set_defaults(func=_cmd_keys)

    _add_handed_on(sub, "drift", "workers.drift.cli", "drift tools: calibrate, freeze-reference")
    _add_handed_on(sub, "shadow", "workers.shadow.cli", "shadow evaluation: compare FILE, report, calibrate")

    gate = sub.add_parser(
        "gate",
        help="gate a release: --golden SET --production OUT.jsonl --candidate OUT.jsonl (exit 1: fails)",
        add_help=False,
    )
    gate.add_argument(
        "rest", nargs=argparse.REMAINDER
    )  # main() hands `ragmon gate ...` to workers.shadow.cli

    _add_handed_on(sub, "rules", "service.rules.cli", "render Prometheus rules from the guardrails config")
    _add_handed_on(
        sub, "retrieval", "service.retrieval.cli", "retrieval quality from labelled traces: report FILE"
    )
    _add_handed_on(sub, "incidents", "service.incidents.cli", "alert history against user signals: lead-time")
    _add_handed_on(
        sub,
        "models",
        "service.models.fetch",
        "fetch|verify the HHEM and flan-t5 files the faithfulness worker loads",
    )

    from service.probes.cli import add_commands as add_probe_commands
    from service.review.cli import add_commands

    add_commands(sub)
    add_probe_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["gate"]:  # its options come first, which argparse's REMAINDER does not take
        return _exec_module("workers.shadow.cli", argv)
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
