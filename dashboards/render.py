"""Panels and rows to Grafana JSON: field config, per-plugin options, grid layout."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from string import ascii_uppercase

from dashboards.model import DATASOURCE, GRID_COLUMNS, JsonObj, Panel, Row

ROW_HEIGHT = 1


def field_defaults(panel: Panel) -> JsonObj:
    defaults: JsonObj = {
        "unit": panel.unit,
        "color": {"mode": "thresholds" if panel.kind in ("stat", "bargauge") else "palette-classic"},
        "thresholds": panel.thresholds.to_json(),
        "mappings": [_mapping(panel.mappings)] if panel.mappings else [],
    }
    for key, value in (("min", panel.minimum), ("max", panel.maximum), ("decimals", panel.decimals)):
        if value is not None:
            defaults[key] = value
    if panel.no_value:
        defaults["noValue"] = panel.no_value
    if panel.kind == "timeseries":
        defaults["custom"] = _timeseries_custom(panel)
    elif panel.kind == "table":
        defaults["custom"] = {"align": "auto", "cellOptions": {"type": "auto"}, "inspect": False}
    return defaults


def _mapping(mappings: Sequence[tuple[str, str, str]]) -> JsonObj:
    options = {
        value: {"text": text, "color": color, "index": i} for i, (value, text, color) in enumerate(mappings)
    }
    return {"type": "value", "options": options}


def _timeseries_custom(panel: Panel) -> JsonObj:
    return {
        "drawStyle": "line",
        "lineInterpolation": "linear",
        "lineWidth": 1,
        "fillOpacity": 25 if panel.stacked else 10,
        "gradientMode": "none",
        "showPoints": "never",
        "spanNulls": False,
        "axisPlacement": "auto",
        "axisSoftMin": 0,
        "stacking": {"mode": "normal" if panel.stacked else "none", "group": "A"},
        # A guardrail's limit is drawn on the graph as a dashed line with the alert colour above/below it.
        "thresholdsStyle": {"mode": "dashed+area" if panel.thresholds.drawn else "off"},
    }


def _reduce(kind: str) -> JsonObj:
    return {"calcs": ["lastNotNull"], "fields": "", "values": kind == "table"}


# The plugins' options that are the same for every panel of the kind (stat and bargauge also get
# reduceOptions: each series reduced to its last value).
TIMESERIES_OPTIONS: JsonObj = {
    "legend": {"showLegend": True, "displayMode": "list", "placement": "bottom", "calcs": []},
    "tooltip": {"mode": "multi", "sort": "desc"},
}
STAT_OPTIONS: JsonObj = {
    "orientation": "auto",
    "textMode": "auto",
    "colorMode": "background",
    "graphMode": "area",
    "justifyMode": "auto",
    "wideLayout": True,
    "showPercentChange": False,
    "percentChangeColorMode": "standard",
}
BARGAUGE_OPTIONS: JsonObj = {
    "orientation": "horizontal",
    "displayMode": "gradient",
    "valueMode": "color",
    "namePlacement": "auto",
    "showUnfilled": True,
    "sizing": "auto",
    "minVizWidth": 8,
    "minVizHeight": 16,
    "maxVizHeight": 300,
    "legend": {"showLegend": False, "displayMode": "list", "placement": "bottom", "calcs": []},
}
TABLE_OPTIONS: JsonObj = {"showHeader": True, "frameIndex": 0, "cellHeight": "sm"}


def options(panel: Panel) -> JsonObj:
    if panel.kind == "timeseries":
        return copy.deepcopy(TIMESERIES_OPTIONS)
    if panel.kind == "stat":
        return {"reduceOptions": _reduce("stat"), **copy.deepcopy(STAT_OPTIONS)}
    if panel.kind == "bargauge":
        return {"reduceOptions": _reduce("bargauge"), **copy.deepcopy(BARGAUGE_OPTIONS)}
    return copy.deepcopy(TABLE_OPTIONS)


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> JsonObj:
    table = panel.kind == "table"
    out: JsonObj = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": [t.to_json(ascii_uppercase[i], table) for i, t in enumerate(panel.targets)],
        "fieldConfig": {
            "defaults": field_defaults(panel),
            "overrides": [o.to_json() for o in panel.overrides],
        },
        "options": options(panel),
    }
    if panel.description:
        out["description"] = panel.description
    if table:
        # One row per series, the labels as columns, from the instant query's frames.
        hidden = {name: True for name in panel.hidden_columns}
        out["transformations"] = [
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": hidden}},
        ]
    return out


def layout(rows: Sequence[Row]) -> list[JsonObj]:
    """Rows top to bottom; panels left to right, wrapping at 24 columns. Ids are positions: stable."""
    out: list[JsonObj] = []
    y = 0
    for row in rows:
        out.append(
            {
                "id": len(out) + 1,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "panels": [],
                "gridPos": {"h": ROW_HEIGHT, "w": GRID_COLUMNS, "x": 0, "y": y},
            }
        )
        y += ROW_HEIGHT
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > GRID_COLUMNS:
                x, y, line_height = 0, y + line_height, 0
            out.append(panel_json(panel, len(out) + 1, x, y))
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height
    return out
