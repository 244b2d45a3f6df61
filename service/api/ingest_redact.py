"""PII redaction of a validated event body: one walker for both ingestion paths.

`body_redactions` lists what redaction changes in a body (its free texts, metadata and predicate
values, the session id), each as (path, new value). It reads the body through `read`, so the full
path walks the parsed JSON (dicts) and the plain path the fast structs it decoded; the full path
then writes the changes into its dicts (redact_body), the plain path into the client's bytes only
when there is a change (redacted_bytes). Every text stays within its field's limit once redacted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from service.api.redaction import Redactor, identifier_key
from service.contracts import vocabulary as L

Path = tuple[Any, ...]
Change = tuple[Path, Any]
Reader = Callable[[Any, str], Any]


def _capped(text: str, limit: int) -> str:
    # A mark is longer than what it replaces: a text at its field's limit must still fit it once
    # redacted, or the workers' views would refuse the stored record (accepted, then lost).
    return text if len(text) <= limit else text[:limit]


def redact_value(value: Any, redactor: Redactor, counts: Counter[str], tenant: str) -> Any:
    """A metadata or predicate value with keyed marks in its strings (also inside a list)."""
    if isinstance(value, str):
        return _capped(redactor.redact_value(value, counts, tenant), L.MAX_METADATA_STR_LEN)
    if isinstance(value, list):
        return [redact_value(v, redactor, counts, tenant) if isinstance(v, str) else v for v in value]
    return value


def redact_metadata(holder: Any, redactor: Redactor, counts: Counter[str], tenant: str) -> None:
    """Redact the `metadata` object of a dict in place (its values, except under identifier keys)."""
    metadata = holder.get("metadata") if isinstance(holder, dict) else None
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            if not identifier_key(key):
                metadata[key] = redact_value(value, redactor, counts, tenant)


# How the walker reads a field: of parsed JSON (a validated body: every holder it reads is an
# object; None for a field absent), or of the fast structs (every field it reads is declared).
read_key: Reader = dict.get
read_attribute: Reader = getattr


def body_redactions(
    event_type: str, body: Any, read: Reader, redactor: Redactor, counts: Counter[str], tenant: str
) -> list[Change]:
    """What redaction changes in a validated body of `event_type`, as (path, new value) pairs."""
    changes: list[Change] = []

    def text(path: Path, old: Any, redact: Callable[[str, Counter[str]], str], limit: int) -> None:
        if isinstance(old, str):
            new = _capped(redact(old, counts), limit)
            if new != old:
                changes.append((path, new))

    def value(path: Path, old: Any) -> None:
        new = redact_value(old, redactor, counts, tenant)
        if new != old:
            changes.append((path, new))

    def metadata(path: Path, holder: Any) -> None:
        # The hot loop (every document's and candidate's every key): only strings and lists of them
        # can change, so nothing else is looked at further.
        found = read(holder, "metadata")
        if found:
            for key, old in found.items():
                if (type(old) is str or type(old) is list) and not identifier_key(key):
                    new = redact_value(old, redactor, counts, tenant)
                    if new != old:
                        changes.append(((*path, "metadata", key), new))

    if event_type == "trace":
        for where, limit in (("query", L.MAX_QUERY_CHARS), ("answer", L.MAX_ANSWER_CHARS)):
            holder = read(body, where)
            if holder is not None:
                text((where, "text"), read(holder, "text"), redactor.redact, limit)
        retrieval = read(body, "retrieval")
        if retrieval is not None:
            for j, doc in enumerate(read(retrieval, "documents") or ()):
                where_doc = ("retrieval", "documents", j)
                text((*where_doc, "text"), read(doc, "text"), redactor.redact_document, L.MAX_DOCUMENT_CHARS)
                metadata(where_doc, doc)
            filters = read(retrieval, "filters")
            if filters is not None:
                for side in ("entitlement", "relevance"):
                    for k, predicate in enumerate(read(filters, side) or ()):
                        if not identifier_key(read(predicate, "field")):
                            value(("retrieval", "filters", side, k, "value"), read(predicate, "value"))
            sample = read(retrieval, "exclusion_sample")
            if sample is not None:
                for c, candidate in enumerate(read(sample, "candidates") or ()):
                    metadata(("retrieval", "exclusion_sample", "candidates", c), candidate)
        session = read(body, "session_id")
        if isinstance(session, str):
            changes.append((("session_id",), redactor.pseudonyms.identifier(tenant, session)))
    elif event_type in ("label", "release"):
        key = "note" if event_type == "label" else "description"
        text((key,), read(body, key), redactor.redact, L.MAX_NOTE_CHARS)
    return changes


def apply_changes(doc: Any, changes: list[Change]) -> None:
    """Write each change into `doc` (parsed JSON) at its path."""
    for path, new in changes:
        holder = doc
        for step in path[:-1]:
            holder = holder[step]
        holder[path[-1]] = new


def redact_body(
    event_type: str, body: dict[str, Any], redactor: Redactor, counts: Counter[str], tenant: str
) -> None:
    """Redact a validated body (parsed JSON) in place."""
    apply_changes(body, body_redactions(event_type, body, read_key, redactor, counts, tenant))


def redacted_bytes(
    event_type: str, body: Any, raw: Any, redactor: Redactor, counts: Counter[str], tenant: str
) -> Any:
    """The bytes `raw` of a body decoded as `body` (a fast struct), redacted as redact_body redacts
    the parsed body: `raw` itself when nothing changes."""
    changes = body_redactions(event_type, body, read_attribute, redactor, counts, tenant)
    if not changes:
        return raw
    doc = orjson.loads(memoryview(raw))
    apply_changes(doc, changes)
    return orjson.dumps(doc)
