"""Idle keys: ``on_idle`` runs once a key has been silent for ``timeout_ms``."""

from __future__ import annotations

import asyncio

from purgatory import IdleTracker, SystemTimer


async def main() -> list[str]:
    idle: list[str] = []

    def on_idle(conn: str) -> None:
        idle.append(conn)
        print(conn, "is idle")

    async with SystemTimer("idle", tick_ms=10) as timer:
        tracker = IdleTracker(100, on_idle, timer=timer)
        tracker.touch("conn-1")  # on every packet: a dict lookup and a clock read
        tracker.touch("conn-2")
        tracker.forget("conn-2")  # on disconnect: O(1)
        await asyncio.sleep(0.3)
    return idle


if __name__ == "__main__":
    asyncio.run(main())
