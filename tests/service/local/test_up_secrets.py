"""`ragmon up` makes its own secrets, keeps every key and password off command lines, and serves the API's
/metrics on its own port (the scrape config it writes points there)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from service.local.prometheus import prometheus_config
from service.local.secrets import SECRETS_FILE, load_or_create_secrets
from tests.service.local.test_up_supervisor import running_up
from tests.support.leaks import command_line, live_descendants


def test_secrets_are_made_once_owner_only_and_kept(tmp_path: Path) -> None:
    first = load_or_create_secrets(tmp_path / "w")
    assert (tmp_path / "w" / SECRETS_FILE).stat().st_mode & 0o777 == 0o600
    assert load_or_create_secrets(tmp_path / "w") == first
    assert len({first.review_secret, first.postgres_app_password, first.postgres_superuser_password}) == 3
    assert min(len(first.review_secret), len(first.postgres_app_password)) >= 32


def test_the_scrape_config_reads_the_api_metrics_port() -> None:
    config = prometheus_config(9180, {"metrics": 9101}, [], None)
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in config["scrape_configs"]}  # type: ignore[index]
    assert jobs["ragmon-api"] == ["127.0.0.1:9180"]


@pytest.mark.slow
def test_up_keeps_keys_off_argv_and_metrics_off_the_ingestion_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RAGMON_DATABASE_URL", "RAGMON_API_KEYS", "RAGMON_REVIEW_SECRET", "RAGMON_DEV_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with running_up(tmp_path, "--workers", "metrics") as up:
        text = up.text()
        metrics = re.search(r"API metrics\s+(http://\S+/metrics)", text)
        review_key = re.search(r"Review\s+\S+\s+\(key (\S+),", text)
        dev_key = re.search(r"API key\s+(\S+)", text)
        assert metrics and review_key and dev_key, text
        assert httpx.get(up.api + "/metrics", timeout=5).status_code == 404
        scraped = httpx.get(metrics.group(1), timeout=5)
        assert scraped.status_code == 200 and "ragmon_api_requests_total" in scraped.text
        assert httpx.get(up.api + "/docs", timeout=5).status_code == 404  # no CDN-loaded Swagger UI
        secrets = load_or_create_secrets(tmp_path / "up")
        values = [
            review_key.group(1),
            dev_key.group(1),
            secrets.review_secret,
            secrets.postgres_app_password,
            secrets.postgres_superuser_password,
        ]
        argvs = [command_line(p) for p in live_descendants(up.proc.pid)]
        assert len(argvs) >= 4, argvs  # broker, Redis, PostgreSQL, API, worker
        for argv in argvs:
            for value in values:
                assert value not in argv, f"a secret on the command line of: {argv[:80]}"
