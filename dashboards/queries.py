"""Every PromQL expression of the dashboards with Grafana's variables filled in.

For tests that run the dashboards' queries against a real Prometheus (the
end-to-end test: every panel returns data after a simulator run) and for the
promtool syntax check. Grafana's own macros get concrete durations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from dashboards.generate import build_all
from service.rules.config import seconds

ANNOTATION_PREFIX = "annotation: "
# Series computed over a window that ends in the past (each band guardrail's baseline: 1d ending 1h
# ago by default): empty until Prometheus holds that much history.
HISTORY_SERIES = tuple(
    f"ragmon:{guardrail}:{series}"
    for guardrail in ("regeneration", "thumbs_down", "refusal")
    for series in ("baseline_rate", "band_half_width")
)
_MACRO = re.compile(r"\$(?:\{__(\w+)\}|__(rate_interval|interval_ms|interval|range_ms|range_s|range)\b)")
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_RE2_META = re.compile(r"([.+*?()|\[\]{}^$\\])")


class PanelQuery(NamedTuple):
    dashboard_uid: str
    panel_title: str
    expr: str


def _regex_literal(value: str) -> str:
    """`value` as an RE2 pattern matching itself, written inside a PromQL double-quoted string."""
    return _RE2_META.sub(r"\\\\\1", value)


def _replace(pattern: re.Pattern[str], values: dict[str, str], kind: str, expr: str) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in values:
            raise ValueError(f"unknown {kind} ${name} in {expr!r}")
        return values[name]

    return pattern.sub(one, expr)


def substitute(
    expr: str,
    tenant: str | None,
    variant: str | None,
    *,
    rate_interval: str = "1m",
    interval: str = "15s",
    range_: str = "1h",
) -> str:
    """Fill in $tenant/$variant (None: Grafana's "All", i.e. `.*`) and the $__ macros.

    Raises ValueError for a variable it does not know, so a new one cannot slip
    through into a query that Prometheus would reject.
    """
    macros = {
        "rate_interval": rate_interval,
        "interval": interval,
        "interval_ms": str(int(seconds(interval) * 1000)),
        "range": range_,
        "range_s": str(int(seconds(range_))),
        "range_ms": str(int(seconds(range_) * 1000)),
    }
    values = {
        "tenant": ".*" if tenant is None else _regex_literal(tenant),
        "variant": ".*" if variant is None else _regex_literal(variant),
    }
    return _replace(_VARIABLE, values, "dashboard variable", _replace(_MACRO, macros, "Grafana macro", expr))


# Panels fed by inputs the simulator's `incidents` run (the demo traffic of the end-to-end test) does not
# send: OTLP exports (the assembler and /v1/logs), a Phoenix or OTLP collector (the exporters and forwarder start only when
# one is configured) and human labels (the review calibration). "No data" is the truth for them there.
ABSENT_INPUT_SERIES = (
    "ragmon_assembler_",
    "ragmon_api_otlp_log_records_",  # POST /v1/logs: the demo app sends no log records
    "ragmon_forwarder_",
    "ragmon_phoenix_",
    "ragmon_evaluations_",
    "ragmon_review_judge_",
    "ragmon_review_reviewer_kappa",
    "ragmon_review_faithful_ratio",
    "ragmon_rag_probe_",  # probe replays need a registered probe set (tests/workers/probes end to end)
    # the incidents scenario changes no component: the boards' "Component changes" annotation stays empty
    "ragmon:release:component_change_timestamp_seconds",
)


def input_absent_from_incidents(query: PanelQuery) -> bool:
    """True for a panel whose input the `incidents` demo traffic does not produce (ABSENT_INPUT_SERIES)."""
    return any(name in query.expr for name in ABSENT_INPUT_SERIES)


def needs_history(query: PanelQuery) -> bool:
    """True for a query that stays empty until Prometheus has the regeneration baseline's history."""
    return any(name in query.expr for name in HISTORY_SERIES)


def raw_queries(dashboards: Mapping[str, Mapping[str, Any]]) -> list[PanelQuery]:
    """(uid, panel title, expr) for every panel target and annotation, variables not filled in."""
    out: list[PanelQuery] = []
    for board in dashboards.values():
        uid = board["uid"]
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                out.append(PanelQuery(uid, panel["title"], target["expr"]))
        for annotation in board["annotations"]["list"]:
            out.append(PanelQuery(uid, ANNOTATION_PREFIX + annotation["name"], annotation["target"]["expr"]))
    return out


def all_panel_queries(
    tenant: str | None,
    variant: str | None,
    *,
    rate_interval: str = "1m",
    interval: str = "15s",
    range_: str = "1h",
) -> list[PanelQuery]:
    """Every target of every panel (and each release annotation, titled "annotation: Releases"),
    as Grafana would send it for this tenant and variant. None selects "All"."""
    return [
        PanelQuery(
            q.dashboard_uid,
            q.panel_title,
            substitute(
                q.expr, tenant, variant, rate_interval=rate_interval, interval=interval, range_=range_
            ),
        )
        for q in raw_queries(build_all())
    ]
