"""The command line: help, refusals with a message and status 2, the synthetic command."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from purgatory.analytics.__main__ import main


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("report", ["--out", "--master", "--window-ms", "--accuracy", "--top-keys", "--no-cache"]),
        ("sweep", ["--grid", "--set", "--task", "--out", "--master"]),
        ("synthetic", ["--rows", "--seed", "--rows-per-file"]),
    ],
)
def test_help_explains_every_option(
    command: str, options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for option in [*options, "--driver-memory", "--quiet"] if command != "synthetic" else options:
        assert option in text, option


def test_report_refuses_a_bad_trace(
    spark: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from purgatory.analytics import synthetic_trace

    pq.write_table(synthetic_trace(5).drop_columns(["keys"]), tmp_path / "t.parquet")
    status = main(["report", str(tmp_path / "t.parquet"), "--out", str(tmp_path / "o"), "--quiet"])
    assert status == 2
    assert "missing column(s): keys" in capsys.readouterr().err


def test_sweep_refuses_a_bad_grid(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status = main(["sweep", "--grid", "tick_ms", "--out", str(tmp_path)])
    assert status == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err
    status = main(["sweep", "--grid", "tick_ms=1", "--set", "tick_ms=2", "--out", str(tmp_path)])
    assert status == 2


def test_window_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "t", "--out", "o", "--window-ms", "0"])
    assert "must be positive" in capsys.readouterr().err


def test_synthetic_writes_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synthetic", str(tmp_path), "--rows", "300", "--rows-per-file", "200"]) == 0
    assert "2 files, 300 operations" in capsys.readouterr().out
    assert sum(pq.read_table(f).num_rows for f in tmp_path.glob("*.parquet")) == 300
