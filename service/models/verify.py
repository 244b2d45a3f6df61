"""Check a models directory without loading a model: the files the faithfulness worker reads are there and whole.

HHEM-2.1-Open (`hhem-2.1-open/`): config.json of an HHEM-2 checkpoint naming its
foundation, and safetensors weights whose header is readable and whose tensors
lie inside the file (a truncated download fails here, not at the worker).
flan-t5-base (`flan-t5-base/`): a T5 config.json with the encoder's shape and a
tokenizers tokenizer.json. Loading itself is the worker's job (its readiness
says why it is not ready).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HHEM_DIR, FOUNDATION_DIR = "hhem-2.1-open", "flan-t5-base"
HHEM_MODEL_TYPES = ("HHEMv2", "HHEMv2Config")
T5_SHAPE_FIELDS = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_heads")
MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclass
class Report:
    checked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _json(path: Path, report: Report) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        report.problems.append(f"{path}: missing")
        return None
    except (OSError, ValueError) as exc:
        report.problems.append(f"{path}: not readable JSON ({exc})")
        return None
    if not isinstance(data, dict):
        report.problems.append(f"{path}: not a JSON object")
        return None
    report.checked.append(str(path))
    return data


def safetensors_problem(path: Path) -> str | None:
    """None when the header parses and every tensor's bytes lie inside the file."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return "shorter than a safetensors header"
        (length,) = struct.unpack("<Q", head)
        if length > min(size - 8, MAX_HEADER_BYTES):
            return f"header length {length} does not fit in {size} bytes (truncated?)"
        try:
            header = json.loads(f.read(length))
        except ValueError as exc:
            return f"header is not JSON ({exc})"
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    if not tensors:
        return "holds no tensor"
    end = max(int(t["data_offsets"][1]) for t in tensors.values())
    if 8 + length + end != size:
        return (
            f"tensors end at byte {8 + length + end} but the file has {size} (truncated or padded download)"
        )
    return None


def verify_hhem(directory: Path, report: Report) -> None:
    config = _json(directory / "config.json", report)
    if config is not None and (
        config.get("model_type") not in HHEM_MODEL_TYPES or not config.get("foundation")
    ):
        report.problems.append(
            f"{directory / 'config.json'}: not an HHEM-2 config (model_type "
            f"{config.get('model_type')!r}, foundation {config.get('foundation')!r})"
        )
    weights = sorted(directory.glob("*.safetensors"))
    if not weights:
        report.problems.append(f"{directory}: no *.safetensors weights")
    for path in weights:
        problem = safetensors_problem(path)
        if problem:
            report.problems.append(f"{path}: {problem}")
        else:
            report.checked.append(str(path))


def verify_foundation(directory: Path, report: Report) -> None:
    config = _json(directory / "config.json", report)
    if config is not None:
        bad = [k for k in T5_SHAPE_FIELDS if not isinstance(config.get(k), int) or config[k] <= 0]
        if bad:
            report.problems.append(f"{directory / 'config.json'}: not a T5 config (missing or invalid {bad})")
    tokenizer = _json(directory / "tokenizer.json", report)
    if tokenizer is not None and not isinstance(tokenizer.get("model"), dict):
        report.problems.append(f"{directory / 'tokenizer.json'}: not a tokenizers file (no 'model')")


def verify(root: Path) -> Report:
    report = Report()
    verify_hhem(root / HHEM_DIR, report)
    verify_foundation(root / FOUNDATION_DIR, report)
    return report
