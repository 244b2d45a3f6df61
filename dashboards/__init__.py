"""Grafana dashboards for ragmon, generated from code.

`python -m dashboards.generate` writes one JSON file per dashboard into this
directory (`--check` exits 1 when a committed file differs from a fresh build).
Each board (dashboards/boards/) is a list of rows of panels written with the
builders of `dashboards.panels`; `dashboards.render` turns them into JSON.
`dashboards.queries.all_panel_queries` lists every panel's PromQL with the
template variables filled in, for tests against a real Prometheus.
`python -m dashboards.typecheck` checks the JSON against Grafana's own types.
"""
