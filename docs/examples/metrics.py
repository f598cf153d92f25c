"""A purgatory's statistics as Prometheus metrics (``aio-purgatory[prometheus]``).

One :class:`~purgatory.contrib.prometheus.PurgatoryCollector` serves any number of
purgatories; each scrape reads their ``statistics()``. A ``ManualClock`` stands in for
time so that one operation expires at once.
"""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, generate_latest

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer
from purgatory.contrib.prometheus import PurgatoryCollector
from purgatory.testing import ManualClock


class Flag(DelayedOperation[bool]):
    def __init__(self, flags: set[str], key: str, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.flags, self.key = flags, key

    def try_complete(self) -> bool:
        return self.key in self.flags and self.force_complete()

    def on_complete(self) -> bool:
        return self.key in self.flags


# [start-metrics]
async def scrape() -> str:
    clock = ManualClock()
    timer = SystemTimer("watch", clock=clock)
    purgatory = DelayedOperationPurgatory[Flag]("watch", timer=timer, reaper_enabled=False)
    registry = CollectorRegistry()  # or prometheus_client.REGISTRY
    registry.register(PurgatoryCollector(purgatory))
    flags: set[str] = set()
    async with purgatory:
        for key in ("a", "b", "c"):
            purgatory.try_complete_else_watch(Flag(flags, key, timeout_ms=100), [key])
        flags.add("a")
        purgatory.check_and_complete("a")  # one completes early
        clock.advance(101)  # never early: the tick after the 100 ms deadline
        timer.poll()  # two expire
    return generate_latest(registry).decode()  # what GET /metrics answers


# [end-metrics]


def main() -> list[str]:
    wanted = ("purgatory_completed_early_total", "purgatory_expired_total", "purgatory_delayed")
    lines = [line for line in asyncio.run(scrape()).splitlines() if line.startswith(wanted)]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
