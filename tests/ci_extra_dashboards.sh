#!/usr/bin/env bash
# Installs the pinned npm packages of the dashboards' type check (@grafana/schema, typescript)
# into dashboards/node_modules, exactly as dashboards/package-lock.json says.
# Idempotent: skips `npm ci` while node_modules was installed from the current lockfile.
set -euo pipefail
cd "$(dirname "$0")/../dashboards"

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "node/npm missing: bash deploy/setup/host.sh test installs them" >&2
  exit 1
fi

stamp=node_modules/.ragmon-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f node_modules/typescript/bin/tsc ]; then
  echo "dashboards/node_modules is current"
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
