"""The code's own registries, imported: every worker's `WorkerSpec`, its processor class, the topics.

The worker list is the `WORKER` of every `workers/NAME/__main__.py` that discovery
finds (service/local/discovery.py); a worker's native topics are its processor
class's `event_types`, mapped through `Topics.for_event`. What the classes do
not declare as data (a subscription set in `__init__`, a topic an emitter is
handed) is read from the source by tests/docs/codescan.py.
"""

from __future__ import annotations

import importlib
from functools import cache

from service.contracts.topics import Topics
from service.local.discovery import worker_names
from tests.docs.markdown import ROOT
from workers.runtime.app import WorkerSpec
from workers.runtime.contract import Processor

PREFIX = "p"


def topic_suffix(topic: str) -> str:
    """ "p.traces" -> "traces": the name the docs' tables use after `<prefix>.`."""
    return topic.removeprefix(f"{PREFIX}.")


@cache
def specs() -> dict[str, WorkerSpec]:
    """worker name -> the `WORKER` its `__main__.py` declares."""
    found = {}
    for package in worker_names():
        spec = importlib.import_module(f"workers.{package}.__main__").WORKER
        assert isinstance(spec, WorkerSpec), f"workers/{package}/__main__.py: WORKER is not a WorkerSpec"
        found[spec.name] = spec
    assert found, "no worker found"
    return found


@cache
def processor_class(name: str) -> type[Processor]:
    """The Processor subclass `build()` of worker `name` returns (its return annotation, imported)."""
    spec = specs()[name]
    returned = spec.build.__annotations__["return"]
    returned = returned if isinstance(returned, str) else returned.__name__
    for path in sorted((ROOT / "workers" / name).glob("*.py")):
        if f"class {returned}(Processor)" in path.read_text():
            cls = getattr(importlib.import_module(f"workers.{name}.{path.stem}"), returned)
            assert issubclass(cls, Processor) and cls.name == name, cls
            return cls
    raise AssertionError(f"workers/{name}: build() returns {returned}, found in no module of the package")


def native_topics(name: str) -> set[str]:
    """The topics of the event types worker `name`'s processor class declares (`event_types`)."""
    topics = Topics(PREFIX)
    return {topic_suffix(topics.for_event(t)) for t in processor_class(name).event_types}


def all_topics() -> list[str]:
    return [topic_suffix(t) for t in Topics(PREFIX).all()]
