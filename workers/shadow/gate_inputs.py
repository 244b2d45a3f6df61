"""The inputs of `ragmon gate`: the release-gate set and each system's outputs on it (JSON lines).

The golden set is `ragmon golden split`'s release_gate.jsonl (or any `ragmon golden export` file,
read for `item_id`, `tenant`, `gold_ids`, `intent` and `split`). An output line is one system's answer
to one golden item:

    {"item_id": 17, "retrieved_ids": ["d3", "d1", ...],
     "context": [{"id": "d1", "text": "..."}, ...],
     "answer": {"text": "...", "refused": false, "citations": ["d1"]},
     "response_format": {"type": "json", "schema_name": "order"}}      (optional)

`retrieved_ids` (the candidates, in rank order) and `context` (what the generator was given, in
prompt order) may be left out, which leaves that stage's metrics without data; `answer` is required.
Every golden item needs exactly one line in each file and every line a golden item. Errors name the
file, the line, the field and the rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from service.contracts.errors import describe_errors
from service.contracts.jsonlines import json_lines
from service.contracts.ranking import GoldSet, gold_set

GATE_SPLIT = "release_gate"
DocId = Annotated[str, StringConstraints(min_length=1, max_length=512)]


class GateInputError(ValueError):
    """A file the gate cannot use; the message names the file, the line, the field and the rule."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class OutputDocument(_Strict):
    id: DocId
    text: str = ""


class OutputAnswer(_Strict):
    text: str = ""
    refused: bool = False
    citations: list[DocId] = Field(default_factory=list)


class OutputFormat(_Strict):
    type: Literal["text", "json"] = "text"
    schema_name: str | None = None


class OutputLine(_Strict):
    item_id: int | Annotated[str, StringConstraints(min_length=1)]
    retrieved_ids: list[DocId] | None = None
    context: list[OutputDocument] | None = None
    answer: OutputAnswer
    response_format: OutputFormat | None = None


class GoldenLine(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    item_id: int | Annotated[str, StringConstraints(min_length=1)]
    tenant: str = ""
    gold_ids: list[DocId] = Field(default_factory=list)
    intent: str | None = None
    split: str | None = None


@dataclass(frozen=True)
class GoldenQuery:
    item_id: str
    line: int
    tenant: str
    gold: GoldSet
    intent: str


def _validate(model: type[BaseModel], doc: object, where: str) -> BaseModel:
    if not isinstance(doc, dict):
        raise GateInputError(f"{where}: must be a JSON object")
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise GateInputError(f"{where}: {describe_errors('', exc)}") from None


def read_golden(lines: Iterable[str], name: str, allow_any_split: bool = False) -> list[GoldenQuery]:
    queries: list[GoldenQuery] = []
    seen: dict[str, int] = {}
    for number, doc in json_lines(lines, GateInputError, name):
        where = f"{name}: line {number}"
        row = _validate(GoldenLine, doc, where)
        assert isinstance(row, GoldenLine)
        if row.split not in (None, GATE_SPLIT) and not allow_any_split:
            raise GateInputError(
                f"{where}: split: {row.split!r} is not {GATE_SPLIT!r}: a release is gated on the release-gate "
                "set (`ragmon golden split`), never on the set it was tuned on (--allow-any-split overrides)"
            )
        key = str(row.item_id)
        if key in seen:
            raise GateInputError(f"{where}: item_id: {key!r} is already on line {seen[key]}")
        seen[key] = number
        queries.append(GoldenQuery(key, number, row.tenant, gold_set(row.gold_ids), row.intent or "none"))
    if not queries:
        raise GateInputError(f"{name}: no golden items")
    return queries


def read_outputs(lines: Iterable[str], name: str, golden: list[GoldenQuery]) -> dict[str, OutputLine]:
    """item_id -> the system's output; every golden item exactly once."""
    known = {q.item_id for q in golden}
    out: dict[str, OutputLine] = {}
    where_seen: dict[str, int] = {}
    for number, doc in json_lines(lines, GateInputError, name):
        where = f"{name}: line {number}"
        row = _validate(OutputLine, doc, where)
        assert isinstance(row, OutputLine)
        key = str(row.item_id)
        if key not in known:
            raise GateInputError(f"{where}: item_id: {key!r} is not in the golden set")
        if key in out:
            raise GateInputError(f"{where}: item_id: {key!r} is already on line {where_seen[key]}")
        out[key], where_seen[key] = row, number
    missing = [q for q in golden if q.item_id not in out]
    if missing:
        first = ", ".join(f"{q.item_id!r} (golden line {q.line})" for q in missing[:3])
        raise GateInputError(
            f"{name}: item_id: no output for {len(missing)} golden item(s), e.g. {first}: every item of the "
            "set needs one line per system, or the comparison would not be paired"
        )
    return out
