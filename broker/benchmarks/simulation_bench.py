"""The broker simulation's cost: at saturation and at the default rate.

Two scenarios, each the default configuration of ``broker/examples/simulate.py`` but
for the rate and the duration, no trace, no progress bar:

* ``saturation``: ``produce_rate`` far above what one core sustains (1,000,000
  requests/s offered): the producers run behind schedule and yield on every
  request, so the achieved rate is the broker's capacity here;
* ``20k``: 20,000 offered, the rate the issue measured before (a checkout from
  before the yielding producers never ends at saturation: use this one there);
* ``default``: the default 1,500 produce requests/s.

For each: achieved produce requests/s, produce requests per CPU second (what
one core would sustain if the process had it to itself: on a shared machine the
achieved rate is also bounded by the CPU the process gets), CPU microseconds
per request (produce and fetch), both purgatories' expiry lateness p99, and
whether the read-back passed. The best of ``--repeat`` runs by CPU per request
(the machine is shared: the least inflated run). Then, with ``--profile``, the
top of a cProfile of one run of each (cProfile slows Python calls several
times, so its times are shares, not costs). The header says which build ran: in
the compiled one cProfile sees no compiled function (the broker's request path
is compiled, see ``setup.py``), their time goes to their Python callers; with
``PURGATORY_NO_EXTENSIONS=1`` the pure build runs and the profile names them.

The script uses only :func:`purgatory_broker.sim.run` and the summary's keys, so it
runs against an older checkout too (``PYTHONPATH=/path/to/old/tree``): that is
how BENCHMARKS.md compares before and after.

Last, the machine's floor: the CPU one timed wake-up of the loop costs when the
loop does nothing else, at 500, 1,500 and 15,000 wake-ups per second (9 s). On
a virtual machine an idle CPU is handed back to the host, and the first
microseconds after each wake-up run on cold caches and translation buffers: at
the default rate that cost is a large part of each request's (BENCHMARKS.md).

And the same work, warm and after a wait: a fixed piece of the simulation's
per-request work (building and checking the batches of 7 produce requests, what
one of the default run's ~240 wake-ups a second handles), run after waits of
0 (``sleep(0)``: the loop never blocks), 1, 4 (the default run's mean gap) and
10 ms. The work's own time and the CPU per wake-up grow with the wait on a
shared virtual machine: the default run's requests run at that colder speed.

Run: ``python broker/benchmarks/simulation_bench.py`` (``--help``); about 4 x duration
x repeat seconds, plus the floor and the profiles.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import platform
import pstats
import random
import time
from collections.abc import Sequence
from typing import Any

from _machine import cpu_model
from purgatory_broker.broker.storage.records import build_batch, validate_batch
from purgatory_broker.sim import SimulationConfig, run
from purgatory_broker.sim.clients import record_values

import purgatory

SCENARIOS = {
    "saturation": 1_000_000.0,
    "20k": 20_000.0,
    "default": SimulationConfig().produce_rate,
}
FIGURES = (
    ("achieved_produce_rate", "produce req/s"),
    ("produce_per_cpu_s", "produce req/CPU s"),
    ("cpu_us_per_request", "CPU us/request"),
    ("produce_lateness_p99_ms", "produce lateness p99 ms"),
    ("fetch_lateness_p99_ms", "fetch lateness p99 ms"),
    ("read_back_ok", "read-back OK"),
)


def config_for(rate: float, duration_s: float, uvloop: bool) -> SimulationConfig:
    return SimulationConfig(
        produce_rate=rate,
        duration_s=duration_s,
        uvloop=uvloop,
        trace_path=None,
        progress=False,
    )


def one_run(rate: float, duration_s: float, uvloop: bool) -> dict[str, Any]:
    summary = run(config_for(rate, duration_s, uvloop))
    summary["produce_per_cpu_s"] = round(summary["produce_requests"] / summary["cpu_s"])
    if "achieved_produce_rate" not in summary:  # an older checkout: over the duration
        summary["achieved_produce_rate"] = round(summary["produce_requests"] / duration_s, 1)
    return summary


async def _bare_wakes(rate: float, duration_s: float) -> float:
    """CPU microseconds per timed wake-up of a loop doing nothing else, at ``rate``
    exponential arrivals per second (the producers' wake-ups, without the work)."""
    loop = asyncio.get_running_loop()
    rng = random.Random(1)
    wakes = 0
    cpu0 = time.process_time()
    next_s = start_s = time.monotonic()
    while next_s - start_s < duration_s:
        next_s += rng.expovariate(rate)
        waiter: asyncio.Future[None] = loop.create_future()
        loop.call_later(max(0.0, next_s - time.monotonic()), waiter.set_result, None)
        await waiter
        wakes += 1
    return (time.process_time() - cpu0) / wakes * 1e6


def wake_floor(rates: Sequence[float], duration_s: float, use_uvloop: bool) -> list[float]:
    """:func:`_bare_wakes` at each rate, each on a new loop."""
    factory = asyncio.new_event_loop
    if use_uvloop:
        import uvloop

        factory = uvloop.new_event_loop
    costs = []
    for rate in rates:
        with asyncio.Runner(loop_factory=factory) as runner:
            costs.append(runner.run(_bare_wakes(rate, duration_s)))
    return costs


#: requests per chunk in :func:`work_after_waits`: the default run's ~1,650 requests a
#: second over its ~240 loop wake-ups
CHUNK_REQUESTS = 7


def _chunk(seq: int) -> int:
    """One chunk of per-request work: build and check CHUNK_REQUESTS default batches."""
    cfg = SimulationConfig()
    size = 0
    for i in range(CHUNK_REQUESTS):
        batch = build_batch(record_values(0, seq + i, cfg.records_per_batch, cfg.record_bytes))
        size += validate_batch(batch).batch_length
    return size


async def _waits_then_work(wait_ms: float, chunks: int) -> tuple[float, float]:
    """(work us per chunk, CPU us per wait and chunk) after ``wait_ms`` waits."""
    work_s = 0.0
    cpu0 = time.process_time()
    for n in range(chunks):
        await asyncio.sleep(wait_ms / 1000)
        t0 = time.perf_counter()
        _chunk(n * CHUNK_REQUESTS)
        work_s += time.perf_counter() - t0
    return work_s / chunks * 1e6, (time.process_time() - cpu0) / chunks * 1e6


def work_after_waits(
    waits_ms: Sequence[float], seconds_each: float, use_uvloop: bool
) -> list[tuple[float, float]]:
    """:func:`_waits_then_work` at each wait, on one loop; each about ``seconds_each``."""
    factory = asyncio.new_event_loop
    if use_uvloop:
        import uvloop

        factory = uvloop.new_event_loop
    results = []
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_waits_then_work(0, 200))  # warm-up
        for wait_ms in waits_ms:
            chunks = int(seconds_each * 1000 / (wait_ms + 0.1))
            results.append(runner.run(_waits_then_work(wait_ms, max(chunks, 100))))
    return results


def profile_top(rate: float, duration_s: float, uvloop: bool, top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    run(config_for(rate, duration_s, uvloop))
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=8.0, help="seconds of load per run")
    parser.add_argument("--repeat", type=int, default=2, help="runs per scenario; best is shown")
    parser.add_argument("--no-uvloop", dest="uvloop", action="store_false", help="plain asyncio")
    parser.add_argument("--profile", action="store_true", help="add a cProfile of each scenario")
    parser.add_argument("--top", type=int, default=25, help="profile rows shown")
    parser.add_argument(
        "--scenario", choices=sorted(SCENARIOS), action="append", help="only these scenarios"
    )
    args = parser.parse_args(argv)
    names = args.scenario or list(SCENARIOS)
    print(
        f"{cpu_model()}, Python {platform.python_version()}, "
        f"{'compiled' if purgatory.compiled else 'pure'} build, "
        f"{'uvloop' if args.uvloop else 'asyncio'}, {args.duration_s:g} s per run, "
        f"best of {args.repeat} by CPU per request (a shared machine: see the docstring)"
    )
    best: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeat):  # alternate the scenarios, so load shifts hit both
        for name in names:
            summary = one_run(SCENARIOS[name], args.duration_s, args.uvloop)
            kept = best.get(name)
            if kept is None or summary["cpu_us_per_request"] < kept["cpu_us_per_request"]:
                best[name] = summary
    width = max(len(label) for _, label in FIGURES)
    print(f"{'':<{width}}  " + "  ".join(f"{name:>12}" for name in names))
    for key, label in FIGURES:
        print(f"{label:<{width}}  " + "  ".join(f"{best[n][key]!s:>12}" for n in names))
    rates = (500.0, 1_500.0, 15_000.0)
    floor = wake_floor(rates, 3.0, args.uvloop)
    print(
        "\nthe machine's floor: CPU us per bare timed wake-up of the loop (nothing else "
        "runs), at " + ", ".join(f"{r:,.0f}/s: {c:.1f}" for r, c in zip(rates, floor, strict=True))
    )
    waits_ms = (0.0, 1.0, 4.0, 10.0)
    after = work_after_waits(waits_ms, 2.0, args.uvloop)
    print(f"\nthe same work (building and checking {CHUNK_REQUESTS} batches) after each wait:")
    print(f"{'wait ms':>8}  {'work us':>8}  {'CPU us per wake-up':>18}")
    for wait_ms, (work_us, cpu_us) in zip(waits_ms, after, strict=True):
        print(f"{wait_ms:>8g}  {work_us:>8.1f}  {cpu_us:>18.1f}")
    if args.profile:
        for name in names:
            print(f"\ncProfile, {name} ({args.duration_s:g} s), top {args.top} by own time:")
            print(profile_top(SCENARIOS[name], args.duration_s, args.uvloop, args.top))


if __name__ == "__main__":
    main()
