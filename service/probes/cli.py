"""`ragmon probes add|list|export|baselines|pin|report --tenant T` (docs/probes.md)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from service.contracts import reviewdb
from service.contracts.jsonlines import json_lines
from service.probes.report import ReportOptions, compare_versions, render_text
from service.probes.store import (
    ProbeFileError,
    add_probes,
    baselines,
    list_probes,
    parse_probe,
    parse_version,
    pin_baseline,
)


def _read_probes(path: str | None) -> list[Any]:
    src = open(path) if path else sys.stdin  # noqa: SIM115 - closed below
    try:
        return [parse_probe(n, doc) for n, doc in json_lines(src, ProbeFileError)]
    finally:
        if path:
            src.close()


def _add(args: argparse.Namespace) -> int:
    try:
        probes = _read_probes(args.file)
    except ProbeFileError as exc:
        print(f"ragmon probes add: {exc}; nothing was added", file=sys.stderr)
        return 2
    with reviewdb.connect(reviewdb.url_from_env()) as conn:
        reviewdb.migrate(conn)
        n = add_probes(conn, args.tenant, probes)
    print(f"{n} probes of tenant {args.tenant!r} registered", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    with reviewdb.connect(reviewdb.url_from_env()) as conn:
        probes = list(list_probes(conn, args.tenant, args.set))
    if args.action == "export":
        out = open(args.out, "w") if args.out else sys.stdout  # noqa: SIM115 - closed below
        try:
            for p in probes:
                out.write(json.dumps(p.as_dict(), ensure_ascii=False) + "\n")
        finally:
            if args.out:
                out.close()
        print(f"{len(probes)} probes of tenant {args.tenant!r} exported", file=sys.stderr)
        return 0
    for p in probes:
        gold = "no gold" if not p.gold_ids else f"{len(p.gold_ids)} gold"
        print(f"{p.probe_set}\t{p.query_id}\t{gold}\t{p.query[:80]}")
    print(f"{len(probes)} probes", file=sys.stderr)
    return 0


def _baselines(args: argparse.Namespace) -> int:
    with reviewdb.connect(reviewdb.url_from_env()) as conn:
        rows = baselines(conn, args.tenant)
    current: set[str] = set()
    for probe_set, model, index, how, pinned_at, _accepted_at in rows:
        mark = "current" if probe_set not in current else "earlier"
        current.add(probe_set)
        print(f"{probe_set}\t{model}@{index}\t{how}\t{mark}\tresults from {pinned_at.isoformat()}")
    print(f"{len(rows)} baselines", file=sys.stderr)
    return 0


def _version(text: str) -> tuple[str, str]:
    try:
        return parse_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _instant(text: str) -> datetime:
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 timestamp") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _pin(args: argparse.Namespace) -> int:
    at = args.at or datetime.now(UTC)
    with reviewdb.connect(reviewdb.url_from_env()) as conn:
        pin_baseline(conn, args.tenant, args.set, args.version, at)
    model, index = args.version
    print(f"{args.tenant}/{args.set}: baseline pinned to {model}@{index}, results from {at.isoformat()} on")
    return 0


def _report(args: argparse.Namespace) -> int:
    options = ReportOptions(k=args.k, margin=args.margin, min_probes=args.min_probes)
    with reviewdb.connect(reviewdb.url_from_env()) as conn:
        report = compare_versions(conn, args.tenant, args.from_, args.to, args.set, options)
    print(json.dumps(report) if args.json else render_text(report))
    return 0


def add_commands(sub: Any) -> None:
    probes = sub.add_parser("probes", help="probe sets for embedding and index migrations (docs/probes.md)")
    actions = probes.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="register probes from JSON lines {set, query_id, query, gold_ids?}")
    add.add_argument("--tenant", required=True)
    add.add_argument("--file", default=None, help="JSON lines file (default: stdin)")
    add.set_defaults(func=_add)
    for name, what in (("list", "print the registered probes"), ("export", "write them as JSON lines")):
        p = actions.add_parser(name, help=what)
        p.add_argument("--tenant", required=True)
        p.add_argument("--set", default=None)
        if name == "export":
            p.add_argument("--out", default=None, help="file to write (default: stdout)")
        p.set_defaults(func=_list)
    base = actions.add_parser("baselines", help="the versions whose results are baselines, current first")
    base.add_argument("--tenant", required=True)
    base.set_defaults(func=_baselines)
    pin = actions.add_parser("pin", help="pin a version's results (from --at on) as the set's baseline")
    pin.add_argument("--tenant", required=True)
    pin.add_argument("--set", required=True)
    pin.add_argument("--version", required=True, type=_version, help="MODEL or MODEL@INDEX_VERSION")
    pin.add_argument("--at", type=_instant, default=None, help="RFC 3339; default: now (the next replay)")
    pin.set_defaults(func=_pin)
    report = actions.add_parser("report", help="before/after: is version --to at least as good as --from")
    report.add_argument("--tenant", required=True)
    report.add_argument("--from", dest="from_", required=True, type=_version, help="MODEL or MODEL@INDEX")
    report.add_argument("--to", required=True, type=_version, help="MODEL or MODEL@INDEX")
    report.add_argument("--set", default=None, help="one probe set (default: all of the tenant's)")
    report.add_argument("--k", type=int, default=ReportOptions.k)
    report.add_argument("--margin", type=float, default=0.0, help="tolerated recall@k loss (non-inferiority)")
    report.add_argument("--min-probes", type=int, default=ReportOptions.min_probes)
    report.add_argument("--json", action="store_true")
    report.set_defaults(func=_report)
