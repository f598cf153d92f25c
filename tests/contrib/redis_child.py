"""A second OS process for the Redis bridge's tests: a purgatory and a bridge that answer
over stdout.

``python -m tests.contrib.redis_child URL STATE_DIR KEY REPLY_KEY`` watches ``KEY`` (its
condition: the file ``STATE_DIR/KEY`` exists, the state the parent changes), prints
``watching`` once its subscription is confirmed, then ``completed KEY`` when the operation
completes (``expired KEY`` if it timed out: the parent fails on that), then creates
``STATE_DIR/REPLY_KEY`` and publishes ``REPLY_KEY`` through its bridge, waits until that is
sent, prints ``published REPLY_KEY``, and exits 0 after closing everything.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.contrib.redis import KeyEvents


class FileExists(DelayedOperation[None]):
    """Completes once ``path`` exists (``op.expired`` tells a timeout apart)."""

    def __init__(self, path: Path, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.path = path

    def try_complete(self) -> bool:
        return self.path.exists() and self.force_complete()

    def on_complete(self) -> None:
        return None


async def main(url: str, state: Path, key: str, reply_key: str) -> None:
    async with (
        DelayedOperationPurgatory[FileExists]("child") as purgatory,
        KeyEvents(purgatory, url, channel="test:child") as events,
    ):
        op = FileExists(state / key, delay_ms=60_000)
        purgatory.try_complete_else_watch(op, [key])
        await events.wait_subscribed()
        print("watching", flush=True)
        await op
        print("expired" if op.expired else "completed", key, flush=True)
        (state / reply_key).touch()
        events.publish(reply_key)
        await events.publisher.flush()
        print("published", reply_key, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]))
