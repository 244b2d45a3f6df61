"""Incidents after the fact: each guardrail alert against what users reported (docs/lead-time.md)."""
