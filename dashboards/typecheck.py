"""`python -m dashboards.typecheck`: the dashboards against Grafana's own TypeScript types.

Builds a throwaway TypeScript project in a temporary directory: grafana_types.ts,
one `const x: RagmonDashboard = <the JSON file>;` per dashboard, a strict
tsconfig, and a link to dashboards/node_modules (installed by
`npm ci --prefix dashboards`, pinned in package-lock.json); then runs
`tsc --noEmit`. The JSON is embedded as an object literal rather than imported
with resolveJsonModule: imported JSON widens "absolute" to string, which no
enum accepts, and skips excess-property checks, which catch misspelt fields.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dashboards.generate import OUT_DIR

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
TSC = NODE_MODULES / "typescript" / "bin" / "tsc"
TYPES = HERE / "grafana_types.ts"

TSCONFIG = {
    "compilerOptions": {
        "strict": True,
        "noEmit": True,
        "target": "ES2022",
        "module": "ESNext",
        "moduleResolution": "bundler",
        "skipLibCheck": True,  # check our documents, not the .d.ts files of the packages
        "types": [],
    },
    "files": ["grafana_types.ts", "dashboards.ts"],
}


@dataclass(frozen=True)
class Result:
    ok: bool
    output: str


class ToolchainMissing(RuntimeError):
    pass


def _identifier(path: Path) -> str:
    return "d_" + "".join(c if c.isalnum() else "_" for c in path.stem)


def check_source(paths: list[Path]) -> str:
    lines = ["import type { RagmonDashboard } from './grafana_types';", ""]
    for path in paths:
        document = json.loads(path.read_text(encoding="utf-8"))
        lines.append(f"// {path.name}")
        lines.append(f"export const {_identifier(path)}: RagmonDashboard = {json.dumps(document, indent=2)};")
        lines.append("")
    return "\n".join(lines)


def toolchain() -> tuple[str, Path]:
    node = shutil.which("node")
    if node is None or not TSC.is_file():
        raise ToolchainMissing(
            f"need node on PATH and {TSC.relative_to(HERE.parent)}: run `npm ci --prefix dashboards` "
            "(or bash tests/ci_extra_dashboards.sh)"
        )
    return node, TSC


def typecheck(paths: list[Path], timeout_s: float = 120) -> Result:
    """tsc over the given dashboard JSON files; ok is False with tsc's diagnostics on any type error."""
    if not paths:
        raise ValueError("no dashboard files to check")
    node, tsc = toolchain()
    with tempfile.TemporaryDirectory(prefix="ragmon-dash-tsc-") as tmp:
        project = Path(tmp)
        (project / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
        shutil.copyfile(TYPES, project / TYPES.name)
        (project / "dashboards.ts").write_text(check_source(paths), encoding="utf-8")
        (project / "tsconfig.json").write_text(json.dumps(TSCONFIG, indent=2), encoding="utf-8")
        proc = subprocess.run(
            [node, str(tsc), "-p", str(project / "tsconfig.json")],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    return Result(proc.returncode == 0, (proc.stdout + proc.stderr).strip())


def committed_dashboards() -> list[Path]:
    return sorted(OUT_DIR.glob("ragmon-*.json"))


def main() -> int:
    try:
        result = typecheck(committed_dashboards())
    except ToolchainMissing as exc:
        print(exc, file=sys.stderr)
        return 2
    if result.output:
        print(result.output)
    print("dashboards type-check against @grafana/schema" if result.ok else "type errors", file=sys.stderr)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
