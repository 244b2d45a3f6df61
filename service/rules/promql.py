"""Small PromQL builders used by the rule renderer."""

from __future__ import annotations

import re


def selector(series: str, **matchers: str) -> str:
    """series{k="v", ...}; a value starting with '!~' or '=~' or '!=' keeps its operator."""
    parts = []
    for key, value in matchers.items():
        for op in ("!~", "=~", "!="):
            if value.startswith(op):
                parts.append(f'{key}{op}"{value[len(op):]}"')
                break
        else:
            parts.append(f'{key}="{value}"')
    return f"{series}{{{', '.join(parts)}}}" if parts else series


def number(v: float) -> str:
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def compare_with_overrides(series: str, op: str, default: float, overrides: dict[str, float],
                           **matchers: str) -> str:
    """`series op threshold`, where the threshold is per tenant when overridden, else the default.

    Renders `(series{tenant="a"} op va) or ... or (series{tenant!~"a|..."} op default)`, so a
    tenant's override is one line of YAML and the alert expression stays plain PromQL.
    """
    parts = [f"{selector(series, **matchers, tenant=tenant)} {op} {number(value)}"
             for tenant, value in sorted(overrides.items())]
    rest = dict(matchers)
    if overrides:
        rest["tenant"] = "!~" + "|".join(re.escape(t) for t in sorted(overrides))
    parts.append(f"{selector(series, **rest)} {op} {number(default)}")
    if len(parts) == 1:
        return parts[0]
    return "\nor ".join(f"({p})" for p in parts)
