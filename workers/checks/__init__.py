"""Deterministic answer checks: per answer, with no model, before any judge (docs/checks.md)."""
