"""The changelog's fragments (CHANGES/): each named for a known type, and towncrier
gathers them all. About the repository, so it reads the repository."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import purgatory

from .repo_kit import ROOT, needs

FRAGMENTS = ROOT / "CHANGES"

pytestmark = needs("CHANGES", "pyproject.toml")


def test_every_fragment_has_an_issue_and_a_known_type() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["towncrier"]
    types = {t["directory"] for t in config["type"]}
    names = sorted(p.name for p in FRAGMENTS.iterdir() if p.name != "README.rst")
    assert names, "no fragment: every change of a release says what it changed"
    for name in names:
        match = re.fullmatch(r"(\d+)\.([a-z]+)(\.\d+)?\.rst", name)
        assert match and match[2] in types, f"CHANGES/{name}: not <issue>.<type>.rst"


def test_towncrier_gathers_every_fragment() -> None:
    towncrier = shutil.which("towncrier", path=str(Path(sys.executable).parent))
    assert towncrier is not None, "towncrier is missing: install the dev extra"
    done = subprocess.run(
        [towncrier, "build", "--draft", "--version", purgatory.__version__],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for fragment in FRAGMENTS.glob("*.*.rst"):
        issue = fragment.name.split(".")[0]
        assert f"(#{issue})" in done.stdout
