"""`ragmon calibrate faithfulness|exclusion|reviewers|rate|refusals|signals --tenant T`, `ragmon golden export
--tenant T` and `ragmon golden split --input FILE`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from service.contracts import reviewdb
from service.review.refusals import DEFAULT_MAX_FALSE_ANSWERS, DEFAULT_MIN_LABELS
from service.review.reports import (
    exclusion_proxy_report,
    faithful_rate_report,
    faithfulness_report,
    proxy_threshold_from_config,
    refusals_report,
    reviewers_report,
    signals_report,
    store_reports,
)


def _fmt(value: Any) -> str:
    return "no data" if value is None else f"{value:.3f}"


def _interval(i: dict[str, float] | None) -> str:
    return "" if not i else f" [{i['low']:.3f}, {i['high']:.3f}]"


def print_threshold_report(r: dict[str, Any]) -> None:
    print(
        f"{r['kind']}: n={r['n']} (threshold chosen on {r['n_selection']}, reported on {r['n_heldout']}); "
        f"AUC {_fmt(r['auc'])}"
    )
    for which in ("configured", "suggested"):
        f = r[which]
        if f is None:
            print(f"  {which:<10} no data")
            continue
        ba, kappa = f["balanced_accuracy"], f["kappa"] or {}
        print(
            f"  {which:<10} threshold {f['threshold']:.3f}  reviewed mix: balanced accuracy {_fmt(ba['value'])}"
            f"{_interval(ba['interval'])}  kappa {_fmt(kappa.get('kappa'))}{_interval(kappa.get('interval'))}"
        )
        pop = f.get("population")
        if pop:
            pba, pk = pop["balanced_accuracy"], pop["kappa"]
            print(
                f"  {'':<10} {'':<15} population (1/π): balanced accuracy {_fmt(pba['value'])}"
                f"{_interval(pba['interval'])}  kappa {_fmt(pk['value'])}{_interval(pk['interval'])}"
                f"  effective n {pk['effective_n']:.0f}"
            )
    print(f"  {r['message']}")


def _rate_text(r: dict[str, Any] | None) -> str:
    if r is None or r["value"] is None:
        return "no data"
    pop = r.get("population")
    population = "" if not pop else f", population (1/π) {pop['value']:.3f}{_interval(pop['interval'])}"
    return f"{r['value']:.3f}{_interval(r['interval'])} ({r['count']}/{r['n']}{population})"


def print_refusal_report(r: dict[str, Any]) -> None:
    print(
        f"refusals: n={r['n']} ({r['answerable']} answerable, {r['not_answerable']} not answerable; "
        f"{r['with_confidence']} with a retrieval score)"
    )
    print(f"  app's refusals   false refusals {_rate_text(r['app']['false_refusals'])}")
    print(f"  {'':<16} false answers  {_rate_text(r['app']['false_answers'])}")
    if r["tradeoff"]:
        print("  refuse when the best retrieval score < t (all labelled items):")
        for row in r["tradeoff"]:
            print(
                f"    t={row['threshold']:.3f}  false refusals {_fmt(row['false_refusals']['value'])}"
                f"  false answers {_fmt(row['false_answers']['value'])}"
            )
    print(f"  {r['message']}")


def signals_markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# Implicit signals against blind review: {r['n']} labelled blind traces "
        f"({r['wrong']} judged wrong, {r['right']} right)",
        "",
        "| signal | predicts | traces with it | precision [95%] | recall [95%] | population precision (1/π) "
        "| population recall (1/π) | reading |",
        "|---|---|---:|---|---|---|---|---|",
    ]
    for s in r["signals"]:

        def pop(x: dict[str, Any]) -> str:
            p = x.get("population")
            return "no data" if not p else f"{p['value']:.3f}{_interval(p['interval'])}"

        lines.append(
            f"| {s['signal']} | {s['predicts']} | {s['with_signal']} | {_rate_text_short(s['precision'])} "
            f"| {_rate_text_short(s['recall'])} | {pop(s['precision'])} | {pop(s['recall'])} "
            f"| {'reading' if s['verdict'] == 'reading' else 'label more'} |"
        )
    notes = [s["message"] for s in r["signals"] if s["message"]]
    if notes:
        lines += ["", *(f"- {m}" for m in notes)]
    return "\n".join(lines) + "\n"


def _rate_text_short(x: dict[str, Any]) -> str:
    if x["value"] is None:
        return "no data"
    return f"{x['value']:.3f}{_interval(x['interval'])} ({x['count']}/{x['n']})"


def _calibrate(args: argparse.Namespace) -> int:
    if args.what == "signals":
        with reviewdb.connect(reviewdb.url_from_env()) as conn:
            report = signals_report(conn, args.tenant, args.min_labels)
        if args.json or args.format == "json":
            print(json.dumps(report, default=str))
        else:
            print(signals_markdown(report), end="")
        return 0
    if args.what == "refusals":
        with reviewdb.connect(reviewdb.url_from_env()) as conn:
            report = refusals_report(conn, args.tenant, args.max_false_answers, args.min_labels)
        if args.json:
            print(json.dumps(report, default=str))
        else:
            print_refusal_report(report)
        return 0
    with reviewdb.connect(reviewdb.url_from_env()) as conn:
        if args.what == "faithfulness":
            report = faithfulness_report(conn, args.tenant, args.max_width)
        elif args.what == "exclusion":
            configured = (
                args.proxy_threshold if args.proxy_threshold is not None else proxy_threshold_from_config()
            )
            report = exclusion_proxy_report(conn, args.tenant, configured, args.max_width)
        elif args.what == "reviewers":
            report = reviewers_report(conn, args.tenant)
        else:
            report = faithful_rate_report(conn, args.tenant, args.days)
        store_reports(conn, args.tenant, {report["kind"]: report})
    if args.json:
        print(json.dumps(report, default=str))
    elif "verdict" in report:
        print_threshold_report(report)
    else:
        print(json.dumps(report, indent=2, default=str))
    return 0


def _golden(args: argparse.Namespace) -> int:
    if args.action == "split":
        return _golden_split(args)
    if not args.tenant:
        print("ragmon golden export: --tenant is required", file=sys.stderr)
        return 2
    from service.review.golden import golden_rows

    out = open(args.out, "w") if args.out else sys.stdout  # noqa: SIM115 - closed below
    n = 0
    try:
        with reviewdb.connect(reviewdb.url_from_env(), autocommit=False) as conn:
            for row in golden_rows(conn, args.tenant):
                out.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
                n += 1
    finally:
        if args.out:
            out.close()
    print(
        f"{n} reviewed items of tenant {args.tenant!r}"
        + (f" written to {Path(args.out)}" if args.out else ""),
        file=sys.stderr,
    )
    return 0


def _golden_split(args: argparse.Namespace) -> int:
    from service.review.coverage import check_metric, coverage, render_markdown
    from service.review.split import DEFAULT_SHARES, SplitError, parse_shares, read_golden, split

    if not args.input:
        print(
            "ragmon golden split: --input FILE is required (a `ragmon golden export` file)", file=sys.stderr
        )
        return 2
    path, out_dir = Path(args.input), Path(args.out_dir)
    try:
        shares = parse_shares(args.shares) if args.shares else DEFAULT_SHARES
        metric = check_metric(args.metric)
        if not (0 < args.target < 1):
            raise SplitError(f"--target: {args.target:g} must be a share in (0, 1), e.g. 0.02 for 2 points")
        if not path.is_file():
            raise SplitError(f"{path}: no such file")
        with path.open() as lines:
            items = read_golden(lines)
    except SplitError as exc:
        print(
            f"ragmon golden split: {path}: {exc}" if "line " in str(exc) else f"ragmon golden split: {exc}",
            file=sys.stderr,
        )
        return 2
    sets = split(items, shares, args.salt)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, members in sets.items():
        with (out_dir / f"{name}.jsonl").open("w") as out:
            for item in members:
                out.write(json.dumps(item.row | {"split": name}, default=str, ensure_ascii=False) + "\n")
    report = coverage(sets, metric, args.target, args.confidence, args.resamples, args.seed)
    report |= {"shares": shares, "salt": args.salt, "input": path.name}
    (out_dir / "coverage.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(json.dumps(report, indent=2, sort_keys=True) if args.format == "json" else render_markdown(report))
    print(
        f"{len(items)} items in {len({i.session for i in items})} sessions split into {out_dir}: "
        + ", ".join(f"{name} {len(members)}" for name, members in sets.items()),
        file=sys.stderr,
    )
    return 0


def _share_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a share in [0, 1]")
    return value


def add_commands(sub: Any) -> None:
    cal = sub.add_parser("calibrate", help="judges against human labels (review store)")
    cal.add_argument(
        "what", choices=["faithfulness", "exclusion", "reviewers", "rate", "refusals", "signals"]
    )
    cal.add_argument("--tenant", required=True)
    cal.add_argument(
        "--max-width", type=float, default=0.2, help="widest balanced-accuracy interval to suggest"
    )
    cal.add_argument(
        "--proxy-threshold",
        type=float,
        default=None,
        help="configured exclusion proxy threshold (default: exclusion.proxy_score_threshold "
        "of RAGMON_CONFIG)",
    )
    cal.add_argument("--days", type=int, default=30, help="window of the faithful-rate estimate")
    cal.add_argument(
        "--max-false-answers",
        type=_share_arg,
        default=DEFAULT_MAX_FALSE_ANSWERS,
        help="refusals: the ceiling on answers given to unanswerable questions the threshold must meet",
    )
    cal.add_argument(
        "--min-labels",
        type=int,
        default=DEFAULT_MIN_LABELS,
        help="refusals: labels each class (answerable, not) needs before a verdict; signals: labelled "
        "traces with the signal, and of the verdict it predicts, before a reading",
    )
    cal.add_argument("--json", action="store_true")
    cal.add_argument("--format", choices=["md", "json"], default="md", help="signals: the report's format")
    cal.set_defaults(func=_calibrate)
    golden = sub.add_parser("golden", help="the golden set grown from reviews")
    golden.add_argument("action", choices=["export", "split"])
    golden.add_argument("--tenant", default=None, help="export: the tenant whose reviewed items to write")
    golden.add_argument("--out", default=None, help="export: file to write (default: stdout)")
    golden.add_argument("--input", default=None, help="split: a `ragmon golden export` file")
    golden.add_argument("--out-dir", default="golden", help="split: where the four sets are written")
    golden.add_argument(
        "--shares",
        default=None,
        help="split: SET=SHARE,... of sessions per set (default development=0.4,judge_calibration=0.2,"
        "release_gate=0.3,monitoring=0.1)",
    )
    golden.add_argument("--salt", default="", help="split: changes the hash, hence which sessions go where")
    golden.add_argument(
        "--metric", default="faithful", help="split: the metric whose interval each set supports is shown"
    )
    golden.add_argument(
        "--target", type=float, default=0.02, help="split: the change the gate must see (0.02: 2 points)"
    )
    golden.add_argument("--confidence", type=float, default=0.95)
    golden.add_argument("--resamples", type=int, default=2000, help="split: bootstrap resamples")
    golden.add_argument("--seed", type=int, default=0, help="split: bootstrap seed")
    golden.add_argument("--format", choices=("md", "json"), default="md")
    golden.set_defaults(func=_golden)
