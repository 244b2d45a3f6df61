"""Probe sets: registration, baselines pinned by hand and the before/after report (docs/probes.md)."""
