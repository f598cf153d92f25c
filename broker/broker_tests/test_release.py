"""What a release of the application promises: the library of its own version, and a
console script for each of its programs that shows its help.

The two distributions are released together, with one version (the broker's
``purgatory_broker/_version.py``, the library's ``purgatory/_version.py``), and the
broker requires ``aio-purgatory~=`` that version, written in its ``pyproject.toml``: a
bump of one without the others fails here. The console scripts are checked from
``pyproject.toml`` and, against the installed wheel (``PURGATORY_EXPECT_INSTALLED``),
from the installed metadata: an editable install's metadata is as old as the install.
Each program's tests of its command line (``*/test_cli.py``) run its console script
(pip's, where installed) and its ``python -m`` form.
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

import purgatory

from .cli_kit import PROGRAMS
from .install_kit import EXPECT_INSTALLED
from .repo_kit import ROOT, needs

pytestmark = needs("pyproject.toml")


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
    """The scripts the CLI tests run (cli_kit.PROGRAMS) are the ones declared."""
    assert {name: target for name, (target, _) in PROGRAMS.items()} == SCRIPTS
    if EXPECT_INSTALLED:
        installed = importlib.metadata.distribution("purgatory-broker").entry_points
        assert {e.name: e.value for e in installed if e.group == "console_scripts"} == SCRIPTS


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
