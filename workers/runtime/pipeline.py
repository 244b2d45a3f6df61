"""A Redis pipeline whose replies are read by the name given when a command was queued.

Reading `pipe.execute()` by position couples the code that queues to the code
that reads: one command added on one side shifts every reply after it. Here
each command that is read back is queued under a name, and the replies come
back as a mapping; commands queued without a name are sent but not kept.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import redis


class NamedPipeline:
    def __init__(self, client: redis.Redis) -> None:
        self._pipe = client.pipeline(transaction=False)
        self._names: list[Hashable | None] = []

    def __len__(self) -> int:
        return len(self._names)

    def set(self, name: Hashable | None, key: str, value: str | bytes, **options: Any) -> None:
        self._pipe.set(key, value, **options)
        self._names.append(name)

    def get(self, name: Hashable | None, key: str) -> None:
        self._pipe.get(key)
        self._names.append(name)

    def execute(self) -> dict[Hashable, Any]:
        if not self._names:
            return {}
        replies = self._pipe.execute()
        named = [(n, r) for n, r in zip(self._names, replies, strict=True) if n is not None]
        out = dict(named)
        if len(out) != len(named):
            raise ValueError("two pipeline commands were queued under the same name")
        return out
