"""Retrieved documents, as a convention's reader found them (neutral.RawDocument) -> contract documents.

LangChain's instrumentors set neither a document id nor a score: the id is then taken
from the metadata (`id`, `doc_id`, `document_id`), else it is `sha256:` + the first 32
hex digits of the content's SHA-256 (stable across traces, so the same chunk keeps its
id). See docs/otlp.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from itertools import islice
from typing import Any

from service.contracts import vocabulary as L
from workers.assembler.neutral import NeutralSpan, RawDocument
from workers.assembler.view import json_object

_IDENTIFIER = re.compile(r"^[A-Za-z0-9._:/@#+=-]+$")
METADATA_ID_KEYS = ("id", "doc_id", "document_id")
TRUNCATED_KEY = "ragmon_truncated"


def identifier(value: Any) -> str | None:
    """`value` as a contract identifier, or None when it cannot be one."""
    if type(value) is str:  # the same chunks come back trace after trace: their ids are checked once
        if value in _KNOWN_IDS:
            return _KNOWN_IDS[value]
        if len(_KNOWN_IDS) >= _MAX_KNOWN_IDS:
            _KNOWN_IDS.clear()
        _KNOWN_IDS[value] = known = _identifier(value)
        return known
    return _identifier(value)


_KNOWN_IDS: dict[str, str | None] = {}
_MAX_KNOWN_IDS = 20_000


def _identifier(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    return text if 0 < len(text) <= L.MAX_ID_LEN and _IDENTIFIER.match(text) else None


def content_id(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()[:32]


def _scalar(value: Any) -> Any:
    if isinstance(value, str):
        return value[: L.MAX_METADATA_STR_LEN]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float):
        return value
    return json.dumps(value, default=str)[: L.MAX_METADATA_STR_LEN]


def clean_metadata(raw: dict[str, Any]) -> dict[str, Any]:
    """Fit app metadata into the contract's limits (long strings cut, nested values as JSON text)."""
    out: dict[str, Any] = {}
    for key, value in islice(raw.items(), L.MAX_METADATA_KEYS - 1):  # one key left for the truncation mark
        if not isinstance(key, str) or not 0 < len(key) <= L.MAX_METADATA_KEY_LEN:
            continue
        kind = type(value)
        if kind is str:  # most metadata values: _scalar's first case, without the call
            out[key] = value if len(value) <= L.MAX_METADATA_STR_LEN else value[: L.MAX_METADATA_STR_LEN]
        elif isinstance(value, list) and all(not isinstance(v, list | dict) for v in value):
            out[key] = [v for v in (_scalar(v) for v in value[: L.MAX_METADATA_LIST_LEN]) if v is not None]
        else:
            out[key] = _scalar(value)
    return out


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def document(raw: RawDocument, truncated: bool) -> dict[str, Any]:
    content = raw.content if isinstance(raw.content, str) else ""
    raw_meta = json_object(raw.metadata)
    doc_id = identifier(raw.id)
    if doc_id is None:
        doc_id = next((i for i in (identifier(raw_meta.get(k)) for k in METADATA_ID_KEYS) if i), None)
    metadata = clean_metadata(raw_meta)
    if truncated:
        metadata[TRUNCATED_KEY] = True
    return {
        "id": doc_id or content_id(content),
        "text": content[: L.MAX_DOCUMENT_CHARS],
        "score": _score(raw.score),
        "metadata": metadata,
    }


def documents_of(span: NeutralSpan) -> list[dict[str, Any]]:
    """Its documents, each marked truncated when the span dropped attributes or had more than the contract allows."""
    items = span.documents
    truncated = span.dropped_attributes > 0 or len(items) > L.MAX_DOCUMENTS
    return [document(raw, truncated) for raw in items[: L.MAX_DOCUMENTS]]


def context_documents(retrievers: list[NeutralSpan], rerankers: list[NeutralSpan]) -> list[dict[str, Any]]:
    """The context given to the generator: the last reranker's output if there is one, else every retriever's."""
    for reranker in reversed(rerankers):
        docs = documents_of(reranker)
        if docs:
            return docs
    out: list[dict[str, Any]] = []
    for retriever in retrievers:
        out.extend(documents_of(retriever))
    return out[: L.MAX_DOCUMENTS]
