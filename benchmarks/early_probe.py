"""Does any operation expire before its timeout? Issue #37's probe, on each backend.

Usage: python benchmarks/early_probe.py [--ops 2000] [--timeout-ms 25] [--ticks 1,10]
       [--backends asyncio,uvloop,trio] [--may-expire-early]

Per backend (asyncio, uvloop and trio, under anyio) and tick: ``ops`` operations of
``timeout_ms`` each, nothing completing them, added to a purgatory with its reaper
running, a loop turn apart (so they start at every phase of a millisecond and of a
tick). Each notes ``time.perf_counter()`` just before ``try_complete_else_watch``
and again in ``on_expiration``. Reported: how many expired early (waited less
than ``timeout_ms``), the shortest and longest wait, and the purgatory's own
``expired_early`` and ``lateness_max_ms``. ``--may-expire-early`` makes the timers
with Kafka's filing, for comparison. Bounded: ``ops * timeout_ms`` plus the waits,
about a second per case with the defaults.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass

import anyio

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer


class Timed(DelayedOperation[None]):
    """Never completes early; notes when it was created and when it expired."""

    __slots__ = ("created_s", "expired_s")

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.created_s = time.perf_counter()
        self.expired_s = 0.0

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        return None

    def on_expiration(self) -> None:
        self.expired_s = time.perf_counter()


@dataclass(frozen=True)
class Result:
    tick_ms: int
    early: int
    shortest_ms: float
    longest_ms: float
    counted_early: int
    lateness_max_ms: int


async def probe(ops: int, timeout_ms: int, tick_ms: int, may_expire_early: bool) -> Result:
    timer = SystemTimer("probe", tick_ms=tick_ms, may_expire_early=may_expire_early)
    async with DelayedOperationPurgatory[Timed]("probe", timer=timer) as purgatory:
        made: list[Timed] = []
        for i in range(ops):
            op = Timed(timeout_ms)
            purgatory.try_complete_else_watch(op, [i % 16])
            made.append(op)
            await anyio.sleep(0)  # a loop turn: the next starts at another phase
        with anyio.fail_after(timeout_ms / 1000 + 30):
            while purgatory.num_delayed:
                await anyio.sleep(timeout_ms / 1000)
        stats = purgatory.statistics()
    waits_ms = [(op.expired_s - op.created_s) * 1000 for op in made]
    return Result(
        tick_ms=tick_ms,
        early=sum(1 for w in waits_ms if w < timeout_ms),
        shortest_ms=min(waits_ms),
        longest_ms=max(waits_ms),
        counted_early=stats.expired_early,
        lateness_max_ms=stats.lateness_max_ms,
    )


BACKENDS = {
    "asyncio": ("asyncio", {}),
    "uvloop": ("asyncio", {"use_uvloop": True}),
    "trio": ("trio", {}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--timeout-ms", type=int, default=25)
    parser.add_argument("--ticks", default="1,10")
    parser.add_argument("--backends", default="asyncio,uvloop,trio")
    parser.add_argument("--may-expire-early", action="store_true")
    args = parser.parse_args()
    print(
        f"# {args.ops} operations of {args.timeout_ms} ms, may_expire_early="
        f"{args.may_expire_early}; Python {platform.python_version()}"
    )
    print("backend  tick  early  shortest_ms  longest_ms  counted_early  lateness_max_ms")
    for name in args.backends.split(","):
        backend, options = BACKENDS[name]
        for tick_ms in (int(t) for t in args.ticks.split(",")):
            r = anyio.run(
                probe,
                args.ops,
                args.timeout_ms,
                tick_ms,
                args.may_expire_early,
                backend=backend,
                backend_options=options,
            )
            print(
                f"{name:8} {tick_ms:4} {r.early:6} {r.shortest_ms:12.3f} {r.longest_ms:11.3f}"
                f" {r.counted_early:14} {r.lateness_max_ms:16}"
            )


if __name__ == "__main__":
    main()
