"""`python -m dashboards.generate [--config FILE] [--out DIR] [--check]`

Writes one Grafana JSON file per dashboard, named by its uid. The committed
files are built from the built-in defaults (the same defaults
deploy/prometheus/ragmon.rules.yml is rendered from), so thresholds drawn on
the panels match the alerts; `--config` draws a deployment's own defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dashboards.boards import BUILDERS
from dashboards.common import Limits, dashboard_json
from dashboards.model import JsonObj
from service.contracts.config import ConfigError, load_section
from service.rules.config import GuardrailsConfig
from workers.drift.config import DriftConfig

HERE = Path(__file__).resolve().parent
# Where the committed dashboards live (deploy/ mounts it into Grafana's provisioning folder).
OUT_DIR = HERE / "grafana"  # only dashboards here: Grafana loads every JSON in the folder it is given


def load_limits(config_path: str | None) -> Limits:
    """Thresholds from a ragmon config file; the built-in defaults without one (never from the environment)."""
    if config_path is None:
        return Limits(GuardrailsConfig.model_validate({}), DriftConfig.model_validate({}).alpha)
    guardrails = load_section("guardrails", GuardrailsConfig, config_path)
    return Limits(guardrails, load_section("drift", DriftConfig, config_path).alpha)


def build_all(limits: Limits | None = None) -> dict[str, JsonObj]:
    """{file name: dashboard JSON}, in a stable order; fails on a duplicate uid."""
    limits = limits or load_limits(None)
    out: dict[str, JsonObj] = {}
    for build in BUILDERS:
        board = dashboard_json(build(limits))
        name = f"{board['uid']}.json"
        if name in out:
            raise ValueError(f"two dashboards share the uid {board['uid']!r}")
        out[name] = board
    return out


def to_text(dashboard: Any) -> str:
    return json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"


def write_all(out_dir: Path, limits: Limits | None = None) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, board in build_all(limits).items():
        path = out_dir / name
        path.write_text(to_text(board), encoding="utf-8")
        written.append(path)
    return written


def stale_files(out_dir: Path, limits: Limits | None = None) -> list[str]:
    """Files missing or different from a fresh build, and generated-looking files no build writes."""
    built = build_all(limits)
    stale = [
        n
        for n, b in built.items()
        if not (out_dir / n).is_file() or (out_dir / n).read_text("utf-8") != to_text(b)
    ]
    stale += sorted(p.name for p in out_dir.glob("ragmon-*.json") if p.name not in built)
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashboards.generate", description=__doc__.split("\n\n")[1])
    ap.add_argument("--config", default=None, help="ragmon YAML config (default: the built-in defaults)")
    ap.add_argument(
        "--out", default=str(OUT_DIR), help=f"output directory (default: {OUT_DIR.relative_to(HERE.parent)}/)"
    )
    ap.add_argument("--check", action="store_true", help="exit 1 when the files differ from a fresh build")
    args = ap.parse_args(argv)
    try:
        limits = load_limits(args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.check:
        stale = stale_files(out, limits)
        for name in stale:
            print(f"{out / name} is stale: run `python -m dashboards.generate`", file=sys.stderr)
        return 1 if stale else 0
    for path in write_all(out, limits):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
