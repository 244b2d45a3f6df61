#!/usr/bin/env bash
# Build the separate virtualenv that runs a real Phoenix server for the tests.
#
#   bash tests/phoenix/setup_venv.sh [VENV_DIR]     (default: .venv-phoenix at the repo root)
#
# arize-phoenix pins its own sqlalchemy, grpcio, fastapi, pandas ... so it never
# shares ragmon's .venv; ragmon only talks to it over HTTP (the exporter through
# arize-phoenix-client, installed in .venv). Idempotent and quick when nothing
# changed: a stamp holding the requirements' hash skips pip entirely.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-$root/.venv-phoenix}"
python="${PYTHON:-python3.11}"
stamp="$venv/.ragmon-requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"

if [[ -x "$venv/bin/phoenix" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
"$venv/bin/python" -c "import phoenix; print('arize-phoenix', phoenix.__version__)"
echo "$want" > "$stamp"
