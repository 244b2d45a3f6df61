"""One poison record never stalls a worker: bounded JSON parsing, and a decode that cannot recurse away."""

from __future__ import annotations

import orjson
import pytest

from tests.support.kafka import stored, trace_body
from tests.support.records import FakeRecord
from workers.metrics.views import VIEWS as METRICS_VIEWS
from workers.runtime import boundedjson
from workers.runtime.decode import RecordDecoder, Undecodable
from workers.runtime.reasons import DeadLetterReason


def nested_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def nested_array(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "text",
    [
        nested_object(100_000),
        nested_array(100_000),
        nested_array(2_000),
        nested_object(boundedjson.MAX_DEPTH + 1),
    ],
)
def test_deep_json_is_refused_as_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="nested deeper than"):
        boundedjson.loads(text)


def test_the_fallback_parser_is_bounded_too() -> None:
    # NaN sends the parse to `json`, which would raise RecursionError on this depth
    with pytest.raises(boundedjson.JsonTooDeep):
        boundedjson.loads("[NaN, " + nested_array(100_000) + "]")


def test_ordinary_json_parses_as_before() -> None:
    assert boundedjson.loads(nested_object(boundedjson.MAX_DEPTH)) is not None
    assert boundedjson.loads('{"locale": "en", "tags": ["a", 1]}') == {"locale": "en", "tags": ["a", 1]}
    assert boundedjson.loads("[NaN]")[0] != 0  # what orjson refuses and json takes still parses
    with pytest.raises(ValueError):
        boundedjson.loads("{not json")


@pytest.mark.parametrize("views", [None, METRICS_VIEWS], ids=["contract", "view"])
def test_a_record_nested_past_the_recursion_limit_is_a_dead_letter(views: object) -> None:
    body = trace_body(1)
    body["retrieval"] = {"documents": [{"id": "d", "text": "x", "metadata": {"k": "v"}}]}
    value = orjson.dumps(stored("trace", body)).replace(b'{"k":"v"}', nested_object(50_000).encode())
    out = RecordDecoder(views).decode(FakeRecord(value), "trace")  # type: ignore[arg-type]
    assert isinstance(out, Undecodable)
    assert out.reason in (DeadLetterReason.UNDECODABLE, DeadLetterReason.INVALID_BODY)
    assert "nested" in out.detail or "depth" in out.detail
    assert out.value == value  # dead-lettered unchanged


def test_postgresql_refusing_a_value_is_poison_and_a_lost_connection_an_outage(review_db_url: str) -> None:
    """A NUL in a text parameter (an index version, a document id the contract lets through) is refused by
    PostgreSQL however often it is retried: isolated and dead-lettered, never a batch retried for ever."""
    import psycopg

    from service.contracts import reviewdb
    from workers.runtime.poison import is_poison

    with reviewdb.connect(review_db_url) as conn, pytest.raises(psycopg.DataError) as text_nul:
        conn.execute("SELECT %s::text", ("v\x00",))
    with reviewdb.connect(review_db_url) as conn, pytest.raises(psycopg.DataError) as jsonb_nul:
        conn.execute("SELECT %s::jsonb", ('{"q": "\\u0000"}',))
    assert is_poison(text_nul.value) and is_poison(jsonb_nul.value)
    assert not is_poison(psycopg.OperationalError("connection lost"))
