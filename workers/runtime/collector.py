"""Delivery of OTLP/HTTP export requests to a collector: the span forwarder's and the evaluation exporter's.

`CollectorSettings` are the settings such a worker has (endpoint, headers,
timeout, request size, gzip). `Collector.chunks` cuts a batch's items into
requests within the size limits; `Collector.deliver` POSTs one chunk of items as one protobuf request (gzip
when asked) and says what came of it to an `Outcome`:
- an unreachable collector, a timeout, 401/403/404/408, 429 or 5xx raises
  `CollectorUnavailable` (the runtime retries the batch with backoff; it is
  never dead-lettered), after `on_unavailable` counted the attempt;
- 413 with more than one item: `too_large`, then each half is delivered;
- another status of 300 or more: `refused` (for good; not sent again);
- 2xx: `accepted`, with the items the answer's `partial_success` says the
  collector dropped (0 when the answer is not protobuf or does not parse).
"""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import httpx
from google.protobuf.message import DecodeError, Message
from prometheus_client import CollectorRegistry, Counter, Histogram
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from service.contracts.config import ConfigError
from workers.runtime.headers import header_map

RETRYABLE = frozenset({401, 403, 404, 408, 429})
T = TypeVar("T")

# One OTLP export to a collector: milliseconds, up to its timeout.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# From an item's own time (the API accepting a span, a score) to the collector acknowledging it.
DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)

NameAndHelp = tuple[str, str]


def export_metrics(
    registry: CollectorRegistry,
    *,
    items: NameAndHelp,
    requests: NameAndHelp,
    request_seconds: NameAndHelp,
    delay_seconds: NameAndHelp,
) -> tuple[Counter, Counter, Histogram, Histogram]:
    """The four metrics every worker that delivers through `Collector` has, each under its own full name.

    items (by outcome), requests (by outcome), the duration of acknowledged requests and the delay to
    the acknowledgement; each argument is (metric name written out in full, help text).
    """
    return (
        Counter(*items, ["outcome"], registry=registry),
        Counter(*requests, ["outcome"], registry=registry),
        Histogram(*request_seconds, buckets=REQUEST_BUCKETS, registry=registry),
        Histogram(*delay_seconds, buckets=DELAY_BUCKETS, registry=registry),
    )


class CollectorSettings(BaseSettings):
    """The settings every worker that sends to a collector has, under its own env prefix.

    A subclass sets `model_config` (its env_prefix), redescribes `endpoint`
    and names itself and an example URL for the error at start-up.
    """

    worker: ClassVar[str] = "this worker"
    example_endpoint: ClassVar[str] = "http://127.0.0.1:4318/v1/traces"

    endpoint: str = Field("", description="OTLP/HTTP URL; empty = off")
    headers: SecretStr = Field(
        SecretStr(""),
        description="'k=v,k2=v2' like OTEL_EXPORTER_OTLP_HEADERS "
        "(values URL-encoded), e.g. Authorization=Bearer%20<key>",
    )
    timeout_s: float = Field(10.0, gt=0, le=300)
    max_bytes_per_request: int = Field(4 * 1024 * 1024, ge=1024, description="before compression")
    gzip: bool = True

    def env(self, field: str) -> str:
        return f"{self.model_config.get('env_prefix', '')}{field}".upper()

    def check_startup(self) -> None:
        if not self.endpoint:
            raise ConfigError(
                f"{self.worker} needs {self.env('endpoint')} (e.g. {self.example_endpoint}); "
                "without it, do not start this worker (ragmon up skips it)"
            )
        self.header_map()  # fail fast on a malformed header list

    def header_map(self) -> dict[str, str]:
        return header_map(self.headers.get_secret_value(), self.env("headers"))


class CollectorUnavailable(Exception):
    """The collector cannot take the request now: the batch is retried."""


class Outcome(Protocol[T]):
    """What a worker does with each answer `Collector.deliver` gets (count it now, or keep it for later)."""

    def too_large(self) -> None: ...

    def refused(self, chunk: list[T], code: int, text: str) -> None: ...

    def accepted(self, chunk: list[T], rejected: int, seconds: float) -> None: ...


class Collector(Generic[T]):
    """One collector endpoint: `body_of` turns a chunk of items into the request's serialised protobuf."""

    def __init__(
        self,
        settings: CollectorSettings,
        http: httpx.Client | None,
        *,
        body_of: Callable[[list[T]], bytes],
        response: type[Message],
        rejected_of: Callable[[Any], int],
        on_unavailable: Callable[[], None],
        log: logging.Logger,
    ) -> None:
        """`http`: the client to post with (None: one of its own, with the settings' timeout)."""
        self._http = http or httpx.Client(timeout=settings.timeout_s)
        self._endpoint = settings.endpoint
        self._headers = {**settings.header_map(), "Content-Type": "application/x-protobuf"}
        if settings.gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._compress = settings.gzip
        self._max_bytes = settings.max_bytes_per_request
        self._body_of = body_of
        self._response = response
        self._rejected_of = rejected_of
        self._on_unavailable = on_unavailable
        self._log = log

    def close(self) -> None:
        self._http.close()

    def chunks(
        self, items: Iterable[T], max_count: int, weigh: Callable[[T], tuple[int, int]]
    ) -> Iterator[list[T]]:
        """`items` in order, in chunks of at most `max_count` and `max_bytes_per_request` by what `weigh`
        says of each item (its count, its bytes); an item over a limit alone is a chunk of its own."""
        chunk: list[T] = []
        count = size = 0
        for item in items:
            n, b = weigh(item)
            if chunk and (count + n > max_count or size + b > self._max_bytes):
                yield chunk
                chunk, count, size = [], 0, 0
            chunk.append(item)
            count, size = count + n, size + b
        if chunk:
            yield chunk

    def deliver(self, chunk: list[T], outcome: Outcome[T]) -> None:
        body = self._body_of(chunk)
        started = time.perf_counter()
        try:
            answer = self._http.post(
                self._endpoint,
                headers=self._headers,
                content=gzip.compress(body, 1) if self._compress else body,
            )
        except httpx.TransportError as exc:
            self._on_unavailable()  # per attempt: the alerts read these
            raise CollectorUnavailable(f"{self._endpoint}: {type(exc).__name__}: {exc}") from exc
        code = answer.status_code
        if code == 413 and len(chunk) > 1:
            outcome.too_large()
            half = len(chunk) // 2
            self.deliver(chunk[:half], outcome)
            self.deliver(chunk[half:], outcome)
            return
        if code in RETRYABLE or code >= 500:
            self._on_unavailable()
            raise CollectorUnavailable(f"{self._endpoint} answered {code}: {answer.text[:300]}")
        if code >= 300:
            outcome.refused(chunk, code, answer.text[:300])
            return
        outcome.accepted(chunk, self._rejected(answer), time.perf_counter() - started)

    def _rejected(self, answer: httpx.Response) -> int:
        if not answer.content or "protobuf" not in answer.headers.get("content-type", ""):
            return 0
        try:
            return self._rejected_of(self._response.FromString(answer.content))
        except DecodeError:
            name = self._response.DESCRIPTOR.name
            self._log.warning("the collector's answer is not an %s; taken as full success", name)
            return 0
