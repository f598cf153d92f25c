"""The web examples' command lines as a user runs them: a refused option is one line
(``PROG: error: WHAT (see --help)``), exit status 2, no traceback, nothing printed on
stdout and nothing left behind. (Before: argparse's usage block above the line.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from .example_cli import error_line, run_example


@pytest.mark.parametrize(
    ("script", "args", "mentions"),
    [
        ("watch_aiohttp.py", ["--port", "70000"], "argument --port: must be an integer from 0"),
        ("watch_aiohttp.py", ["--port", "x"], "argument --port: invalid int value: 'x'"),
        ("watch_starlette.py", ["--bogus"], "unrecognized arguments: --bogus"),
        ("watch_starlette.py", ["--port", "-1"], "argument --port: must be an integer from 0"),
        ("watch_aiohttp_workers.py", [], "the following arguments are required: --redis-url"),
        (
            "watch_aiohttp_workers.py",
            ["--redis-url", "redis://127.0.0.1:1/0", "--workers", "0"],
            "argument --workers: must be an integer >= 1, not 0",
        ),
    ],
)
def test_a_refused_option_is_one_line_and_status_2(
    tmp_path: Path, script: str, args: list[str], mentions: str
) -> None:
    result = run_example(script, *args, cwd=tmp_path)
    line = error_line(result, status=2, mentions=mentions)
    assert line.startswith(f"{script}: error: ") and line.endswith("(see --help)")
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("script", ["watch_aiohttp.py", "watch_starlette.py"])
def test_help_shows_the_defaults(tmp_path: Path, script: str) -> None:
    result = run_example(script, "--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert "(default: 127.0.0.1)" in " ".join(result.stdout.split())
