"""The probes worker: replayed probe queries against their pinned baselines (docs/probes.md)."""
