"""`ragmon retrieval report --input FILE.jsonl --tenant T [--format md|json] [--k 1,3,5,10]`."""

from __future__ import annotations

import argparse
import json
import sys

from service.contracts.ranking import DEFAULT_KS, parse_ks
from service.retrieval.aggregate import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MIN_N,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    BootstrapOptions,
)
from service.retrieval.report import InputError, render_markdown, report_file


def _ks(text: str) -> tuple[int, ...]:
    try:
        return parse_ks(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragmon retrieval", description="Retrieval quality from labelled traces")
    sub = p.add_subparsers(dest="action", required=True)
    report = sub.add_parser(
        "report",
        help="Hit/Recall/Precision/nDCG@k and MRR per intent, variant and release, with bootstrap intervals",
    )
    report.add_argument(
        "--input", required=True, help="labelled traces, JSON lines (or a `ragmon golden export` file)"
    )
    report.add_argument("--tenant", required=True)
    report.add_argument("--format", choices=["md", "json"], default="md")
    report.add_argument(
        "--k", type=_ks, default=DEFAULT_KS, help="cut-offs, comma-separated (default 1,3,5,10)"
    )
    report.add_argument(
        "--min-n",
        type=int,
        default=DEFAULT_MIN_N,
        help=f"fewest labelled traces for an interval; fewer: 'label more' (default {DEFAULT_MIN_N})",
    )
    report.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    report.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    report.add_argument("--seed", type=int, default=DEFAULT_SEED)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.confidence < 1 or args.resamples < 1 or args.min_n < 1:
        print("--confidence must be in (0, 1), --resamples and --min-n at least 1", file=sys.stderr)
        return 2
    options = BootstrapOptions(args.resamples, args.min_n, args.confidence, args.seed)
    try:
        report = report_file(args.input, args.tenant, args.k, options)
    except OSError as exc:
        print(f"cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 2
    except InputError as exc:
        print(f"{args.input}: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        sys.stdout.write(render_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
