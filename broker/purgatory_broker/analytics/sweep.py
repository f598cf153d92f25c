"""Sweeps: a grid of configurations run as Spark tasks, one task per configuration.

A *grid* maps setting names to lists of values (``tick_ms=1,5 wheel_size=20,64``);
:func:`expand_grid` takes its Cartesian product over a base configuration.
:func:`run_sweep` parallelises the configurations with one Spark partition
each, so every configuration is one task on some executor; the task imports
the *task function* by its dotted path (``package.module:function`` or
``package.module.function``) and calls it with the configuration dict. The
default task, :func:`purgatory_broker.analytics.workload.run_workload`, runs its own
asyncio event loop. Each task returns a small summary dict; only those reach
the driver, where they become one table: ``OUT/summaries.parquet`` and
``OUT/sweep.html``.

The HTML answers "which tick_ms and wheel_size give the lowest CPU per
operation and expiry lateness for a workload": configurations are grouped by
workload (every setting except ``tick_ms``, ``wheel_size`` and ``seed``), and
in each group the Pareto-optimal ones for (CPU per operation, distance from
the deadline) are highlighted, with the best of each named. Distance from the
deadline is ``off_deadline_p99_ms`` (p99 of the absolute lateness) when the task
reports it, so a coarse tick that fires early does not look good; early
expiries are shown in their own column. Labels and the verdict name only the
settings that were swept.

A task may declare the settings it accepts (``task.settings``: a collection of
names, or a function returning one); :func:`check_settings` then refuses an
unknown grid or ``--set`` key on the driver before Spark starts.

On a cluster the task's code reaches the executors through :mod:`._ship`.
A task that raises does not sink the sweep: its row carries the error text,
:attr:`SweepResult.failed` counts such rows and :attr:`SweepResult.failures`
counts each distinct reason.
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
from ._out import Output
from ._session import Progress

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_GRID",
    "DEFAULT_TASK",
    "SweepResult",
    "check_settings",
    "expand_grid",
    "parse_assignments",
    "resolve_task",
    "run_sweep",
]

DEFAULT_TASK = "purgatory_broker.analytics.workload:run_workload"
DEFAULT_GRID: dict[str, list[Any]] = {"tick_ms": [1, 5], "wheel_size": [20, 64]}
#: settings a sweep tunes; every other setting describes the workload
TUNED = ("tick_ms", "wheel_size")
_NOT_WORKLOAD = {*TUNED, "seed"}
#: the measurements the HTML ranks by, when the task reports them
CPU_COLUMN = "cpu_us_per_op"
LATENESS_COLUMN = "lateness_p99_ms"
#: p99 of |lateness|, preferred to LATENESS_COLUMN for ranking when present
OFF_DEADLINE_COLUMN = "off_deadline_p99_ms"

TaskFunction = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class SweepResult:
    """The sweep's table (one row per configuration) and where it was written."""

    summaries: pd.DataFrame
    parquet: str
    html: str
    failed: int
    #: each distinct failure reason -> configurations that failed with it
    failures: dict[str, int]


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


def check_settings(task: TaskFunction, names: Sequence[str], task_path: str) -> None:
    """Refuse setting names the task declares it does not accept (ValueError).

    A task without a ``settings`` attribute accepts anything here (it checks
    its configuration itself). O(names).
    """
    declared = getattr(task, "settings", None)
    if declared is None:
        return
    known = set(declared() if callable(declared) else declared)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown setting(s) for {task_path}: {', '.join(unknown)} "
            f"(it accepts: {', '.join(sorted(known))})"
        )


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
    out_dir: str | Path | Output,
    *,
    task: str = DEFAULT_TASK,
    progress: bool = True,
    first_stage: int = 0,
    swept: Sequence[str] | None = None,
) -> SweepResult:
    """Run every configuration as its own Spark task and write the summary table.

    ``task`` is resolved on the driver first, so a typo fails before any work
    (the command line also checks the keys with :func:`check_settings`; here a
    configuration the task refuses is one failed row, not a failed sweep).
    The configurations run ``spark.defaultParallelism`` at a time; each returns
    a small dict. Writes ``summaries.parquet`` and ``sweep.html`` in ``out_dir``
    (a local folder or a URL: :class:`._out.Output`). ``swept`` names the grid's
    keys for the page's labels (default: the tuned settings present).
    """
    if not configs:
        raise ValueError("no configurations to run")
    resolve_task(task)
    out = out_dir if isinstance(out_dir, Output) else Output(out_dir)
    out.create()
    steps = Progress("sweep", 2 + first_stage, enabled=progress, done=first_stage)
    items = [(i, dict(c)) for i, c in enumerate(configs)]
    with steps.stage(f"{len(items)} configurations run"):
        rdd = spark.sparkContext.parallelize(items, len(items))
        rows = rdd.map(lambda item: _run_one(task, item)).collect()
    with steps.stage("summaries written"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        frame = _summary_frame(sorted(rows, key=lambda r: r["config_id"]))
        buffer = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer)
        parquet = out.write_bytes(spark, "summaries.parquet", buffer.getvalue().to_pybytes())
        cores = spark.sparkContext.defaultParallelism
        settings = list(dict.fromkeys(k for c in configs for k in c))
        page_html = render_sweep(
            frame, settings=settings, task=task, parallelism=cores, swept=swept
        )
        html = out.write_bytes(spark, "sweep.html", page_html.encode())
    errors = frame["error"].dropna()
    failures = {str(reason): int(count) for reason, count in errors.value_counts().items()}
    return SweepResult(
        summaries=frame, parquet=parquet, html=html, failed=len(errors), failures=failures
    )


def _summary_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The summary rows as a table Parquet can type (see :func:`_tidy`)."""
    import pandas as pd

    return _tidy(pd.DataFrame(rows))


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
    frame: pd.DataFrame,
    *,
    settings: Sequence[str],
    task: str,
    parallelism: int,
    swept: Sequence[str] | None = None,
) -> str:
    """The sweep's HTML page: per workload (``settings`` other than the tuned ones
    and the seed), a ranked table and charts; ``swept`` (the grid's keys) names
    the configurations in labels and the verdict. O(configurations squared)."""
    ok = frame[frame["error"].isna()] if "error" in frame else frame
    sections = [
        f'<p class="meta">Task <code>{escape(task)}</code>, {len(frame)} configurations, '
        f"{len(frame) - len(ok)} failed; up to {parallelism} ran at a time.</p>"
    ]
    failed = frame[frame["error"].notna()] if "error" in frame else frame.iloc[0:0]
    if not failed.empty:
        sections.append('<h2 class="bad">Failed configurations</h2>' + table(failed))
    distance = OFF_DEADLINE_COLUMN if OFF_DEADLINE_COLUMN in ok else LATENESS_COLUMN
    if CPU_COLUMN not in ok or distance not in ok:  # nothing to rank by
        sections.append("<h2>Results</h2>" + table(ok))
        return page("Purgatory sweep", sections)
    workload_columns = [c for c in settings if c in frame and c not in _NOT_WORKLOAD]
    label_keys = [c for c in (swept or TUNED) if c in frame and c not in workload_columns]
    label_keys = label_keys or [c for c in TUNED if c in frame]
    groups = (
        ok.groupby(workload_columns, dropna=False, sort=True) if workload_columns else [((), ok)]
    )
    for key, unsorted in groups:
        key_values = key if isinstance(key, tuple) else (key,)
        label = (
            ", ".join(f"{n}={v}" for n, v in zip(workload_columns, key_values, strict=True))
            or "all configurations"
        )
        ranking = _Ranking(unsorted.sort_values([CPU_COLUMN, distance]), label_keys, distance)
        sections += ranking.sections(label)
    sections.append(_CPU_NOTE)
    return page("Purgatory sweep", sections)


_CPU_NOTE = (
    '<p class="note">CPU time is <code>time.process_time()</code> of the task\'s Python '
    "worker over the run, divided by operations. Tasks ran concurrently on a shared "
    "machine, so lateness (wall clock) includes scheduling noise; repeat with several "
    "seeds before trusting small differences.</p>"
)

#: the measurements a workload's table shows, when the task reports them
_SHOWN = (
    CPU_COLUMN,
    "ops_per_s",
    OFF_DEADLINE_COLUMN,
    "lateness_p50_ms",
    LATENESS_COLUMN,
    "lateness_max_ms",
    "early_expiries",
    "completed_early",
    "expired",
    "reaper_wakeups",
    "wall_s",
)


class _Ranking:
    """One workload's configurations, in (CPU, distance from the deadline) order:
    its section of the page, as a verdict, a table and charts."""

    def __init__(self, group: pd.DataFrame, label_keys: list[str], distance: str) -> None:
        import pandas as pd

        self.group = group
        self.label_keys = label_keys
        self.distance = distance
        self.axis = " / ".join(label_keys) or "configuration"
        self.cpu = [float(v) for v in group[CPU_COLUMN]]
        self.off = [math.nan if pd.isna(v) else float(v) for v in group[distance]]
        self.names = [
            " / ".join(str(row[c]) for c in label_keys) or str(row.get("config_id"))
            for row in group.to_dict("records")
        ]

    def sections(self, label: str) -> list[str]:
        """The workload's heading, verdict, table, note and charts."""
        group = self.group
        shown = [c for c in (*self.label_keys, "seed") if c in group]
        shown += [c for c in _SHOWN if c in group]
        best = _pareto(self.cpu, self.off)
        return [
            f"<h2>Workload: {escape(label)}</h2>",
            _verdict(self.names, self.cpu, self.off, self.axis, self.distance),
            table(group, columns={c: c for c in shown}, highlight=best),
            self._note(),
            f'<div class="charts">{"".join(self._charts())}</div>',
        ]

    def _note(self) -> str:
        return (
            '<p class="note">Highlighted: Pareto-optimal for (CPU per operation, '
            f"<code>{self.distance}</code>): no other configuration is at least as good in "
            "both and better in one. "
            + (
                "<code>off_deadline_p99_ms</code> is the p99 of |lateness|: an expiry fired "
                "early (a coarse tick) counts as far from its deadline as one fired late; "
                "<code>early_expiries</code> counts the early ones.</p>"
                if self.distance == OFF_DEADLINE_COLUMN
                else "Negative lateness (an early expiry) ranks as good here: the task does "
                "not report the distance from the deadline.</p>"
            )
        )

    def _charts(self) -> list[str]:
        """CPU per operation, and lateness (p99, and max when reported) when reported."""
        charts = [
            self._bars(
                {"CPU µs per operation": self.cpu}, "CPU per operation (lower is better)", "µs"
            )
        ]
        if LATENESS_COLUMN in self.group:
            lateness = {"p99": _zero_for_none(self.group[LATENESS_COLUMN])}
            if "lateness_max_ms" in self.group:  # no max reported: no max bars
                lateness["max"] = _zero_for_none(self.group["lateness_max_ms"])
            charts.append(self._bars(lateness, "Expiry lateness (negative: fired early)", "ms"))
        return charts

    def _bars(self, series: dict[str, list[float]], title: str, y_label: str) -> str:
        return _svg.bar_chart(
            self.names, series, title=title, x_label=self.axis, y_label=y_label, width=520
        )


def _zero_for_none(values: pd.Series) -> list[float]:
    import pandas as pd

    return [0.0 if pd.isna(v) else float(v) for v in values]


def _verdict(names: list[str], cpu: list[float], off: list[float], axis: str, distance: str) -> str:
    best_cpu = min(range(len(cpu)), key=lambda i: cpu[i])
    text = f"Lowest CPU per operation: <b>{escape(names[best_cpu])}</b> ({cpu[best_cpu]:.1f} µs)"
    known = [i for i, v in enumerate(off) if not math.isnan(v)]
    if known:
        best = min(known, key=lambda i: (off[i], cpu[i]))
        what = (
            "closest to the deadline (p99 of |lateness|)"
            if distance == OFF_DEADLINE_COLUMN
            else "lowest lateness p99"
        )
        text += f"; {what}: <b>{escape(names[best])}</b> ({off[best]:.1f} ms)"
    return f"<p>{text} ({escape(axis)}).</p>"
