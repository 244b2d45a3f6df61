"""The contract written once, held together: the pydantic models (events.py), the workers' msgspec
views (views.py and workers/*/views.py) and the API's fast structs (fast.py) agree.

Structure: for every model, its fast struct has the same fields, and every view the fields it
names (all of them where it forbids unknown fields); a field allows the same literal values, the
same lengths and bounds, the same pattern (the fast structs leave the patterns to rules_hold) and
the same default on all three.

Behaviour: a generated valid event is accepted by all three, and an event breaking one rule is
refused by the model, the fast check and every view that reads the field holding it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from uuid import UUID

import annotated_types as at
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, StringConstraints, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from service.contracts import BODY_MODELS, StoredEvent
from service.contracts import events as E
from service.contracts import fast as F
from service.contracts import views as V
from service.contracts import vocabulary as L
from tests.service.contracts.test_views import WORKER_VIEWS
from workers.exclusion.views import ContextDocument

# -- shapes: one description of a field's type and rules, from either side -------------------------

Shape = tuple[Any, ...]
NESTED = "nested"  # a nested model/struct: compared field by field on its own


def _none_if(value: Any, *ignored: Any) -> Any:
    return None if value in ignored else value


def _normal_pattern(pattern: str | None) -> str | None:
    # views.py matches with Python's re through whole_pattern (`\Z`); pydantic's form ends in `$`.
    return None if pattern is None else pattern.removesuffix(r"\Z").removesuffix("$") + "$"


def _str(min_length: Any, max_length: Any, pattern: str | None) -> Shape:
    return ("str", min_length or 0, max_length, _normal_pattern(pattern))


def _num(kind: str, gt: Any, ge: Any, lt: Any, le: Any) -> Shape:
    # Finite floats: msgspec bounds them by the largest float, pydantic by allow_inf_nan=False (not
    # a bound); the fast structs' int64 bound is stricter than the models by design (fast.py).
    ge = _none_if(ge, -L.MAX_FINITE_FLOAT, L.MIN_FAST_INT)
    le = _none_if(le, L.MAX_FINITE_FLOAT, L.MAX_FAST_INT)
    return (kind, *(None if b is None else float(b) for b in (gt, ge, lt, le)))


def _union(members: list[Shape]) -> Shape:
    flat: set[Shape] = set()
    for m in members:
        flat |= set(m[1]) if m[0] == "union" else {m}
    return next(iter(flat)) if len(flat) == 1 else ("union", frozenset(flat))


def _metadata_shape(schema: dict[str, Any]) -> Shape:
    """The shape of events.Metadata, from the JSON Schema that carries its rules (its validator is
    a function: the schema is what the contract publishes)."""

    def value(s: dict[str, Any]) -> Shape:
        if "anyOf" in s:
            return _union([value(m) for m in s["anyOf"]])
        kind = s["type"]
        if kind == "string":
            return _str(s.get("minLength"), s.get("maxLength"), None)
        if kind == "number":
            return _union([_num("int", None, None, None, None), _num("float", None, None, None, None)])
        if kind == "array":
            return ("list", s.get("minItems", 0), s.get("maxItems"), value(s["items"]))
        return {"boolean": ("bool",), "null": ("null",)}[kind]

    names = schema["propertyNames"]
    key = _str(names.get("minLength"), names.get("maxLength"), None)
    return ("dict", 0, schema["maxProperties"], key, value(schema["additionalProperties"]))


def pydantic_shape(annotation: Any, metadata: list[Any] = (), patterns: bool = True) -> Shape:  # type: ignore[assignment]
    """The shape of a pydantic field: its annotation with its constraints (Annotated metadata,
    StringConstraints, annotated_types bounds and lengths)."""
    metadata = list(metadata)
    while get_origin(annotation) is Annotated:
        annotation, *extra = get_args(annotation)
        metadata += extra
    c: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, FieldInfo):
            metadata += m.metadata
        elif isinstance(m, StringConstraints):
            c.update(
                {
                    k: getattr(m, k)
                    for k in ("min_length", "max_length", "pattern")
                    if getattr(m, k) is not None
                }
            )
        elif isinstance(m, at.MinLen):
            c["min_length"] = m.min_length
        elif isinstance(m, at.MaxLen):
            c["max_length"] = m.max_length
        elif isinstance(m, at.Gt | at.Ge | at.Lt | at.Le):
            c.update({k: getattr(m, k) for k in ("gt", "ge", "lt", "le") if hasattr(m, k)})
        elif type(m).__name__ == "WithJsonSchema":
            return _metadata_shape(m.json_schema)
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return _union([pydantic_shape(a, patterns=patterns) for a in get_args(annotation)])
    if origin is Literal:
        return ("literal", frozenset(get_args(annotation)))
    if origin is list:
        (item,) = get_args(annotation)
        return ("list", c.get("min_length", 0), c.get("max_length"), pydantic_shape(item, patterns=patterns))
    if origin is dict:
        key, value = get_args(annotation)
        return (
            "dict",
            c.get("min_length", 0),
            c.get("max_length"),
            pydantic_shape(key, patterns=patterns),
            pydantic_shape(value, patterns=patterns),
        )
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return (NESTED,)
    if annotation is str:
        return _str(c.get("min_length"), c.get("max_length"), c.get("pattern") if patterns else None)
    if annotation is bool:
        return ("bool",)
    if annotation in (int, float):
        return _num(annotation.__name__, c.get("gt"), c.get("ge"), c.get("lt"), c.get("le"))
    if annotation is type(None):
        return ("null",)
    if annotation is datetime:
        return ("datetime",)
    if annotation is Any:
        return ("any",)
    if annotation is UUID:
        return ("uuid",)
    raise AssertionError(f"no shape for {annotation!r}")


def msgspec_shape(t: msgspec.inspect.Type, patterns: bool = True) -> Shape:
    """The shape of a msgspec field type (msgspec.inspect)."""
    mi = msgspec.inspect
    if isinstance(t, mi.UnionType):
        return _union([msgspec_shape(m, patterns) for m in t.types])
    if isinstance(t, mi.LiteralType):
        return ("literal", frozenset(t.values))
    if isinstance(t, mi.ListType):
        return ("list", t.min_length or 0, t.max_length, msgspec_shape(t.item_type, patterns))
    if isinstance(t, mi.DictType):
        return (
            "dict",
            t.min_length or 0,
            t.max_length,
            msgspec_shape(t.key_type, patterns),
            msgspec_shape(t.value_type, patterns),
        )
    if isinstance(t, mi.StructType):
        return (NESTED,)
    if isinstance(t, mi.StrType):
        return _str(t.min_length, t.max_length, t.pattern if patterns else None)
    if isinstance(t, mi.BoolType):
        return ("bool",)
    if isinstance(t, mi.IntType | mi.FloatType):
        return _num("int" if isinstance(t, mi.IntType) else "float", t.gt, t.ge, t.lt, t.le)
    if isinstance(t, mi.NoneType):
        return ("null",)
    if isinstance(t, mi.AnyType):
        return ("any",)
    if isinstance(t, mi.DateTimeType):
        return ("datetime",)
    if isinstance(t, mi.UUIDType):
        return ("uuid",)
    raise AssertionError(f"no shape for {t!r}")


def _pydantic_default(info: FieldInfo) -> Any:
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg]
    return None if info.default is PydanticUndefined else info.default


def _msgspec_default(field: msgspec.inspect.Field) -> Any:
    if field.default_factory is not msgspec.NODEFAULT:
        made = field.default_factory()
        return msgspec.to_builtins(made) if isinstance(made, msgspec.Struct) else made
    return None if field.default is msgspec.NODEFAULT else field.default


def _normal_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    return value


def _struct_fields(struct: type[msgspec.Struct]) -> dict[str, msgspec.inspect.Field]:
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    return {f.name: f for f in info.fields}


def _nested_class(t: msgspec.inspect.Type) -> type[msgspec.Struct] | None:
    if isinstance(t, msgspec.inspect.StructType):
        return t.cls
    if isinstance(t, msgspec.inspect.UnionType | msgspec.inspect.ListType):
        inner = t.types if isinstance(t, msgspec.inspect.UnionType) else (t.item_type,)
        found = [c for c in (_nested_class(m) for m in inner) if c is not None]
        return found[0] if found else None
    return None


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for a in get_args(annotation):
        found = _nested_model(a)
        if found is not None:
            return found
    return None


def disagreements(
    model: type[BaseModel], struct: type[msgspec.Struct], *, complete: bool, patterns: bool, where: str = ""
) -> Iterator[str]:
    """Where `struct` (and the structs nested in it) disagrees with `model`: a field it names that
    the model lacks, a field it lacks (when `complete`), a field's shape, requiredness or default."""
    where = where or f"{struct.__name__} vs {model.__name__}"
    fields = _struct_fields(struct)
    forbids = msgspec.inspect.type_info(struct).forbid_unknown_fields  # type: ignore[attr-defined]
    for name in set(fields) - set(model.model_fields):
        yield f"{where}: field {name!r} is not in the model"
    if complete or forbids:
        for name in set(model.model_fields) - set(fields):
            yield f"{where}: lacks the model's field {name!r}"
    for name, field in fields.items():
        info = model.model_fields.get(name)
        if info is None:
            continue
        ours = pydantic_shape(info.annotation, info.metadata, patterns)
        theirs = msgspec_shape(field.type, patterns)
        if ours != theirs:
            yield f"{where}.{name}: model {ours} != struct {theirs}"
        if info.is_required() != field.required:
            yield f"{where}.{name}: required {info.is_required()} in the model, {field.required} in the struct"
        inner_model, inner_struct = _nested_model(info.annotation), _nested_class(field.type)
        if ours[0] == NESTED:  # a nested object's defaults are its fields' (compared below)
            pass
        elif not field.required and _normal_default(_pydantic_default(info)) != _msgspec_default(field):
            yield f"{where}.{name}: default {_pydantic_default(info)!r} != {_msgspec_default(field)!r}"
        if inner_model is not None and inner_struct is not None:
            yield from disagreements(
                inner_model, inner_struct, complete=complete, patterns=patterns, where=f"{where}.{name}"
            )


VIEW_PAIRS = [
    pytest.param(BODY_MODELS[etype], view, id=f"{worker}-{etype}")
    for worker, views in WORKER_VIEWS.items()
    for etype, view in views.items()
] + [
    pytest.param(model, view, id=view.__name__)
    for model, view in [
        (E.Predicate, V.Predicate),
        (E.Filters, V.Filters),
        (E.Candidate, V.Candidate),
        (E.ExclusionSample, V.ExclusionSample),
        (E.Document, V.DocumentMetadata),
        (E.Document, ContextDocument),
        (E.Query, V.QueryEmbedding),
        (E.Answer, V.AnswerOutcome),
        (E.Usage, V.Usage),
        (StoredEvent, V.Record[dict[str, Any]]),
    ]
]


@pytest.mark.parametrize("etype", sorted(BODY_MODELS))
def test_each_fast_struct_holds_its_model_field_for_field(etype: str) -> None:
    found = list(disagreements(BODY_MODELS[etype], F.BODIES[etype], complete=True, patterns=False))
    assert found == []


@pytest.mark.parametrize(("model", "view"), VIEW_PAIRS)
def test_each_view_holds_the_fields_it_names_as_its_model_does(
    model: type[BaseModel], view: type[Any]
) -> None:
    assert list(disagreements(model, view, complete=False, patterns=True)) == []


def test_the_fast_structs_and_the_models_name_no_class_alike() -> None:
    fast_names = {
        name for name, obj in vars(F).items() if isinstance(obj, type) and obj.__module__ == F.__name__
    }
    model_names = {
        name for name, obj in vars(E).items() if isinstance(obj, type) and issubclass(obj, BaseModel)
    }
    assert {"FastTraceBody", "PlainEnvelope"} <= fast_names and "TraceBody" in model_names
    assert fast_names & model_names == set()


def test_the_closed_sets_are_the_vocabulary_s() -> None:
    assert E.TraceBody.model_fields["usage"].annotation is E.Usage
    assert set(L.EVENT_TYPES) == set(BODY_MODELS) == set(F.BODIES)
    plain_type = msgspec.inspect.type_info(F.PlainEnvelope).fields[0].type  # type: ignore[attr-defined]
    assert isinstance(plain_type, msgspec.inspect.LiteralType)
    assert set(plain_type.values) == set(L.EVENT_TYPES)
    assert set(typing.get_args(E.EventEnvelope.model_fields["type"].annotation)) == set(L.EVENT_TYPES)


def test_the_comparison_sees_a_changed_limit() -> None:
    """The shapes hold a limit: a struct with one length changed disagrees (the test can fail)."""

    class Shorter(V.View, forbid_unknown_fields=True):
        release: Annotated[str, msgspec.Meta(min_length=1, max_length=L.MAX_ID_LEN - 1)]
        variant: Annotated[str, msgspec.Meta(min_length=1, max_length=L.MAX_NAME_LEN)] = L.DEFAULT_VARIANT
        description: Annotated[str, msgspec.Meta(max_length=L.MAX_NOTE_CHARS)] | None = None
        component: L.ReleaseComponent = L.DEFAULT_COMPONENT
        from_: Annotated[str, msgspec.Meta(min_length=1, max_length=L.MAX_ID_LEN)] | None = None
        to: Annotated[str, msgspec.Meta(min_length=1, max_length=L.MAX_ID_LEN)] | None = None

    found = list(disagreements(E.ReleaseBody, Shorter, complete=True, patterns=False))
    assert len(found) == 1 and "release" in found[0], found


# -- behaviour -----------------------------------------------------------------------------------

ids = st.text(alphabet="abcXYZ019._:/@#+=-", min_size=1, max_size=12)
names = st.from_regex(r"\A[a-z0-9][a-z0-9_.-]{0,10}\Z")
stages = st.from_regex(r"\A[a-z][a-z0-9_]{0,10}\Z")
finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
meta_scalar = st.one_of(st.booleans(), st.integers(-(10**6), 10**6), finite, st.text(max_size=8), st.none())
metadata = st.dictionaries(st.text(min_size=1, max_size=8), meta_scalar, max_size=4)
predicate = st.one_of(
    st.builds(
        lambda f, v: {"field": f, "op": "eq", "value": v},
        st.text(min_size=1, max_size=6),
        st.text(max_size=6),
    ),
    st.builds(
        lambda f, v: {"field": f, "op": "in", "value": v},
        st.text(min_size=1, max_size=6),
        st.lists(st.integers(0, 9), max_size=3),
    ),
    st.builds(lambda f: {"field": f, "op": "exists"}, st.text(min_size=1, max_size=6)),
    st.builds(lambda f, v: {"field": f, "op": "gte", "value": v}, st.text(min_size=1, max_size=6), finite),
)


@st.composite
def trace_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {
        "trace_id": draw(ids),
        "request_id": draw(ids),
        "variant": draw(names),
        "sample_rate": draw(st.floats(min_value=1e-6, max_value=1.0)),
        "intent": draw(st.none() | names),
        "session_id": draw(st.none() | ids),
        "release": draw(st.none() | ids),
        "query": {"text": draw(st.text(min_size=1, max_size=20))},
        "retrieval": {
            "documents": draw(
                st.lists(
                    st.fixed_dictionaries({"id": ids, "text": st.text(max_size=20), "metadata": metadata}),
                    max_size=3,
                )
            ),
            "filters": {
                "entitlement": draw(st.lists(predicate, max_size=2)),
                "relevance": draw(st.lists(predicate, max_size=2)),
            },
            "exclusion_sample": {
                "candidates": draw(
                    st.lists(st.fixed_dictionaries({"id": ids, "metadata": metadata}), max_size=3)
                )
            },
        },
        "answer": {
            "text": draw(st.text(max_size=20)),
            "refused": draw(st.booleans()),
            "citations": draw(st.lists(ids, max_size=3)),
        },
        "timings": draw(
            st.dictionaries(stages, st.floats(min_value=0, max_value=L.MAX_TIMING_MS), max_size=3)
        ),
        "usage": {
            "model": draw(st.none() | ids),
            "tokens": draw(st.dictionaries(st.sampled_from(L.TOKEN_KINDS), st.integers(0, L.MAX_TOKENS))),
            "cost_usd": draw(st.none() | st.floats(min_value=0, max_value=L.MAX_COST_USD)),
        },
    }
    if draw(st.booleans()):
        dim = draw(st.integers(1, 4))
        body["query"]["embedding"] = draw(st.lists(finite, min_size=dim, max_size=dim))
        body["query"]["embedding_model"] = draw(ids)
    return body


@st.composite
def feedback_bodies(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(L.FEEDBACK_KINDS))
    value: Any = {
        "thumbs": draw(st.sampled_from([True, False, 1, -1])),
        "dwell": draw(st.floats(min_value=0, max_value=1e6)),
    }.get(kind, draw(st.none() | st.booleans() | finite))
    return {
        "trace_id": draw(ids),
        "kind": kind,
        "value": value,
        "reason": draw(st.none() | st.sampled_from(L.FEEDBACK_REASONS)),
        "document_id": draw(st.none() | ids),
    }


release_bodies = st.fixed_dictionaries(
    {"release": ids, "variant": names, "component": st.sampled_from(L.RELEASE_COMPONENTS), "to": ids},
    optional={"description": st.text(max_size=20), "from": st.just("v0-from")},
)
label_bodies = st.fixed_dictionaries(
    {"trace_id": ids, "faithful": st.booleans()},
    optional={
        "gold_ids": st.lists(ids, max_size=3),
        "answerable": st.booleans(),
        "reviewer": ids,
        "note": st.text(max_size=20),
    },
)
BODIES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "trace": trace_bodies(),
    "feedback": feedback_bodies(),
    "release": release_bodies,
    "label": label_bodies,
}


def _model_accepts(etype: str, body: dict[str, Any]) -> bool:
    try:
        BODY_MODELS[etype].model_validate(body)
    except ValidationError:
        return False
    return True


def _view_accepts(view: type[Any], body: dict[str, Any]) -> bool:
    try:
        msgspec.json.decode(msgspec.json.encode(body), type=view)
    except msgspec.ValidationError:
        return False
    return True


def _views_of(etype: str) -> list[type[Any]]:
    return [views[etype] for views in WORKER_VIEWS.values() if etype in views]


def _reads(view: type[Any], path: tuple[Any, ...]) -> bool:
    """Whether `view` decodes the field at `path` (list indices and dict keys pass through)."""
    t: Any = msgspec.inspect.type_info(view)
    for step in path:
        while isinstance(t, msgspec.inspect.UnionType | msgspec.inspect.ListType | msgspec.inspect.DictType):
            if isinstance(t, msgspec.inspect.UnionType):
                t = next((m for m in t.types if not isinstance(m, msgspec.inspect.NoneType)), None)
            elif isinstance(t, msgspec.inspect.ListType):
                t = t.item_type
            else:
                t = t.value_type
        if isinstance(step, int) or t is None:
            continue
        if not isinstance(t, msgspec.inspect.StructType):
            return True  # a leaf (a dict's key, a metadata value): its holder is read
        field = next((f for f in t.fields if f.name == step), None)
        if field is None:
            return False
        t = field.type
    return True


@pytest.mark.parametrize("etype", sorted(BODY_MODELS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_valid_event_is_accepted_by_all_three(etype: str, data: st.DataObject) -> None:
    body = data.draw(BODIES[etype])
    assert _model_accepts(etype, body)
    assert F.check_body(etype, body)
    for view in _views_of(etype):
        assert _view_accepts(view, body), view.__name__


# One rule broken at a time: (event type, path of the field, the value that breaks its rule).
Break = tuple[str, tuple[Any, ...], Callable[[Any], Any]]
BREAKS: list[Break] = [
    ("trace", ("trace_id",), lambda _: "has space"),
    ("trace", ("trace_id",), lambda _: "x" * (L.MAX_ID_LEN + 1)),
    ("trace", ("request_id",), lambda _: ""),
    ("trace", ("variant",), lambda _: "Production"),
    ("trace", ("variant",), lambda _: "v" * (L.MAX_NAME_LEN + 1)),
    ("trace", ("sample_rate",), lambda _: 0.0),
    ("trace", ("sample_rate",), lambda _: 1.5),
    ("trace", ("query", "text"), lambda _: ""),
    ("trace", ("query", "text"), lambda _: "q" * (L.MAX_QUERY_CHARS + 1)),
    ("trace", ("answer", "citations"), lambda _: ["c"] * (L.MAX_CITATIONS + 1)),
    ("trace", ("timings",), lambda _: {"Bad-Stage": 1.0}),
    ("trace", ("timings",), lambda _: {"stage": -1.0}),
    ("trace", ("timings",), lambda _: {"stage": L.MAX_TIMING_MS * 2}),
    ("trace", ("timings",), lambda _: {f"s{i}": 1.0 for i in range(L.MAX_TIMING_STAGES + 1)}),
    ("trace", ("usage", "tokens"), lambda _: {"words": 1}),
    ("trace", ("usage", "tokens"), lambda _: {"prompt": -1}),
    ("trace", ("usage", "cost_usd"), lambda _: L.MAX_COST_USD * 2),
    ("trace", ("retrieval", "documents"), lambda _: [{"id": "d", "text": "t"}] * (L.MAX_DOCUMENTS + 1)),
    (
        "trace",
        ("retrieval", "documents", 0, "metadata"),
        lambda _: {"k" * (L.MAX_METADATA_KEY_LEN + 1): 1},
    ),
    ("trace", ("retrieval", "documents", 0, "metadata"), lambda _: {"k": "v" * (L.MAX_METADATA_STR_LEN + 1)}),
    (
        "trace",
        ("retrieval", "documents", 0, "metadata"),
        lambda _: {f"k{i}": 1 for i in range(L.MAX_METADATA_KEYS + 1)},
    ),
    ("trace", ("retrieval", "filters", "entitlement"), lambda _: [{"field": "f", "op": "like", "value": 1}]),
    ("trace", ("retrieval", "filters", "relevance"), lambda _: [{"field": "f", "op": "in", "value": 1}]),
    ("trace", ("retrieval", "exclusion_sample", "candidates"), lambda _: [{"id": "bad id"}]),
    ("feedback", ("kind",), lambda _: "smile"),
    ("feedback", ("reason",), lambda _: "bored"),
    ("feedback", ("trace_id",), lambda _: "t\n"),
    ("release", ("variant",), lambda _: "-lead"),
    ("release", ("description",), lambda _: "d" * (L.MAX_NOTE_CHARS + 1)),
    ("release", ("component",), lambda _: "vibes"),
    ("release", ("to",), lambda _: "v 2"),
    ("release", ("from",), lambda _: "x" * (L.MAX_ID_LEN + 1)),
    ("release", ("from",), lambda body: body["to"]),  # no change
    ("label", ("gold_ids",), lambda _: ["g"] * (L.MAX_GOLD_IDS + 1)),
    ("label", ("reviewer",), lambda _: "a b"),
]


def _set(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    holder: Any = body
    for step, after in zip(path, path[1:], strict=False):
        if isinstance(step, int):
            while len(holder) <= step:
                holder.append({"id": "d", "text": "t"})
            holder = holder[step]
        else:
            holder = holder.setdefault(step, [] if isinstance(after, int) else {})
    holder[path[-1]] = value


@pytest.mark.parametrize("broken", BREAKS, ids=lambda b: f"{b[0]}-{'.'.join(map(str, b[1]))}")
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_event_breaking_one_rule_is_refused_by_whoever_checks_it(
    broken: Break, data: st.DataObject
) -> None:
    etype, path, value = broken
    body = data.draw(BODIES[etype])
    _set(body, path, value(body))
    assert not _model_accepts(etype, body)
    assert not F.check_body(etype, body)
    readers = [view for view in _views_of(etype) if _reads(view, path)]
    for view in readers:
        assert not _view_accepts(view, body), view.__name__


def test_reads_follows_the_fields_a_view_names() -> None:
    metrics, drift, review = (WORKER_VIEWS[worker]["trace"] for worker in ("metrics", "drift", "review"))
    assert _reads(metrics, ("timings",)) and not _reads(drift, ("timings",))
    assert _reads(review, ("retrieval", "documents", 0, "text"))
    assert not _reads(review, ("retrieval", "documents", 0, "metadata"))
    assert all(_views_of(etype) for etype in ("trace", "feedback", "release", "label"))
