"""Schema-driven fuzzing of the running API from its own OpenAPI document (schemathesis + hypothesis)."""

from __future__ import annotations

import time

import schemathesis
from api_events import ACME_KEY
from conftest import RunningApi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance, ignored_auth]


def test_no_server_error_but_the_documented_503(api: RunningApi) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    schema.config.update(base_url=api.url)
    statuses = []
    for result in schema.get_all_operations():
        op = result.ok()
        strategy = st.one_of(op.as_strategy(schemathesis.GenerationMode.POSITIVE),
                             op.as_strategy(schemathesis.GenerationMode.NEGATIVE))
        t = time.monotonic()

        @given(case=strategy)
        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case: schemathesis.Case) -> None:
            response = case.call(headers={"Authorization": f"Bearer {ACME_KEY}"})
            statuses.append((op.label, response.status_code))
            case.validate_response(response, checks=CHECKS)

        run()
        print(op.label, time.monotonic() - t)
    from collections import Counter
    print(Counter(statuses))
