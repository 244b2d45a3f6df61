"""Fairness under attack: the victim tenant's p99 and /healthz p99 while an attacker sends each attack.

One live `ragmon up` (API, broker, Redis, the metrics worker) with an attacker tenant (2,000
events/s, the rate an operator would give it) and a victim tenant. Phases of --phase-s seconds:
the victim's ordinary traffic (VictimTraffic: batches of 10 traces every 0.1 s, a /healthz probe
after each) alone, then under each attack sent back to back by an attacker process (tests/e2e/
hostile/limits_attacks.py: long @ runs, ten million empty ResourceSpans, a huge attribute and a
huge record, 6.9 million empty events, deep nesting, 300 half-sent requests), with an undisturbed
phase between attacks, so each attack is compared with the undisturbed figures of the same run.
The attacker is its own process, as a real one is another client: in a thread of this process its
own request building and sending (megabytes per request) would hold this process's GIL and delay
the victim's clock, which measures the benchmark, not the API. The CPUs are still shared (the
attacker, the victim, the API and the worker on one machine).
Goal: the victim's p99 within 2x of undisturbed under every attack. Phases of 16 s (about 145 victim batches each, so the p99 is not simply the maximum). Bounded: about four minutes.
Usage: python -m tests.bench.bench_fairness [--phase-s 16] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from service.api.settings import hash_key
from tests.bench.common import median, write_report
from tests.e2e.hostile.limits_attacks import ATTACKS, slow_clients
from tests.e2e.hostile.victim import ATTACKER, ATTACKER_KEY, VICTIM, VICTIM_KEY, Tenant, VictimTraffic
from tests.e2e.stack import UpStack, start_up

ATTACKER_RATE_EPS = 2_000.0


def _stack(root: Path) -> UpStack:
    config = root / "ragmon.yaml"
    config.write_text(yaml.safe_dump({"assembler": {"quiet_period_s": 1.0}}))
    keys = json.dumps(
        [
            {
                "tenant": ATTACKER,
                "key_sha256": hash_key(ATTACKER_KEY),
                "rate_limit_eps": ATTACKER_RATE_EPS,
                "burst": 4_000,
            },
            {"tenant": VICTIM, "key_sha256": hash_key(VICTIM_KEY)},
        ]
    )
    return start_up(
        root, config, {"RAGMON_API_KEYS": keys, "RAGMON_FREE_PORTS": "1"}, extra_args=("--workers", "metrics")
    )


def _hold_connections(attacker: Tenant) -> None:
    held = slow_clients(attacker, 300, hold_s=3.0)
    for sock in held:
        sock.close()


def _attack_loop(name: str, attacker: Tenant, ready: Any, stop: Any, results: Any) -> None:
    """The attacker process: `name` back to back until `stop` is set; its outcome put on `results`."""
    send = _hold_connections if name == "slow_clients" else ATTACKS[name]
    ready.set()  # its module (the prebuilt attack bodies) imported: the attack starts now
    outcome: dict[str, Any] = {"sent": 0, "unexpected": [], "errors": []}
    while not stop.is_set():
        try:
            send(attacker)
            outcome["sent"] += 1
        except AssertionError as exc:  # an unexpected status: reported, the attack goes on
            outcome["unexpected"].append(str(exc)[:200])
        except OSError as exc:
            outcome["errors"].append(f"{type(exc).__name__}: {exc}"[:200])
    results.put(outcome)


def _phase(name: str | None, victim: Tenant, attacker: Tenant, seconds: float) -> dict[str, Any]:
    outcome: dict[str, Any] = {"attack": name or "undisturbed", "sent": 0, "unexpected": [], "errors": []}
    ctx = multiprocessing.get_context("spawn")
    ready, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
    process = None
    if name is not None:
        process = ctx.Process(target=_attack_loop, args=(name, attacker, ready, stop, results), daemon=True)
        process.start()
        assert ready.wait(120), f"the {name} attacker did not start"
        time.sleep(1)  # its first requests in flight before the victim is timed
    with VictimTraffic(victim) as traffic:
        time.sleep(seconds)
        stop.set()
    if process is not None:
        outcome.update(results.get(timeout=90))
        process.join(30)
    report = traffic.report
    outcome.update(
        victim_p99=report.p99(report.latencies_s),
        health_p99=report.p99(report.health_latencies_s),
        batches=sum(report.statuses.values()),
        failures=len(report.failures),
        statuses=dict(report.statuses),
    )
    return outcome


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--phase-s", type=float, default=16.0)
    args = ap.parse_args()
    attacks = [*sorted(ATTACKS), "slow_clients"]
    with tempfile.TemporaryDirectory(prefix="ragmon-fairness-") as tmp:
        stack = _stack(Path(tmp))
        try:
            victim, attacker = (
                Tenant(VICTIM, VICTIM_KEY, stack.api),
                Tenant(ATTACKER, ATTACKER_KEY, stack.api),
            )
            _phase(None, victim, attacker, 2)  # warm-up: connections, topics' metadata
            phases = [_phase(None, victim, attacker, args.phase_s)]
            for name in attacks:
                phases.append(_phase(name, victim, attacker, args.phase_s))
                phases.append(_phase(None, victim, attacker, args.phase_s / 2))
        finally:
            stack.stop()
    write_report(
        "fairness", "Fairness under attack: victim p99 and /healthz p99", _report(args, phases), args.out
    )
    return 0


def _report(args: argparse.Namespace, phases: list[dict[str, Any]]) -> str:
    calm = [p for p in phases if p["attack"] == "undisturbed"]
    base_victim, base_health = (
        median([p["victim_p99"] for p in calm]),
        median([p["health_p99"] for p in calm]),
    )
    rows = [
        "| phase | attack requests | victim batches | victim failures | victim p99 ms | x undisturbed | "
        "/healthz p99 ms | x undisturbed | within 2x |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in phases:
        if p["attack"] == "undisturbed":
            continue
        rv, rh = p["victim_p99"] / base_victim, p["health_p99"] / base_health
        rows.append(
            f"| {p['attack']} | {p['sent']} | {p['batches']} | {p['failures']} | {p['victim_p99'] * 1000:.1f} | "
            f"{rv:.2f} | {p['health_p99'] * 1000:.1f} | {rh:.2f} | {'yes' if rv <= 2 else 'NO'} |"
        )
    unexpected = {
        p["attack"]: p["unexpected"][:2] + p["errors"][:2] for p in phases if p["unexpected"] or p["errors"]
    }
    notes = "\n".join(f"- {k}: {v}" for k, v in unexpected.items()) or "- none"
    return (
        f"Phases of {args.phase_s:g} s; undisturbed phases between attacks, same run: victim p99 "
        f"{base_victim * 1000:.1f} ms, /healthz p99 {base_health * 1000:.1f} ms (median of {len(calm)} phases).\n\n"
        + "\n".join(rows)
        + "\n\nUnexpected attack statuses or errors:\n\n"
        + notes
        + "\n\n"
        "Command: `python -m tests.bench.bench_fairness` (also `tests/bench/run_all.py --only fairness`).\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
