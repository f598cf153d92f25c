"""Running an example program as a user would, and reading how it refused.

The library's examples parse their command lines with ``examples/_cli.py``'s
:mod:`argparse` parser: a refused option prints one ``PROG: error: WHAT (see
--help)`` line, exit status 2, as the broker's command lines do; a failure at run
time (a port in use) prints the error line alone, exit status 1; never a
traceback.
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


def error_line(result: subprocess.CompletedProcess[str], *, status: int, mentions: str) -> str:
    """The one line on stderr of a refusal (status 2) or of a failure at run time
    (status 1), which holds ``mentions``; no traceback."""
    err = result.stderr
    assert "Traceback" not in err and "Traceback" not in result.stdout, err
    assert result.returncode == status, (result.returncode, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "nothing on stderr"
    assert len(lines) == 1, f"expected one line on stderr:\n{err}"
    assert mentions in lines[-1], (mentions, lines[-1])
    return lines[-1]
