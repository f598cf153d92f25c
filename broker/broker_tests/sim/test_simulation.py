"""The simulation, tiny: every acknowledged record read back, counts add up, trace schema;
the process's hooks are put back after a run.

The runs are in virtual time (``virtual_time=True``: the same run every time, as fast
as the CPU goes); the real-time run is test_robustness's smoke run of the command
line."""

from __future__ import annotations

import gc
import importlib.util
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.parquet as pq
import pytest
from purgatory_broker.broker import next_offset
from purgatory_broker.broker.storage.log import PartitionLog
from purgatory_broker.sim import (
    SUMMARY_KEYS,
    SimulationConfig,
    format_summary,
    run,
)
from purgatory_broker.sim.clients import Ack
from purgatory_broker.sim.readback import ReadBack
from purgatory_broker.tracing import trace_schema

from purgatory import TopicPartition

ROOT = Path(__file__).resolve().parents[2]


def tiny(tmp_path: Path, **changes: object) -> SimulationConfig:
    base: dict[str, object] = {
        "duration_s": 1.5,
        "partitions": 3,
        "produce_rate": 400.0,
        "producers": 2,
        "replica_lag_time_max_ms": 200,
        "stall_at": 0.2,
        "stall_ms": 500,
        "leader_change_at": 0.6,
        "leader_change_ms": 100,
        "fetch_min_bytes": 2048,
        "fetch_max_wait_ms": 50,
        "produce_timeout_ms": 300,
        "trace_path": str(tmp_path / "trace.parquet"),
        "data_dir": str(tmp_path / "data"),
        "virtual_time": True,
    }
    base.update(changes)
    return SimulationConfig(**base)  # type: ignore[arg-type]


def test_tiny_run_reads_back_every_acknowledged_record(tmp_path: Path) -> None:
    config = tiny(tmp_path)
    summary = run(config)
    assert set(SUMMARY_KEYS) <= set(summary)
    assert summary["read_back_ok"], summary["read_back_problems"]
    assert summary["acked_records"] > 0
    assert summary["recovery_truncated_bytes"] == 0 and summary["log_flushes"] == 0
    assert summary["read_back_records"] == summary["acked_records"]
    # the stall made the ISR shrink and grow; the leader change happened
    assert summary["isr_shrinks"] >= 1 and summary["isr_expands"] >= 1
    assert summary["leader_changes"] == 1
    # counts add up: every produce request was acknowledged, failed at once, or waited
    delayed_produces = summary["produce_completed"] + summary["produce_expired"]
    assert summary["produce_cancelled"] == summary["fetch_cancelled"] == 0
    assert (
        summary["acked_records"]
        == (summary["produce_requests"] - summary["failed_produces"]) * config.records_per_batch
    )
    assert delayed_produces <= summary["produce_requests"]
    assert 0 < summary["consumed_records"] <= summary["produce_requests"] * config.records_per_batch
    # the trace: the contract's schema, one row per delayed operation
    table = pq.read_table(summary["trace_path"])
    assert table.schema.equals(trace_schema())
    assert table.num_rows == summary["trace_rows"] == summary["delayed_ops"]
    rows = table.to_pylist()
    produce_rows = [r for r in rows if r["purgatory"] == "produce"]
    assert len(produce_rows) == delayed_produces
    assert sum(r["outcome"] == "expired" for r in produce_rows) == summary["produce_expired"]
    for r in rows:
        assert r["created_ms"] <= r["completed_ms"]
        assert r["deadline_ms"] - r["created_ms"] in (
            config.produce_timeout_ms,
            config.fetch_max_wait_ms,
            config.follower_max_wait_ms,
        )
        assert len(r["error_codes"]) == len(r["keys"])
        if r["outcome"] == "expired":
            assert r["completed_ms"] >= r["deadline_ms"] - config.tick_ms
    assert {r["kind"] for r in rows} >= {"produce", "fetch_follower"}
    assert "read_back_ok" in format_summary(summary)


def test_run_without_trace_in_a_temporary_directory(tmp_path: Path) -> None:
    summary = run(tiny(tmp_path, duration_s=0.5, trace_path=None, data_dir=None))
    assert summary["read_back_ok"] and summary["trace_path"] is None
    assert summary["uvloop"] is False  # virtual time runs on asyncio's selector loop
    assert summary["cpu_s"] is None and summary["cpu_us_per_request"] is None
    assert summary["load_s"] == 0.5


def test_survivors_are_frozen_during_the_run_and_handed_back_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a run lasts, what survives a collection leaves the collector (frozen);
    afterwards nothing stays frozen and the collector's hooks are as they were."""
    from purgatory_broker.sim import simulation
    from purgatory_broker.sim.readback import read_back as original

    hooks = list(gc.callbacks)
    frozen_during: list[int] = []

    def observing(
        acks: Sequence[Ack], data_dir: Path, tps: Sequence[TopicPartition], truncated: int
    ) -> ReadBack:
        gc.collect(0)  # a young collection: its survivors are frozen right after it
        frozen_during.append(gc.get_freeze_count())
        return original(acks, data_dir, tps, truncated)

    monkeypatch.setattr(simulation, "read_back", observing)
    summary = run(tiny(tmp_path, duration_s=0.5, trace_path=None))
    assert summary["read_back_ok"]
    assert frozen_during and frozen_during[0] > 1000  # the run's answers, rows, logs
    assert gc.get_freeze_count() == 0
    assert gc.callbacks == hooks


def test_signal_handlers_are_put_back_after_a_run(tmp_path: Path) -> None:
    """A run that handles SIGINT and SIGTERM leaves the process's own handlers (and
    its collector's hooks) as they were, not the defaults."""

    def own(signum: int, frame: object) -> None:
        raise AssertionError(f"signal {signum} during the test")

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    hooks = list(gc.callbacks)
    try:
        for signum in before:
            signal.signal(signum, own)
        summary = run(tiny(tmp_path, duration_s=0.5, trace_path=None), handle_signals=True)
        after = {signum: signal.getsignal(signum) for signum in before}
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    assert summary["read_back_ok"] and summary["interrupted"] is None
    assert after == {signal.SIGINT: own, signal.SIGTERM: own}
    assert gc.callbacks == hooks


def test_the_loop_must_keep_the_time_the_config_asks_for(tmp_path: Path) -> None:
    """run_async refuses a virtual-time config on a real loop, and the reverse."""
    import asyncio

    from purgatory_broker.sim import run_async

    from purgatory.testing import run_in_virtual_time

    with pytest.raises(ValueError, match="virtual_time needs a VirtualTimeLoop"):
        asyncio.run(run_async(tiny(tmp_path)))
    with pytest.raises(ValueError, match="set virtual_time=True"):
        run_in_virtual_time(run_async(tiny(tmp_path, virtual_time=False)))
    assert not (tmp_path / "data").exists()


def run_damaging_before_read_back(
    tmp_path: Path, damage: Callable[[Path], object], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """A short run whose partition 0 directory goes through ``damage`` (by hand, after
    the broker closed) just before the read-back reopens the logs."""
    from purgatory_broker.sim import simulation
    from purgatory_broker.sim.readback import read_back as original

    def damaging(
        acks: Sequence[Ack], data_dir: Path, tps: Sequence[TopicPartition], truncated: int
    ) -> ReadBack:
        damage(data_dir / str(tps[0]))
        return original(acks, data_dir, tps, truncated)

    monkeypatch.setattr(simulation, "read_back", damaging)
    return run(tiny(tmp_path, duration_s=0.5, stall_at=-1, leader_change_at=-1))


def test_read_back_catches_a_lost_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Truncating a log after the run (by hand) must be reported, not missed."""

    def truncate(directory: Path) -> None:
        with PartitionLog(directory) as log:
            log.truncate_to(max(0, log.log_end_offset - 3))

    summary = run_damaging_before_read_back(tmp_path, truncate, monkeypatch)
    assert not summary["read_back_ok"]
    assert any("missing" in p for p in summary["read_back_problems"])


def test_recovery_cuts_are_counted_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torn tail found when the read-back reopens a log: the summary counts the bytes
    cut and the read-back fails, naming the partition."""
    torn = b"\x00" * 8 + b"\x00\x00\x01\x00" + b"\x07" * 20  # a header cut short

    def tear(directory: Path) -> None:
        with sorted(directory.glob("*.log"))[-1].open("ab") as f:
            f.write(torn)

    summary = run_damaging_before_read_back(tmp_path, tear, monkeypatch)
    assert summary["recovery_truncated_bytes"] == len(torn)
    assert not summary["read_back_ok"]
    assert any("sim-0: reopening cut 32 bytes" in p for p in summary["read_back_problems"])


def test_bad_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="min_insync_replicas"):
        run(tiny(tmp_path, min_insync_replicas=5))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "junk").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        run(tiny(tmp_path))


def test_next_offset() -> None:
    from purgatory_broker.broker.storage.records import build_batch, with_base_offset

    two = with_base_offset(build_batch([b"a", b"b"]), 5) + with_base_offset(build_batch([b"c"]), 7)
    assert next_offset(two) == 8
    assert next_offset(b"") is None


def _load_cli() -> ModuleType:
    spec = importlib.util.spec_from_file_location("simulate", ROOT / "examples" / "simulate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["simulate_cli_under_test"] = module
    spec.loader.exec_module(module)
    return module


def test_cli_help_and_short_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = _load_cli()
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    help_text = capsys.readouterr().out
    for option in (
        "--seed",
        "--duration",
        "--tick-ms",
        "--wheel-size",
        "--no-uvloop",
        "--trace",
        "--flush-messages",
        "--flush-ms",
    ):
        assert option in help_text
    trace = tmp_path / "t.parquet"
    code = cli.main(
        [
            "--virtual-time",
            "--duration",
            "0.5",
            "--quiet",
            "--trace",
            str(trace),
            "--stall-at",
            "-1",
            "--partitions",
            "2",
            "--flush-messages",
            "50",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "read-back OK" in out and trace.exists()
    flushes = next(line for line in out.splitlines() if line.strip().startswith("log_flushes"))
    assert int(flushes.split()[1]) >= 2  # at least each partition's flush on close
    for refused in (["--partitions", "0"], ["--flush-ms", "0"]):  # usage errors, as argparse's
        with pytest.raises(SystemExit) as exit_info:
            cli.main(refused)
        assert exit_info.value.code == 2
