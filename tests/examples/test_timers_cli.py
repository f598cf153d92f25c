"""examples/timers.py as a user runs it: a report for any number of tasks from one,
and bad input refused in one line (no usage block, no traceback, exit status 2,
nothing left behind)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .example_cli import error_line, run_example


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["--tasks", "0"], "argument --tasks: must be an integer >= 1, not 0"),
        (["--tasks", "-5"], "argument --tasks: must be an integer >= 1, not -5"),
        (["--tasks", "many"], "argument --tasks"),
        (["--max-delay-ms", "0"], "argument --max-delay-ms: must be an integer >= 1, not 0"),
        (["--max-delay-ms", "-1"], "argument --max-delay-ms: must be an integer >= 1, not -1"),
        (["--max-delay-ms", str(2**41)], "argument --max-delay-ms: delay_ms must be within"),
        (["--seed", "x"], "argument --seed"),
        (["--tasks"], "argument --tasks: expected one argument"),
    ],
)
def test_a_refused_option_is_an_error_line_and_status_2(
    tmp_path: Path, args: list[str], mentions: str
) -> None:
    result = run_example("timers.py", *args, cwd=tmp_path)
    line = error_line(result, status=2, mentions=mentions)
    assert line.startswith("timers.py: error: ")
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("tasks", "fired"), [(1, 1), (2, 2), (10, 9)])
def test_a_report_for_as_few_tasks_as_one(tmp_path: Path, tasks: int, fired: int) -> None:
    """(Before: one task raised StatisticsError.) Every 10th task is cancelled."""
    args = ["--tasks", str(tasks), "--max-delay-ms", "20", "--asyncio"]
    result = run_example("timers.py", *args, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert f"fired {fired} of {fired} in" in result.stdout
    report = re.search(r"lateness ms: min (\S+)  p50 (\S+)  p99 (\S+)  max (\S+)", result.stdout)
    assert report is not None, result.stdout
    low, p50, p99, high = (float(x) for x in report.groups())
    assert low <= p50 <= p99 <= high
    if tasks == 1:
        assert low == p50 == p99 == high


def test_help_shows_every_options_default(tmp_path: Path) -> None:
    result = run_example("timers.py", "--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    text = " ".join(result.stdout.split())
    for default in ["(default: 5000)", "(default: 2000)", "(default: 1)", "(default: False)"]:
        assert default in text, default
    assert "at least 1" in text
