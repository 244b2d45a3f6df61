"""Offline A/B data (JSON lines) -> PairTable, for `ragmon shadow compare FILE`.

Each line: {"request_id": str, "metric": str, "production": number, "candidate":
number, "slice": str | {dimension: label} (optional)}. A string slice is the
dimension "slice". Errors name the line and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from service.contracts.jsonlines import json_lines
from workers.shadow.table import PairTable, build_table


class OfflineDataError(ValueError):
    pass


def _number(doc: dict[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise OfflineDataError(f"{where}: '{key}' must be a finite number or a boolean, got {value!r}")
    return float(value)


def _labels(doc: dict[str, Any], where: str) -> dict[str, str]:
    raw = doc.get("slice")
    if raw is None:
        return {}
    if isinstance(raw, str):
        return {"slice": raw}
    if isinstance(raw, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        return dict(raw)
    raise OfflineDataError(f"{where}: 'slice' must be a string or an object of strings")


def read_pairs(lines: Iterable[str]) -> PairTable:
    by_request: dict[str, tuple[dict[str, float], dict[str, float], dict[str, str]]] = {}
    for number, doc in json_lines(lines, OfflineDataError):
        where = f"line {number}"
        if not isinstance(doc, dict):
            raise OfflineDataError(f"{where}: must be a JSON object")
        rid, metric = doc.get("request_id"), doc.get("metric")
        if not isinstance(rid, str) or not rid:
            raise OfflineDataError(f"{where}: 'request_id' must be a non-empty string")
        if not isinstance(metric, str) or not metric:
            raise OfflineDataError(f"{where}: 'metric' must be a non-empty string")
        prod, cand, labels = by_request.setdefault(rid, ({}, {}, {}))
        if metric in prod:
            raise OfflineDataError(f"{where}: request {rid!r} already has metric {metric!r}")
        prod[metric] = _number(doc, "production", where)
        cand[metric] = _number(doc, "candidate", where)
        labels.update(_labels(doc, where))
    if not by_request:
        raise OfflineDataError("no pairs in the input")
    return build_table(by_request.values())
