"""docker compose: what checkov covers for Kubernetes, checked here for the compose file (checkov has no compose scanner)."""

from __future__ import annotations

from tests.deploy.deployfiles import compose_ragmon_containers, compose_services

# Services whose image writes outside its volumes at start, so a read-only root would break them.
WRITABLE_ROOT = {
    "kafka": "the start script renders server.properties from KAFKA_* variables",
    "phoenix": "the server writes migrations and exports outside its working dir",
    "grafana": "writes logs and the plugin cache outside /var/lib/grafana",
}


def test_no_service_is_privileged_or_shares_host_namespaces() -> None:
    for name, svc in compose_services().items():
        assert not svc.get("privileged"), name
        assert "cap_add" not in svc, name
        for key in ("network_mode", "pid", "ipc"):
            assert svc.get(key) != "host", f"{name}: {key}: host"


def test_every_service_forbids_new_privileges() -> None:
    for name, svc in compose_services().items():
        assert "no-new-privileges:true" in svc.get("security_opt", []), name


def test_root_filesystems_are_read_only_where_the_image_allows() -> None:
    for name, svc in compose_services().items():
        assert bool(svc.get("read_only")) is (name not in WRITABLE_ROOT), name


def test_ragmon_containers_drop_every_capability_and_write_only_tmp() -> None:
    containers = compose_ragmon_containers()
    assert containers
    for c in containers:
        assert c.raw["cap_drop"] == ["ALL"] and c.raw["tmpfs"] == ["/tmp"], c.where


def test_postgres_keeps_its_data_on_a_volume_with_a_required_password() -> None:
    pg = compose_services()["postgres"]
    assert any(str(v).startswith("postgres-data:/var/lib/postgresql/data") for v in pg["volumes"])
    assert pg["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert "ports" not in pg, "PostgreSQL is reached on the compose network only"
    assert "pg_isready" in pg["healthcheck"]["test"]
