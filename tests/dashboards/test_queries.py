"""Every dashboard query parses, names metrics the code defines, and is filtered by the variables."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from dashboards.common import TENANT_VALUES, VARIANT_VALUES
from dashboards.generate import build_all
from dashboards.promql import Selector, metric_names, selectors
from dashboards.queries import ANNOTATION_PREFIX, PanelQuery, all_panel_queries, raw_queries, substitute
from tests.dashboards.catalog import PROMETHEUS_SERIES, known_series
from tests.support.tools import require_tool

RAW = raw_queries(build_all())
FILLED = all_panel_queries("acme", "production")
TENANT_FILTER = ("=~", "$tenant")
VARIANT_FILTER = ("=~", "$variant")


def _label_values_metric(query: str) -> str:
    (name,) = metric_names(re.fullmatch(r"label_values\((.+), \w+\)", query).group(1))  # type: ignore[union-attr]
    return name


def test_the_tokenizer_finds_metrics_and_their_matchers() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (stage, le) (rate(a_bucket{tenant=~"$tenant", x="}"}[$__rate_interval])))'
        " / on (tenant) group_left (release) max without (instance) (rec:rule:mean offset 1h)"
        ' or on () label_replace(vector(0), "reason", "none", "", "") + sum(b_total) > bool 2'
    )
    assert list(selectors(expr)) == [
        Selector("a_bucket", {"tenant": ("=~", "$tenant"), "x": ("=", "}")}),
        Selector("rec:rule:mean", {}),
        Selector("b_total", {}),
    ]
    with pytest.raises(ValueError, match="without a metric name"):
        list(selectors('{__name__="a"}'))


def test_all_panel_queries_fills_in_every_variable_and_macro() -> None:
    assert len(FILLED) == len(RAW) > 60
    assert [(q.dashboard_uid, q.panel_title) for q in FILLED] == [
        (q.dashboard_uid, q.panel_title) for q in RAW
    ]
    assert all(isinstance(q, PanelQuery) and "$" not in q.expr for q in FILLED)
    assert {q.dashboard_uid for q in FILLED} == {b["uid"] for b in build_all().values()}
    assert sum(q.panel_title == ANNOTATION_PREFIX + "Releases" for q in FILLED) == len(build_all())
    releases = [q.expr for q in FILLED if q.panel_title.startswith(ANNOTATION_PREFIX)][0]
    assert releases == 'ragmon:release:last_timestamp_seconds{tenant=~"acme", variant=~"production"} * 1000'


def test_substitute_escapes_values_and_sizes_macros() -> None:
    expr = (
        'increase(m_total{tenant=~"$tenant", variant=~"${variant}"}[$__range]) / $__range_s + $__interval_ms'
    )
    assert substitute(expr, "a.b", None, range_="2h", interval="30s") == (
        'increase(m_total{tenant=~"a\\\\.b", variant=~".*"}[2h]) / 7200 + 30000'
    )
    assert substitute("rate(m[$__rate_interval])", "t", "v", rate_interval="5m") == "rate(m[5m])"
    with pytest.raises(ValueError, match="unknown dashboard variable"):
        substitute('m{job="$job"}', "t", "v")
    with pytest.raises(ValueError, match="unknown Grafana macro"):
        substitute("m[${__from}]", "t", "v")


@pytest.mark.slow
def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rules = [{"record": f"dashboard:query_{i}", "expr": q.expr} for i, q in enumerate(FILLED)]
    (tmp_path / "queries.rules.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]})
    )
    proc = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "queries.rules.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


@pytest.mark.slow
def test_promtool_check_rejects_a_broken_query(tmp_path: Path) -> None:
    """The parse test above can fail: a query with a syntax error does not pass it."""
    promtool = require_tool("promtool")
    broken = substitute(FILLED[0].expr.replace("}", "", 1), "acme", "production")
    rules = {"groups": [{"name": "d", "rules": [{"record": "dashboard:query", "expr": broken}]}]}
    (tmp_path / "broken.rules.yml").write_text(yaml.safe_dump(rules))
    proc = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "broken.rules.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0


def test_every_referenced_metric_is_defined_by_the_code_or_a_recording_rule() -> None:
    known = known_series()
    used = {(q.dashboard_uid, q.panel_title, name) for q in RAW for name in metric_names(q.expr)}
    used |= {
        ("variables", "tenant", _label_values_metric(TENANT_VALUES)),
        ("variables", "variant", _label_values_metric(VARIANT_VALUES)),
    }
    unknown = sorted(u for u in used if u[2] not in known)
    assert not unknown, f"no metrics.py or recording rule defines: {unknown}"


def test_queries_filter_by_tenant_and_variant_where_the_metric_has_them() -> None:
    known = known_series()
    missing = []
    for q in RAW:
        for s in selectors(q.expr):
            if s.metric in PROMETHEUS_SERIES:
                continue
            labels = known[s.metric]
            if "tenant" in labels and s.matchers.get("tenant") != TENANT_FILTER:
                missing.append((q.dashboard_uid, q.panel_title, s.metric, "tenant"))
            if "variant" in labels and s.matchers.get("variant") != VARIANT_FILTER:
                missing.append((q.dashboard_uid, q.panel_title, s.metric, "variant"))
    assert not missing, f"selectors not filtered by the dashboard variables: {missing}"


def test_the_catalog_sees_every_worker_and_the_api() -> None:
    names = set(known_series())
    for expected in (
        "ragmon_api_requests_total",
        "ragmon_worker_consumer_lag_messages",
        "ragmon_rag_stage_duration_seconds_bucket",
        "ragmon_faithfulness_score_ratio_count",
        "ragmon_exclusion_predicate_exclusions_total",
        "ragmon_drift_mmd2",
        "ragmon:false_exclusion:rate",
    ):
        assert expected in names
    assert "ragmon_rag_stage_duration_seconds" not in names  # a classic histogram has no bare series
