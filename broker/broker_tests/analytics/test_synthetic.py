"""The synthetic trace generator: schema, determinism, and rows that make sense."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from purgatory_broker.analytics import SyntheticSpec, synthetic_trace, write_synthetic_trace
from purgatory_broker.analytics.exact import check_rows
from purgatory_broker.tracing import OUTCOMES, trace_schema


def test_schema_is_the_trace_schema() -> None:
    assert synthetic_trace(100).schema.equals(trace_schema())


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    assert synthetic_trace(500, seed=3).equals(synthetic_trace(500, seed=3))
    assert not synthetic_trace(500, seed=3).equals(synthetic_trace(500, seed=4))


def test_rows_are_all_possible_and_ordered() -> None:
    table = synthetic_trace(20_000, seed=1)
    _, check = check_rows(table)
    assert check.bad == 0
    created = table.column("created_ms").to_numpy()
    assert (np.diff(created) >= 0).all()
    assert set(pc.unique(table.column("outcome")).to_pylist()) == set(OUTCOMES)
    keys = table.column("keys").to_pylist()
    assert all(len(set(k)) == len(k) for k in keys), "an operation watches a key twice"


def test_expired_produce_answers_request_timed_out() -> None:
    table = synthetic_trace(20_000, seed=2).to_pandas()
    expired = table[(table["outcome"] == "expired") & (table["purgatory"] == "produce")]
    assert len(expired) > 0
    assert all(set(codes) == {7} for codes in expired["error_codes"])
    expired_late = expired["completed_ms"] - expired["deadline_ms"]
    assert (expired_late >= 0).all()


def test_files_continue_in_time_and_ids(tmp_path: Path) -> None:
    files = write_synthetic_trace(tmp_path, 2_500, rows_per_file=1_000, seed=5)
    assert [f.name for f in files] == [
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    tables = [pq.read_table(f) for f in files]
    assert [t.num_rows for t in tables] == [1_000, 1_000, 500]
    ids = np.concatenate([t.column("op_id").to_numpy() for t in tables])
    assert (ids == np.arange(2_500)).all()
    created = np.concatenate([t.column("created_ms").to_numpy() for t in tables])
    assert (np.diff(created) >= 0).all()


def test_bad_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="max_keys"):
        SyntheticSpec(max_keys=0)
    with pytest.raises(ValueError, match="rows"):
        synthetic_trace(-1)
