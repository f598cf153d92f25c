"""The purgatory data pipeline on Apache Spark (the optional ``spark`` extra).

Two jobs, both in local mode by default and unchanged on a cluster:

* trace reports (:func:`build_report`): delayed-operation traces (Parquet, see
  :mod:`purgatory_broker.tracing`) into figures per purgatory, kind,
  topic-partition and time window (defined in :mod:`.figures`, computed by
  Spark; :mod:`.exact` is the exact reference), written as Parquet and one
  HTML page;
* sweeps (:func:`run_sweep`): a grid of timer configurations, one Spark task
  each, ranked by CPU per operation and expiry lateness.

On a cluster the pipeline ships its own code to the executors (:mod:`._ship`:
a zip of the ``purgatory`` package and the sweep task's module, added with
``addPyFile``), so workers need only Python and PySpark (plus a sweep task's
own dependencies), and never the driver's interpreter path; ``--out`` may be
any URL Spark writes to (:mod:`._out`).

The core package never imports this one. Importing it is cheap: pyspark,
pandas, pyarrow and numpy (and the broker's error table) are imported inside
the functions that need them, when a session or a job runs (a test checks it).
Command line: ``purgatory-broker-analytics --help`` (or ``python -m
purgatory_broker.analytics --help``).
"""

from ._session import Progress, build_session
from ._trace import REASONS, RowCheck, TraceSchemaError, check_rows, read_trace
from .report import ReportResult, build_report
from .sweep import SweepResult, expand_grid, parse_assignments, run_sweep
from .synthetic import SyntheticSpec, synthetic_trace, write_synthetic_trace
from .workload import run_workload

__all__ = [
    "REASONS",
    "Progress",
    "ReportResult",
    "RowCheck",
    "SweepResult",
    "SyntheticSpec",
    "TraceSchemaError",
    "build_report",
    "build_session",
    "check_rows",
    "expand_grid",
    "parse_assignments",
    "read_trace",
    "run_sweep",
    "run_workload",
    "synthetic_trace",
    "write_synthetic_trace",
]
