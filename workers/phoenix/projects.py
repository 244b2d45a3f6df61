"""One Phoenix project per tenant: the rule the forwarder and the exporter share.

A tenant's spans go to its own project and its scores are matched to traces in
that project only, so an annotation lands on the trace of the tenant that was
scored, even when two tenants send the same trace id. The project is ragmon's
choice, never the client's: a span resource that names another project is
overridden, or a tenant could put spans into another tenant's project.
"""

from __future__ import annotations

from collections.abc import Mapping


def tenant_project(tenant: str, tenant_projects: Mapping[str, str], prefix: str = "") -> str:
    """The tenant's configured project, else `<prefix><tenant>`."""
    return tenant_projects.get(tenant) or f"{prefix}{tenant}"


def check_one_tenant_per_project(tenant_projects: Mapping[str, str]) -> dict[str, str]:
    """The mapping, or ValueError when two tenants are given the same project."""
    owner: dict[str, str] = {}
    for tenant, project in sorted(tenant_projects.items()):
        other = owner.setdefault(project, tenant)
        if other != tenant:
            raise ValueError(
                f"tenants {other!r} and {tenant!r} are both given the Phoenix project {project!r}: "
                "each tenant needs its own"
            )
    return dict(tenant_projects)
