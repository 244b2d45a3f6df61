"""The private attributes and signatures of pinned libraries the API leans on still exist, as used.

service/api/kafka_private.py (kafka-python) and service/api/processes.py's
HandoffServer (uvicorn) reach past the public API where tests/bench/bench_private.py
shows it pays (docs/throughput.md, "Private internals"). An upgrade that moves one
fails here, naming the library, its version and the attribute, without a broker;
tests/service/api/test_kafka_private.py and test_api_processes.py check behaviour.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import kafka
import pytest
import uvicorn
from kafka.cluster import ClusterMetadata
from kafka.future import Future
from kafka.producer.record_accumulator import RecordAccumulator
from kafka.producer.sender import Sender
from kafka.record.default_records import DefaultRecordBatchBuilder

KAFKA = f"kafka-python {kafka.__version__}"
UVICORN = f"uvicorn {uvicorn.__version__}"


def _params(func: Any) -> list[str]:
    return list(inspect.signature(func).parameters)


@pytest.mark.parametrize(
    "attribute",
    ["_metadata", "_accumulator", "_sender", "_closed", "_transaction_manager", "config"],
)
def test_kafka_producer_sets_the_private_attributes_kafka_private_reads(attribute: str) -> None:
    source = inspect.getsource(kafka.KafkaProducer.__init__)
    assert f"self.{attribute} =" in source or f"self.{attribute}=" in source, (
        f"{KAFKA}: KafkaProducer.__init__ no longer sets {attribute}; re-check service/api/kafka_private.py"
    )


@pytest.mark.parametrize(
    ("owner", "name", "leading"),
    [
        (RecordAccumulator, "append", ["self", "tp", "timestamp_ms", "key", "value", "headers"]),
        (Sender, "force_close", ["self"]),
        (Sender, "wakeup", ["self"]),
        (Future, "_add_cb_eb", ["self", "cb", "eb"]),
        (ClusterMetadata, "partitions_for_topic", ["self", "topic"]),
        (DefaultRecordBatchBuilder, "estimate_size_in_bytes", ["key", "value", "headers"]),
    ],
)
def test_kafka_python_private_calls_keep_their_signatures(owner: type, name: str, leading: list[str]) -> None:
    where = f"{KAFKA}: {owner.__module__}.{owner.__name__}.{name}"
    assert hasattr(owner, name), f"{where} is gone; re-check service/api/kafka_private.py"
    got = _params(getattr(owner, name))
    assert got[: len(leading)] == leading, (
        f"{where} takes {got}, kafka_private.py calls it as {leading}; re-check service/api/kafka_private.py"
    )


def test_record_accumulator_append_returns_the_four_values_append_records_unpacks() -> None:
    returns = [
        node.value
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(RecordAccumulator.append))))
        if isinstance(node, ast.Return) and node.value is not None
    ]
    # (None, ...) only with abort_on_new_batch=True, which append_records does not pass
    assert returns and all(
        isinstance(r, ast.Tuple) and len(r.elts) == 4 and ast.unparse(r.elts[0]) in ("future", "None")
        for r in returns
    ), (
        f"{KAFKA}: RecordAccumulator.append no longer returns (future, batch_is_full, new_batch, ...); "
        "re-check service/api/kafka_private.append_records"
    )


def test_uvicorn_server_internals_handoff_server_uses() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not called")

    config = uvicorn.Config(app, lifespan="on")
    config.load()
    server = uvicorn.Server(config)
    assert hasattr(server, "server_state"), f"{UVICORN}: Server.server_state is gone; re-check processes.py"
    assert hasattr(config, "http_protocol_class"), (
        f"{UVICORN}: Config.http_protocol_class is gone after load(); re-check service/api/processes.py"
    )
    lifespan = config.lifespan_class(config)
    assert isinstance(getattr(lifespan, "state", None), dict), (
        f"{UVICORN}: the lifespan's state dict is gone; HandoffServer passes it as app_state (processes.py)"
    )
    assert "self.lifespan = " in inspect.getsource(uvicorn.Server), (
        f"{UVICORN}: Server no longer keeps its lifespan as self.lifespan; re-check service/api/processes.py"
    )
    protocol = _params(config.http_protocol_class.__init__)
    assert protocol[:4] == ["self", "config", "server_state", "app_state"], (
        f"{UVICORN}: the HTTP protocol takes {protocol}; HandoffServer._protocol passes "
        "config, server_state, app_state (service/api/processes.py)"
    )
    for name in ("startup", "shutdown"):
        assert _params(getattr(uvicorn.Server, name)) == ["self", "sockets"], (
            f"{UVICORN}: Server.{name} takes {_params(getattr(uvicorn.Server, name))}; HandoffServer "
            "overrides it as (self, sockets) (service/api/processes.py)"
        )
