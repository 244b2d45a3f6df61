"""Entitlement check: does a document the app retrieved violate an entitlement predicate?

A leak is a security event, so it needs positive evidence: the document
carries the predicate's field and its value fails the predicate. A document
that lacks the field cannot be checked (the app may simply not send that
metadata); it is *unverified*, counted apart so that a dashboard shows how
much of the traffic the check actually covers, but it does not page anyone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from workers.exclusion.predicates import CompiledPredicate

Verdict = Literal["entitled", "leak", "unverified"]
LEAK: Verdict = "leak"
UNVERIFIED: Verdict = "unverified"
ENTITLED: Verdict = "entitled"


def entitlement_verdict(metadata: Mapping[str, Any], predicates: Sequence[CompiledPredicate]) -> Verdict:
    unverified = False
    for predicate in predicates:
        value = metadata.get(predicate.field)
        if value is None or value == []:  # missing, as in predicates.py
            unverified = True
        elif not predicate.test(value):
            return LEAK
    return UNVERIFIED if unverified else ENTITLED


def count_verdicts(
    metadatas: Sequence[Mapping[str, Any]], predicates: Sequence[CompiledPredicate]
) -> tuple[int, int]:
    """(leaks, unverified) among documents, e.g. the context given to the generator."""
    leaks = unverified = 0
    if not predicates:
        return 0, 0
    for metadata in metadatas:
        verdict = entitlement_verdict(metadata, predicates)
        if verdict == LEAK:
            leaks += 1
        elif verdict == UNVERIFIED:
            unverified += 1
    return leaks, unverified
