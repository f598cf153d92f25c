"""Running an example program as a user would, and reading how it refused.

The library's examples parse their command lines with :mod:`argparse` (they
depend on nothing but the library): a refused option prints argparse's usage
and one ``PROG: error: WHAT`` line, exit status 2 (the idle server: the error line
alone, as the broker's command lines); a failure at run time (a port in use)
prints the error line alone, exit status 1; never a traceback.
:func:`run_example` runs one in a child process with a deadline;
:func:`error_line` checks that contract and returns the error line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..repo_kit import ROOT, need

#: the library's examples
EXAMPLES = ROOT / "examples"


def run_example(
    script: str, *args: str, cwd: Path, timeout_s: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """Run ``examples/SCRIPT ARGS`` in ``cwd`` (without the test's warning filters)."""
    need(f"examples/{script}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    command = [sys.executable, str(EXAMPLES / script), *args]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )


def error_line(
    result: subprocess.CompletedProcess[str], *, status: int, mentions: str, usage: bool = True
) -> str:
    """The error line of a refusal (status 2: after argparse's usage, or alone with
    ``usage=False``) or of a failure at run time (status 1: alone), which holds
    ``mentions``; no traceback."""
    err = result.stderr
    assert "Traceback" not in err and "Traceback" not in result.stdout, err
    assert result.returncode == status, (result.returncode, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "nothing on stderr"
    if status == 1 or not usage:
        assert len(lines) == 1, f"expected one line on stderr:\n{err}"
    else:
        assert lines[0].startswith("usage: "), err
    assert mentions in lines[-1], (mentions, lines[-1])
    return lines[-1]
