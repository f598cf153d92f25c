"""Sweeps: grids, task resolution, and a tiny sweep of the real workload on Spark."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest
from purgatory_broker.analytics import expand_grid, parse_assignments, run_sweep, run_workload
from purgatory_broker.analytics.sweep import render_sweep, resolve_task

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

#: a short run: 600 operations at 3000/s, so about 0.2 s plus the 200 ms timeout
SHORT = {"operations": 600, "rate_per_s": 3000.0}


def test_parse_assignments_types_values() -> None:
    grid = parse_assignments(["tick_ms=1,5", "mix=low,high", "rate_per_s=2.5", "p50_ms=none"])
    assert grid == {
        "tick_ms": [1, 5],
        "mix": ["low", "high"],
        "rate_per_s": [2.5],
        "p50_ms": [None],
    }
    for bad in (["tick_ms"], ["=1"], ["tick_ms="], ["a=1", "a=2"]):
        with pytest.raises(ValueError):
            parse_assignments(bad)


def test_expand_grid_is_the_product_over_the_base() -> None:
    configs = expand_grid({"tick_ms": [1, 5], "wheel_size": [8, 20]}, {"mix": "high"})
    assert configs == [
        {"mix": "high", "tick_ms": 1, "wheel_size": 8},
        {"mix": "high", "tick_ms": 1, "wheel_size": 20},
        {"mix": "high", "tick_ms": 5, "wheel_size": 8},
        {"mix": "high", "tick_ms": 5, "wheel_size": 20},
    ]
    with pytest.raises(ValueError, match="no values"):
        expand_grid({"tick_ms": []})


def test_resolve_task_accepts_both_spellings_and_names_failures() -> None:
    assert resolve_task("purgatory_broker.analytics.workload:run_workload") is run_workload
    assert resolve_task("purgatory_broker.analytics.workload.run_workload") is run_workload
    with pytest.raises(ValueError, match="cannot import"):
        resolve_task("no_such_module:f")
    with pytest.raises(ValueError, match="not a function"):
        resolve_task("purgatory_broker.analytics.workload:MIXES")
    with pytest.raises(ValueError, match="dotted path"):
        resolve_task("run_workload")


def test_workload_completes_or_expires_every_operation() -> None:
    summary = run_workload({**SHORT, "tick_ms": 1, "wheel_size": 20, "seed": 3})
    assert summary["completed_early"] + summary["expired"] == 600
    assert summary["expired"] > 0 and summary["completed_early"] > 0
    # with 1 ms ticks a task never runs before its deadline on the loop clock
    assert summary["lateness_p50_ms"] >= 0
    assert summary["lateness_p50_ms"] <= summary["lateness_p99_ms"] <= summary["lateness_max_ms"]
    assert summary["cpu_us_per_op"] > 0 and summary["reaper_wakeups"] > 0


def test_workload_draws_depend_on_the_seed_only() -> None:
    coarse = run_workload({**SHORT, "tick_ms": 20, "wheel_size": 8, "seed": 3})
    fine = run_workload({**SHORT, "tick_ms": 1, "wheel_size": 20, "seed": 3})
    # the same latencies: the operations whose latency is under the timeout complete
    # early in both, up to those within one coarse tick of their deadline
    assert abs(coarse["expired"] - fine["expired"]) <= 0.05 * 600
    # a coarse tick may fire a bucket early, never by a whole tick
    assert coarse["lateness_p50_ms"] > -20


def test_workload_refuses_unknown_settings() -> None:
    with pytest.raises(ValueError, match="unknown workload setting"):
        run_workload({"tick": 1})
    with pytest.raises(ValueError, match="mix"):
        run_workload({"mix": "medium"})


@pytest.mark.system  # Java: a Spark session
def test_sweep_runs_one_task_per_config(spark: SparkSession, tmp_path: Path) -> None:
    configs = expand_grid({"tick_ms": [1, 10], "wheel_size": [20]}, SHORT)
    configs.append({"tick_ms": 1, "bogus": 1})  # a failing configuration
    result = run_sweep(spark, configs, tmp_path, progress=False)
    table = pq.read_table(result.parquet).to_pandas()
    assert list(table["config_id"]) == [0, 1, 2]
    assert result.failed == 1
    assert "unknown workload setting(s): bogus" in table.loc[2, "error"]
    ok = table.iloc[:2]
    assert list(ok["tick_ms"]) == [1, 10]
    assert (ok["completed_early"] + ok["expired"] == 600).all()
    assert ok["error"].isna().all()
    html = Path(result.html).read_text(encoding="utf-8")
    assert "Lowest CPU per operation" in html and "Failed configurations" in html
    assert "<script" not in html and html.count("<svg") == 2


@pytest.mark.system  # Java: a Spark session
def test_sweep_task_is_pluggable(spark: SparkSession, tmp_path: Path) -> None:
    # any importable (config: dict) -> dict works; builtins.dict echoes the config
    configs = expand_grid({"tick_ms": [1, 2], "answer": [42]})
    result = run_sweep(spark, configs, tmp_path, task="builtins:dict", progress=False)
    assert result.failed == 0
    assert list(result.summaries["answer"]) == [42, 42]
    assert "Results" in Path(result.html).read_text(encoding="utf-8")


@pytest.mark.system  # Java: a Spark session
def test_sweep_over_the_broker_simulation(spark: SparkSession, tmp_path: Path) -> None:
    """Two simulation configurations (follower lag varies) as Spark tasks, and a bad one."""
    task = "purgatory_broker.analytics.simulation_task:run_simulation"
    base = {"duration_s": 1.0, "produce_rate": 300.0, "stall_at": -1.0}
    configs = expand_grid({"follower_lag_ms": [2, 40], "tick_ms": [1]}, base)
    configs.append({"no_such_setting": 1})
    result = run_sweep(spark, configs, tmp_path, task=task, progress=False)
    table = pq.read_table(result.parquet).to_pandas()
    assert result.failed == 1
    assert "unknown simulation setting(s): no_such_setting" in table.loc[2, "error"]
    ok = table.iloc[:2]
    assert list(ok["follower_lag_ms"]) == [2, 40]
    assert ok["read_back_ok"].all() and (ok["acked_records"] > 0).all()
    assert (ok["cpu_us_per_op"] > 0).all()
    # the same workload with slower followers waits longer for its acknowledgements
    assert ok.loc[1, "produce_latency_p50_ms"] > ok.loc[0, "produce_latency_p50_ms"]
    assert "Lowest CPU per operation" in Path(result.html).read_text(encoding="utf-8")


def _summaries(**columns: list[Any]) -> pd.DataFrame:
    import pandas as pd

    base: dict[str, list[Any]] = {"tick_ms": [1, 20], "wheel_size": [20, 20], "error": [None] * 2}
    return pd.DataFrame({**base, **columns})


def test_the_verdict_ranks_by_distance_from_the_deadline() -> None:
    # 20 ms ticks fire 15 ms early (lateness p99 -15): far from the deadline, not "good"
    frame = _summaries(
        cpu_us_per_op=[5.0, 4.0],
        lateness_p99_ms=[2.0, -15.0],
        lateness_max_ms=[3.0, -1.0],
        off_deadline_p99_ms=[2.0, 15.0],
        early_expiries=[0, 40],
    )
    html = render_sweep(
        frame, settings=["tick_ms", "wheel_size"], task="t", parallelism=2, swept=["tick_ms"]
    )
    assert "closest to the deadline (p99 of |lateness|): <b>1</b> (2.0 ms)" in html
    assert "early_expiries" in html
    # only the swept key names the configurations
    assert "(tick_ms)." in html and "tick_ms / wheel_size" not in html


def test_no_max_bars_when_the_task_reports_no_max() -> None:
    frame = _summaries(cpu_us_per_op=[5.0, 4.0], lateness_p99_ms=[2.0, 3.0])
    html = render_sweep(frame, settings=["tick_ms", "wheel_size"], task="t", parallelism=2)
    assert "Expiry lateness (negative: fired early)" in html and ">max<" not in html
    assert "lowest lateness p99: <b>1 / 20</b>" in html
