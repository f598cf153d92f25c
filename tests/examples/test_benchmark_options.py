"""The library's benchmarks refuse a count they cannot run with in one line, status 2
(before: a count of 0 ended in a ZeroDivisionError or ValueError traceback, and a
refused option printed argparse's usage block). They share ``examples/_cli.py``'s
parser through the link ``benchmarks/_cli.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .example_cli import EXAMPLES, error_line

BENCHMARKS = EXAMPLES.parent / "benchmarks"

pytestmark = pytest.mark.skipif(
    not BENCHMARKS.is_dir(), reason="the benchmarks are not here (not a source checkout)"
)


def run_benchmark(script: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``benchmarks/<script> <args>`` run to its end (at most 2 minutes) in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    command = [sys.executable, str(BENCHMARKS / script), *args]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("script", "args", "mentions"),
    [
        ("timer_bench.py", ["--ops", "0"], "argument --ops: must be an integer >= 1, not 0"),
        ("instruction_floor.py", ["--ops", "1"], "argument --ops: must be an integer >= 2, not 1"),
        ("await_bench.py", ["--waits", "0"], "argument --waits: must be an integer >= 1, not 0"),
        ("idle_bench.py", ["--keys", "0"], "argument --keys: must be an integer >= 1, not 0"),
        ("idle_bench.py", ["--touches", "0"], "argument --touches: must be an integer >= 1"),
        ("purgatory_bench.py", ["--requests", "0"], "argument --requests: must be an integer"),
        ("backends_bench.py", ["--repeat", "x"], "argument --repeat: invalid int value: 'x'"),
        ("watch_servers_bench.py", ["--polls", "0"], "argument --polls: must be an integer >= 1"),
    ],
)
def test_a_count_it_cannot_run_with_is_one_line_and_status_2(
    tmp_path: Path, script: str, args: list[str], mentions: str
) -> None:
    result = run_benchmark(script, args, tmp_path)
    line = error_line(result, status=2, mentions=mentions)
    assert line.startswith(f"{script}: error: ")
    assert result.stdout == ""


def test_the_idle_benchmark_checks_its_two_designs_agree_before_it_measures(
    tmp_path: Path,
) -> None:
    """Its first step reaps the same keys at the same times with both designs on a
    manual clock (before: it asserted so on the default never-early timer, where the
    two file a re-armed task differently, and every run stopped there)."""
    args = ["--keys", "10", "--touches", "10", "--repeat", "1"]
    result = run_benchmark("idle_bench.py", args, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "| variant |" in result.stdout
