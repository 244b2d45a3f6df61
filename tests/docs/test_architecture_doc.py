"""docs/architecture.md against the code: its topics, workers and dead-letter reasons tables.

The tables are parsed; the code side comes from the registries, imported
(`Topics`, `DeadLetterReason`, every `workers/NAME/__main__.py`'s `WORKER` and
its processor class's `event_types`, tests/docs/registry.py), and, for what no
registry holds as data, an `ast` scan of each worker package
(tests/docs/codescan.py). Adding a topic, a worker or a reason
without its row, or a row for something the code does not have, fails here.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from service.contracts.topics import Topics
from service.local.discovery import worker_names
from tests.docs import codescan, registry
from tests.docs.markdown import ROOT, code, section, table, words
from workers.runtime.app import WorkerContext
from workers.runtime.contract import Processor
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
def test_a_workers_reads_and_writes_columns_are_its_topics(worker: str) -> None:
    consumed, produced = codescan.worker_topics()[worker]
    row = _worker_rows()[worker]
    assert words(row["reads"], TOPICS) == consumed
    assert words(row["writes"], TOPICS) == produced


def test_the_dead_letter_reasons_table_is_the_closed_set() -> None:
    rows = table(section(DOC, "Dead-letter reasons"), "reason")
    assert [code(r["reason"]) for r in rows] == [r.value for r in DeadLetterReason]


def test_no_dead_letter_reason_is_a_literal_outside_the_set() -> None:
    assert codescan.literal_reasons() <= {r.value for r in DeadLetterReason}


def _emitted_by() -> dict[str, str]:
    return {code(r["reason"]): r["emitted by"] for r in table(section(DOC, "Dead-letter reasons"), "reason")}


@pytest.mark.parametrize("reason", list(DeadLetterReason), ids=str)
def test_a_reasons_emitters_are_the_workers_that_emit_it(reason: DeadLetterReason) -> None:
    emitters = {w for w in WORKERS if reason.name in codescan.reasons_emitted(ROOT / "workers" / w)}
    assert words(_emitted_by()[reason.value], WORKERS) == emitters


@pytest.mark.parametrize("reason", list(DeadLetterReason), ids=str)
def test_a_reasons_runtime_modules_are_the_ones_that_name_it(reason: DeadLetterReason) -> None:
    cell = _emitted_by()[reason.value]
    runtime = re.search(r"\bruntime \(([^()]*)\)", cell)
    listed = set(re.findall(r"`([a-z_]+\.py)`", runtime.group(1))) if runtime else set()
    assert listed == codescan.runtime_modules_naming(reason.name)


# Who writes PostgreSQL, as the doc names them, and the code that is each of them.
PG_WRITERS = {"review worker": "workers/review", "review page": "service/review", "API": "service/api"}
_WRITE = re.compile(r"\b(?:INSERT INTO|UPDATE|DELETE FROM)\s+([a-z_]+)\b")


def _tables_written(package: str) -> set[str]:
    text = "".join(p.read_text() for p in sorted((ROOT / package).rglob("*.py")))
    return set(_WRITE.findall(text)) - {"SET", "OF"}


def test_the_postgresql_tables_are_the_migrations_and_their_writers() -> None:
    created = {
        name
        for path in sorted((ROOT / "service" / "contracts" / "reviewdb" / "migrations").glob("*.sql"))
        for name in re.findall(r"^CREATE TABLE ([a-z_]+)", path.read_text(), re.M)
    }
    assert len(created) >= 5, "the migrations were read"
    rows = {code(r["table"]): r["written by"] for r in table(section(DOC, "Stores"), "table")}
    assert set(rows) == created
    for writer, package in PG_WRITERS.items():
        written = _tables_written(package) & created
        assert written, f"{package} writes no table: the scan is broken"
        listed = {t for t, cell in rows.items() if writer in re.sub(r"\([^()]*\)", "", cell)}
        assert listed == written, f"tables {package} ({writer}) writes"


# Redis key families: `ragmon:<family>` in a package's source, and where the doc must name them.
_FAMILY = re.compile(r"\bragmon:([a-z][a-z_-]*)")


def _families(package: str) -> set[str]:
    return {f for p in sorted((ROOT / package).rglob("*.py")) for f in _FAMILY.findall(p.read_text())}


@pytest.mark.parametrize("worker", sorted(WORKERS))
def test_a_workers_redis_keys_are_in_its_row(worker: str) -> None:
    row = _worker_rows()[worker]
    assert set(_FAMILY.findall(" ".join(row.values()))) == _families(f"workers/{worker}")


def test_the_runtimes_and_the_apis_redis_keys_are_named() -> None:
    runtime, api = _families("workers/runtime"), _families("service/api") | _families("service/contracts")
    assert runtime and api, "the scan found no key"
    prose = "\n".join(line for line in section(DOC, "Workers").splitlines() if not line.startswith("|"))
    assert runtime <= set(_FAMILY.findall(prose)), "the runtime's keys, in the prose under the table"
    assert api <= set(_FAMILY.findall(section(DOC, "Stores") + section(DOC, "Workers")))


def test_the_layering_block_names_every_package() -> None:
    block = section(DOC, "Layering").split("```")[1]
    listed = set(re.findall(r"^([A-Za-z_/.]+)\s", block, re.M))
    packages = {
        str(p.parent.relative_to(ROOT))
        for top in ("service", "dashboards")
        for p in (ROOT / top).glob("*/__init__.py")
        if p.parent.name != "boards"
    }
    assert len(packages) >= 7, "the packages were found"
    shared = {  # workers/ packages that are not workers (no __main__.py): shared by several of them
        str(p.parent.relative_to(ROOT))
        for p in (ROOT / "workers").glob("*/__init__.py")
        if not (p.parent / "__main__.py").exists()
    }
    assert "workers/runtime" in shared
    assert packages | shared | {"service/cli.py", "dashboards", "workers/NAME"} == listed


def test_the_contracts_members_are_the_processors() -> None:
    rows = table(section(DOC, "Worker contract"), "member")
    members = {m.group(1) for r in rows if (m := re.match(r"`(\w+)", r["member"]))}
    public = {n for n in (*vars(Processor), *Processor.__annotations__) if not n.startswith("_")}
    assert len(public) >= 8, "the contract was read"
    assert members == public


def test_how_to_add_a_worker_names_every_field_of_the_context() -> None:
    step = section(DOC, "How to add a worker").split("\n4. ", 1)[1]
    context = step.split("`WorkerContext`:", 1)[1].split("`ragmon worker NAME`", 1)[0]
    named = set(re.findall(r"`(\w+)`", re.sub(r"\([^()]*\)", "", context)))  # notes in parentheses
    assert named == {f.name for f in dataclasses.fields(WorkerContext)}
