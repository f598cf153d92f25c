"""The simulation's default run in virtual time: its instructions per request, counted.

The default run's CPU per request cannot be timed reliably on a shared virtual
machine (the same code measured from 60 to 140 us). This script runs the same
simulation (:func:`purgatory_broker.sim.run_async`, the default settings but for
``--duration-s`` and ``--rate``, no trace) on an asyncio loop whose clock is
virtual: when the loop would block, the clock jumps to its next timer instead
(``time.monotonic``, which the simulation's clients read, is that clock too).
Every request, fetch round, timer and loop turn runs as in real time, in zero
virtual time, so the run is deterministic and load-independent and can be counted
with ``valgrind --tool=callgrind``.

Under callgrind the script calls ``os.getppid()`` right before the run and again
right before the read-back: with ``--dump-before=getppid`` the profile is
dumped at both, so the second part is the run alone (the broker's set-up, the
load, the drain, the close; not the imports, the read-back or the summary)::

    valgrind --tool=callgrind --dump-before=getppid \\
        python broker/benchmarks/virtual_run.py --duration-s 8

then ``callgrind_annotate`` the file ending ``.2`` (or read its ``summary:``
line) and divide by the requests the script prints. Without valgrind it prints
the run's requests, the loop's blocks (the times it would have slept) and how long
the run took.

What the model leaves out: the asyncio loop is Python's own (uvloop's turns cost
less), and the compiled core reads this loop's clock through a Python call
instead of ``time.monotonic`` in C. Both apply to before and after alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import selectors
import time
from typing import Any

from purgatory_broker.sim import SimulationConfig, run_async, simulation


class VirtualSelector(selectors.DefaultSelector):
    """Never blocks: a wait of ``timeout`` moves the loop's virtual clock instead."""

    def __init__(self) -> None:
        super().__init__()
        self.now_s = time.monotonic()
        self.blocks = 0  # waits with a timeout (the times a real loop sleeps)

    def select(self, timeout: float | None = None) -> list[Any]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise RuntimeError("the loop would wait forever: nothing scheduled")
        self.now_s += timeout
        self.blocks += 1
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """asyncio's loop on the selector's virtual clock."""

    def __init__(self, selector: VirtualSelector) -> None:
        super().__init__(selector)
        self.virtual = selector

    def time(self) -> float:
        return self.virtual.now_s


def run_virtual(config: SimulationConfig) -> tuple[dict[str, Any], int]:
    """Run ``config`` in virtual time; (summary, blocks). ``os.getppid()`` marks the
    run's start and end for callgrind (see the module doc)."""
    selector = VirtualSelector()
    loop = VirtualLoop(selector)
    real_monotonic = time.monotonic
    real_read_back = getattr(simulation, "read_back")  # noqa: B009 - not re-exported

    def read_back(*args: Any, **kwargs: Any) -> dict[str, Any]:
        os.getppid()  # the end of the run (callgrind dumps here)
        result: dict[str, Any] = real_read_back(*args, **kwargs)
        return result

    time.monotonic = loop.time
    setattr(simulation, "read_back", read_back)  # noqa: B010 - see the module doc
    try:
        os.getppid()  # the start of the run (callgrind dumps here)
        summary = loop.run_until_complete(run_async(config))
    finally:
        time.monotonic = real_monotonic
        setattr(simulation, "read_back", real_read_back)  # noqa: B010
        loop.close()
    return summary, selector.blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=8.0, help="virtual seconds of load")
    parser.add_argument("--rate", type=float, default=SimulationConfig().produce_rate)
    args = parser.parse_args()
    config = SimulationConfig(
        produce_rate=args.rate,
        duration_s=args.duration_s,
        uvloop=False,
        trace_path=None,
        progress=False,
    )
    start = time.perf_counter()
    summary, blocks = run_virtual(config)
    produces, fetches = summary["produce_requests"], summary["fetch_requests"]
    print(
        f"virtual {summary['load_s']:.2f} s of load in {time.perf_counter() - start:.2f} s: "
        f"{produces} produce + {fetches} fetch requests, {blocks} blocks "
        f"({blocks / summary['load_s']:.1f}/s of load), read-back OK: {summary['read_back_ok']}, "
        f"produce latency p50/p99 {summary['produce_latency_p50_ms']}/"
        f"{summary['produce_latency_p99_ms']} ms"
    )


if __name__ == "__main__":
    main()
