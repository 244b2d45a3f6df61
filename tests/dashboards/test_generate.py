"""The committed dashboards are exactly what the generator builds, with stable uids and the shared parts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dashboards import generate
from dashboards.common import CHANGE_ANNOTATION_EXPR, RELEASE_ANNOTATION_EXPR, Limits
from dashboards.generate import build_all, to_text, write_all
from dashboards.model import DATASOURCE
from service.rules.config import GuardrailsConfig

DASHBOARDS_DIR = generate.OUT_DIR
EXPECTED_UIDS = {
    "ragmon-overview",
    "ragmon-latency-cost",
    "ragmon-quality",
    "ragmon-intents",
    "ragmon-drift",
    "ragmon-feedback",
    "ragmon-pipeline",
    "ragmon-shadow",
    "ragmon-review",
}
BOARDS = build_all()


def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def _panel(uid: str, title_start: str) -> dict[str, Any]:
    (panel,) = [p for p in _panels(BOARDS[f"{uid}.json"]) if p["title"].startswith(title_start)]
    return panel


def _steps(panel: dict[str, Any]) -> list[tuple[float | None, str]]:
    return [(s["value"], s["color"]) for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]


def test_regenerating_changes_nothing(tmp_path: Path) -> None:
    write_all(tmp_path)
    fresh = {p.name: p.read_bytes() for p in tmp_path.glob("*.json")}
    committed = {p.name: p.read_bytes() for p in DASHBOARDS_DIR.glob("ragmon-*.json")}
    assert sorted(fresh) == sorted(committed), "run `python -m dashboards.generate` and commit the result"
    for name, content in fresh.items():
        assert committed[name] == content, f"{name} is stale: run `python -m dashboards.generate`"


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    write_all(tmp_path)
    assert generate.main(["--check", "--out", str(tmp_path)]) == 0
    edited = tmp_path / "ragmon-quality.json"
    edited.write_text(edited.read_text().replace("Quality", "Qualty", 1))
    assert generate.main(["--check", "--out", str(tmp_path)]) == 1
    (tmp_path / "ragmon-removed.json").write_text("{}")
    assert generate.stale_files(tmp_path) == ["ragmon-quality.json", "ragmon-removed.json"]


def test_uids_are_stable_unique_and_name_the_files() -> None:
    uids = [b["uid"] for b in BOARDS.values()]
    assert len(uids) == len(set(uids))
    assert set(uids) == EXPECTED_UIDS, "a dashboard's uid is its URL: changing one breaks links and bookmarks"
    for name, board in BOARDS.items():
        assert name == f"{board['uid']}.json"
        assert len(board["uid"]) <= 40  # Grafana's limit


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_dashboard_has_the_variables_and_the_release_annotation(name: str) -> None:
    board = BOARDS[name]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    assert variables["tenant"]["query"] == "label_values(ragmon_rag_queries_total, tenant)"
    assert (
        variables["variant"]["query"] == 'label_values(ragmon_rag_queries_total{tenant=~"$tenant"}, variant)'
    )
    assert variables["variant"]["current"]["value"] == ["production"]
    release, change = board["annotations"]["list"]
    assert release["target"]["expr"] == RELEASE_ANNOTATION_EXPR
    assert change["target"]["expr"] == CHANGE_ANNOTATION_EXPR and "{{to}}" in change["textFormat"]
    assert release["useValueForTime"] is True and "{{release}}" in release["titleFormat"]
    assert "dashboards" in {link["type"] for link in board["links"]}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_panel_has_a_datasource_and_a_query(name: str) -> None:
    for panel in _panels(BOARDS[name]):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE and target["expr"].strip(), panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panels_tile_the_grid_without_overlap(name: str) -> None:
    cells: dict[tuple[int, int], str] = {}
    ids = [p["id"] for p in BOARDS[name]["panels"]]
    assert len(ids) == len(set(ids))
    for panel in BOARDS[name]["panels"]:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_guardrail_thresholds_are_the_configured_ones() -> None:
    g = GuardrailsConfig.model_validate({})
    assert _steps(_panel("ragmon-overview", "Faithfulness"))[1] == (g.faithfulness.min_mean_score, "green")
    assert _steps(_panel("ragmon-overview", "False exclusion"))[1] == (g.false_exclusion.max_rate, "red")
    assert _steps(_panel("ragmon-overview", "Cost per query"))[1] == (g.cost.max_mean_usd, "red")
    assert _steps(_panel("ragmon-overview", "p95 total latency"))[1] == (
        g.latency.slo_seconds["total"],
        "red",
    )
    for stage, slo in g.latency.slo_seconds.items():
        panel = _panel("ragmon-latency-cost", f"p95 {stage} ")
        assert _steps(panel)[1] == (slo, "red")
        assert f'stage="{stage}"' in panel["targets"][0]["expr"]
        assert panel["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "dashed+area"


def test_thresholds_follow_the_config_they_are_built_from() -> None:
    cfg = GuardrailsConfig.model_validate(
        {"cost": {"max_mean_usd": 0.2}, "latency": {"slo_seconds": {"total": 3}}}
    )
    boards = build_all(Limits(cfg, drift_alpha=0.05))
    overview = {p["title"]: p for p in _panels(boards["ragmon-overview.json"])}
    assert _steps(overview["Cost per query (30m mean)"])[1] == (0.2, "red")
    assert [p["title"] for p in _panels(boards["ragmon-latency-cost.json"]) if "SLO" in p["title"]] == [
        "p95 total (SLO 3s)"
    ]
    drift = {p["title"]: p for p in _panels(boards["ragmon-drift.json"])}
    assert _steps(drift["Permutation p-value (alpha 0.05)"])[1] == (0.05, "green")


def test_a_config_file_sets_the_thresholds(tmp_path: Path) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text("guardrails:\n  faithfulness:\n    min_mean_score: 0.7\n")
    generate.main(["--config", str(config), "--out", str(tmp_path)])
    overview = json.loads((tmp_path / "ragmon-overview.json").read_text())
    (faithfulness,) = [p for p in _panels(overview) if p["title"].startswith("Faithfulness")]
    assert _steps(faithfulness)[1] == (0.7, "green")
    config.write_text("guardrails:\n  faithfulness:\n    min_mean_score: 7\n")
    assert generate.main(["--config", str(config), "--out", str(tmp_path)]) == 2


def test_json_text_is_deterministic() -> None:
    assert [to_text(b) for b in build_all().values()] == [to_text(b) for b in BOARDS.values()]
