"""A sweep task that runs the broker simulation: ``(config: dict) -> dict``.

Use it with ``python -m purgatory_broker.analytics sweep --task
purgatory_broker.analytics.simulation_task:run_simulation --grid tick_ms=1,10
wheel_size=20,64 follower_lag_ms=5,50 produce_rate=500,2000 ...``. Each grid key
is a field of :class:`purgatory_broker.sim.SimulationConfig` (unknown keys
are refused by name, on the driver before Spark starts:
``run_simulation.settings`` names them). Sweep defaults differ from the main job's: a 3 s run, no
trace file, no progress bar, asyncio unless ``uvloop`` is set: every task
runs its own event loop and its own temporary data directory.

The summary is the simulation's own (:data:`purgatory_broker.sim.SUMMARY_KEYS`)
plus the two columns the sweep ranks by: ``cpu_us_per_op`` (CPU per request) and
``lateness_p99_ms`` (the worse of the produce and fetch purgatories' p99 expiry
lateness). A run whose acknowledged records do not all read back fails the task.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

__all__ = ["SWEEP_DEFAULTS", "run_simulation", "simulation_settings"]

SWEEP_DEFAULTS: dict[str, Any] = {
    "duration_s": 3.0,
    "trace_path": None,
    "progress": False,
    "uvloop": False,
    "data_dir": None,
}


def run_simulation(config: dict[str, Any]) -> dict[str, Any]:
    """Run one simulation with ``config`` over :data:`SWEEP_DEFAULTS`; its summary.

    Cost: the simulated ``duration_s`` of wall time, plus set-up and read-back.
    """
    from purgatory_broker.sim import SimulationConfig, run

    known = {f.name for f in fields(SimulationConfig)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"unknown simulation setting(s): {', '.join(unknown)}")
    summary = run(SimulationConfig(**{**SWEEP_DEFAULTS, **config}))
    if not summary.get("read_back_ok"):
        raise AssertionError(f"acknowledged records lost: {summary.get('read_back_problems')}")
    summary.pop("read_back_problems", None)  # empty when the read-back is ok
    lateness = [summary["produce_lateness_p99_ms"], summary["fetch_lateness_p99_ms"]]
    return {
        **summary,
        "cpu_us_per_op": summary["cpu_us_per_request"],
        "lateness_p99_ms": max(lateness),
    }


def simulation_settings() -> frozenset[str]:
    """The settings run_simulation accepts: SimulationConfig's fields."""
    from purgatory_broker.sim import SimulationConfig

    return frozenset(f.name for f in fields(SimulationConfig))


run_simulation.settings = simulation_settings  # type: ignore[attr-defined]
