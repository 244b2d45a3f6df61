"""What the code says about topics and dead letters, read from the source with `ast` (nothing imported).

Importing every worker would pull in torch, psycopg and the Phoenix client; the
facts the docs state are all visible in the source.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from service.contracts.events import BODY_MODELS
from service.contracts.topics import Topics
from service.local.discovery import worker_names
from tests.docs.markdown import ROOT

TOPIC_NAMES = ("traces", "feedback", "releases", "labels", "dlq", "scores", "spans")
_SUFFIX = {t: Topics("p").for_event(t).removeprefix("p.") for t in (*BODY_MODELS, "score")}


def _trees(package: Path) -> Iterator[ast.AST]:
    for path in sorted(package.rglob("*.py")):
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


def event_types(package: Path) -> set[str]:
    """The string literals of every `event_types = (...)` in the package (a processor's topics)."""
    found: set[str] = set()
    for tree in _trees(package):
        for node in ast.walk(tree):
            target = (
                node.target
                if isinstance(node, ast.AnnAssign)
                else (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
            )
            value = node.value if isinstance(node, ast.AnnAssign | ast.Assign) else None
            if isinstance(target, ast.Name) and target.id == "event_types" and isinstance(value, ast.Tuple):
                found |= {
                    e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
    return found


def worker_topics() -> dict[str, tuple[set[str], set[str]]]:
    """worker -> (topics it consumes, topics it produces).

    Consumed: its processor's `event_types`, and the spans topic when it reads
    `topics.spans` (the assembler's own loop, the forwarder's subscription).
    Produced: every other topic it names as `topics.<name>`.
    """
    result = {}
    for name in worker_names():
        package = ROOT / "workers" / name
        named = topics_referenced(package)
        consumed = {_SUFFIX[t] for t in event_types(package)} | (named & {"spans"})
        result[name] = consumed, named - {"spans"}
    return result


def api_topics() -> set[str]:
    """Topics the API produces: one per native event type (`Topics.for_event`), plus those it names."""
    return {_SUFFIX[t] for t in BODY_MODELS} | topics_referenced(ROOT / "service" / "api")


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
