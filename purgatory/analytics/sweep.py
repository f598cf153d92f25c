"""Sweeps: a grid of configurations run as Spark tasks, one task per configuration.

A *grid* maps setting names to lists of values (``tick_ms=1,5 wheel_size=20,64``);
:func:`expand_grid` takes its Cartesian product over a base configuration.
:func:`run_sweep` parallelises the configurations with one Spark partition
each, so every configuration is one task on some executor; the task imports
the *task function* by its dotted path (``package.module:function`` or
``package.module.function``) and calls it with the configuration dict. The
default task, :func:`purgatory.analytics.workload.run_workload`, runs its own
asyncio event loop. Each task returns a small summary dict; only those reach
the driver, where they become one table: ``OUT/summaries.parquet`` and
``OUT/sweep.html``.

The HTML answers "which tick_ms and wheel_size give the lowest CPU per
operation and expiry lateness for a workload": configurations are grouped by
workload (every setting except ``tick_ms``, ``wheel_size`` and ``seed``), and
in each group the Pareto-optimal ones for (CPU per operation, lateness p99)
are highlighted, with the best of each named.

A task that raises does not sink the sweep: its row carries the error text,
and :attr:`SweepResult.failed` counts such rows.
"""

from __future__ import annotations

import importlib
import itertools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _svg
from ._html import page, table
from ._session import Progress

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_GRID",
    "DEFAULT_TASK",
    "SweepResult",
    "expand_grid",
    "parse_assignments",
    "resolve_task",
    "run_sweep",
]

DEFAULT_TASK = "purgatory.analytics.workload:run_workload"
DEFAULT_GRID: dict[str, list[Any]] = {"tick_ms": [1, 5], "wheel_size": [20, 64]}
#: settings a sweep tunes; every other setting describes the workload
TUNED = ("tick_ms", "wheel_size")
_NOT_WORKLOAD = {*TUNED, "seed"}
#: the measurements the HTML ranks by, when the task reports them
CPU_COLUMN = "cpu_us_per_op"
LATENESS_COLUMN = "lateness_p99_ms"

TaskFunction = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class SweepResult:
    """The sweep's table (one row per configuration) and where it was written."""

    summaries: pd.DataFrame
    parquet: Path
    html: Path
    failed: int


def _parse_value(text: str) -> Any:
    """``"5"`` -> 5, ``"2.5"`` -> 2.5, ``"none"`` -> None, else the string."""
    if text.lower() in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_assignments(items: Sequence[str]) -> dict[str, list[Any]]:
    """Parse ``name=v1,v2`` items into ``{name: [v1, v2]}``; numbers become numbers."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not name or not values.strip():
            raise ValueError(f"expected NAME=VALUE[,VALUE...], got {item!r}")
        if name in grid:
            raise ValueError(f"{name} given twice")
        grid[name] = [_parse_value(v.strip()) for v in values.split(",") if v.strip()]
    return grid


def expand_grid(
    grid: Mapping[str, Sequence[Any]], base: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every combination of the grid's values over ``base``, in grid order.

    O(product of the value counts).
    """
    for name, values in grid.items():
        if not values:
            raise ValueError(f"no values for {name}")
    names = list(grid)
    return [
        {**(base or {}), **dict(zip(names, combo, strict=True))}
        for combo in itertools.product(*(grid[n] for n in names))
    ]


def resolve_task(path: str) -> TaskFunction:
    """Import the function at ``module:function`` or ``module.function``."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"task must be a dotted path like pkg.module:function, not {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} for task {path!r}: {exc}") from exc
    function = getattr(module, attr, None)
    if not callable(function):
        raise ValueError(f"{path!r} is not a function")
    return function  # type: ignore[no-any-return]


def _run_one(task_path: str, item: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    """Executed on an executor: run one configuration, never raise."""
    index, config = item
    row: dict[str, Any] = {"config_id": index, **config}
    try:
        summary = resolve_task(task_path)(dict(config))
        if not isinstance(summary, Mapping):
            raise TypeError(f"task returned {type(summary).__name__}, not a dict")
        row.update(summary)
        row["error"] = None
    except Exception as exc:  # noqa: BLE001 - one failed configuration must not lose the rest
        row["error"] = f"{type(exc).__name__}: {exc}"
    row["worker_pid"] = os.getpid()
    return row


def run_sweep(
    spark: SparkSession,
    configs: Sequence[Mapping[str, Any]],
    out_dir: str | Path,
    *,
    task: str = DEFAULT_TASK,
    progress: bool = True,
) -> SweepResult:
    """Run every configuration as its own Spark task and write the summary table.

    ``task`` is resolved on the driver first, so a typo fails before any work.
    The configurations run ``spark.defaultParallelism`` at a time; each returns
    a small dict. Writes ``summaries.parquet`` and ``sweep.html`` in ``out_dir``.
    """
    if not configs:
        raise ValueError("no configurations to run")
    resolve_task(task)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    steps = Progress("sweep", 2, enabled=progress)
    items = [(i, dict(c)) for i, c in enumerate(configs)]
    with steps.stage(f"{len(items)} configurations run"):
        rdd = spark.sparkContext.parallelize(items, len(items))
        rows = rdd.map(lambda item: _run_one(task, item)).collect()
    with steps.stage("summaries written"):
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq

        frame = pd.DataFrame(sorted(rows, key=lambda r: r["config_id"]))
        frame = _tidy(frame)
        parquet = out / "summaries.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet)
        html = out / "sweep.html"
        cores = spark.sparkContext.defaultParallelism
        settings = list(dict.fromkeys(k for c in configs for k in c))
        page_html = render_sweep(frame, settings=settings, task=task, parallelism=cores)
        html.write_text(page_html, encoding="utf-8")
    failed = int(frame["error"].notna().sum())
    return SweepResult(summaries=frame, parquet=parquet, html=html, failed=failed)


def _tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns Parquet can type: all-None columns as float, mixed ones as strings."""
    import pandas as pd

    for column in frame.columns:
        values = frame[column]
        if column != "error" and any(not pd.api.types.is_scalar(v) for v in values):
            frame[column] = values.map(str)  # lists, dicts: shown, not typed
            continue
        if values.isna().all() and column != "error":
            frame[column] = values.astype("float64")
        elif values.dtype == object and column != "error":
            kinds = {type(v) for v in values if v is not None and not pd.isna(v)}
            if len(kinds) > 1 and not kinds <= {int, float}:
                frame[column] = values.map(lambda v: None if v is None else str(v))
    if "error" in frame:
        frame["error"] = frame["error"].astype(object)
    return frame


def _pareto(cpu: Sequence[float], late: Sequence[float]) -> list[bool]:
    """True where no other row is at least as good in both and better in one."""
    flags = []
    points = list(zip(cpu, late, strict=True))
    for c, late_ms in points:
        if math.isnan(c) or math.isnan(late_ms):
            flags.append(False)
            continue
        dominated = any(
            (oc <= c and ol <= late_ms) and (oc < c or ol < late_ms)
            for oc, ol in points
            if not (math.isnan(oc) or math.isnan(ol))
        )
        flags.append(not dominated)
    return flags


def render_sweep(
    frame: pd.DataFrame, *, settings: Sequence[str], task: str, parallelism: int
) -> str:
    """The sweep's HTML page: per workload (``settings`` other than the tuned ones
    and the seed), a ranked table and charts."""
    import pandas as pd

    ok = frame[frame["error"].isna()] if "error" in frame else frame
    sections = [
        f'<p class="meta">Task <code>{escape(task)}</code>, {len(frame)} configurations, '
        f"{len(frame) - len(ok)} failed; up to {parallelism} ran at a time.</p>"
    ]
    failed = frame[frame["error"].notna()] if "error" in frame else frame.iloc[0:0]
    if not failed.empty:
        sections.append('<h2 class="bad">Failed configurations</h2>' + table(failed))
    ranked = CPU_COLUMN in ok and LATENESS_COLUMN in ok
    if not ranked:
        sections.append("<h2>Results</h2>" + table(ok))
        return page("Purgatory sweep", sections)

    workload_columns = [c for c in settings if c in frame and c not in _NOT_WORKLOAD]
    groups = (
        ok.groupby(workload_columns, dropna=False, sort=True) if workload_columns else [((), ok)]
    )
    for key, unsorted in groups:
        key_values = key if isinstance(key, tuple) else (key,)
        label = (
            ", ".join(f"{n}={v}" for n, v in zip(workload_columns, key_values, strict=True))
            or "all configurations"
        )
        group = unsorted.sort_values([CPU_COLUMN, LATENESS_COLUMN])
        cpu = [float(v) for v in group[CPU_COLUMN]]
        late = [math.nan if pd.isna(v) else float(v) for v in group[LATENESS_COLUMN]]
        best = _pareto(cpu, late)
        names = [_tuned_label(row) for row in group.to_dict("records")]
        sections.append(f"<h2>Workload: {escape(label)}</h2>")
        sections.append(_verdict(names, cpu, late))
        shown = [c for c in (*TUNED, "seed") if c in group] + [
            c
            for c in (
                CPU_COLUMN,
                "ops_per_s",
                "lateness_p50_ms",
                LATENESS_COLUMN,
                "lateness_max_ms",
                "completed_early",
                "expired",
                "reaper_wakeups",
                "wall_s",
            )
            if c in group
        ]
        sections.append(table(group, columns={c: c for c in shown}, highlight=best))
        sections.append(
            '<p class="note">Highlighted: Pareto-optimal for (CPU per operation, lateness '
            "p99): no other configuration is at least as good in both and better in one.</p>"
        )
        charts = [
            _svg.bar_chart(
                names,
                {"CPU µs per operation": cpu},
                title="CPU per operation (lower is better)",
                x_label="tick_ms / wheel_size",
                y_label="µs",
                width=520,
            ),
            _svg.bar_chart(
                names,
                {
                    "p99": [0.0 if math.isnan(v) else v for v in late],
                    "max": [
                        0.0 if pd.isna(v) else float(v)
                        for v in group.get("lateness_max_ms", group[LATENESS_COLUMN])
                    ],
                },
                title="Expiry lateness (lower is better)",
                x_label="tick_ms / wheel_size",
                y_label="ms",
                width=520,
            ),
        ]
        sections.append(f'<div class="charts">{"".join(charts)}</div>')
    sections.append(
        '<p class="note">CPU time is <code>time.process_time()</code> of the task\'s Python '
        "worker over the run, divided by operations. Tasks ran concurrently on a shared "
        "machine, so lateness (wall clock) includes scheduling noise; repeat with several "
        "seeds before trusting small differences.</p>"
    )
    return page("Purgatory sweep: tick and wheel size", sections)


def _tuned_label(row: Mapping[str, Any]) -> str:
    return " / ".join(str(row[c]) for c in TUNED if c in row) or str(row.get("config_id"))


def _verdict(names: list[str], cpu: list[float], late: list[float]) -> str:
    best_cpu = min(range(len(cpu)), key=lambda i: cpu[i])
    text = f"Lowest CPU per operation: <b>{escape(names[best_cpu])}</b> ({cpu[best_cpu]:.1f} µs)"
    known = [i for i, v in enumerate(late) if not math.isnan(v)]
    if known:
        best_late = min(known, key=lambda i: (late[i], cpu[i]))
        text += (
            f"; lowest lateness p99: <b>{escape(names[best_late])}</b> ({late[best_late]:.1f} ms)"
        )
    return f"<p>{text} (tick_ms / wheel_size).</p>"
