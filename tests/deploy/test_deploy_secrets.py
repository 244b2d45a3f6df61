"""deploy/: no superuser for the app, passwords everywhere, none on a command line, images past known CVEs.

Before: compose pinned redis:7.4.2 (CVE-2025-21605, CVE-2025-49844, CVE-2026-23479), Redis had no
password, the app connected to PostgreSQL as the image's superuser, Grafana fell back to admin/admin
with anonymous access, Phoenix ran without auth, Prometheus had --web.enable-lifecycle.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.local.postgres import postgres_bin_dir, start_postgres
from tests.conftest import LOG_DIR
from tests.deploy.deployfiles import DEPLOY, compose_services, image_name_and_tag, k8s_named, k8s_of_kind

# The lowest version each image may be pinned at, and why (docs/deploy.md, "Image pins").
MINIMUM_VERSIONS: dict[str, tuple[tuple[int, ...], str]] = {
    "redis": ((8, 6, 3), "CVE-2025-21605, CVE-2025-49844 (Lua use-after-free, RCE), CVE-2026-23479"),
    "apache/kafka": ((3, 9, 1), "CVE-2025-27817, CVE-2025-27818"),
    "postgres": ((17, 7), "CVE-2025-12817, CVE-2025-12818"),
}
SECRET_NAME = re.compile(r"\$\{[A-Z_]*(PASSWORD|SECRET|KEY)[A-Z_]*")


def _version(tag: str) -> tuple[int, ...]:
    found = re.match(r"(?:version-)?v?(\d+(?:\.\d+)*)", tag)
    assert found, tag
    return tuple(int(p) for p in found.group(1).split("."))


def _images() -> list[tuple[str, str]]:
    found = [("compose " + name, svc["image"]) for name, svc in compose_services().items() if "image" in svc]
    for kind in ("Deployment", "StatefulSet"):
        for obj in k8s_of_kind(kind):
            found += [
                (f"k8s {obj['metadata']['name']}", c["image"])
                for c in obj["spec"]["template"]["spec"]["containers"]
            ]
    return found


def test_images_are_pinned_past_the_known_cves() -> None:
    checked = set()
    for where, image in _images():
        name, tag = image_name_and_tag(image)
        assert tag and tag != "latest", f"{where}: {image} is not pinned"
        if name in MINIMUM_VERSIONS:
            minimum, why = MINIMUM_VERSIONS[name]
            assert _version(tag) >= minimum, f"{where}: {image} is older than {minimum} ({why})"
            checked.add(name)
    assert checked == set(MINIMUM_VERSIONS)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def test_no_secret_is_interpolated_into_a_command_line() -> None:
    """A `${...PASSWORD}` in command, entrypoint or healthcheck becomes argv, which `ps` shows every user."""
    for name, svc in compose_services().items():
        for key in ("command", "entrypoint", "healthcheck"):
            for text in _strings(svc.get(key)):
                assert not SECRET_NAME.search(text), (
                    f"{name}.{key}: a secret on the command line: {text[:80]}"
                )


def test_redis_requires_a_password_and_every_client_sends_it() -> None:
    services = compose_services()
    redis = services["redis"]
    script = " ".join(_strings(redis["command"]))
    assert "requirepass" in script and "/tmp/redis.conf" in script and "--requirepass" not in script
    assert redis["environment"]["REDIS_PASSWORD"].startswith("${REDIS_PASSWORD:?")
    assert "REDISCLI_AUTH" in " ".join(redis["healthcheck"]["test"])
    for name, svc in services.items():
        url = (svc.get("environment") or {}).get("RAGMON_REDIS_URL")
        if url is not None:
            assert url.startswith("redis://:${REDIS_PASSWORD:?"), name


def test_the_app_is_no_postgres_superuser() -> None:
    services = compose_services()
    pg = services["postgres"]["environment"]
    for name, svc in services.items():
        url = (svc.get("environment") or {}).get("RAGMON_DATABASE_URL")
        if url is not None:
            assert url.startswith("postgresql://rgm_app:${RAGMON_DB_PASSWORD:?"), name
            assert pg["POSTGRES_USER"] not in ("rgm_app",) and "POSTGRES_PASSWORD" not in url, name
    assert any("init-app-role.sh:/docker-entrypoint-initdb.d/" in v for v in services["postgres"]["volumes"])
    assert "scram-sha-256" in pg["POSTGRES_INITDB_ARGS"]
    k8s = k8s_named("ConfigMap", "ragmon-postgres-init")["data"]["10-app-role.sh"]
    assert k8s == (DEPLOY / "postgres" / "init-app-role.sh").read_text(), (
        "the k8s copy of the init script drifted"
    )


def test_grafana_phoenix_prometheus_and_the_review_secret_are_locked() -> None:
    services = compose_services()
    grafana = services["grafana"]["environment"]
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false" and "GF_AUTH_ANONYMOUS_ORG_ROLE" not in grafana
    phoenix = services["phoenix"]["environment"]
    assert phoenix["PHOENIX_ENABLE_AUTH"] == "true" and phoenix["PHOENIX_SECRET"].startswith(
        "${PHOENIX_SECRET:?"
    )
    assert not any("enable-lifecycle" in a for a in services["prometheus"]["command"])
    assert services["api"]["environment"]["RAGMON_REVIEW_SECRET"].startswith("${RAGMON_REVIEW_SECRET:?")
    assert "9180" not in " ".join(str(p) for p in services["api"]["ports"])  # /metrics is never published


@pytest.mark.slow
def test_the_init_script_makes_a_role_without_superuser_powers() -> None:
    """deploy/postgres/init-app-role.sh run as the postgres image runs it, against a real PostgreSQL."""
    workdir = Path(tempfile.mkdtemp(prefix="ragmon-pg-init-"))
    server = start_postgres(workdir, log_dir=LOG_DIR, durable=False)
    try:
        admin = psycopg.conninfo.conninfo_to_dict(server.extra["url"])
        with psycopg.connect(server.extra["url"], autocommit=True) as conn:  # as on an empty data directory
            conn.execute("DROP DATABASE ragmon")
            conn.execute("DROP ROLE rgm_app")
        env = {
            **os.environ,
            "PATH": f"{postgres_bin_dir()}:{os.environ['PATH']}",
            "PGHOST": str(admin["host"]),
            "PGPORT": str(admin["port"]),
            "PGPASSWORD": str(admin["password"]),
            "POSTGRES_USER": "postgres",
            "POSTGRES_DB": "postgres",
            "RAGMON_DB_PASSWORD": "app-password-for-the-test",
        }
        done = subprocess.run(
            ["sh", str(DEPLOY / "postgres" / "init-app-role.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        app = psycopg.conninfo.make_conninfo(
            server.extra["url"], user="rgm_app", dbname="ragmon", password="app-password-for-the-test"
        )
        with psycopg.connect(app, autocommit=True) as conn:
            assert conn.execute(
                "SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user"
            ).fetchone() == (False, False, False)
            conn.execute("CREATE TABLE migrations_work (id int)")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("CREATE DATABASE not_allowed")
        quoted = subprocess.run(
            ["sh", str(DEPLOY / "postgres" / "init-app-role.sh")],
            env={**env, "RAGMON_DB_PASSWORD": "x'; DROP ROLE postgres; --"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert quoted.returncode != 0 and "single quote" in quoted.stderr
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
