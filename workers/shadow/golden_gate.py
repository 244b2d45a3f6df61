"""`ragmon gate`: production and candidate outputs on the release-gate set -> the shadow verdict table.

Per golden item and system, three families of outcomes (docs/shadow.md, "Gating on the golden set"):

- retrieval: every column of service/contracts/ranking.py at the chosen cut-offs, over the retrieved
  candidates and over the context, against the item's gold (no gold: no data for that item);
  `dropped` and `missed` are lower-is-better;
- the deterministic answer checks (workers/checks): `check.<name>` is 1 when it failed, 0 when it
  passed, no data when it was skipped; lower is better;
- HHEM (`faithfulness_score`) when the model files are there; otherwise the report says it was
  skipped and why.

The two systems' outcomes on the same item are one pair; workers/shadow/compare.py judges every
metric (paired: the sign test, the paired bootstrap and the anytime confidence sequence over the
per-item differences, Holm across the metrics) and workers/shadow/gate.py decides pass or fail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from service.contracts.ranking import Judged, batch_metrics
from workers.checks.answer import CHECKS, AnswerFacts, run_checks
from workers.checks.config import ChecksConfig
from workers.shadow.gate_inputs import GoldenQuery, OutputLine
from workers.shadow.metrics_spec import MetricSpec
from workers.shadow.table import PairTable

LOWER_IS_BETTER = ("dropped", "missed")
Scorer = Callable[[list[tuple[list[str], str]]], list[float]]  # (context texts, answer) -> HHEM scores


@dataclass
class GateInputs:
    golden: list[GoldenQuery]
    production: dict[str, OutputLine]
    candidate: dict[str, OutputLine]
    ks: tuple[int, ...] = (5, 10)
    checks: ChecksConfig = field(default_factory=ChecksConfig)


def check_metric(name: str) -> str:
    return f"check.{name}"


def gate_specs(ks: Sequence[int]) -> dict[str, MetricSpec]:
    """The directions the builtin specs do not know: drops, misses and failed checks are bad."""
    specs = {m: MetricSpec(m, True, False) for m in LOWER_IS_BETTER}
    specs |= {check_metric(c): MetricSpec(check_metric(c), True, False) for c in CHECKS}
    return specs


def _retrieval(
    golden: list[GoldenQuery], outputs: dict[str, OutputLine], ks: Sequence[int]
) -> dict[str, np.ndarray]:
    judged = []
    for q in golden:
        out = outputs[q.item_id]
        context = None if out.context is None else [d.id for d in out.context]
        judged.append(Judged(out.retrieved_ids, context, q.gold))
    return batch_metrics(judged, ks)


def _checks(
    golden: list[GoldenQuery], outputs: dict[str, OutputLine], cfg: ChecksConfig
) -> dict[str, np.ndarray]:
    cols = {check_metric(c): np.full(len(golden), np.nan) for c in CHECKS}
    for i, q in enumerate(golden):
        out = outputs[q.item_id]
        fmt = out.response_format
        facts = AnswerFacts(
            out.answer.text,
            out.answer.refused,
            out.answer.citations,
            [(d.id, d.text) for d in out.context or []],
            None if fmt is None else fmt.type,
            None if fmt is None else fmt.schema_name,
        )
        for name, outcome in run_checks(facts, cfg, q.tenant).outcomes.items():
            if outcome != "skip":
                cols[check_metric(name)][i] = 1.0 if outcome == "fail" else 0.0
    return cols


def _hhem(golden: list[GoldenQuery], outputs: dict[str, OutputLine], score: Scorer) -> np.ndarray:
    """The answer against the context it was given; a refusal or an empty answer has no score."""
    values = np.full(len(golden), np.nan)
    rows = [
        (i, [d.text for d in out.context or []], out.answer.text)
        for i, q in enumerate(golden)
        for out in (outputs[q.item_id],)
        if not out.answer.refused and out.answer.text.strip()
    ]
    if rows:
        values[[i for i, _, _ in rows]] = score([(texts, answer) for _, texts, answer in rows])
    return values


def system_columns(
    inputs: GateInputs, outputs: dict[str, OutputLine], score: Scorer | None
) -> dict[str, np.ndarray]:
    cols = dict(_retrieval(inputs.golden, outputs, inputs.ks))
    cols |= _checks(inputs.golden, outputs, inputs.checks)
    if score is not None:
        cols["faithfulness_score"] = _hhem(inputs.golden, outputs, score)
    return cols


def gate_table(inputs: GateInputs, score: Scorer | None = None) -> PairTable:
    """One pair per golden item, one column per metric, sliced by intent."""
    prod = system_columns(inputs, inputs.production, score)
    cand = system_columns(inputs, inputs.candidate, score)
    metrics = list(prod)  # ranking.column_names order, then the checks, then HHEM
    return PairTable(
        metrics,
        np.stack([prod[m] for m in metrics], axis=1),
        np.stack([cand[m] for m in metrics], axis=1),
        {"intent": np.array([q.intent for q in inputs.golden], dtype=object)},
    )
