"""The band simulations' window counts checked against the rendered rules under promtool.

A band's simulation (regeneration_sim.py) counts events per window in numpy; this runs the same
cumulative counters through the real rule file and asserts that each recorded count
(`ragmon:<prefix>:<name>` for the window and `ragmon:<prefix>:baseline_<name>` for the baseline) equals
the simulation's at every checked minute.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from service.rules.cli import rendered_text
from tests.service.rules.regeneration_sim import Band, _window
from tests.support.tools import require_tool


@dataclass(frozen=True)
class Counter:
    name: str  # the recorded count's name: `queries` is recorded as ragmon:<prefix>:queries and baseline_queries
    series: str | None  # the input series the rules read, with its labels (None: a sum of other inputs)
    cumulative: np.ndarray  # the counter's value at each minute


def assert_rules_count_as_simulated(
    tmp_path: Path,
    band: Band,
    prefix: str,
    recorded_labels: str,
    counters: Sequence[Counter],
    minutes: Sequence[int],
    inputs: Sequence[tuple[str, np.ndarray]] = (),
) -> None:
    """`inputs`: more input series (name with labels, cumulative values) that feed the counts without a
    count of their own (thumbs up votes beside the downs)."""
    t = np.array(minutes)
    base_end = t - band.baseline_offset
    cases = []
    for c in counters:
        window = _window(c.cumulative[None, :], t, band.window)[0]
        baseline = _window(c.cumulative[None, :], base_end, band.baseline_window)[0]
        for name, values in ((c.name, window), (f"baseline_{c.name}", baseline)):
            for minute, base_minute, value in zip(minutes, base_end, values, strict=True):
                if name.startswith("baseline") and base_minute < 0:
                    continue  # `offset 1h` before ragmon ran: no baseline series at all
                cases.append(
                    {
                        "expr": f"ragmon:{prefix}:{name}",
                        "eval_time": f"{minute}m",
                        "exp_samples": [
                            {"labels": f"ragmon:{prefix}:{name}{recorded_labels}", "value": int(value)}
                        ],
                    }
                )
    series = [
        {"series": name, "values": " ".join(map(str, values))}
        for name, values in [*((c.series, c.cumulative) for c in counters if c.series), *inputs]
    ]
    (tmp_path / "rules.yml").write_text(rendered_text(None))
    (tmp_path / "sim.test.yml").write_text(
        yaml.safe_dump(
            {
                "rule_files": ["rules.yml"],
                "evaluation_interval": "1m",
                "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": cases}],
            }
        )
    )
    out = subprocess.run(
        [require_tool("promtool"), "test", "rules", "sim.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
