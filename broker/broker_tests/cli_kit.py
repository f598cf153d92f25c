"""Running a command line as a user would, and checking how it fails.

Every program the project ships answers bad input the same way: one line on
stderr that says what is wrong (and what to do), no Python traceback, exit
status 2 for a usage error (1 for a failure at run time), and nothing left
behind (no empty output folder, no half-written file). :func:`run_cli` runs a
program in a child process with a deadline; :func:`assert_one_line_error`
checks that contract on its result.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

#: The application's folder (broker/): programs run with it as their working directory, so
#: the scripts of its examples/ are found; ``-P`` keeps that folder off sys.path, so
#: ``python -m purgatory_broker.wire`` imports the installed package, not the source tree's.
ROOT = Path(__file__).resolve().parents[1]


def run_cli(
    args: Sequence[str],
    *,
    timeout_s: float = 60.0,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    columns: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -P ARGS`` from the application's folder and return what it did.

    ``env`` adds to (or overrides) the test's environment; ``columns`` sets the
    terminal width a program sees through ``COLUMNS``. Raises
    ``subprocess.TimeoutExpired`` (after killing the child) past ``timeout_s``.
    """
    child_env = dict(os.environ)
    child_env.pop("PYTHONWARNINGS", None)
    if columns is not None:
        child_env["COLUMNS"] = str(columns)
    if env is not None:
        child_env.update(env)
    return subprocess.run(
        [sys.executable, "-P", *args],
        cwd=ROOT if cwd is None else cwd,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def assert_one_line_error(
    result: subprocess.CompletedProcess[str], *, status: int = 2, mentions: str = ""
) -> str:
    """Assert the one-line error contract; return the line.

    The program exited with ``status``, printed no traceback, and its stderr
    holds exactly one non-empty line (which contains ``mentions``, when given).
    """
    err = result.stderr
    assert "Traceback" not in err and "Traceback" not in result.stdout, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    assert result.returncode == status, (result.returncode, err)
    assert mentions in lines[0], (mentions, lines[0])
    return lines[0]


def read_only_dir(tmp_path: Path) -> Path:
    """An existing folder this process cannot write into.

    A folder of ``tmp_path`` with mode 0o500, for an ordinary user. Root ignores
    permission bits, so for root a folder of sysfs stands in: it exists and root
    cannot create files in it. Skips (saying why) if neither is at hand.
    """
    if os.geteuid() != 0:
        locked = tmp_path / "read-only"
        locked.mkdir(mode=0o500)
        return locked
    for candidate in (Path("/sys/kernel"), Path("/sys")):
        try:
            with tempfile.TemporaryFile(dir=candidate):
                pass
        except OSError:
            if candidate.is_dir():
                return candidate
    pytest.skip("running as root, and no folder here refuses root's writes")
