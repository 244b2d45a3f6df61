"""Retrieval quality where gold is known: per-trace metrics, bootstrap aggregates, `ragmon retrieval report`.

A pure library (numpy only): it reads no broker, store or config, so the
report command, a worker or a release gate can all use the same definitions.
"""
