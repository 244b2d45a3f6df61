"""One live `ragmon up` shared by the hostile-input suite: an attacker tenant and a victim tenant.

Every module of tests/e2e/hostile sends one kind of attack with the attacker's
key while `victim_traffic` sends ordinary batches with the victim's, then checks
the victim was unharmed (every batch 202, no request held for long, every
trace processed by the workers). The stack runs the API, the assembler and
the metrics worker (`--workers metrics,assembler`), Redis, the broker and
Prometheus, started once for the package and stopped by PID.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from service.api.settings import hash_key
from tests.e2e.hostile.victim import ATTACKER, ATTACKER_KEY, VICTIM, VICTIM_KEY, Tenant
from tests.e2e.stack import UpStack, start_up, wait_workers_ready

# The attacker's rate is the limit an operator would give a tenant; the victim's is the default.
ATTACKER_RATE_EPS = 2_000.0
CONFIG = {"assembler": {"quiet_period_s": 1.0}}


# One stack for the package's modules, stopped when the package ends: the tests after it (the
# guardrails e2e among them) must not share two cores with an idle second stack.
@pytest.fixture(scope="package")
def hostile_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpStack]:
    root: Path = tmp_path_factory.mktemp("hostile")
    config = root / "ragmon.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    keys = json.dumps(
        [
            {
                "tenant": ATTACKER,
                "key_sha256": hash_key(ATTACKER_KEY),
                "name": "attacker-app",
                "rate_limit_eps": ATTACKER_RATE_EPS,
                "burst": 4_000,
            },
            {"tenant": VICTIM, "key_sha256": hash_key(VICTIM_KEY), "name": "victim-app"},
        ]
    )
    up = start_up(root, config, {"RAGMON_API_KEYS": keys}, extra_args=("--workers", "metrics,assembler"))
    try:
        wait_workers_ready(up)
        yield up
    finally:
        up.stop()


@pytest.fixture
def attacker(hostile_stack: UpStack) -> Tenant:
    return Tenant(ATTACKER, ATTACKER_KEY, hostile_stack.api)


@pytest.fixture
def victim(hostile_stack: UpStack) -> Tenant:
    return Tenant(VICTIM, VICTIM_KEY, hostile_stack.api)
