"""What every ragmon dashboard shares: template variables, the release and change annotations,
links between the dashboards, the guardrail limits drawn on the panels, and the latency panels that
several boards draw from their own histograms (`p95_panel`, `quantile_lines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Unpack

from dashboards.model import DATASOURCE, JsonObj, Panel, Row, Target
from dashboards.panels import Options, seconds_panel
from dashboards.promql import TENANT, TV, quantile, sel
from dashboards.render import layout
from service.rules.config import GuardrailsConfig

SCHEMA_VERSION = 39
TAG = "ragmon"
# Tenants are listed from the metrics worker's query counter: every tenant with traffic has it.
TENANT_VALUES = "label_values(ragmon_rag_queries_total, tenant)"
VARIANT_VALUES = f"label_values({sel('ragmon_rag_queries_total', TENANT)}, variant)"
# One point per tenant/variant whose value is the release's time in ms: with useValueForTime,
# Grafana draws one marker at the moment of the release (the first release included), not
# at the scrape that noticed it.
RELEASE_ANNOTATION_EXPR = f"{sel('ragmon:release:last_timestamp_seconds', TV)} * 1000"
# The latest change per tenant and component, declared or detected in the traces (docs/markers.md).
_NOT_APP = 'component!="app"'
CHANGE_ANNOTATION_EXPR = (
    f"{sel('ragmon:release:component_change_timestamp_seconds', TENANT, _NOT_APP)} * 1000"
)


@dataclass(frozen=True)
class Limits:
    """The guardrail thresholds drawn on panels: the defaults the alert rules are rendered from."""

    guardrails: GuardrailsConfig = field(default_factory=lambda: GuardrailsConfig.model_validate({}))
    drift_alpha: float = 0.01


def quantile_lines(histogram: str, *matchers: str, qs: Sequence[float] = (0.5, 0.95, 0.99)) -> list[Target]:
    """One line per quantile of `histogram` over everything selected (`matchers`), named p50, p95, ..."""
    return [Target(quantile(q, histogram, "", *matchers), f"p{round(q * 100)}") for q in qs]


def p95_panel(
    title: str, histogram: str, by: str, legend: str, *matchers: str, **options: Unpack[Options]
) -> Panel:
    """A duration histogram's p95 per `by` (everything summed when empty), in seconds."""
    return seconds_panel(title, Target(quantile(0.95, histogram, by, *matchers), legend), **options)


@dataclass(frozen=True)
class Board:
    uid: str
    title: str
    description: str
    rows: Sequence[Row]
    tags: tuple[str, ...] = ()


def _query_variable(name: str, label: str, query: str, default: str) -> JsonObj:
    current = (
        {"text": ["All"], "value": ["$__all"]}
        if default == "$__all"
        else {"text": [default], "value": [default]}
    )
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": query,
        "refresh": 2,  # on time-range change: a tenant that just started sending shows up
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "sort": 1,
        "current": current,
        "options": [],
        "regex": "",
        "hide": 0,
    }


def variables() -> list[JsonObj]:
    datasource = {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {"text": "Prometheus", "value": "prometheus"},
        "options": [],
        "regex": "",
        "hide": 0,
        "refresh": 1,
    }
    return [
        datasource,
        _query_variable("tenant", "Tenant", TENANT_VALUES, "$__all"),
        _query_variable("variant", "Variant", VARIANT_VALUES, "production"),
    ]


def _annotation(
    name: str, colour: str, ref_id: str, expr: str, title: str, text: str, tag_keys: str
) -> JsonObj:
    """Markers drawn from a series whose value is the event's time in ms (useValueForTime)."""
    return {
        "name": name,
        "enable": True,
        "hide": False,
        "iconColor": colour,
        "datasource": DATASOURCE,
        "target": {
            "datasource": DATASOURCE,
            "refId": ref_id,
            "editorMode": "code",
            "expr": expr,
            "interval": "1m",
            "range": True,
            "instant": False,
        },
        "titleFormat": title,
        "textFormat": text,
        "tagKeys": tag_keys,
        "useValueForTime": True,
    }


def release_annotation() -> JsonObj:
    return _annotation(
        "Releases",
        "purple",
        "Anno",
        RELEASE_ANNOTATION_EXPR,
        "Release {{release}}",
        "{{tenant}} / {{variant}}: release {{release}} deployed",
        "tenant,variant,release",
    )


def change_annotation() -> JsonObj:
    return _annotation(
        "Component changes",
        "orange",
        "Changes",
        CHANGE_ANNOTATION_EXPR,
        "{{component}} changed",
        "{{tenant}}: {{component}} {{from}} -> {{to}} ({{source}})",
        "tenant,component,source",
    )


def _links() -> list[JsonObj]:
    return [
        {
            "title": "ragmon dashboards",
            "type": "dashboards",
            "tags": [TAG],
            "asDropdown": True,
            "includeVars": True,
            "keepTime": True,
            "icon": "external link",
            "targetBlank": False,
            "tooltip": "",
        }
    ]


def dashboard_json(board: Board) -> JsonObj:
    return {
        "uid": board.uid,
        "title": board.title,
        "description": board.description,
        "tags": [TAG, *board.tags],
        "editable": False,  # provisioned from generated JSON: UI edits would be lost
        "graphTooltip": 1,
        "timezone": "browser",
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "links": _links(),
        "annotations": {"list": [release_annotation(), change_annotation()]},
        "templating": {"list": variables()},
        "panels": layout(board.rows),
    }
