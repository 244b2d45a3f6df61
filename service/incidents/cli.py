"""`ragmon incidents lead-time --prometheus URL [--since 7d] [--until T] [--tenant T] [--format md|json]`."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime

from service.incidents.history import History, HistoryError, Span, alert_episodes, user_rises
from service.incidents.leadtime import as_json, as_markdown, match

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d|w)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration_s(text: str) -> float:
    m = _DURATION.match(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 90s, 15m, 2h or 7d")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def moment(text: str, now: float | None = None) -> float:
    """A time: an ISO 8601 datetime with its zone, unix seconds, or a duration ago (`7d`)."""
    now = time.time() if now is None else now
    if _DURATION.match(text.strip()):
        return now - duration_s(text)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: an ISO 8601 time with its zone, unix seconds, or a duration ago such as 7d"
        ) from None
    if parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give the zone (for example 2026-12-01T00:00:00+00:00)")
    return parsed.timestamp()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragmon incidents", description="Alert history against user signals")
    sub = p.add_subparsers(dest="action", required=True)
    lt = sub.add_parser("lead-time", help="each guardrail alert's lead time over user signals")
    lt.add_argument("--prometheus", required=True, help="base URL of the Prometheus-compatible store")
    lt.add_argument("--since", default="7d", help="start: a duration ago (7d), ISO time or unix seconds")
    lt.add_argument("--until", default=None, help="end (default: now)")
    lt.add_argument("--tenant", default=None)
    lt.add_argument("--step", type=duration_s, default=30.0, help="resolution of the history (default 30s)")
    lt.add_argument(
        "--window",
        type=duration_s,
        default=7200.0,
        help="an alert and a user rise further apart than this are unrelated (default 2h)",
    )
    lt.add_argument("--format", choices=["md", "json"], default="md")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        now = time.time()
        start = moment(args.since, now)
        end = now if args.until is None else moment(args.until, now)
    except argparse.ArgumentTypeError as exc:
        print(f"--since/--until: {exc}", file=sys.stderr)
        return 2
    if end <= start:
        print("--until must be after --since", file=sys.stderr)
        return 2
    history = History(args.prometheus)
    try:
        rules = history.alert_rules()
        span = Span(start, end, args.step, args.tenant)
        alerts = alert_episodes(history, rules, span)
        rises = user_rises(history, rules, span)
    except HistoryError as exc:
        print(f"cannot read the alert history: {exc}", file=sys.stderr)
        return 1
    finally:
        history.close()
    if not any(r.user_signal for r in rules):
        print("the store evaluates no user-signal alert (thumbs-down, regenerate bands)", file=sys.stderr)
        return 1
    matches, unmatched = match(alerts, rises, args.window)
    if args.format == "json":
        print(json.dumps(as_json(matches, unmatched, args.window), indent=2))
    else:
        print(as_markdown(matches, unmatched, args.window), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
