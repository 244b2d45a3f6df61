"""What every ragmon dashboard shares: template variables, the release annotation,
links between the dashboards, and the guardrail limits drawn on the panels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dashboards.model import DATASOURCE, JsonObj, Override, Panel, Row, Target
from dashboards.promql import TENANT, TV, sel
from dashboards.render import layout
from service.rules.config import BandRule, GuardrailsConfig

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


def release_annotation() -> JsonObj:
    return {
        "name": "Releases",
        "enable": True,
        "hide": False,
        "iconColor": "purple",
        "datasource": DATASOURCE,
        "target": {
            "datasource": DATASOURCE,
            "refId": "Anno",
            "editorMode": "code",
            "expr": RELEASE_ANNOTATION_EXPR,
            "interval": "1m",
            "range": True,
            "instant": False,
        },
        "titleFormat": "Release {{release}}",
        "textFormat": "{{tenant}} / {{variant}}: release {{release}} deployed",
        "tagKeys": "tenant,variant,release",
        "useValueForTime": True,
    }


def change_annotation() -> JsonObj:
    return {
        "name": "Component changes",
        "enable": True,
        "hide": False,
        "iconColor": "orange",
        "datasource": DATASOURCE,
        "target": {
            "datasource": DATASOURCE,
            "refId": "Changes",
            "editorMode": "code",
            "expr": CHANGE_ANNOTATION_EXPR,
            "interval": "1m",
            "range": True,
            "instant": False,
        },
        "titleFormat": "{{component}} changed",
        "textFormat": "{{tenant}}: {{component}} {{from}} -> {{to}} ({{source}})",
        "tagKeys": "tenant,component,source",
        "useValueForTime": True,
    }


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


DASHED = (("custom.lineStyle", {"fill": "dash", "dash": [10, 10]}), ("custom.fillOpacity", 0))


def band_panel(title: str, prefix: str, rule: BandRule, what: str, legend: str, trials: str = "") -> Panel:
    """A share and its two-sample control band (service/rules/render.py band_rules): the recorded rate,
    the baseline and the band p̄ ± z·√(p̄(1−p̄)(1/n + 1/n_b)) around it, dashed. `prefix` is the recorded
    series' (`ragmon:refusal:`), `what` says what the share counts, `legend` names one series."""
    rate, base, half = (sel(f"{prefix}{name}", TV) for name in ("rate", "baseline_rate", "band_half_width"))
    return Panel(
        f"{title} and its control band ({rule.window})",
        "timeseries",
        [
            Target(rate, "rate " + legend),
            Target(base, "baseline " + legend),
            Target(f"{base} + {half}", "upper " + legend),
            Target(f"clamp_min({base} - {half}, 0)", "lower " + legend),
        ],
        description=f"{what} over {rule.window} against p̄ ± {rule.sigmas:g}·√(p̄(1−p̄)(1/n + 1/n_b)), p̄ "
        f"pooled with the {rule.baseline_window} ending {rule.baseline_offset} ago (alert with n ≥ "
        f"{rule.min_n}{trials}, n_b ≥ {rule.min_baseline_n}). The band needs that much history; no trials "
        "in the window: no data, not 0%.",
        unit="percentunit",
        minimum=0,
        overrides=(Override("^(upper|lower|baseline) .*", DASHED),),
        width=24,
        height=9,
    )
