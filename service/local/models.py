"""The faithfulness model for `ragmon up`: use ./models when it is there, and say so when it is not.

`ragmon models fetch` writes HHEM-2.1-Open and flan-t5-base's config and tokenizer
to ./models; `ragmon up` points the faithfulness worker at them unless the config
names a model itself. Without them the worker runs but is not ready (no fake model),
and `ragmon up` prints why, with the one command that fixes it. Without the `ml` extra
(torch) the worker does not run at all: `ragmon up` says the extra is missing instead.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import yaml

from service.contracts.extras import FAITHFULNESS_MODULES, missing, missing_line
from service.models.fetch import DEFAULT_DIR
from service.models.verify import FOUNDATION_DIR, HHEM_DIR, verify

FIX = (
    f"Fix: `ragmon models fetch` (it writes ./{DEFAULT_DIR}; where huggingface.co is unreachable, run it on a "
    f"machine that reaches it and copy the directory here), then restart ragmon up: it uses ./{DEFAULT_DIR} "
    "by itself. See docs/models.md."
)


# The status line's word on a faithfulness worker that runs without a model.
NO_WEIGHTS = f"no HHEM weights loaded; fix: `ragmon models fetch` (./{DEFAULT_DIR}, docs/models.md)"


def with_local_models(config: str | None, workdir: Path, models: Path = DEFAULT_DIR) -> str | None:
    """The config to run: `config` plus faithfulness.model/foundation from ./models when that is complete."""
    sections = yaml.safe_load(Path(config).read_text()) if config else None
    sections = sections if isinstance(sections, dict) else {}
    faithfulness = sections.get("faithfulness") or {}
    if "model" in faithfulness or not verify(models).ok:
        return config
    root = models.resolve()
    sections["faithfulness"] = {
        **faithfulness,
        "model": str(root / HHEM_DIR),
        "foundation": str(root / FOUNDATION_DIR),
    }
    merged = workdir / "ragmon-config.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    merged.write_text(yaml.safe_dump(sections, sort_keys=False))
    print(f"Faithfulness: using {root} (HHEM-2.1-Open, flan-t5-base tokenizer); config {merged}", flush=True)
    return str(merged)


def faithfulness_status(worker_url: str, timeout_s: float) -> str:
    """One line on the faithfulness worker once it answers /readyz: on, or off with why and the fix."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            r = httpx.get(worker_url + "/readyz", timeout=2)
        except httpx.HTTPError:
            time.sleep(0.5)
            continue
        if r.status_code == 200:
            return "Faithfulness: on (HHEM loaded)"
        reason = r.json().get("reason", "")
        if reason:
            return f"Faithfulness: off: {reason}\n  {FIX}"
        time.sleep(0.5)
    return f"Faithfulness: unknown, the worker did not answer /readyz within {timeout_s:.0f}s"


def report_faithfulness(
    worker_url: str, timeout_s: float = 120, off: dict[str, str] | None = None
) -> threading.Thread | None:
    """Print the faithfulness line as soon as the worker knows (loading or failing takes seconds); without
    the `ml` extra at once (the worker exits with EXIT_EXTRA_MISSING and never answers). When it is off
    for want of weights, `off` (the status line's list) says so."""
    absent = missing(FAITHFULNESS_MODULES)
    if absent:
        print(missing_line("Faithfulness", "ml", absent), flush=True)
        return None

    def report() -> None:
        line = faithfulness_status(worker_url, timeout_s)
        print(line, flush=True)
        if off is not None and line.startswith("Faithfulness: off"):
            off.setdefault("worker-faithfulness", NO_WEIGHTS)

    thread = threading.Thread(target=report, name="faithfulness-status", daemon=True)
    thread.start()
    return thread
