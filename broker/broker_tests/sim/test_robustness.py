"""The simulation never hangs: yielding producers, a bounded end, clean signals,
early path checks, a progress line that fits, a summary that agrees with the trace.

In-process runs are in virtual time (``small``); the command line runs in real
time where real time is what is checked: the smoke run of the main job at
saturation, and signals sent to a running process."""

from __future__ import annotations

import asyncio
import io
import itertools
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from purgatory_broker.sim import (
    SUMMARY_GROUPS,
    SimulationConfig,
    format_summary,
    run,
    run_async,
    simulation,
)
from purgatory_broker.sim.clients import SEND_CHUNK, Producer
from purgatory_broker.sim.progress import MIN_BAR, ProgressState, format_progress

from broker_tests.cli_kit import ROOT, assert_one_line_error, run_cli
from broker_tests.sim.test_producers import Stepper
from broker_tests.sim.test_simulation import tiny
from purgatory.core import exact_quantile
from purgatory.testing import VirtualTimeLoop, run_in_virtual_time

SIMULATE = "examples/simulate.py"  # run from the application's folder, broker/
HANG_GUARD_S = 60.0  # what must end fails only if it has not by then: no timing claim
SMALL = ["--partitions", "2", "--no-progress"]


#: the virtual time each request costs the sender in the falling-behind test (the
#: broker then sustains 10,000 requests/s)
SEND_COST_S = 0.0001


def small(tmp_path: Path, **changes: object) -> SimulationConfig:
    """The tiny run of test_simulation (in virtual time), shorter."""
    return tiny(tmp_path, **{"duration_s": 1.0, "stall_ms": 300, **changes})


# -- falling behind ------------------------------------------------------------------


def test_producers_behind_schedule_still_yield_to_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offered far more than the broker sustains, the producers run behind schedule and
    still let other tasks run on every request; the run ends after its duration, with
    the backlog unsent. In virtual time, where each request costs the sender
    SEND_COST_S (as CPU time would); counted in turns of the loop and requests."""
    sent = 0
    stepper = Stepper(lambda: sent)  # one step per turn of the loop while sending

    class CostlyProducer(Producer):
        def send(self) -> None:
            nonlocal sent
            super().send()
            sent += 1
            loop = asyncio.get_running_loop()
            assert isinstance(loop, VirtualTimeLoop)
            loop.advance(SEND_COST_S)
            stepper.on_send()

    # the simulation's producers are of this class (the compiled Producer's methods
    # cannot be patched: it is an extension type)
    monkeypatch.setattr(simulation, "Producer", CostlyProducer)

    async def main() -> dict[str, Any]:
        task = asyncio.create_task(stepper.run())
        summary = await run_async(config)
        await stepper.stop(task)
        return summary

    config = small(tmp_path, produce_rate=100_000.0, duration_s=0.3, trace_path=None)
    summary: dict[str, Any] = run_in_virtual_time(main())
    assert summary["read_back_ok"], summary["read_back_problems"]
    assert summary["achieved_produce_rate"] < summary["offered_produce_rate"]
    assert summary["produce_behind_schedule_s"] > 0
    # the loop kept turning during the load: the sender yields after every SEND_CHUNK
    # requests at most (the wake-up that first finds a backlog), and after every one
    # once it is behind schedule; another task steps at each yield
    assert summary["produce_requests"] == sent > 100
    steps = [b - a for a, b in itertools.pairwise(stepper.seen)]
    assert max(steps) <= SEND_CHUNK and sum(steps) == sent
    assert steps.count(1) > sent / 2, steps
    # it stopped at its duration: the arrivals of the duration were not all sent
    assert summary["produce_requests"] < config.produce_rate * config.duration_s
    assert not summary["drain_cut"]


def test_the_main_job_saturated_in_real_time_ends_with_its_summary(tmp_path: Path) -> None:
    """The real-time smoke run: the command line on its default loop at 1,000,000
    produce requests/s offered ends on its own, reads back, and prints its summary in
    groups, with units (CPU measured), and the trace's path once."""
    trace = tmp_path / "t.parquet"
    args = [SIMULATE, "--duration-s", "1", "--produce-rate", "1000000", "--trace-path"]
    result = run_cli([*args, str(trace), *SMALL], timeout_s=90)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "read-back OK" in out and "Traceback" not in result.stderr
    for title, _ in SUMMARY_GROUPS:
        assert f"\n{title}\n" in f"\n{out}", title
    assert out.count(str(trace)) == 1 and trace.exists()
    assert _row(out, "cpu_us_per_request")[0] == "cpu_us_per_request"
    assert " us " in next(line for line in out.splitlines() if "cpu_us_per_request" in line)
    assert "can exceed acked_records" in " ".join(out.split())


def test_a_slow_producer_does_not_hold_the_end(tmp_path: Path) -> None:
    """A producer waiting a long time for its next arrival is stopped at the end of the
    load: the run ends at its duration, long before that wait (in virtual time, where
    sitting through it would show as the run's time)."""
    config = small(tmp_path, produce_rate=0.001, duration_s=0.5, trace_path=None)
    rate = config.produce_rate / config.producers
    # each producer's first arrival (its seeded draw, as test_producers computes it)
    first_s = min(
        random.Random(config.seed * 1000 + pid).expovariate(rate) for pid in range(config.producers)
    )
    assert first_s > 10 * HANG_GUARD_S  # the wait the run must not sit through
    summary = run(config)
    assert summary["produce_requests"] == 0 and summary["read_back_ok"]
    assert summary["load_s"] == 0.5
    assert summary["wall_s"] < HANG_GUARD_S < first_s


# -- interrupting --------------------------------------------------------------------


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_run_with_its_summary(
    tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    data = tmp_path / "data"
    trace = ["--trace-path", str(tmp_path / "t.parquet")]
    child = subprocess.Popen(
        [sys.executable, SIMULATE, "--duration-s", "60", "--data-dir", str(data), *trace, *SMALL],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        # the load runs (its handlers are in place before the first append): an event,
        # not a guess at how long the start takes
        while not any(f.stat().st_size for f in (data / "sim-1").glob("*.log")):
            assert child.poll() is None and time.monotonic() < deadline, "no load ran"
            time.sleep(0.05)
        child.send_signal(signum)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == status, err
    assert "Traceback" not in err and "Task exception" not in err
    assert [line for line in err.splitlines() if line.strip()] == [
        f"simulate: {signum.name}: stopping; waiting up to 2 s for produces in flight "
        "(again to cut that short)"
    ]
    assert f"interrupted {signum.name}".split() == _row(out, "interrupted")
    assert "read-back OK" in out
    assert (tmp_path / "t.parquet").exists()


def _row(out: str, key: str) -> list[str]:
    """The words of the summary row ``key``, without its explanation."""
    for line in out.splitlines():
        words = line.split()
        if words and words[0] == key:
            return words[:2]
    raise AssertionError(f"no row {key} in:\n{out}")


# -- bad input: one line, exit 2, nothing left behind ---------------------------------


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["--stall-at", "1.5"], "stall_at must be a fraction of the run in (0, 1)"),
        (["--stall-at", "0"], "stall_at"),
        (["--leader-change-at", "2"], "leader_change_at must be a fraction"),
        (["--partitions", "two"], "argument --partitions: invalid int value"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_options_are_one_line(args: list[str], mentions: str) -> None:
    assert_one_line_error(run_cli([SIMULATE, *args]), mentions=mentions)


def test_bad_output_paths_fail_before_the_run(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "old.log").write_text("keep me")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    fresh = tmp_path / "fresh"
    cases = [
        (["--data-dir", str(full)], "is not empty"),
        (["--data-dir", str(a_file)], "is a file, not a directory"),
        (["--data-dir", "/proc/purgatory-sim-data"], "cannot be created"),
        (["--data-dir", str(fresh), "--trace-path", str(tmp_path)], "is a directory"),
        (["--data-dir", str(fresh), "--trace-path", "/proc/x/t.parquet"], "cannot be written"),
        (["--data-dir", str(a_file / "sub")], "cannot be created"),
    ]
    for args, mentions in cases:
        started = time.monotonic()
        result = run_cli([SIMULATE, "--duration-s", "600", *args])
        assert_one_line_error(result, mentions=mentions)
        # a hang guard far below the run's 600 s, not a measure of speed
        assert time.monotonic() - started < HANG_GUARD_S, "the path was checked after the run"
    assert not fresh.exists(), "a failed start left the data dir behind"
    assert [p.name for p in full.iterdir()] == ["old.log"]
    assert a_file.read_text() == "x"


# -- the progress line -----------------------------------------------------------------


STATE = ProgressState(
    elapsed_s=6.25,
    duration_s=20,
    produce_requests=1_234_567,
    waiting_produces=1234,
    waiting_fetches=12,
    smallest_isr=2,
    replicas=3,
)


@pytest.mark.parametrize("width", [200, 120, 100, 81, 80, 79, 60, 40, 20, 9, 1, 0])
def test_the_progress_line_fits_its_width(width: int) -> None:
    line = format_progress(STATE, width)
    assert len(line) <= max(0, width - 1)
    if width >= 80:
        assert "6.2/20 s" in line and "1,234,567 produce req" in line
        assert "waiting: 1234 produce, 12 fetch" in line and line.startswith("[")
    if width >= 120:
        assert "smallest ISR 2/3" in line
    if width == 40:
        assert line.startswith("[") and line.count(".") >= MIN_BAR - 3


def test_the_progress_bar_never_wraps_at_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    summary = run(small(tmp_path, trace_path=None, progress=True), out=out)
    assert summary["read_back_ok"]
    frames = [f.replace("\x1b[K", "") for f in out.getvalue().split("\r")]
    drawn = [f for f in frames if f]
    assert len(drawn) >= 3 and "\n" not in out.getvalue()
    assert max(len(f) for f in drawn) <= 79
    assert all("produce req" in f for f in drawn)


# -- the summary -----------------------------------------------------------------------


def test_summary_lateness_is_the_traces(tmp_path: Path) -> None:
    """The summary's lateness p50/p99/max are the exact figures of the trace's expired
    rows (completed_ms - deadline_ms), which the analytics report reads."""
    summary = run(small(tmp_path, produce_timeout_ms=20, fetch_max_wait_ms=20))
    rows = pq.read_table(summary["trace_path"]).to_pylist()
    for purgatory in ("produce", "fetch"):
        late = sorted(
            r["completed_ms"] - r["deadline_ms"]
            for r in rows
            if r["purgatory"] == purgatory and r["outcome"] == "expired"
        )
        assert late, f"no {purgatory} expired"
        assert summary[f"{purgatory}_lateness_p50_ms"] == exact_quantile(late, 0.5)
        assert summary[f"{purgatory}_lateness_p99_ms"] == exact_quantile(late, 0.99)
        assert summary[f"{purgatory}_lateness_max_ms"] == late[-1]


def test_the_summary_table_fits_its_width_with_units() -> None:
    text = format_summary({"failed_produces": 3, "read_back_ok": True, "cpu_s": None}, width=60)
    assert all(len(line) <= 59 for line in text.splitlines())
    assert "yes" in text and "3 req" in text
    assert _row(text, "cpu_s") == ["cpu_s", "-"]  # not measured (virtual time)


def test_help_says_what_is_seeded() -> None:
    result = run_cli([SIMULATE, "--help"], columns=100)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: simulate.py ")  # a file: its name
    text = " ".join(result.stdout.split())
    assert "--seed fixes each producer's arrival schedule" in text
    assert "runs in real time" in text and "130 after Ctrl-C" in text
