"""`ragmon shadow ...` (python -m workers.shadow.cli): the statistics outside the worker.

compare FILE     offline A/B data (JSON lines) -> the same report the live worker gives, and the
                 release gate: exit 1 when a metric fails it (--fail-on, --budget), 2 on bad input
gate             both systems' outputs on the release-gate set (`ragmon gate`): retrieval metrics,
                 the answer checks and HHEM per item, paired -> the same table and exit codes
report           the live comparison of one tenant's candidate, from Redis
calibrate        false verdicts of an equal candidate, checked after every batch; power on a known effect
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from service.contracts.config import ConfigError, load_section
from service.contracts.ranking import parse_ks
from workers.checks.config import ChecksConfig
from workers.shadow.bootstrap import BootstrapSettings
from workers.shadow.calibrate import null_calibration, power_on_known_effect, render_table
from workers.shadow.compare import CompareSettings, compare
from workers.shadow.gate import GateError, GateResult, evaluate, parse_budgets, parse_fail_on
from workers.shadow.gate import render_markdown as render_gate
from workers.shadow.gate_inputs import GateInputError, read_golden, read_outputs
from workers.shadow.golden_gate import GateInputs, gate_specs, gate_table
from workers.shadow.offline import OfflineDataError, read_pairs
from workers.shadow.report import render
from workers.shadow.results import Comparison


def _settings(args: argparse.Namespace) -> CompareSettings:
    return CompareSettings(
        alpha=args.alpha,
        min_pairs=args.min_pairs,
        bootstrap=BootstrapSettings(resamples=args.resamples, seed=args.seed),
    )


def cmd_compare(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        print(f"ragmon shadow compare: {path}: no such file", file=sys.stderr)
        return 2
    try:
        with path.open() as lines:
            table = read_pairs(lines)
    except OfflineDataError as exc:
        print(f"ragmon shadow compare: {path}: {exc}", file=sys.stderr)
        return 2
    try:
        fail_on = parse_fail_on(args.fail_on)
        budgets = parse_budgets(args.budget)
        comparison = compare(table, _settings(args))
        gate = evaluate(comparison, fail_on, budgets)
    except GateError as exc:
        print(f"ragmon shadow compare: {exc}", file=sys.stderr)
        return 2
    comparison.context["source"] = path.name
    return _emit(comparison, gate, args.format, "ragmon shadow compare")


def _emit(comparison: Comparison, gate: GateResult, fmt: str, command: str) -> int:
    """The report on stdout either way; one line per failed metric on stderr; exit 1 on a failed gate."""
    if fmt == "json":
        print(json.dumps(comparison.to_dict() | {"gate": gate.to_dict()}, indent=2, sort_keys=True))
    else:
        print(render(comparison, fmt) + "\n\n" + render_gate(gate))
    for check in gate.failures():
        print(f"{command}: gate FAIL: {check.metric}: {check.why}", file=sys.stderr)
    return 0 if gate.passed else 1


def cmd_gate(args: argparse.Namespace) -> int:
    from workers.shadow.gate_hhem import load_scorer

    where = "ragmon gate"
    try:
        fail_on, budgets = parse_fail_on(args.fail_on), parse_budgets(args.budget)
        ks = parse_ks(args.k)
        checks = load_section("checks", ChecksConfig, args.config)
        inputs = read_gate_inputs(Path(args.golden), Path(args.production), Path(args.candidate), args)
    except (GateError, GateInputError, ConfigError, ValueError) as exc:
        print(f"{where}: {exc}", file=sys.stderr)
        return 2
    inputs.ks, inputs.checks = ks, checks
    score, hhem = load_scorer(None if args.no_hhem else Path(args.models_dir), args.device)
    table = gate_table(inputs, score)
    try:
        comparison = compare(table, replace(_settings(args), specs=gate_specs(ks)))
        gate = evaluate(comparison, fail_on, budgets)
    except GateError as exc:
        print(f"{where}: {exc}", file=sys.stderr)
        return 2
    comparison.context |= {
        "source": Path(args.golden).name,
        "gate.items": len(inputs.golden),
        "gate.hhem": hhem,
    }
    print(f"{where}: HHEM {hhem}", file=sys.stderr)
    return _emit(comparison, gate, args.format, where)


def read_gate_inputs(golden: Path, production: Path, candidate: Path, args: argparse.Namespace) -> GateInputs:
    for path in (golden, production, candidate):
        if not path.is_file():
            raise GateInputError(f"{path}: no such file")
    with golden.open() as lines:
        queries = read_golden(lines, golden.name, args.allow_any_split)
    with production.open() as lines:
        prod = read_outputs(lines, f"--production {production.name}", queries)
    with candidate.open() as lines:
        cand = read_outputs(lines, f"--candidate {candidate.name}", queries)
    return GateInputs(queries, prod, cand)


def cmd_report(args: argparse.Namespace) -> int:
    from workers.shadow.live import live_report

    return live_report(args)


def cmd_calibrate(args: argparse.Namespace) -> int:
    rows = null_calibration(seeds=args.seeds, batches=args.batches, batch=args.batch, alpha=args.alpha)
    print(render_table(rows, args.alpha))
    for pairs in (56, 200, 800):
        power = power_on_known_effect(seeds=args.seeds, pairs=pairs, alpha=args.alpha)
        print(
            f"net +10 points, 20% discordant, {pairs} pairs: sign test power {power['sign_test_exact']:.2f} "
            f"(exact), anytime verdict power {power['anytime_simulated']:.2f} (simulated)"
        )
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--min-pairs", type=int, default=30)
    p.add_argument("--resamples", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=7)


def _gate_options(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--fail-on",
        default="worse",
        help="verdicts that fail the gate (exit 1), a comma list of worse, inconclusive, not_enough_data "
        "(default: worse)",
    )
    c.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="METRIC=DELTA",
        help="the largest regression allowed for METRIC, in its units; fails when surely exceeded "
        "(repeatable)",
    )


def _gate_parser(g: argparse.ArgumentParser) -> None:
    g.add_argument("--golden", required=True, help="the release-gate set (`ragmon golden split`)")
    g.add_argument("--production", required=True, help="production's outputs on it (JSON lines)")
    g.add_argument("--candidate", required=True, help="the candidate's outputs on it (JSON lines)")
    g.add_argument("--k", default="5,10", help="retrieval cut-offs (default 5,10)")
    g.add_argument(
        "--config", default=None, help="ragmon YAML config for the checks section (default: RAGMON_CONFIG)"
    )
    g.add_argument(
        "--models-dir", default="models", help="where `ragmon models fetch` put HHEM (default: models)"
    )
    g.add_argument("--no-hhem", action="store_true", help="skip HHEM even when the model is there")
    g.add_argument("--device", default="cpu", help="HHEM device (cpu, cuda)")
    g.add_argument(
        "--allow-any-split",
        action="store_true",
        help="gate on a golden file whose lines are not release_gate",
    )
    _common(g)
    _gate_options(g)
    g.set_defaults(func=cmd_gate)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragmon shadow", description="shadow evaluation statistics")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="compare offline A/B data (JSON lines)")
    c.add_argument("file")
    _common(c)
    _gate_options(c)
    c.set_defaults(func=cmd_compare)
    _gate_parser(
        sub.add_parser("gate", help="gate a candidate on the release-gate set (both systems' outputs)")
    )
    r = sub.add_parser("report", help="the live comparison of a candidate (from Redis)")
    r.add_argument("--tenant", required=True)
    r.add_argument("--candidate", required=True)
    r.add_argument("--redis-url", default=None, help="default: RAGMON_REDIS_URL")
    _common(r)
    r.set_defaults(func=cmd_report)
    k = sub.add_parser("calibrate", help="false verdict rate of an equal candidate; power on a known effect")
    k.add_argument("--seeds", type=int, default=1000)
    k.add_argument("--batches", type=int, default=40)
    k.add_argument("--batch", type=int, default=50)
    k.add_argument("--alpha", type=float, default=0.05)
    k.set_defaults(func=cmd_calibrate)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
