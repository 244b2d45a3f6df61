"""The test Phoenix itself: it answers, and it refuses requests without the Bearer key."""

from __future__ import annotations

import httpx
import pytest

from tests.support.phoenix import PhoenixServer

pytestmark = pytest.mark.slow


def test_phoenix_requires_the_bearer_key(phoenix: PhoenixServer) -> None:
    assert httpx.get(f"{phoenix.base_url}/v1/projects", timeout=5).status_code == 401
    answer = httpx.get(f"{phoenix.base_url}/v1/projects", headers=phoenix.headers, timeout=5)
    assert answer.status_code == 200
    assert "default" in [p["name"] for p in answer.json()["data"]]
