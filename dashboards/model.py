"""A small typed builder for the Grafana dashboard JSON model (schemaVersion 39+).

Only what ragmon's dashboards use: timeseries, stat, bargauge and table panels
over Prometheus, row headers, threshold steps, value mappings and overrides.
The output is checked against Grafana's own TypeScript types by
`python -m dashboards.typecheck` (see grafana_types.ts), so a field this module
gets wrong fails a test rather than a Grafana import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

JsonObj = dict[str, Any]
PanelKind = Literal["timeseries", "stat", "bargauge", "table"]

DATASOURCE: JsonObj = {"type": "prometheus", "uid": "${datasource}"}
GRID_COLUMNS = 24


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel. `legend` is Grafana's legendFormat."""

    expr: str
    legend: str = "__auto"
    instant: bool = False

    def to_json(self, ref_id: str, table: bool) -> JsonObj:
        out: JsonObj = {
            "datasource": DATASOURCE,
            "refId": ref_id,
            "editorMode": "code",
            "expr": self.expr,
            "legendFormat": self.legend,
            "range": not self.instant,
            "instant": self.instant,
        }
        if table:
            out["format"] = "table"
        return out


@dataclass(frozen=True)
class Steps:
    """Threshold steps: `base` colours everything below the first step."""

    base: str
    steps: tuple[tuple[float, str], ...] = ()

    def to_json(self) -> JsonObj:
        first: list[JsonObj] = [{"color": self.base, "value": None}]
        return {"mode": "absolute", "steps": first + [{"color": c, "value": v} for v, c in self.steps]}

    @property
    def drawn(self) -> bool:
        return bool(self.steps)


NO_STEPS = Steps("green")


def bad_above(limit: float) -> Steps:
    """A guardrail that fires above `limit` (latency, cost, exclusion rate, lag)."""
    return Steps("green", ((limit, "red"),))


def bad_below(limit: float) -> Steps:
    """A guardrail that fires below `limit` (faithfulness, readiness)."""
    return Steps("red", ((limit, "green"),))


@dataclass(frozen=True)
class Override:
    """Field properties applied to series whose display name matches `regex`."""

    regex: str
    properties: tuple[tuple[str, Any], ...]

    def to_json(self) -> JsonObj:
        return {
            "matcher": {"id": "byRegexp", "options": self.regex},
            "properties": [{"id": key, "value": value} for key, value in self.properties],
        }


@dataclass(frozen=True)
class Panel:
    title: str
    kind: PanelKind
    targets: Sequence[Target]
    description: str = ""
    unit: str = "short"
    thresholds: Steps = NO_STEPS
    minimum: float | None = None
    maximum: float | None = None
    decimals: int | None = None
    mappings: tuple[tuple[str, str, str], ...] = ()  # (value, text, colour)
    overrides: tuple[Override, ...] = ()
    stacked: bool = False
    width: int = 8
    height: int = 8
    no_value: str = ""
    hidden_columns: tuple[str, ...] = ()  # tables: columns the reader does not need (Time, Value)

    def __post_init__(self) -> None:
        if not self.targets:
            raise ValueError(f"panel {self.title!r} has no query")
        if not 0 < self.width <= GRID_COLUMNS:
            raise ValueError(f"panel {self.title!r}: width {self.width} outside 1..{GRID_COLUMNS}")


@dataclass(frozen=True)
class Row:
    """A section header; the panels after it belong to it."""

    title: str
    panels: Sequence[Panel] = field(default_factory=tuple)
