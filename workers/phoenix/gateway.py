"""Phoenix's REST API through arize-phoenix-client: find a trace's spans, write annotations.

Errors are sorted the way the consumer runtime needs them: Phoenix down, slow,
throttling, refusing our key or too old is `PhoenixUnavailable` (an outage:
the batch is retried with backoff, nothing is committed or dead-lettered);
Phoenix refusing the data itself (400/404/422) is `PhoenixRejected` (retrying
would not help: counted and logged).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from phoenix.client import Client
from phoenix.client.exceptions import PhoenixException

from workers.phoenix.annotations import TraceSpans
from workers.phoenix.metrics import PhoenixMetrics
from workers.phoenix.settings import PhoenixSettings
from workers.runtime import boundedjson

T = TypeVar("T")
_DOC_FIELD = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|content|metadata)$")
_PERMANENT = {400, 404, 409, 413, 422}


class PhoenixUnavailable(Exception):
    """Phoenix cannot take the request now (down, timeout, 429/5xx, 401/403, too old): retry later."""


class PhoenixRejected(Exception):
    """Phoenix refused the request's content: retrying it unchanged would fail again."""

    def __init__(self, detail: str, status: int) -> None:
        super().__init__(detail)
        self.status = status


def document_id(document: Mapping[str, Any]) -> str | None:
    """A retrieved document's id by the assembler's rule (docs/otlp.md, the mapping table), so the ids
    Phoenix lists match the ids ragmon's trace events (and so its gold ids) use: `document.id`, else the
    metadata's `id`/`doc_id`/`document_id`, else `sha256:` + 32 hex of the content's SHA-256."""
    if document.get("id") not in (None, ""):
        return str(document["id"])
    metadata = document.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = boundedjson.loads(metadata)
        except ValueError:  # not JSON, or nested past the bound (never RecursionError)
            metadata = None
    if isinstance(metadata, Mapping):
        for key in ("id", "doc_id", "document_id"):
            if metadata.get(key) not in (None, ""):
                return str(metadata[key])
    content = document.get("content")
    if isinstance(content, str):
        return "sha256:" + hashlib.sha256(content.encode()).hexdigest()[:32]
    return None


def retriever_documents(attributes: Mapping[str, Any]) -> dict[str, int]:
    """doc id -> position in a RETRIEVER span's `retrieval.documents` (flat OTLP keys or nested)."""
    by_position: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        m = _DOC_FIELD.match(key)
        if m:
            by_position.setdefault(int(m.group(1)), {})[m.group(2)] = value
    nested = attributes.get("retrieval", {})
    documents = nested.get("documents", []) if isinstance(nested, Mapping) else []
    for position, doc in enumerate(documents if isinstance(documents, list) else []):
        if isinstance(doc, Mapping) and isinstance(doc.get("document"), Mapping):
            by_position.setdefault(position, dict(doc["document"]))
    found: dict[str, int] = {}
    for position in sorted(by_position):
        doc_id = document_id(by_position[position])
        if doc_id is not None:
            found.setdefault(doc_id, position)
    return found


class PhoenixGateway:
    def __init__(
        self, settings: PhoenixSettings, metrics: PhoenixMetrics, http_client: httpx.Client | None = None
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        key = settings.api_key.get_secret_value() if settings.api_key else ""
        headers = (
            {"Authorization": f"Bearer {key}"} if key else {}
        )  # an empty key (compose's default): no auth
        self._http = http_client or httpx.Client(
            base_url=settings.url.rstrip("/") + "/", headers=headers, timeout=settings.timeout_s
        )
        self._client = Client(http_client=self._http)

    def close(self) -> None:
        self._http.close()

    def _call(self, endpoint: str, call: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            result = call()
        except httpx.HTTPStatusError as exc:
            code = exc.response.status_code
            outcome = "rejected" if code in _PERMANENT else "unavailable"
            self._metrics.requests.labels(endpoint, outcome).inc()
            detail = f"Phoenix answered {code} on {endpoint}: {exc.response.text[:300]}"
            if outcome == "rejected":
                raise PhoenixRejected(detail, code) from exc
            raise PhoenixUnavailable(detail) from exc
        except (httpx.TransportError, PhoenixException) as exc:
            self._metrics.requests.labels(endpoint, "unavailable").inc()
            raise PhoenixUnavailable(f"{endpoint}: {type(exc).__name__}: {exc}") from exc
        self._metrics.requests.labels(endpoint, "ok").inc()
        self._metrics.request_seconds.labels(endpoint).observe(time.perf_counter() - started)
        return result

    def find_traces(
        self, project: str, trace_ids: Sequence[str], with_documents: Iterable[str] = ()
    ) -> dict[str, TraceSpans]:
        """The root span (and, for `with_documents`, the retrievers' documents) of each trace Phoenix has."""
        step = self._settings.max_traces_per_lookup
        roots: dict[str, tuple[str, str]] = {}  # trace id -> (start time, span id): the earliest root wins
        documents: dict[str, dict[str, tuple[str, int]]] = {}
        for i in range(0, len(trace_ids), step):
            chunk = list(trace_ids[i : i + step])
            for span in self._spans(project, chunk, parent_id="null"):
                tid, sid, start = span["context"]["trace_id"], span["context"]["span_id"], span["start_time"]
                if tid not in roots or start < roots[tid][0]:
                    roots[tid] = (start, sid)
        wanted = sorted(set(with_documents) & set(roots))
        for i in range(0, len(wanted), step):
            for span in self._spans(project, wanted[i : i + step], span_kind="RETRIEVER"):
                placed = documents.setdefault(span["context"]["trace_id"], {})
                for doc_id, position in retriever_documents(span.get("attributes") or {}).items():
                    placed.setdefault(doc_id, (span["context"]["span_id"], position))
        return {
            tid: TraceSpans(root=sid, documents=documents.get(tid, {})) for tid, (_, sid) in roots.items()
        }

    def _spans(self, project: str, trace_ids: list[str], **filters: str) -> list[Any]:
        try:
            return self._call(
                "get_spans",
                lambda: self._client.spans.get_spans(
                    project_identifier=project,
                    trace_ids=trace_ids,
                    limit=10_000,
                    **filters,  # type: ignore[arg-type]
                ),
            )
        except PhoenixRejected as exc:
            if exc.status == 404:  # the project does not exist (yet): no span of these traces reached Phoenix
                return []
            raise

    def write_span_annotations(self, payloads: list[dict[str, Any]]) -> None:
        self._call(
            "span_annotations",
            lambda: self._client.spans.log_span_annotations(span_annotations=payloads, sync=True),  # type: ignore[arg-type]
        )

    def write_document_annotations(self, payloads: list[dict[str, Any]]) -> None:
        self._call(
            "document_annotations",
            lambda: self._client.spans.log_document_annotations(document_annotations=payloads, sync=True),  # type: ignore[arg-type]
        )
