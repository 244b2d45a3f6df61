#!/usr/bin/env bash
# Build the separate virtualenv for checkov, the IaC scanner the deploy tests run.
#
#   bash tests/deploy/checkov/setup_venv.sh [VENV_DIR]   (default: .venv-checkov at the repo root)
#
# Separate from .venv because checkov pins versions of packages ragmon also uses.
# Idempotent: an existing venv with the pinned checkov is left as it is.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
venv="${1:-$root/.venv-checkov}"
python="${PYTHON:-python3.11}"
want="$(sed -n 's/^checkov==//p' "$here/requirements.txt")"

if [[ -x "$venv/bin/checkov" ]] && [[ "$("$venv/bin/checkov" --version 2>/dev/null)" == "$want" ]]; then
    exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
echo "checkov $("$venv/bin/checkov" --version)"
