"""The command line both deploy/k8s renderers share: render their source (a file or folder) to the
committed output, or with --check exit 1 when the committed output is out of date. They import it as a
sibling (run as scripts, their folder is on sys.path).

Exit codes: 0 done (or up to date), 1 out of date (--check), 2 the renderer raised RenderError (it says why).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


class RenderError(ValueError):
    pass


def main(argv: list[str] | None, script: str, description: str, render: Callable[[Path], str],
         source_option: str, source: Path, output: Path) -> int:
    """`script` is the renderer's file (its __file__); `source_option` names its source, `source` and
    `output` are their defaults."""
    path = Path(script)
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    source_dest = parser.add_argument(source_option, type=Path, default=source).dest
    parser.add_argument("--output", type=Path, default=output)
    args = parser.parse_args(argv)
    try:
        text = render(getattr(args, source_dest))
    except RenderError as exc:
        print(f"{path.stem}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        current = args.output.read_text() if args.output.is_file() else ""
        if current != text:
            print(f"{args.output} is out of date: run python deploy/k8s/{path.name}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    return 0
