"""The config `ragmon up --demo` uses is valid for every section it sets, and its rules check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from service.contracts.config import load_config_file, load_section
from service.local.up import DEMO_CONFIG
from service.rules.cli import rendered_text
from tests.support.tools import require_tool
from workers.drift.config import DriftConfig
from workers.exclusion.config import ExclusionConfig
from workers.shadow.config import ShadowConfig


def test_demo_config_sections_validate() -> None:
    sections = load_config_file(DEMO_CONFIG)
    assert set(sections) == {"exclusion", "drift", "shadow", "guardrails"}
    load_section("exclusion", ExclusionConfig, DEMO_CONFIG)
    load_section("drift", DriftConfig, DEMO_CONFIG)
    load_section("shadow", ShadowConfig, DEMO_CONFIG)


@pytest.mark.slow
def test_demo_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rules = tmp_path / "demo.rules.yml"
    rules.write_text(rendered_text(str(DEMO_CONFIG)))
    out = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
