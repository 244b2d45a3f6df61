"""POST /v1/events: the native batch endpoint (statuses in docs/conventions.md, "Errors", and README.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from opentelemetry import trace
from starlette.requests import ClientDisconnect

from service.api import admission
from service.api.auth import AuthError, Principal, authorize_labels, refuse_events
from service.api.ingest import PreparedBatch
from service.api.ingest_body import check_tenant_fields, decompress, parse_envelope
from service.api.ingest_errors import IngestError
from service.api.producer import BrokerUnavailable, OutgoingRecord, oversized, record_bytes
from service.api.schemas import INGEST_RESPONSES, ingest_openapi_extra
from service.api.state import ApiState, ApiStateDep, BodyHold
from service.api.telemetry import current_traceparent, extract_context
from service.contracts import vocabulary as L

log = logging.getLogger("ragmon.api.events")
router = APIRouter()
tracer = trace.get_tracer("ragmon.api")
T = TypeVar("T")

# Decoding, validating and redacting a body costs about 10 µs per kilobyte of CPU; above this size
# the work runs in a worker thread, so the event loop keeps serving /healthz and other tenants.
OFF_LOOP_ABOVE_BYTES = 256 * 1024
# A compressed body may inflate a thousandfold: above this size its inflating is off the loop too.
OFF_LOOP_COMPRESSED_ABOVE_BYTES = 4 * 1024
# A body off the loop pays the rate limiter one token per this many decompressed bytes before it
# is parsed (see prepaid_tokens).
BYTES_PER_TOKEN = 4096


async def off_loop(
    size: int, compressed: bool, work: Callable[..., T], *args: Any, slots: asyncio.Semaphore | None = None
) -> T:
    """`work(*args)` in a worker thread when the body is big enough to hold the loop, else inline
    (a thread hop costs more than a small body's whole decode). A thread is taken only within
    `slots`, the tenant's share (ApiState.thread_slots): the worker threads are one queue for every
    tenant, and one tenant's many slow bodies in it made another's big batch wait seconds."""
    if size > OFF_LOOP_ABOVE_BYTES or (compressed and size > OFF_LOOP_COMPRESSED_ABOVE_BYTES):
        if slots is None:
            return await asyncio.to_thread(work, *args)
        async with slots:
            return await asyncio.to_thread(work, *args)
    return work(*args)


def _error(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


def _over_share(state: ApiState, tenant: str) -> IngestError:
    share = max(state.settings.body_bytes_per_tenant, state.settings.max_body_bytes)
    return IngestError(
        429,
        f"tenant '{tenant}' has {state.body_bytes.get(tenant, 0)} bytes of bodies in flight; at most {share} "
        "at once: send fewer requests at a time, retry",
        field="body",
        rule="body_bytes_per_tenant",
        headers={"Retry-After": str(state.settings.retry_after_s)},
    )


async def _read_body(
    request: Request, limit: int, timeout_s: float = 30.0, hold: BodyHold | None = None, tenant: str = ""
) -> bytes:
    """The body, at most `limit` bytes, all of it within `timeout_s` (a slow sender gets a 408),
    each chunk taken from the tenant's share of body bytes by `hold` (429 beyond it)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise IngestError(
            413, f"body of {declared} bytes exceeds {limit} bytes", field="body", rule="max_body_bytes"
        )
    chunks: list[bytes] = []
    total = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                total += len(chunk)
                if total > limit:
                    raise IngestError(413, f"body exceeds {limit} bytes", field="body", rule="max_body_bytes")
                if hold is not None and not hold.take(tenant, len(chunk)):
                    raise _over_share(hold.state, tenant)
                chunks.append(chunk)
    except ClientDisconnect:  # the client went (or was closed: connections.py): nobody reads an answer
        raise IngestError(
            400,
            f"the connection closed before the body was sent ({total} bytes came)",
            field="body",
            rule="body",
        ) from None
    except TimeoutError:
        raise IngestError(
            408,
            f"the body did not arrive within {timeout_s:g}s ({total} bytes came)",
            field="body",
            rule="body_timeout",
        ) from None
    return b"".join(chunks)


def _full_parse(state: ApiState, data: bytes, tenant: str) -> list[Any]:
    events = parse_envelope(data, state.settings.max_events_per_batch)
    check_tenant_fields(events, tenant)
    return events


def pretoken(content_encoding: str | None) -> int:
    """The token a compressed body pays before it is inflated: a tenant over its rate (or in debt for
    work it already caused) is refused before its body costs any CPU; an attacker re-sending 2 KB
    that inflates to megabytes is answered 429 for the price of reading 2 KB. It counts towards the
    request's cost, which is otherwise unchanged."""
    return 1 if content_encoding else 0


# What one ordinary event costs to decode, validate and redact (docs/throughput.md: ~100 µs): the CPU
# a batch may spend per token it paid before it pays more (see cpu_debt).
CPU_S_PER_TOKEN = 100e-6
# A batch costing more than this many times what it paid, in CPU, pays the excess afterwards.
CPU_SLACK = 2.0


def cpu_timed(work: Callable[..., T], *args: Any) -> tuple[T, float]:
    """`work(*args)` and the CPU seconds this thread spent on it."""
    started = time.thread_time()
    out = work(*args)
    return out, time.thread_time() - started


def cpu_debt(cpu_s: float, paid: int) -> int:
    """Tokens a batch still owes for its CPU: text built to be slow (long runs a redaction pattern
    walks, deep structures) costs several times an ordinary event; beyond CPU_SLACK times what it
    paid the excess goes into the tenant's bucket as debt, so a tenant's rate bounds its CPU share,
    not only its event count. Ordinary batches (about 1x) never owe anything."""
    used = cpu_s / CPU_S_PER_TOKEN
    return int(used - CPU_SLACK * max(paid, 1)) if used > CPU_SLACK * max(paid, 1) else 0


def prepaid_tokens(decompressed_bytes: int) -> int:
    """Tokens a big body pays before it is parsed, one per BYTES_PER_TOKEN: a body that is refused
    after costing a parse (too deep, too many elements) still costs its sender, and only its sender.
    Bodies small enough for the loop pay by their events alone."""
    return decompressed_bytes // BYTES_PER_TOKEN if decompressed_bytes > OFF_LOOP_ABOVE_BYTES else 0


def _decode(state: ApiState, data: bytes, tenant: str) -> tuple[list[Any] | None, list[Any]]:
    """(the decompressed body's plain-form events or None, the events): no HTTP, no await."""
    # The plain form (nearly every batch) is read in one pass; anything else, and a plain
    # batch with one event not accepted as written, goes the full way, which names the problem.
    plain = state.preparer.decode_plain(data)
    if plain is not None and any(e.type == "label" for e in plain):
        plain = None  # labels go the full way: their scope and reviewer are checked on the objects
    return plain, _full_parse(state, data, tenant) if plain is None else plain


def _prepare(
    state: ApiState,
    data: bytes,
    plain: list[Any] | None,
    events: list[Any],
    tenant: str,
    traceparent: bytes | None,
    refused_labels: dict[int, str],
) -> PreparedBatch:
    batch = state.preparer.prepare_plain(plain, tenant, traceparent) if plain is not None else None
    if batch is None:
        if plain is not None:
            events = _full_parse(state, data, tenant)
        batch = state.preparer.prepare(events, tenant, traceparent)
        refuse_events(batch, refused_labels, "label_scope")
    return batch


def _check_content_type(request: Request) -> None:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise IngestError(
            415,
            f"Content-Type must be application/json, got {ctype or 'none'!r}",
            field="Content-Type",
            rule="application/json",
        )


def _bucket(state: ApiState, principal: Principal) -> tuple[float, int]:
    """The tenant's rate and burst (a full batch always fits in the bucket)."""
    return admission.bucket(state, principal, state.settings.max_events_per_batch)


async def _charge_debt(state: ApiState, principal: Principal, tokens: int) -> None:
    """Tokens taken for work already done, refused or not (the bucket may go into debt); no answer changes."""
    await admission.charge(state, principal, tokens, state.settings.max_events_per_batch, log)


async def _rate_limit(
    state: ApiState, principal: Principal, events: int, debit: bool = False
) -> JSONResponse | None:
    over = await admission.take(state, principal, events, state.settings.max_events_per_batch, log, debit)
    if over is None:
        return None
    return _error(429, {"error": over.message("events"), "rule": "rate_limit"}, over.headers)


def refuse_records(
    batch: PreparedBatch, indexes: set[int], why: Callable[[int, int], str], reason: str
) -> None:
    """The events of batch.records[i] for i in `indexes` rejected alone; the rest of the batch goes on.

    batch.records holds one record per accepted result, in the same order."""
    if not indexes:
        return
    accepted = [r for r in batch.results if r.status == "accepted"]
    for i in indexes:
        result = accepted[i]
        result.status, result.error, result.reason = "rejected", why(result.index, i), reason
    batch.records = [r for i, r in enumerate(batch.records) if i not in indexes]


def _too_big(records: list[OutgoingRecord]) -> Callable[[int, int], str]:
    return lambda index, i: (
        f"events[{index}]: the stored event is {record_bytes(records[i])} bytes; at most "
        f"{L.MAX_RECORD_BYTES} per event (max_record_bytes)"
    )


def _refused_by_broker(index: int, _i: int) -> str:
    return f"events[{index}]: the broker refused this event as too large or invalid (record_refused)"


def _count_rejections(state: ApiState, batch: PreparedBatch) -> None:
    for r in batch.rejected:
        state.metrics.events_rejected.labels(r.type, r.reason or "invalid").inc()
    for kind, n in batch.redactions.items():
        state.metrics.redactions.labels(kind).inc(n)


def _shed(state: ApiState, reason: str, error: str, rule: str) -> JSONResponse:
    """A 503 for a batch of which nothing was accepted, counted as shed for `reason`; retried after Retry-After."""
    state.metrics.shed.labels(reason).inc()
    return _error(503, {"error": error, "rule": rule}, {"Retry-After": str(state.settings.retry_after_s)})


async def _produce(state: ApiState, principal: Principal, batch: PreparedBatch) -> JSONResponse | None:
    s = state.settings
    n = len(batch.records)
    if not state.producer.up:
        return _shed(
            state,
            "broker_down",
            f"broker unavailable ({state.producer.last_error}); nothing was accepted, retry the whole batch",
            "broker_ack",
        )
    if state.inflight_events + n > s.max_inflight_events:
        return _shed(
            state,
            "overloaded",
            f"{state.inflight_events} events await acknowledgement; over the limit of {s.max_inflight_events}; "
            "retry",
            "backpressure",
        )
    state.inflight_events += n
    state.metrics.inflight_events.set(state.inflight_events)
    started = time.perf_counter()
    try:
        with tracer.start_as_current_span("kafka.produce", attributes={"messaging.batch.message_count": n}):
            refused = await state.producer.produce(batch.records, s.produce_timeout_s)
        refuse_records(batch, refused, _refused_by_broker, "record_refused")
        for r in batch.results:
            if r.reason == "record_refused":
                state.metrics.events_rejected.labels(r.type, "record_refused").inc()
    except BrokerUnavailable as exc:
        return _shed(
            state,
            "broker_down",
            f"broker did not acknowledge ({exc}); retry the whole batch: event ids make the retry safe",
            "broker_ack",
        )
    finally:
        state.inflight_events -= n
        state.metrics.inflight_events.set(state.inflight_events)
    state.metrics.produce_seconds.observe(time.perf_counter() - started)
    # One increment per event type, not per event: each is a labelled lookup and a write to the
    # multiprocess metrics file.
    for etype, count in Counter(r.type for r in batch.results if r.status == "accepted").items():
        state.metrics.events_accepted.labels(principal.tenant, etype).inc(count)
    return None


@router.post(
    "/v1/events",
    status_code=202,
    summary="Ingest a batch of trace, feedback, release and label events",
    responses=INGEST_RESPONSES,
    openapi_extra=ingest_openapi_extra(),
)
async def ingest_events(request: Request, state: ApiStateDep) -> JSONResponse:
    hold = BodyHold(state)
    try:
        return await _ingest_events(request, state, hold)
    finally:
        hold.release()


async def _ingest_events(request: Request, state: ApiState, hold: BodyHold) -> JSONResponse:
    with tracer.start_as_current_span(
        "ingest.events", context=extract_context(dict(request.headers))
    ) as span:
        try:
            principal = state.keys.authenticate(request.headers.get("authorization"))
            span.set_attribute("ragmon.tenant", principal.tenant)
            _check_content_type(request)
            raw = await _read_body(
                request, state.settings.max_body_bytes, state.settings.body_timeout_s, hold, principal.tenant
            )
            encoding = request.headers.get("content-encoding")
            paid = pretoken(encoding)
            limited = await _rate_limit(state, principal, paid)
            if limited is not None:
                return limited
            slots = state.thread_slots(principal.tenant)
            data = await off_loop(
                len(raw),
                bool(encoding),
                decompress,
                raw,
                encoding,
                state.settings.max_decompressed_bytes,
                slots=slots,
            )
            prepaid = max(0, prepaid_tokens(len(data)) - paid)
            limited = await _rate_limit(
                state, principal, prepaid, debit=True
            )  # read and inflated: paid even if refused
            if limited is not None:
                return limited
            paid += prepaid
            (plain, events), decode_cpu_s = await off_loop(
                len(data), False, cpu_timed, _decode, state, data, principal.tenant, slots=slots
            )
            refused_labels = authorize_labels(events, principal) if plain is None else {}
        except AuthError as exc:
            return _error(exc.status, {"error": exc.message, "rule": "api_key"}, admission.challenge(exc))
        except IngestError as exc:
            return _error(exc.status, exc.body(), exc.headers)
        limited = await _rate_limit(state, principal, len(events) - paid)
        if limited is not None:
            return limited
        try:
            batch, prepare_cpu_s = await off_loop(
                len(data),
                False,
                cpu_timed,
                _prepare,
                state,
                data,
                plain,
                events,
                principal.tenant,
                current_traceparent(),
                refused_labels,
                slots=slots,
            )
        except IngestError as exc:
            return _error(exc.status, exc.body())
        # the batch's CPU beyond what it paid: debt of the tenant's bucket (this batch goes on)
        await _charge_debt(state, principal, cpu_debt(decode_cpu_s + prepare_cpu_s, max(paid, len(events))))
        refuse_records(batch, oversized(batch.records), _too_big(batch.records), "max_record_bytes")
        _count_rejections(state, batch)
        if not batch.records:
            results = [r.as_dict() for r in batch.results]
            return _error(
                400,
                {
                    "error": "no event in the batch is valid; see results",
                    "accepted": 0,
                    "rejected": len(results),
                    "results": results,
                },
            )
        failed = await _produce(state, principal, batch)
        if failed is not None:
            return failed
        accepted = len(batch.records)
        span.set_attribute("ragmon.events.accepted", accepted)
        if accepted == len(events):
            return JSONResponse({"accepted": accepted}, status_code=202)
        return JSONResponse(
            {
                "accepted": accepted,
                "rejected": len(events) - accepted,
                "results": [r.as_dict() for r in batch.results],
            },
            status_code=207,
        )
