"""What the code says about topics and dead letters that no registry holds as data, read with `ast`.

The worker list, the topic list and each processor's `event_types` are imported
(tests/docs/registry.py). What is only visible in the source is read here: a
topic a worker is handed as `<...>.topics.<name>` (the spans topic its
subscription reads, a topic its emitter writes), the topics the API names, and
the dead-letter reasons each package names.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from service.contracts.events import BODY_MODELS
from service.contracts.topics import Topics
from tests.docs import registry
from tests.docs.markdown import ROOT

TOPIC_NAMES = tuple(registry.all_topics())


def _trees(package: Path) -> Iterator[ast.AST]:
    for path in [package] if package.is_file() else sorted(package.rglob("*.py")):
        yield ast.parse(path.read_text(), str(path))


def _is_topics(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "topics") or (
        isinstance(node, ast.Attribute) and node.attr == "topics"
    )


def topics_referenced(package: Path) -> set[str]:
    """Topic names read as `<...>.topics.<name>` anywhere in the package."""
    return {
        node.attr
        for tree in _trees(package)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in TOPIC_NAMES and _is_topics(node.value)
    }


def worker_topics() -> dict[str, tuple[set[str], set[str]]]:
    """worker -> (topics it consumes, topics it produces).

    Consumed: the topics of its processor class's `event_types` (imported), and
    the spans, logs and probes topics when it names `topics.spans` / `topics.logs` /
    `topics.probes` (the assembler's, the forwarder's and the probes worker's subscriptions,
    built from them in `__init__`).
    Produced: every other topic it names as `topics.<name>`.
    """
    result = {}
    subscribed = {"spans", "logs", "probes"}
    for name in registry.specs():
        named = topics_referenced(ROOT / "workers" / name)
        result[name] = registry.native_topics(name) | (named & subscribed), named - subscribed
    return result


def api_topics() -> set[str]:
    """Topics the API produces: one per native event type (`Topics.for_event`), plus those it names."""
    native = {registry.topic_suffix(Topics(registry.PREFIX).for_event(t)) for t in BODY_MODELS}
    return native | topics_referenced(ROOT / "service" / "api")


def reason_members_used(package: Path) -> set[str]:
    """Members of DeadLetterReason the package names (`DeadLetterReason.X`)."""
    return {
        node.attr
        for tree in _trees(package)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "DeadLetterReason"
    }


def literal_reasons() -> set[str]:
    """String literals used as a dead-letter reason: `dlq_headers(source, headers, "<reason>", ...)`
    or `<...>.dead_letters.labels(..., "<reason>")`, anywhere in workers/ or service/."""
    found: set[str] = set()
    for top in ("workers", "service"):
        for tree in _trees(ROOT / top):
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                fname = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if fname == "dlq_headers" and len(node.args) > 2:
                    args = [node.args[2]]
                elif (
                    fname == "labels"
                    and isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Attribute)
                    and func.value.attr == "dead_letters"
                ):
                    args = list(node.args)
                else:
                    continue
                found |= {a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return found


def _calls(package: Path, name: str) -> bool:
    return any(
        isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == name)
            or (isinstance(node.func, ast.Attribute) and node.func.attr == name)
        )
        for tree in _trees(package)
        for node in ast.walk(tree)
    )


def reasons_emitted(package: Path) -> set[str]:
    """The DeadLetterReason members a worker package emits: those it names, and the poison reasons
    (those workers/runtime/poison.py names) when it dead-letters through `poison_reason(exc)`."""
    named = reason_members_used(package)
    if _calls(package, "poison_reason"):
        named |= reason_members_used(ROOT / "workers" / "runtime" / "poison.py")
    return named


def runtime_modules_naming(member: str) -> set[str]:
    """The file names of workers/runtime/ that name `DeadLetterReason.<member>`."""
    runtime = ROOT / "workers" / "runtime"
    return {p.name for p in sorted(runtime.glob("*.py")) if member in reason_members_used(p)}
