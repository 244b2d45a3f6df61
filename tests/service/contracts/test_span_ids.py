"""The trace event id of an OTLP trace: uuid5 of tenant and trace id, written out without uuid objects."""

from __future__ import annotations

import os
import uuid

from service.contracts.spans import TRACE_EVENT_NAMESPACE, trace_event_id


def test_trace_event_id_is_exactly_uuid5_of_tenant_and_trace() -> None:
    names = [("acme", os.urandom(16).hex()) for _ in range(2000)]
    names += [("", ""), ("tenant-ü", "0" * 32), ("a" * 200, "f" * 32)]
    for tenant, trace_hex in names:
        assert trace_event_id(tenant, trace_hex) == str(
            uuid.uuid5(TRACE_EVENT_NAMESPACE, f"{tenant}/{trace_hex}")
        )


def test_trace_event_id_is_a_version_5_uuid() -> None:
    parsed = uuid.UUID(trace_event_id("acme", "ab" * 16))
    assert parsed.version == 5 and parsed.variant == uuid.RFC_4122
