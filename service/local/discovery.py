"""Which workers exist, found on disk without importing them (service never imports workers)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

NOT_WORKERS = {"runtime"}


def worker_names() -> list[str]:
    spec = importlib.util.find_spec("workers")
    if spec is None or not spec.submodule_search_locations:
        return []
    names = set()
    for location in spec.submodule_search_locations:
        for child in Path(location).iterdir():
            if child.is_dir() and (child / "__main__.py").is_file() and child.name not in NOT_WORKERS:
                names.add(child.name)
    return sorted(names)
