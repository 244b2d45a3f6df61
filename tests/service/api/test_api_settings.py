"""API settings fail at start, naming the variable to fix (no broker or Redis needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from service.api.settings import ApiSettings, hash_key
from service.contracts.settings import describe_settings_error

ROOT = Path(__file__).resolve().parents[3]


def test_a_missing_key_file_fails_validation_naming_the_variable(tmp_path: Path) -> None:
    missing = tmp_path / "keys.yaml"
    with pytest.raises(ValidationError) as info:
        ApiSettings(api_keys_file=missing)
    (err,) = info.value.errors()
    assert err["loc"] == ("api_keys_file",)
    assert describe_settings_error(info.value).startswith(
        f"invalid settings: RAGMON_API_KEYS_FILE={missing}: no such file"
    )


def test_a_bad_entry_names_the_file_the_entry_and_the_rule(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"- {{tenant: acme, key_sha256: {hash_key('k')}}}\n- {{tenant: acme, key_sha256: xyz}}\n")
    with pytest.raises(ValidationError) as info:
        ApiSettings(api_keys_file=keys)
    text = describe_settings_error(info.value)
    assert f"RAGMON_API_KEYS_FILE={keys}: [1].key_sha256: String should match pattern" in text
    assert "(string_pattern_mismatch)" in text


def test_a_good_key_file_adds_its_entries(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(f'{{"api_keys": [{{"tenant": "acme", "key_sha256": "{hash_key("k")}"}}]}}')
    assert [e.tenant for e in ApiSettings(api_keys_file=keys).key_entries()] == ["acme"]


@pytest.mark.slow
def test_ragmon_api_exits_2_with_the_variable_named(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAGMON_API_KEYS_FILE": str(tmp_path / "absent.yaml")}
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "api"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "RAGMON_API_KEYS_FILE=" in done.stderr and "no such file" in done.stderr
    assert "Traceback" not in done.stderr
