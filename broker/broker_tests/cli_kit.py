"""Running a command line as a user would, and checking how it fails.

Every program the project ships answers bad input the same way: one line on
stderr that says what is wrong (and what to do), no Python traceback, exit
status 2 for a usage error (1 for a failure at run time), and nothing left
behind (no empty output folder, no half-written file). :func:`run_cli` runs a
program in a child process with a deadline; :func:`assert_one_line_error`
checks that contract on its result.

Each program names itself as it was started: its console script's name, or
``python -m PACKAGE``. :func:`started_as` gives the command line of either and the
name to expect; :func:`assert_named_as_started` checks the usage line and an
error line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from .install_kit import EXPECT_INSTALLED

#: The application's folder (broker/): programs run with it as their working directory, so
#: the scripts of its examples/ are found; ``-P`` keeps that folder off sys.path, so
#: ``python -m purgatory_broker.wire`` imports the installed package, not the source tree's.
ROOT = Path(__file__).resolve().parents[1]

#: each program's console script -> (its target, the package ``python -m`` runs);
#: test_release.py checks the targets against pyproject.toml's [project.scripts]
PROGRAMS = {
    "purgatory-broker-simulate": ("purgatory_broker.sim:main", "purgatory_broker.sim"),
    "purgatory-broker-wire": ("purgatory_broker.wire.__main__:main", "purgatory_broker.wire"),
    "purgatory-broker-analytics": (
        "purgatory_broker.analytics.__main__:main",
        "purgatory_broker.analytics",
    ),
}

#: a console script as pip writes one (its launcher on POSIX)
_SCRIPT = """\
import re
import sys
from {module} import {function}
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit({function}())
"""


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


def console_script(name: str, folder: Path) -> Path:
    """The console script ``name``: the one pip wrote beside this interpreter, or (not
    there: an editable install made before the scripts were declared) one written
    into ``folder`` as pip writes it. Against the installed wheel it must be pip's."""
    installed = shutil.which(name, path=str(Path(sys.executable).parent))
    if installed is not None:
        return Path(installed)
    assert not EXPECT_INSTALLED, f"{name} is not installed beside {sys.executable}"
    module, _, function = PROGRAMS[name][0].partition(":")
    script = folder / name
    script.write_text(_SCRIPT.format(module=module, function=function), encoding="utf-8")
    return script


def started_as(form: str, name: str, folder: Path) -> tuple[list[str], str]:
    """The arguments of :func:`run_cli` that start the program ``name`` as ``form``
    (``script``: its console script; ``module``: ``python -m``), and the name its
    usage and error lines should give."""
    if form == "script":  # the script's own lines, run by this interpreter
        return [str(console_script(name, folder))], name
    package = PROGRAMS[name][1]
    return ["-m", package], f"{Path(sys.executable).name} -m {package}"


def assert_named_as_started(form: str, name: str, folder: Path, bad: Sequence[str]) -> None:
    """The program ``name`` started as ``form`` (:func:`started_as`) names itself so in
    its usage line (``--help``) and in the one-line error that ``bad`` gets."""
    command, prog = started_as(form, name, folder)
    shown = run_cli([*command, "--help"], cwd=folder)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"usage: {prog} "), shown.stdout[:200]
    line = assert_one_line_error(run_cli([*command, *bad], cwd=folder))
    assert line.startswith(f"{prog}: error: "), line
