"""How often the simulation's event loop blocks, and what wakes it: a count, not a time.

At the default rate (1,500 produce requests/s) the simulation's CPU per request is
set less by its own work than by how often the loop goes idle and wakes again: on a
virtual machine every timed wake-up costs tens of microseconds of CPU on cold caches
(``simulation_bench.py`` prints that floor). A count of the wake-ups does not depend
on the machine's load, so a change to the scheduling can be judged by it.

The run is :func:`purgatory_broker.sim.run_async` with the default settings (but for
``--rate`` and ``--duration-s``, no trace) on asyncio's own loop with an
instrumented selector: each ``select`` call with a timeout other than zero is a
block (the loop had nothing ready); the callback of the earliest timer handle at
that moment names what the block waited for (a block that ends by I/O or a
``call_soon_threadsafe`` is counted as such). uvloop blocks in the same places (its
timers count whole milliseconds where asyncio's count fractions, so it may merge a
few more), but cannot be instrumented from Python.

The script uses only :func:`purgatory_broker.sim.run_async`, so it runs against an older
checkout too (``PYTHONPATH=/path/to/old/tree``).

Run: ``python broker/benchmarks/loop_wakeups.py [--duration-s 8] [--rate 1500]``.
"""

from __future__ import annotations

import argparse
import asyncio
import selectors
from collections import Counter
from typing import Any

from purgatory_broker.sim import SimulationConfig, run_async


class CountingSelector(selectors.DefaultSelector):
    """A selector that counts the blocking selects, by what the loop waits for."""

    loop: asyncio.BaseEventLoop | None = None
    blocks: Counter[str]

    def __init__(self) -> None:
        super().__init__()
        self.blocks = Counter()

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None or timeout > 0:
            scheduled = getattr(self.loop, "_scheduled", None) or []
            live = [h for h in scheduled if not h.cancelled()]
            if live:
                earliest = min(live, key=lambda h: h.when())
                cause = _cause(earliest)
            else:
                cause = "(no timer: I/O only)"
            events = super().select(timeout)
            if events:
                cause = "(I/O) " + cause
            self.blocks[cause] += 1
            return events
        return super().select(timeout)


def _cause(handle: asyncio.TimerHandle) -> str:
    """The name of a timer handle's callback; for a timer that resolves a future
    (``asyncio.sleep``, ``call_later(delay, wake, future)``), also the coroutine of
    the task that awaits the future."""
    callback = getattr(handle, "_callback")  # noqa: B009 - a private field
    name = getattr(callback, "__qualname__", repr(callback))
    for arg in getattr(handle, "_args"):  # noqa: B009
        if isinstance(arg, asyncio.Future):
            for cb, _ in getattr(arg, "_callbacks", None) or []:
                task = getattr(cb, "__self__", None)
                if isinstance(task, asyncio.Task):
                    return f"{name} -> {task.get_coro().__qualname__}"  # type: ignore[union-attr]
    return name


def count(rate: float, duration_s: float) -> tuple[Counter[str], dict[str, Any]]:
    selector = CountingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    selector.loop = loop
    config = SimulationConfig(
        produce_rate=rate, duration_s=duration_s, uvloop=False, trace_path=None, progress=False
    )
    try:
        summary = loop.run_until_complete(run_async(config))
    finally:
        loop.close()
    return selector.blocks, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=8.0, help="seconds of load")
    parser.add_argument("--rate", type=float, default=SimulationConfig().produce_rate)
    args = parser.parse_args()
    blocks, summary = count(args.rate, args.duration_s)
    seconds = summary.get("wall_s", args.duration_s)
    total = sum(blocks.values())
    print(
        f"{summary['produce_requests']} produce requests in {seconds:.2f} s; "
        f"the loop blocked {total} times: {total / seconds:.1f}/s, "
        f"{total / max(1, summary['produce_requests']):.3f} per produce request; "
        f"read-back OK: {summary.get('read_back_ok')}"
    )
    for cause, n in blocks.most_common():
        print(f"{n / seconds:9.1f}/s  {n:8d}  {cause}")


if __name__ == "__main__":
    main()
