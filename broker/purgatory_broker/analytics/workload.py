"""The default sweep workload: a SystemTimer under Kafka-purgatory-like load, measured.

:func:`run_workload` is a sweep task (``(config: dict) -> dict``). On a fresh
event loop it starts a :class:`purgatory.SystemTimer` with the config's
``tick_ms`` and ``wheel_size`` and its reaper (``async with timer``), then:

1. schedules ``operations`` timer tasks with exponential inter-arrival times
   at ``rate_per_s`` (a Poisson process), each with delay ``timeout_ms``;
2. draws each operation's completion latency from a lognormal with the
   config's p50 and p75 (the "timeout mix", as in Confluent's purgatory
   benchmark: ``low`` p50 20 ms / p75 60 ms, ``high`` p50 200 ms / p75 400 ms);
   an operation whose latency is below its timeout is completed early by a
   ``loop.call_later`` that cancels its timer task, the others expire;
3. waits until every operation has completed or expired.

It measures CPU seconds (``time.process_time``, the whole process, so the
loop's own work and the early-completion callbacks are in it too: the same
for every tick and wheel size, so comparisons hold), wall seconds, operations
per second, reaper wake-ups, and the lateness of each expiry: the loop clock
at ``run()`` minus the deadline the timer computed (``now_ms + timeout_ms`` on
the timer's clock), in ms. Negative lateness means a coarse tick fired early;
``off_deadline_p99_ms`` ranks both directions alike (p99 of the absolute
lateness) and ``early_expiries`` counts the early ones.

The random draws depend on ``seed`` only, so configurations see the same
arrivals and latencies. Cost: O(operations) memory; wall time about
``operations / rate_per_s + timeout_ms``.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from purgatory import SystemTimer, TimerTask
from purgatory.core import DEFAULT_TICK_MS, DEFAULT_WHEEL_SIZE, exact_quantile

__all__ = [
    "MIXES",
    "WORKLOAD_SETTINGS",
    "WorkloadConfig",
    "lognormal_params",
    "run_workload",
]

#: latency mixes: name -> (p50 ms, p75 ms)
MIXES: dict[str, tuple[float, float]] = {"low": (20.0, 60.0), "high": (200.0, 400.0)}
Z_75 = 0.6744897501960817  # the standard normal's 0.75 quantile


def lognormal_params(p50: float, p75: float) -> tuple[float, float]:
    """``(mu, sigma)`` of the log-normal with median ``p50`` and 75th percentile ``p75``.

    ``mu = ln p50`` and ``sigma = ln(p75 / p50) / z_0.75``: how Kafka's purgatory
    benchmark fits its completion latencies to two quantiles. O(1).
    """
    return math.log(p50), math.log(p75 / p50) / Z_75


@dataclass(frozen=True)
class WorkloadConfig:
    """A workload's settings; unknown config keys are refused."""

    tick_ms: int = DEFAULT_TICK_MS
    wheel_size: int = DEFAULT_WHEEL_SIZE
    operations: int = 2_000
    rate_per_s: float = 2_000.0
    timeout_ms: int = 200
    mix: str = "low"
    p50_ms: float | None = None  # override the mix
    p75_ms: float | None = None
    seed: int = 0
    loop: str = "asyncio"  # or "uvloop"

    def __post_init__(self) -> None:
        if self.tick_ms <= 0 or self.wheel_size <= 0:
            raise ValueError("tick_ms and wheel_size must be positive")
        if self.operations <= 0 or self.rate_per_s <= 0 or self.timeout_ms <= 0:
            raise ValueError("operations, rate_per_s and timeout_ms must be positive")
        if self.mix not in MIXES and (self.p50_ms is None or self.p75_ms is None):
            raise ValueError(f"mix must be one of {sorted(MIXES)}, or give p50_ms and p75_ms")
        p50, p75 = self.latency_p50_p75
        if not 0 < p50 < p75:
            raise ValueError(f"need 0 < p50_ms < p75_ms, got {p50} and {p75}")
        if self.loop not in ("asyncio", "uvloop"):
            raise ValueError(f"loop must be asyncio or uvloop, not {self.loop!r}")

    @property
    def latency_p50_p75(self) -> tuple[float, float]:
        p50, p75 = MIXES.get(self.mix, (math.nan, math.nan))
        return (self.p50_ms or p50, self.p75_ms or p75)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> WorkloadConfig:
        """Build from a sweep config, converting numbers given as strings."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise ValueError(f"unknown workload setting(s): {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, value in config.items():
            default = getattr(cls, name)
            if isinstance(default, bool) or value is None:
                values[name] = value
            elif isinstance(default, int):
                values[name] = int(value)
            elif isinstance(default, float) or name in ("p50_ms", "p75_ms"):
                values[name] = float(value)
            else:
                values[name] = str(value)
        return cls(**values)


class _Operation(TimerTask):
    """A delayed operation: expires through the timer or is completed early."""

    __slots__ = ("deadline_ms", "done", "run_state")

    def __init__(self, timeout_ms: int, run_state: _RunState) -> None:
        super().__init__(timeout_ms)
        self.deadline_ms = 0
        self.done = False
        self.run_state = run_state

    def run(self) -> None:  # expired
        state = self.run_state
        state.lateness_ms.append(state.loop.time() * 1000.0 - self.deadline_ms)
        state.finish(self, expired=True)

    def complete(self) -> None:  # early; a coarse tick may have expired it already
        if not self.done:
            self.cancel()
            self.run_state.finish(self, expired=False)


class _RunState:
    __slots__ = ("all_done", "expired", "lateness_ms", "loop", "remaining")

    def __init__(self, loop: asyncio.AbstractEventLoop, operations: int) -> None:
        self.loop = loop
        self.lateness_ms: list[float] = []
        self.remaining = operations
        self.expired = 0
        self.all_done: asyncio.Future[None] = loop.create_future()

    def finish(self, op: _Operation, *, expired: bool) -> None:
        op.done = True
        self.expired += expired
        self.remaining -= 1
        if self.remaining == 0:
            self.all_done.set_result(None)


async def _drive(cfg: WorkloadConfig) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    rng = random.Random(cfg.seed)
    p50, p75 = cfg.latency_p50_p75
    mu, sigma = lognormal_params(p50, p75)
    gaps_s = [rng.expovariate(cfg.rate_per_s) for _ in range(cfg.operations)]
    latencies_s = [rng.lognormvariate(mu, sigma) / 1000.0 for _ in range(cfg.operations)]
    timeout_s = cfg.timeout_ms / 1000.0

    state = _RunState(loop, cfg.operations)
    timer = SystemTimer("sweep", tick_ms=cfg.tick_ms, wheel_size=cfg.wheel_size)
    now_ms = timer.clock.now_ms
    cpu_start = time.process_time()
    wall_start = loop.time()
    async with timer:
        arrival_s = wall_start
        for gap_s, latency_s in zip(gaps_s, latencies_s, strict=True):
            arrival_s += gap_s
            wait_s = arrival_s - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
            op = _Operation(cfg.timeout_ms, state)
            op.deadline_ms = now_ms() + cfg.timeout_ms  # what the timer computes in add()
            timer.add(op)
            if latency_s < timeout_s:
                loop.call_later(latency_s, op.complete)
        await state.all_done
        wakeups = timer.reaper_wakeups
    wall_s = loop.time() - wall_start
    cpu_s = time.process_time() - cpu_start

    lateness = sorted(state.lateness_ms)
    off_deadline = sorted(abs(v) for v in lateness)
    return {
        "operations": cfg.operations,
        "completed_early": cfg.operations - state.expired,
        "expired": state.expired,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "cpu_us_per_op": cpu_s / cfg.operations * 1e6,
        "ops_per_s": cfg.operations / wall_s,
        "lateness_p50_ms": exact_quantile(lateness, 0.5) if lateness else None,
        "lateness_p99_ms": exact_quantile(lateness, 0.99) if lateness else None,
        "lateness_max_ms": lateness[-1] if lateness else None,
        "off_deadline_p99_ms": exact_quantile(off_deadline, 0.99) if lateness else None,
        "early_expiries": sum(1 for v in lateness if v < 0),
        "reaper_wakeups": wakeups,
    }


def _new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run_workload(config: Mapping[str, Any]) -> dict[str, Any]:
    """Run the workload ``config`` describes on a fresh event loop; return its summary.

    The summary holds the full configuration (defaults filled in) and the
    measurements: operations, completed_early, expired, wall_s, cpu_s,
    cpu_us_per_op, ops_per_s, lateness_p50_ms, lateness_p99_ms,
    lateness_max_ms, off_deadline_p99_ms (p99 of |lateness|: how far from the
    deadline expiries fire, early or late; None when nothing expired),
    early_expiries (expiries fired before their deadline) and reaper_wakeups.
    The settings it accepts are :data:`WORKLOAD_SETTINGS` (also
    ``run_workload.settings``, which the sweep checks its grid against).
    """
    cfg = WorkloadConfig.from_mapping(config)
    loop = _new_loop(cfg.loop)
    try:
        measured = loop.run_until_complete(_drive(cfg))
    finally:
        loop.close()
    return {**asdict(cfg), **measured}


#: the settings run_workload accepts: WorkloadConfig's fields
WORKLOAD_SETTINGS = frozenset(f.name for f in fields(WorkloadConfig))
run_workload.settings = WORKLOAD_SETTINGS  # type: ignore[attr-defined]
