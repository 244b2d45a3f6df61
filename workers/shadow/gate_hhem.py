"""HHEM for `ragmon gate`, when the model is there: the `ml` extra installed and the files fetched.

`ragmon models fetch --dir D` writes D/hhem-2.1-open and D/flan-t5-base (docs/models.md); the gate
loads them with the faithfulness worker's own loader (no hub access: local directories only) and
scores each answer against the context it was given, cut to the worker's premise budget. Anything
missing is a reason to skip HHEM, reported beside the verdicts, never a reason to fail the gate.
"""

from __future__ import annotations

from pathlib import Path

from service.contracts.extras import FAITHFULNESS_MODULES, missing
from workers.shadow.golden_gate import Scorer

HHEM_DIR, FOUNDATION_DIR = "hhem-2.1-open", "flan-t5-base"  # as service/models/verify.py names them


def load_scorer(models_dir: Path | None, device: str = "cpu") -> tuple[Scorer | None, str]:
    """(scorer, "scored with ...") or (None, why HHEM was skipped)."""
    if models_dir is None:
        return None, "skipped: --no-hhem"
    absent = missing(FAITHFULNESS_MODULES)
    if absent:
        return None, f"skipped: the ml extra is not installed ({', '.join(absent)}; pip install 'ragmon[ml]')"
    model, foundation = models_dir / HHEM_DIR, models_dir / FOUNDATION_DIR
    if not (model / "config.json").is_file() or not (foundation / "tokenizer.json").is_file():
        return None, f"skipped: no model at {models_dir} (`ragmon models fetch --dir {models_dir}`)"
    from workers.faithfulness.config import FaithfulnessConfig
    from workers.faithfulness.loader import LoadError, load_hhem
    from workers.faithfulness.premise import build_premise
    from workers.faithfulness.scorer import HHEMScorer

    try:
        loaded = load_hhem(str(model), str(foundation), device=device)
    except LoadError as exc:
        return None, f"skipped: {exc}"
    scorer = HHEMScorer(loaded)
    budget = FaithfulnessConfig().premise_token_budget

    def score(pairs: list[tuple[list[str], str]]) -> list[float]:
        premised = [(build_premise(texts, scorer.tokenizer, budget)[0], answer) for texts, answer in pairs]
        return [s.score for s in scorer.score(premised)]

    return score, f"scored with {loaded.source} ({device})"
