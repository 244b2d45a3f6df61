"""PromQL for the dashboards: the template-variable filters, query helpers, and a
tokenizer that lists the metric selectors an expression uses (for the tests that
check every referenced metric exists and is filtered by tenant and variant).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

TENANT = 'tenant=~"$tenant"'
VARIANT = 'variant=~"$variant"'
TV = f"{TENANT}, {VARIANT}"
RATE_WINDOW = "$__rate_interval"
RANGE_WINDOW = "$__range"


def sel(metric: str, *matchers: str) -> str:
    inner = ", ".join(m for m in matchers if m)
    return f"{metric}{{{inner}}}" if inner else metric


def per_second(metric: str, by: str, *matchers: str, fn: str = "rate", window: str = RATE_WINDOW) -> str:
    """`sum by (by) (fn(metric{matchers}[window]))`; an empty `by` sums everything."""
    grouping = f"sum by ({by}) " if by else "sum "
    return f"{grouping}({fn}({sel(metric, *matchers)}[{window}]))"


def ratio(numerator: str, denominator: str, per: str | None = None) -> str:
    """A share that is absent (no data), not NaN or 0, when nothing was in the denominator.
    With `per`, the numerator is split by more labels than the denominator has: each of its
    series is divided by the denominator's series with the same `per` labels."""
    match = "" if per is None else f"on ({per}) group_left () "
    return f"({numerator}) / {match}({denominator} > 0)"


def share(numerator: str, denominator: str) -> str:
    """`ratio` for a numerator counter that appears only on its first event (refusals, regenerations):
    a series with traffic but no such event yet reads 0 instead of vanishing."""
    return ratio(f"({numerator} or {denominator} * 0)", denominator)


def quantile(q: float, histogram: str, by: str, *matchers: str) -> str:
    le = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, {per_second(histogram + '_bucket', le, *matchers)})"


def across_replicas(metric: str, by: str, *matchers: str, agg: str = "max") -> str:
    """One series per `by` of a gauge that each replica of a worker exports as a copy of one shared figure
    (a drift test's result, a stored shadow comparison, a count read from PostgreSQL): `max` collapses the
    copies; `agg="min"` keeps the worst replica's reading where that is what the alert rule takes."""
    return f"{agg} by ({by}) ({sel(metric, *matchers)})"


def zero_when_absent(expr: str, label: str = "") -> str:
    """For counters that exist only once something went wrong (dead letters, 503s): read 0, not
    'No data', while nothing has. With `label`, the zero series is named `none` in that label."""
    zero = f'label_replace(vector(0), "{label}", "none", "", "")' if label else "vector(0)"
    return f"(({expr}) or on () {zero})"


# -- tokenizer --------------------------------------------------------------------------------

_TOKENS = re.compile(
    r"""
    (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<var>\$\{?[A-Za-z_][A-Za-z0-9_]*(?::[A-Za-z]+)?\}?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<number>[0-9][0-9A-Za-z_.]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[{}()\[\],=<>+\-*/%^@])
  | (?P<space>\s+)
    """,
    re.VERBOSE,
)
KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "and",
        "or",
        "unless",
        "atan2",
        "inf",
        "nan",
        # aggregation operators: also written `sum by (x) (...)`, so not always followed by "("
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})


@dataclass(frozen=True)
class Selector:
    """A metric selector: the metric name and its label matchers {label: (op, value)}."""

    metric: str
    matchers: dict[str, tuple[str, str]]


def tokens(expr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        m = _TOKENS.match(expr, pos)
        if m is None:
            raise ValueError(f"cannot tokenize PromQL at {pos}: {expr[pos : pos + 20]!r} in {expr!r}")
        kind = m.lastgroup or ""
        if kind != "space":
            out.append((kind, m.group()))
        pos = m.end()
    return out


def _matchers(toks: list[tuple[str, str]], start: int) -> tuple[dict[str, tuple[str, str]], int]:
    """Parse `{label op "value", ...}` from toks[start] == '{'; returns the matchers and the index after '}'."""
    found: dict[str, tuple[str, str]] = {}
    i = start + 1
    while toks[i][1] != "}":
        if toks[i][1] == ",":
            i += 1
            continue
        (_, label), (_, op), (kind, value) = toks[i], toks[i + 1], toks[i + 2]
        if kind != "string":
            raise ValueError(f"label {label} is not matched against a string")
        found[label] = (op, value[1:-1])
        i += 3
    return found, i + 1


def selectors(expr: str) -> Iterator[Selector]:
    """Every metric selector in `expr`, skipping functions, keywords, label lists and durations."""
    toks = tokens(expr)
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "ident" and text in _GROUPING and nxt == "(":
            i = [j for j in range(i + 1, len(toks)) if toks[j][1] == ")"][0] + 1
        elif text == "[":
            i = [j for j in range(i, len(toks)) if toks[j][1] == "]"][0] + 1
        elif kind == "ident" and text not in KEYWORDS and nxt != "(":
            matchers: dict[str, tuple[str, str]] = {}
            i += 1
            if nxt == "{":
                matchers, i = _matchers(toks, i)
            yield Selector(text, matchers)
        elif text == "{":
            raise ValueError(f"a selector without a metric name in {expr!r}: name every metric")
        else:
            i += 1


def metric_names(expr: str) -> set[str]:
    return {s.metric for s in selectors(expr)}
