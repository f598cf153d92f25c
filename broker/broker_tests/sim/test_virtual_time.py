"""The simulation in virtual time: a seeded run is the same run every time.

On :class:`purgatory.testing.VirtualTimeLoop` only waiting takes time, so the run is
a function of its settings: two runs give the same trace (row by row), the same
summary (key by key) and the same bytes in their partition logs, within one process
and across processes whose string hashes differ (``PYTHONHASHSEED``). The runs take
the CPU they need, a few seconds of wall time, for seconds of simulated load with
its stall and its leader change.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from purgatory_broker.sim import SimulationConfig, run

from broker_tests.cli_kit import run_cli
from broker_tests.sim.test_simulation import tiny

SIMULATE = "examples/simulate.py"  # run from the application's folder, broker/


def _logs(data_dir: Path) -> dict[str, str]:
    """The digest of every file under ``data_dir``, by relative path."""
    return {
        path.relative_to(data_dir).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(data_dir.rglob("*"))
        if path.is_file()
    }


def _run(config: SimulationConfig) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """Run ``config``: its summary, its trace's rows, its logs' digests."""
    summary = run(config)
    rows = pq.read_table(summary["trace_path"]).to_pylist()
    assert config.data_dir is not None
    return summary, rows, _logs(Path(config.data_dir))


def test_a_seeded_run_in_virtual_time_is_the_same_every_time(tmp_path: Path) -> None:
    trace = str(tmp_path / "trace.parquet")  # the same path: the summaries name it
    first = tiny(tmp_path, duration_s=3.0, trace_path=trace, data_dir=str(tmp_path / "first"))
    summary, rows, logs = _run(first)
    again = _run(tiny(tmp_path, duration_s=3.0, trace_path=trace, data_dir=str(tmp_path / "again")))
    assert again[1] == rows
    assert again[0] == summary
    assert again[2] == logs
    # a whole run: the scenario happened, fetches waited and expired, all read back
    assert summary["read_back_ok"] and summary["acked_records"] > 0
    assert summary["isr_shrinks"] >= 1 and summary["isr_expands"] >= 1
    assert summary["leader_changes"] == 1 and summary["fetch_expired"] > 0
    assert summary["load_s"] == 3.0 and summary["cpu_s"] is None
    assert len(rows) == summary["trace_rows"] > 1000


def test_another_seed_is_another_run(tmp_path: Path) -> None:
    one = run(tiny(tmp_path, duration_s=1.0, trace_path=None, data_dir=None))
    two = run(tiny(tmp_path, duration_s=1.0, trace_path=None, data_dir=None, seed=2))
    assert one["read_back_ok"] and two["read_back_ok"]
    assert one["produce_requests"] != two["produce_requests"]


def test_the_command_line_repeats_a_run_in_another_process(tmp_path: Path) -> None:
    """``--virtual-time`` on the command line, in two processes whose string hashes
    differ: the same table printed, the same trace written."""
    trace = tmp_path / "t.parquet"
    args = [SIMULATE, "--virtual-time", "--duration-s", "1", "--partitions", "2"]
    args += ["--no-progress", "--trace-path", str(trace)]
    outputs = []
    for hash_seed in ("1", "2"):
        result = run_cli(args, env={"PYTHONHASHSEED": hash_seed})
        assert result.returncode == 0, result.stderr
        outputs.append((result.stdout, pq.read_table(trace).to_pylist()))
    assert outputs[0] == outputs[1]
    assert "read-back OK" in outputs[0][0]
