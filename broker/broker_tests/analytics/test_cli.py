"""The command line: help, refusals with a message and status 2, the synthetic command."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from purgatory_broker.analytics.__main__ import _parser, main

from broker_tests.cli_kit import (
    ROOT,
    assert_named_as_started,
    assert_one_line_error,
    read_only_dir,
    run_cli,
)


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("report", ["--out", "--master", "--window-ms", "--top-keys"]),
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


@pytest.mark.system  # Java: a Spark session
def test_report_refuses_a_bad_trace(
    spark: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from purgatory_broker.analytics import synthetic_trace

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
    assert "must be an integer >= 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["report", "t"], "required: --out"),
        (["report", "t", "--out", "o", "--window-ms", "0"], "--window-ms"),
        (["nonsense"], "invalid choice"),
    ],
)
def test_argparse_refusals_are_one_line(args: list[str], mentions: str) -> None:
    assert_one_line_error(run_cli([*_CLI, *args], timeout_s=30), status=2, mentions=mentions)


def test_synthetic_writes_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synthetic", str(tmp_path), "--rows", "300", "--rows-per-file", "200"]) == 0
    assert "2 files, 300 operations" in capsys.readouterr().out
    assert sum(pq.read_table(f).num_rows for f in tmp_path.glob("*.parquet")) == 300


# -- bad input, as a user would type it: one line, no traceback, nothing left behind --

_CLI = ["-m", "purgatory_broker.analytics"]


def _trace(folder: Path) -> Path:
    from purgatory_broker.analytics import synthetic_trace

    folder.mkdir()
    pq.write_table(synthetic_trace(50), folder / "t.parquet")
    return folder


def test_every_option_explains_itself_and_its_default() -> None:
    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            assert action.help, (name, action.option_strings)
            assert "default" in action.help or action.required, (name, action.option_strings)
    assert "COMMAND --help" in parser.format_help()


@pytest.mark.parametrize(
    ("case", "mentions"),
    [
        ("missing", "trace not found"),
        ("empty", "an empty folder"),
        ("not_parquet", "is not a Parquet file"),
        ("out_is_file", "is a file, not a folder"),
        ("bad_master", "is not a Spark master URL"),
        ("bad_memory", "is not a memory size"),
        ("bad_conf", "--conf expects KEY=VALUE"),
    ],
)
def test_report_refuses_bad_input_before_spark_starts(
    case: str, mentions: str, tmp_path: Path
) -> None:
    trace = _trace(tmp_path / "trace")
    out = tmp_path / "out"
    args = [*_CLI, "report", str(trace), "--out", str(out)]
    if case == "missing":
        args[3] = str(tmp_path / "nope")
    elif case == "empty":
        (tmp_path / "empty").mkdir()
        args[3] = str(tmp_path / "empty")
    elif case == "not_parquet":
        (trace / "notes.parquet").write_text("hello")
    elif case == "out_is_file":
        out.write_text("keep me")
    elif case == "bad_master":
        args += ["--master", "bogus://x"]
    elif case == "bad_memory":
        args += ["--driver-memory", "lots"]
    else:
        args += ["--conf", "spark.executor.memory"]
    result = run_cli(args, timeout_s=30)  # no JVM: seconds, not tens of seconds
    assert_one_line_error(result, status=2, mentions=mentions)
    if case == "out_is_file":
        assert out.read_text() == "keep me"
    else:
        assert not out.exists()


def test_a_missing_extra_names_the_install(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "pandas"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pandas'\", name='pandas')\n"
    )
    trace = _trace(tmp_path / "trace")
    result = run_cli(
        [*_CLI, "report", str(trace), "--out", str(tmp_path / "out")],
        env={"PYTHONPATH": f"{tmp_path / 'shadow'}{os.pathsep}{ROOT}"},
        timeout_s=30,
    )
    assert_one_line_error(result, status=2, mentions="install purgatory-broker[spark]")
    assert not (tmp_path / "out").exists()


def test_synthetic_refuses_a_folder_that_holds_files(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    out.mkdir()
    (out / "part-00000.parquet").write_bytes(b"old")
    result = run_cli([*_CLI, "synthetic", str(out), "--rows", "5"], timeout_s=30)
    assert_one_line_error(result, status=2, mentions="is not empty")
    assert [p.name for p in out.iterdir()] == ["part-00000.parquet"]
    (tmp_path / "file").write_text("x")
    result = run_cli([*_CLI, "synthetic", str(tmp_path / "file"), "--rows", "5"], timeout_s=30)
    assert_one_line_error(result, status=2, mentions="is a file")


def test_a_read_only_out_is_refused(tmp_path: Path) -> None:
    locked = read_only_dir(tmp_path)
    try:
        result = run_cli([*_CLI, "synthetic", str(locked / "t"), "--rows", "5"], timeout_s=30)
    finally:
        if locked.is_relative_to(tmp_path):
            locked.chmod(0o700)  # so that pytest can remove it
    assert_one_line_error(result, status=2, mentions="not writable")


def test_sweep_checks_grid_keys_against_the_task_before_spark(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli(
        [*_CLI, "sweep", "--grid", "tick_ms=1,2", "tick_size=3", "--out", str(out)],
        timeout_s=30,
    )
    assert_one_line_error(result, status=2, mentions="unknown setting(s) for")
    assert "tick_size" in result.stderr and not out.exists()
    task = "purgatory_broker.analytics.simulation_task:run_simulation"
    result = run_cli(
        [*_CLI, "sweep", "--task", task, "--grid", "follower_lag=1", "--out", str(out)],
        timeout_s=30,
    )
    assert_one_line_error(result, status=2, mentions="follower_lag")


@pytest.mark.system  # Java: a Spark session
def test_a_sweep_whose_configurations_all_fail_says_why(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli(
        [
            *_CLI,
            "sweep",
            "--grid",
            "tick_ms=0",
            "wheel_size=8,16",
            "--master",
            "local[1]",
            "--out",
            str(out),
            "--quiet",
        ],
        timeout_s=180,
    )
    line = assert_one_line_error(result, status=1, mentions="2 of 2 configurations failed")
    assert "tick_ms and wheel_size must be positive (2 configurations)" in line
    assert (out / "sweep.html").exists()  # the failures are in the page too


def test_spark_that_does_not_start_is_one_line(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "trace")
    out = tmp_path / "out"
    result = run_cli(
        [
            *_CLI,
            "report",
            str(trace),
            "--out",
            str(out),
            "--quiet",
            "--conf",
            "spark.driver.memory=lots",
        ],
        timeout_s=120,
    )
    assert_one_line_error(result, status=1, mentions="Spark did not start")
    assert not out.exists()


@pytest.mark.system  # Java: a Spark session
def test_ctrl_c_stops_quietly(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "trace")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    child = subprocess.Popen(
        [sys.executable, "-P", *_CLI, "report", str(trace), "--out", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    lines = []
    for line in child.stderr:  # interrupt once Spark is up and the report has begun
        lines.append(line)
        if "Spark started" in line:
            break
    child.send_signal(signal.SIGINT)
    rest, _ = child.communicate(timeout=60)[::-1]
    err = "".join(lines) + rest
    assert child.returncode == 130, err
    assert "Traceback" not in err and "py4j" not in err, err
    last = err.rstrip().splitlines()[-1]
    assert last == f"{Path(sys.executable).name} -m purgatory_broker.analytics: error: interrupted"
    assert not out.exists()


@pytest.mark.parametrize("form", ["script", "module"])
def test_usage_and_errors_name_the_program_as_started(form: str, tmp_path: Path) -> None:
    """``purgatory-broker-analytics`` (the console script) or ``python -m ...``, as it was started;
    here the one-line error is that of an output that is a file."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert_named_as_started(
        form, "purgatory-broker-analytics", tmp_path, ["synthetic", str(a_file), "--rows", "5"]
    )
