"""`ragmon models fetch|verify`: HHEM-2.1-Open and flan-t5-base's config and tokenizer in one directory.

For air-gapped installs: fetch on a machine that reaches huggingface.co, copy the
directory, `ragmon models verify --dir D` there, and point the faithfulness
worker at it (docs/models.md). Nothing here loads or fakes a model.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from service.models.verify import FOUNDATION_DIR, HHEM_DIR, verify

DEFAULT_DIR = Path("models")


@dataclass(frozen=True)
class ModelFiles:
    repo_id: str
    subdir: str
    patterns: tuple[str, ...]


MODELS = (
    ModelFiles(
        "vectara/hallucination_evaluation_model",
        HHEM_DIR,
        ("config.json", "*.safetensors", "model.safetensors.index.json"),
    ),
    # Only what our loader reads: the encoder's shape and the tokenizer, not flan-t5's 1 GB of weights.
    ModelFiles("google/flan-t5-base", FOUNDATION_DIR, ("config.json", "tokenizer.json")),
)


class FetchError(Exception):
    pass


def fetch(root: Path, revision: str | None = None) -> None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise FetchError("huggingface_hub is not installed: pip install 'ragmon[ml]'") from exc
    for m in MODELS:
        target = root / m.subdir
        print(f"fetching {m.repo_id} ({', '.join(m.patterns)}) into {target}", flush=True)
        try:
            snapshot_download(
                repo_id=m.repo_id,
                allow_patterns=list(m.patterns),
                local_dir=str(target),
                revision=revision if m.subdir == HHEM_DIR else None,
            )
        except Exception as exc:  # the hub client raises many types; all mean "could not download"
            reason = str(exc).splitlines()[0] if str(exc) else ""
            raise FetchError(
                f"could not download {m.repo_id} from the Hugging Face hub ({type(exc).__name__}: {reason}). "
                f"Run `ragmon models fetch --dir {root}` on a machine that reaches huggingface.co and copy "
                f"{root} here, or give this host access to the hub (HF_ENDPOINT, HTTPS proxy, HF_HUB_OFFLINE unset)"
            ) from exc


def config_lines(root: Path) -> str:
    return (
        f"faithfulness:\n  model: {(root / HHEM_DIR).resolve()}\n"
        f"  foundation: {(root / FOUNDATION_DIR).resolve()}"
    )


def _verified(root: Path) -> int:
    report = verify(root)
    for path in report.checked:
        print(f"  ok  {path}")
    for problem in report.problems:
        print(f"  BAD {problem}", file=sys.stderr)
    if not report.ok:
        print(
            f"{root}: not usable by the faithfulness worker ({len(report.problems)} problems above)",
            file=sys.stderr,
        )
        return 1
    print(
        f"{root}: complete. Point the faithfulness worker at it in the ragmon config "
        f"(`ragmon up` does so by itself for ./{DEFAULT_DIR}):\n{config_lines(root)}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragmon models", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    for name, text in (("fetch", "download, then verify"), ("verify", "check a directory already there")):
        p = sub.add_parser(name, help=text)
        p.add_argument(
            "--dir", type=Path, default=DEFAULT_DIR, help=f"target directory (default ./{DEFAULT_DIR})"
        )
        if name == "fetch":
            p.add_argument("--revision", default=None, help="HHEM revision (tag or commit) to pin")
    args = parser.parse_args(argv)
    if args.action == "fetch":
        try:
            fetch(args.dir, args.revision)
        except FetchError as exc:
            print(f"ragmon models fetch failed: {exc}", file=sys.stderr)
            return 1
    return _verified(args.dir)
