"""`ragmon golden split`: the golden export into development, judge-calibration, release-gate and
monitoring sets, grouped by session and stratified by intent (docs/review.md, "Splitting the golden set").

- A session's items all go to one set, so no set can be tuned on a conversation another set judges.
  An item without a `session_id` is a session of its own (keyed by its trace).
- Stratified by intent: a session's intent is the most frequent intent of its items (ties: the first
  name in sort order; no intent is `none`). Within each intent the sessions are ordered by a hash of
  (salt, tenant, session) and cut at the shares by largest remainder, so every intent gives each set
  its share of sessions to within one session.
- Deterministic: the same file and salt give the same sets, byte for byte, in any input order.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.contracts.jsonlines import json_lines

SETS: tuple[str, ...] = ("development", "judge_calibration", "release_gate", "monitoring")
DEFAULT_SHARES: dict[str, float] = {
    "development": 0.4,
    "judge_calibration": 0.2,
    "release_gate": 0.3,
    "monitoring": 0.1,
}
NO_INTENT = "none"
NO_STRATUM = "none"
_SCALE = float(1 << 64)


class SplitError(ValueError):
    """Bad input or options; the message names the line, the field and the rule."""


@dataclass(frozen=True)
class GoldenItem:
    line: int
    row: dict[str, Any]
    session: str  # tenant \0 session_id, or tenant \0 trace:<trace_id>
    intent: str
    stratum: str  # the review stratum the item was sampled under


def parse_shares(text: str) -> dict[str, float]:
    """'development=0.4,release_gate=0.6' -> shares over SETS (a set not named gets 0), summing to 1."""
    shares = dict.fromkeys(SETS, 0.0)
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if name not in shares:
            raise SplitError(f"--shares: {name!r} is not one of {', '.join(SETS)}")
        try:
            share = float(value) if sep else math.nan
        except ValueError:
            share = math.nan
        if not math.isfinite(share) or share < 0:
            raise SplitError(f"--shares: {part!r} must be SET=SHARE with SHARE a number >= 0")
        shares[name] = share
    total = sum(shares.values())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise SplitError(f"--shares: the shares sum to {total:g}, they must sum to 1")
    return shares


def _optional_name(row: dict[str, Any], field: str, where: str) -> str | None:
    value = row.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SplitError(f"{where}: field '{field}': must be a non-empty string or null, got {value!r}")
    return value


def parse_item(line: int, row: Any) -> GoldenItem:
    where = f"line {line}"
    if not isinstance(row, dict):
        raise SplitError(f"{where}: must be a JSON object (one golden item per line)")
    item_id = row.get("item_id")
    if isinstance(item_id, bool) or not isinstance(item_id, int | str) or item_id == "":
        raise SplitError(f"{where}: field 'item_id': must be a string or an integer, got {item_id!r}")
    gold = row.get("gold_ids", [])
    if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
        raise SplitError(f"{where}: field 'gold_ids': must be a list of document ids (strings)")
    tenant = row.get("tenant", "")
    if not isinstance(tenant, str):
        raise SplitError(f"{where}: field 'tenant': must be a string")
    session = _optional_name(row, "session_id", where)
    if session is None:
        trace = _optional_name(row, "trace_id", where)
        if trace is None:
            raise SplitError(f"{where}: field 'trace_id': required when 'session_id' is null")
        session = f"trace:{trace}"
    intent = _optional_name(row, "intent", where) or NO_INTENT
    stratum = _optional_name(row, "stratum", where) or NO_STRATUM
    return GoldenItem(line, row, f"{tenant}\0{session}", intent, stratum)


def read_golden(lines: Iterable[str]) -> list[GoldenItem]:
    items: list[GoldenItem] = []
    seen: dict[tuple[str, str], int] = {}
    for number, row in json_lines(lines, SplitError):
        item = parse_item(number, row)
        key = (str(row.get("tenant", "")), str(row["item_id"]))
        if key in seen:
            raise SplitError(f"line {number}: field 'item_id': {key[1]!r} is already on line {seen[key]}")
        seen[key] = number
        items.append(item)
    if not items:
        raise SplitError("no golden items in the input")
    return items


def session_unit(salt: str, session: str) -> float:
    digest = hashlib.blake2b(f"golden-split\0{salt}\0{session}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


def quotas(n: int, shares: Sequence[float]) -> list[int]:
    """n sessions over the sets by largest remainder (ties: the earlier set); sums to n."""
    exact = [n * s for s in shares]
    out = [math.floor(e) for e in exact]
    order = sorted(range(len(shares)), key=lambda j: (-(exact[j] - out[j]), j))
    for j in order[: n - sum(out)]:
        out[j] += 1
    return out


def session_intents(items: Sequence[GoldenItem]) -> dict[str, str]:
    """Each session's stratum: the most frequent intent of its items, ties to the first name."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for item in items:
        counts[item.session][item.intent] += 1
    return {s: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for s, c in counts.items()}


def assign(items: Sequence[GoldenItem], shares: Mapping[str, float], salt: str = "") -> dict[str, str]:
    """session -> set name."""
    by_intent: dict[str, list[str]] = defaultdict(list)
    for session, intent in session_intents(items).items():
        by_intent[intent].append(session)
    weights = [shares.get(name, 0.0) for name in SETS]
    out: dict[str, str] = {}
    for intent in sorted(by_intent):
        sessions = sorted(by_intent[intent], key=lambda s: (session_unit(salt, s), s))
        start = 0
        for name, q in zip(SETS, quotas(len(sessions), weights), strict=True):
            out.update(dict.fromkeys(sessions[start : start + q], name))
            start += q
    return out


def split(
    items: Sequence[GoldenItem], shares: Mapping[str, float], salt: str = ""
) -> dict[str, list[GoldenItem]]:
    """Set name -> its items, each set in (tenant, item_id) order."""
    where = assign(items, shares, salt)
    sets: dict[str, list[GoldenItem]] = {name: [] for name in SETS}
    for item in items:
        sets[where[item.session]].append(item)
    for members in sets.values():
        members.sort(key=lambda i: (str(i.row.get("tenant", "")), str(i.row["item_id"])))
    return sets
