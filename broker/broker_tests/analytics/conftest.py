"""Fixtures of the pipeline tests: one local SparkSession, one trace, one report.

Starting Spark costs seconds, so the session is session-scoped (local[2], four
shuffle partitions, no UI), and the report every report test inspects is built
once, through the command line, from a small synthetic trace plus one file of
hand-made impossible rows (:data:`BAD_ROWS`).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from purgatory_broker.analytics import build_session, write_synthetic_trace  # noqa: E402
from purgatory_broker.analytics.__main__ import main  # noqa: E402
from purgatory_broker.analytics._cds import CDS_ENV  # noqa: E402
from purgatory_broker.tracing import TRACE_COLUMNS  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: rows of the synthetic part of the test trace
SYNTHETIC_ROWS = 4_000
#: the report's time window
WINDOW_MS = 50
#: the report fixture's options (the cluster test repeats them)
REPORT_OPTIONS = ["--window-ms", str(WINDOW_MS), "--top-keys", "5"]

_GOOD: dict[str, Any] = {
    "op_id": 10**9,
    "purgatory": "produce",
    "kind": "produce",
    "keys": ["orders-0"],
    "created_ms": 100,
    "deadline_ms": 200,
    "completed_ms": 150,
    "outcome": "completed",
    "error_codes": [0],
    "bytes": 10,
}

#: (changes to a valid row, the reasons it must be counted under)
BAD_ROWS: list[tuple[dict[str, Any], set[str]]] = [
    ({"completed_ms": 99}, {"completed_before_created"}),
    ({"deadline_ms": 50}, {"deadline_before_created"}),
    ({"bytes": -1}, {"negative_bytes"}),
    ({"outcome": "exploded"}, {"unknown_outcome"}),
    ({"error_codes": [0, 0]}, {"error_codes_length_mismatch"}),
    ({"outcome": None}, {"null_value"}),
    ({"keys": ["orders-0", None], "error_codes": [0, 0]}, {"null_value"}),
    (
        {"completed_ms": 0, "deadline_ms": 0, "bytes": -5},
        {"completed_before_created", "deadline_before_created", "negative_bytes"},
    ),
]


def bad_rows_table() -> Any:
    """BAD_ROWS as a table with the trace's types (nullable, to hold the nulls)."""
    rows = [{**_GOOD, **change, "op_id": 10**9 + i} for i, (change, _) in enumerate(BAD_ROWS)]
    types = {
        "int64": pa.int64(),
        "string": pa.string(),
        "list<string>": pa.list_(pa.string()),
        "list<int16>": pa.list_(pa.int16()),
    }
    schema = pa.schema([pa.field(n, types[t]) for n, t in TRACE_COLUMNS])
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.fixture(scope="session", autouse=True)
def _no_class_archive() -> Iterator[None]:
    """The command lines the tests start run without the per-user class archive
    (no file written under the user's cache, no first run saving one); the
    archive's own tests (test_cds) turn it on in a cache of their own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CDS_ENV, "0")
        yield


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", app_name="purgatory-tests", shuffle_partitions=4)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two synthetic files and one file of impossible rows."""
    folder = tmp_path_factory.mktemp("trace")
    write_synthetic_trace(folder, SYNTHETIC_ROWS, seed=7, rows_per_file=SYNTHETIC_ROWS // 2)
    pq.write_table(bad_rows_table(), folder / "bad-rows.parquet")
    return folder


@dataclass(frozen=True)
class Report:
    out: Path
    stdout: str
    status: int


@pytest.fixture(scope="session")
def report(
    spark: SparkSession, trace_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Report:
    """The report of ``trace_dir``, built once through the command line."""
    out = tmp_path_factory.mktemp("report")
    captured = io.StringIO()
    argv = ["report", str(trace_dir), "--out", str(out), *REPORT_OPTIONS, "--quiet"]
    with contextlib.redirect_stdout(captured):
        status = main(argv)
    return Report(out=out, stdout=captured.getvalue(), status=status)
