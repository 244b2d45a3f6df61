#!/usr/bin/env bash
# The one host set-up step of ragmon: `make run`, `make test` and `.ci/run` all call it.
#
#   bash deploy/setup/host.sh run     system packages `ragmon up` uses (Redis, Prometheus, Alertmanager)
#   bash deploy/setup/host.sh test    those, plus what the test suite needs: Chromium (review page
#                                     browser tests), kubectl (kustomize check), VictoriaMetrics with
#                                     vmagent and vmalert (the remote_write path: deploy/victoriametrics),
#                                     node/npm and the pinned
#                                     dashboard type checker, the alibi-detect parity virtualenv
#
# Idempotent and quick when everything is present: each step checks before it installs.
# Debian packages are installed with apt-get as root (or through `sudo -n`); when neither is
# possible it prints one line naming the command to run, and exits 1.
# It lives in deploy/ rather than tests/ because `make run` (a deployment on one host) uses it too.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
profile="${1:-test}"
case "$profile" in run | test) ;; *) echo "usage: $0 run|test" >&2; exit 2 ;; esac

have() { command -v "$1" >/dev/null 2>&1; }

missing=()
want() {  # want PACKAGE COMMAND...: the package is needed when none of the commands is on PATH
    local pkg="$1"; shift
    for cmd in "$@"; do have "$cmd" && return 0; done
    [[ " ${missing[*]-} " == *" $pkg "* ]] || missing+=("$pkg")
}

want redis-server redis-server
want prometheus prometheus
want prometheus promtool
want prometheus-alertmanager prometheus-alertmanager alertmanager
want prometheus-alertmanager amtool
if [[ "$profile" == test ]]; then
    want chromium chromium chromium-browser
    want kubernetes-client kubectl
    want victoria-metrics victoria-metrics
    want victoria-metrics vmagent
    want victoria-metrics vmalert
    want nodejs node
    want npm npm
fi

apt_install() {
    local runner=()
    if [[ "$(id -u)" != 0 ]]; then
        if have sudo && sudo -n true >/dev/null 2>&1; then
            runner=(sudo -n)
        else
            echo "ragmon set-up: missing ${*}; not root and no sudo: run 'sudo apt-get install -y --no-install-recommends ${*}' (or make as root), then retry" >&2
            exit 1
        fi
    fi
    # The Debian packages would start their own Prometheus/Alertmanager/VictoriaMetrics services on
    # 9090/9093/8428.
    # ragmon starts private instances on free ports, so keep services from starting at all
    # (policy-rc.d) instead of stopping processes afterwards.
    local policy=/usr/sbin/policy-rc.d placed=""
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\nexit 101\n' | "${runner[@]}" tee "$policy" >/dev/null
        "${runner[@]}" chmod 755 "$policy"
        placed=1
    fi
    echo "ragmon set-up: installing ${*}"
    local rc=0
    "${runner[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq || rc=$?
    [[ $rc == 0 ]] && { "${runner[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends --no-upgrade "$@" >/dev/null || rc=$?; }
    [[ -n "$placed" ]] && "${runner[@]}" rm -f "$policy"
    if [[ $rc != 0 ]]; then
        echo "ragmon set-up: apt-get install ${*} failed (exit $rc); see the output above" >&2
        exit 1
    fi
}

if (( ${#missing[@]} )); then
    apt_install "${missing[@]}"
else
    echo "ragmon set-up: system packages present"
fi

if [[ "$profile" == test ]]; then
    bash "$root/tests/ci_extra_dashboards.sh"
    bash "$root/tests/alibi/setup_venv.sh"
    bash "$root/tests/deploy/checkov/setup_venv.sh"   # checkov pins its own dependencies
    bash "$root/tests/phoenix/setup_venv.sh"          # a real Phoenix for tests/workers/phoenix (own pins)
fi
