"""docs/architecture.md against the code: its topics, workers and dead-letter reasons tables.

The tables are parsed; the code side comes from the registries, imported
(`Topics`, `DeadLetterReason`, every `workers/NAME/__main__.py`'s `WORKER` and
its processor class's `event_types`, tests/docs/registry.py), and, for what no
registry holds as data, an `ast` scan of each worker package
(tests/docs/codescan.py). Adding a topic, a worker or a reason
without its row, or a row for something the code does not have, fails here.
"""

from __future__ import annotations

import pytest

from service.contracts.topics import Topics
from service.local.discovery import worker_names
from tests.docs import codescan, registry
from tests.docs.markdown import ROOT, code, section, table, words
from workers.runtime.reasons import DeadLetterReason

DOC = (ROOT / "docs" / "architecture.md").read_text()
WORKERS = set(registry.specs())
TOPICS = set(codescan.TOPIC_NAMES)


def _topic_rows() -> dict[str, dict[str, str]]:
    rows = table(section(DOC, "Topics"), "topic")
    return {code(r["topic"]).removeprefix("<prefix>."): r for r in rows}


def _worker_rows() -> dict[str, dict[str, str]]:
    return {code(r["worker"]): r for r in table(section(DOC, "Workers"), "worker")}


def test_the_topics_table_lists_every_topic_and_no_other() -> None:
    assert len(Topics().all()) >= 7, "Topics.all() was read"
    assert {f"ragmon.{t}" for t in _topic_rows()} == set(Topics().all())


def test_the_workers_table_lists_every_worker_and_no_other() -> None:
    assert len(WORKERS) >= 9, "every WORKER was imported"
    assert set(worker_names()) == WORKERS, "a WorkerSpec's name is not its package's name"
    assert set(_worker_rows()) == WORKERS


def test_every_worker_consumes_something() -> None:
    """A worker that reads nothing means the registry or the scan lost its topics."""
    assert all(consumed for consumed, _ in codescan.worker_topics().values())


@pytest.mark.parametrize("topic", codescan.TOPIC_NAMES)
def test_a_topics_consumers_and_producers_are_the_workers_that_use_it(topic: str) -> None:
    row = _topic_rows()[topic]
    usage = codescan.worker_topics()
    assert words(row["consumed by"], WORKERS) == {
        w for w, (consumed, _) in usage.items() if topic in consumed
    }
    assert words(row["produced by"], WORKERS) == {
        w for w, (_, produced) in usage.items() if topic in produced
    }
    assert bool(words(row["produced by"], {"API"})) == (topic in codescan.api_topics())


@pytest.mark.parametrize("worker", sorted(WORKERS))
def test_a_workers_reads_column_is_what_it_consumes(worker: str) -> None:
    consumed, produced = codescan.worker_topics()[worker]
    row = _worker_rows()[worker]
    assert words(row["reads"], TOPICS) == consumed
    assert produced <= words(row["writes"], TOPICS)


def test_the_dead_letter_reasons_table_is_the_closed_set() -> None:
    rows = table(section(DOC, "Dead-letter reasons"), "reason")
    assert [code(r["reason"]) for r in rows] == [r.value for r in DeadLetterReason]


def test_no_dead_letter_reason_is_a_literal_outside_the_set() -> None:
    assert codescan.literal_reasons() <= {r.value for r in DeadLetterReason}


@pytest.mark.parametrize("worker", sorted(WORKERS))
def test_a_worker_that_names_a_reason_is_listed_as_emitting_it(worker: str) -> None:
    emitted_by = {
        code(r["reason"]): words(r["emitted by"], WORKERS)
        for r in table(section(DOC, "Dead-letter reasons"), "reason")
    }
    for member in codescan.reason_members_used(ROOT / "workers" / worker):
        reason = DeadLetterReason[member].value
        assert worker in emitted_by[reason], f"{worker} emits {reason} but the doc does not say so"
