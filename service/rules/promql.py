"""Small PromQL builders used by the rule renderer."""

from __future__ import annotations

import re


def selector(series: str, **matchers: str) -> str:
    """series{k="v", ...}; a value starting with '!~' or '=~' or '!=' keeps its operator."""
    parts = []
    for key, value in matchers.items():
        for op in ("!~", "=~", "!="):
            if value.startswith(op):
                parts.append(f'{key}{op}"{value[len(op) :]}"')
                break
        else:
            parts.append(f'{key}="{value}"')
    return f"{series}{{{', '.join(parts)}}}" if parts else series


def number(v: float) -> str:
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def compare_with_overrides(
    series: str, op: str, default: float, overrides: dict[str, float], **matchers: str
) -> str:
    """`series op threshold`, where the threshold is per tenant when overridden, else the default.

    Renders `(series{tenant="a"} op va) or ... or (series{tenant!~"a|..."} op default)`, so a
    tenant's override is one line of YAML and the alert expression stays plain PromQL.
    """
    parts = [
        f"{selector(series, **matchers, tenant=tenant)} {op} {number(value)}"
        for tenant, value in sorted(overrides.items())
    ]
    rest = dict(matchers)
    if overrides:
        rest["tenant"] = "!~" + "|".join(re.escape(t) for t in sorted(overrides))
    parts.append(f"{selector(series, **rest)} {op} {number(default)}")
    if len(parts) == 1:
        return parts[0]
    return "\nor ".join(f"({p})" for p in parts)


def duration(total_seconds: float) -> str:
    """A Prometheus duration for a whole number of seconds, largest units first (e.g. 1d1h)."""
    rest, parts = int(total_seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"


def window_count(
    series: str, window: str, by: str, offset: str | None = None, offset_s: float = 0.0, window_s: float = 0.0
) -> str:
    """Events counted by a counter within a window, including a series' first sample.

    increase() cannot see the jump from 'no series' to its first value, so a series
    created inside the window (a new tenant, release or reason; a restarted pod's fresh
    instance label) would lose its first events. A series that already existed at the
    window's start is counted by increase(); one created inside the window by its
    whole current value (it started from zero inside the window).
    """
    at_end = f" offset {offset}" if offset else ""
    at_start = f" offset {duration(offset_s + window_s)}"
    return (
        f"sum by ({by}) (\n  (increase({series}[{window}]{at_end}) and {series}{at_start})\n"
        f"  or ({series}{at_end} unless {series}{at_start})\n)"
    )
