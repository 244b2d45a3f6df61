#!/usr/bin/env bash
# Build the separate virtualenv for the alibi-detect parity test and benchmark.
#
#   bash tests/alibi/setup_venv.sh [VENV_DIR]     (default: .venv-alibi at the repo root)
#
# It is separate from .venv because alibi-detect pins numpy<2 and
# transformers<5, while ragmon runs on numpy 2 and transformers 5. Only numpy
# is needed from ragmon itself: the parity test imports workers/drift/mmd.py
# from the source tree through PYTHONPATH, it does not install ragmon.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-$root/.venv-alibi}"
python="${PYTHON:-python3.11}"

# Idempotent: nothing is installed while the venv was built from the current requirements.
stamp="$venv/.ragmon-requirements.sha256"
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$venv/bin/python" ]]; then
    echo "alibi venv $venv is current"
    exit 0
fi
if ! command -v "$python" >/dev/null 2>&1; then
    echo "alibi venv: need $python on PATH (or PYTHON=/path/to/python3.11)" >&2
    exit 1
fi
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
"$venv/bin/python" - <<'PY'
import alibi_detect, numpy, torch
print(f"alibi-detect {alibi_detect.__version__}, numpy {numpy.__version__}, torch {torch.__version__}")
PY
echo "$want" > "$stamp"
