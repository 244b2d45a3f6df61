"""Scenario files: validation errors name the field; bundled scenarios load; the CLI's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.simulate import ScenarioError, load_scenario, parse_scenario
from service.simulate.cli import main

BAD = [
    ({"rate": 0}, "rate: Input should be greater than 0"),
    ({"duration_s": -5}, "duration_s: Input should be greater than 0"),
    ({"tenants": ["acme", "acme"]}, "tenants: duplicate tenant name ['acme']"),
    ({"tenants": ["Not A Slug"]}, "tenants.0.name: String should match pattern"),
    (
        {"tenants": [{"name": "acme", "locales": ["de"]}]},
        "tenants.0.locales.0: Input should be 'en', 'pt' or 'pl'",
    ),
    (
        {"candidate": {"name": "production"}},
        "candidate.name: the candidate variant cannot be named 'production'",
    ),
    ({"candidate": {"model": "gpt-9"}}, "candidate.model: 'gpt-9' is not one of models"),
    (
        {"sampling": {"exclusion_sample": 1.5}},
        "sampling.exclusion_sample: Input should be less than or equal to 1",
    ),
    ({"sampling": {"label_delay_s": [60, 10]}}, "sampling.label_delay_s: needs [min, max] seconds"),
    ({"feedback": {"thumbs": -0.1}}, "feedback.thumbs: Input should be greater than or equal to 0"),
    ({"colour": "blue"}, "colour: Extra inputs are not permitted"),
    ({"incidents": [{"kind": "meteor", "start_s": 1}]}, "incidents.0: Input tag 'meteor' found using 'kind'"),
    (
        {"incidents": [{"kind": "slow_stage", "start_s": 1, "factor": 0.5}]},
        "incidents.0.factor: Input should be greater than 1",
    ),
    (
        {"incidents": [{"kind": "slow_stage", "start_s": 1, "stage": "parsing"}]},
        "incidents.0.stage: Input should be",
    ),
    (
        {"incidents": [{"kind": "filter_regression", "start_s": 1, "field": "tenant"}]},
        "incidents.0.field: Input should be 'locale', 'product' or 'updated_at'",
    ),
    (
        {"incidents": [{"kind": "cost_spike", "start_s": 9, "end_s": 3}]},
        "incidents.0.end_s: must be greater than start_s",
    ),
    (
        {"incidents": [{"kind": "cost_spike", "start_s": 90}]},
        "incidents.0.start_s: 90.0 is not before the scenario's duration_s",
    ),
    (
        {"incidents": [{"kind": "cost_spike", "start_s": 1, "end_s": 5, "every_s": 3}]},
        "incidents.0.every_s: must be longer than the incident",
    ),
    (
        {"incidents": [{"kind": "topic_shift", "start_s": 1, "tenants": ["initech"]}]},
        "incidents.0.tenants: unknown tenant(s) ['initech']",
    ),
    (
        {"incidents": [{"kind": "topic_shift", "start_s": 1, "variants": ["canary"]}]},
        "incidents.0.variants: unknown variant(s) ['canary']",
    ),
    (
        {"incidents": [{"kind": "topic_shift", "start_s": 1}, {"kind": "topic_shift", "start_s": 2}]},
        "incidents: duplicate incident name ['topic-shift']",
    ),
]


@pytest.mark.parametrize(("fields", "message"), BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_validation_error_names_the_field(fields, message):
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"duration_s": 60} | fields)
    assert message in str(err.value)


@pytest.mark.parametrize("name", ["demo", "clean", "incidents"])
def test_bundled_scenarios_load(name):
    scenario = load_scenario(name)
    assert scenario.name == name
    assert scenario.candidate is not None


def test_incidents_scenario_is_clean_first_then_one_incident_after_another():
    scenario = load_scenario("incidents")
    kinds = [i.kind for i in sorted(scenario.incidents, key=lambda i: i.start_s)]  # type: ignore[attr-defined]
    assert kinds == [
        "filter_regression",
        "slow_stage",
        "cost_spike",
        "topic_shift",
        "unfaithful_answers",
        "provider_outage",
        "truncation_spike",
    ]
    windows = [(i.start_s, i.end_s) for i in sorted(scenario.incidents, key=lambda i: i.start_s)]
    assert windows[0][0] > 0
    assert all(prev[1] < nxt[0] for prev, nxt in zip(windows, windows[1:], strict=False))


def test_json_scenario_and_file_errors(tmp_path: Path):
    good = tmp_path / "s.json"
    good.write_text(json.dumps({"seed": 3, "tenants": ["t1"]}))
    assert load_scenario(str(good)).tenants[0].name == "t1"
    broken = tmp_path / "b.yaml"
    broken.write_text("rate: [unclosed")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(str(broken))
    with pytest.raises(ScenarioError, match="no such file and not a bundled scenario"):
        load_scenario(str(tmp_path / "missing.yaml"))


def test_cli_validate_and_bad_scenario_exit_codes(tmp_path: Path, capsys):
    assert main(["validate", "incidents"]) == 0
    assert "filter-regression (filter_regression) 240-420 s" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("rate: 5\nincidents:\n  - kind: slow_stage\n    start_s: 1\n    factor: 0\n")
    assert main(["validate", str(bad)]) == 2
    assert "incidents.0.factor: Input should be greater than 1" in capsys.readouterr().err


def test_cli_generate_writes_events_and_manifest(tmp_path: Path):
    out, manifest_path = tmp_path / "events.jsonl", tmp_path / "manifest.json"
    argv = [
        "generate",
        "clean",
        "--duration",
        "5",
        "--seed",
        "9",
        "--start",
        "2026-03-01T00:00:00Z",
        "--out",
        str(out),
        "--manifest",
        str(manifest_path),
    ]
    assert main(argv) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    manifest = json.loads(manifest_path.read_text())
    assert manifest["scenario"]["seed"] == 9 and manifest["run"]["start"] == "2026-03-01T00:00:00.000+00:00"
    assert sum(manifest["events"]["sent"].values()) == len(lines)
    assert {line["tenant"] for line in lines} == {"acme", "globex"}
    assert lines[0]["event"]["timestamp"].startswith("2026-03-01T00:00:00")


def test_cli_override_that_breaks_the_schedule_is_refused(capsys):
    assert main(["generate", "incidents", "--duration", "100"]) == 2
    assert (
        "incidents.0.start_s: 240.0 is not before the scenario's duration_s (100.0)"
        in capsys.readouterr().err
    )


def test_endless_generation_needs_a_limit(tmp_path: Path, capsys):
    out = tmp_path / "e.jsonl"
    assert main(["generate", "demo", "--out", str(out)]) == 2
    assert "--max-events" in capsys.readouterr().err
    assert main(["generate", "demo", "--max-events", "50", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 50
