"""What a release of the application promises: the library of its own version, and a
console script for each of its programs that shows its help.

The two distributions are released together, with one version (the broker's
``purgatory_broker/_version.py``, the library's ``purgatory/_version.py``), and the
broker requires ``aio-purgatory~=`` that version, written in its ``pyproject.toml``: a
bump of one without the others fails here. The console scripts are checked from
``pyproject.toml`` (each target runs with ``--help``) and, against the installed wheel
(``PURGATORY_EXPECT_INSTALLED``), from the installed metadata and as the programs pip
wrote: an editable install's metadata is as old as the install.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import purgatory_broker
import pytest

import purgatory

from .install_kit import EXPECT_INSTALLED
from .repo_kit import ROOT, needs

pytestmark = needs("pyproject.toml")

#: runs ``MODULE:FUNCTION`` as a console script does, with the arguments after it
RUN_TARGET = (
    "import importlib, sys; module, _, name = sys.argv.pop(1).partition(':');"
    "sys.argv[0] = 'script'; sys.exit(getattr(importlib.import_module(module), name)())"
)


def _project() -> dict[str, Any]:
    if not (ROOT / "pyproject.toml").is_file():
        return {}  # skipped: pytestmark
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]  # type: ignore[no-any-return]


PROJECT = _project()
SCRIPTS: dict[str, str] = PROJECT.get("scripts", {})


def test_the_broker_requires_the_library_of_its_own_version() -> None:
    version = purgatory.__version__
    assert purgatory_broker.__version__ == version, "the two are released with one version"
    library = [r for r in PROJECT["dependencies"] if r.startswith("aio-purgatory")]
    assert library == [f"aio-purgatory~={version}"]
    if EXPECT_INSTALLED:  # what pip read
        assert importlib.metadata.version("purgatory-broker") == version
        requires = importlib.metadata.requires("purgatory-broker") or []
        assert f"aio-purgatory~={version}" in requires


def test_each_program_has_a_console_script() -> None:
    assert set(SCRIPTS.values()) == {
        "purgatory_broker.sim:main",
        "purgatory_broker.wire.__main__:main",
        "purgatory_broker.analytics.__main__:main",
    }
    if EXPECT_INSTALLED:
        installed = importlib.metadata.distribution("purgatory-broker").entry_points
        assert {e.name: e.value for e in installed if e.group == "console_scripts"} == SCRIPTS


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_console_script_shows_its_help(name: str, tmp_path: Path) -> None:
    """Its target, run as the script runs it; installed, the script pip wrote too."""
    commands = [[sys.executable, "-P", "-c", RUN_TARGET, SCRIPTS[name], "--help"]]
    if EXPECT_INSTALLED:
        script = shutil.which(name, path=str(Path(sys.executable).parent))
        assert script is not None, f"{name} is not installed beside {sys.executable}"
        commands.append([script, "--help"])
    for command in commands:
        done = subprocess.run(
            command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: "), done.stdout


@needs("README.md")
def test_the_readme_has_no_relative_link() -> None:
    """PyPI shows the README away from the repository, where a relative link leads nowhere."""
    targets = re.findall(r"\]\(([^)\s]+)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert all(target.startswith("https://") for target in targets), targets


@needs("CHANGES", "CHANGES.rst")
def test_the_broker_has_its_own_changelog() -> None:
    """towncrier, run in broker/, gathers the application's fragments (broker/CHANGES/)."""
    towncrier = shutil.which("towncrier", path=str(Path(sys.executable).parent))
    assert towncrier is not None, "towncrier is missing: install the dev extra"
    version = purgatory_broker.__version__
    done = subprocess.run(
        [towncrier, "build", "--draft", "--version", version],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{version} (")
    for fragment in (ROOT / "CHANGES").glob("*.*.rst"):
        assert f"(#{fragment.name.split('.')[0]})" in done.stdout
