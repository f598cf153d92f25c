"""Which copy of a package the suite tests: the installed one, or the source tree's.

The suite runs against whatever ``import purgatory`` finds. pytest's
``--import-mode=append`` (pyproject.toml) keeps the tests' own roots behind
site-packages, so an installed wheel wins over the source tree beside the tests;
``PURGATORY_EXPECT_INSTALLED=1`` makes the run insist on it: each suite's
``conftest.py`` ends the session at its start if a package it tests was imported from
anywhere but an installation directory (an editable install, or the tree on sys.path,
imports it from the tree). The application's suite links this file.
"""

from __future__ import annotations

import importlib
import os
import site
import sysconfig
from collections.abc import Iterable
from pathlib import Path

import pytest

#: set (to anything but ``0`` or empty): the packages must come from an installation
EXPECT_INSTALLED = os.environ.get("PURGATORY_EXPECT_INSTALLED", "") not in ("", "0")


def install_dirs() -> set[Path]:
    """The directories pip installs packages into for this interpreter."""
    dirs = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    dirs.update(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.add(site.getusersitepackages())
    return {Path(d).resolve() for d in dirs}


def not_installed(names: Iterable[str]) -> list[str]:
    """``name from path`` for each package of ``names`` imported from outside every
    installation directory (importing them now if they were not yet)."""
    dirs = install_dirs()
    outside = []
    for name in names:
        path = Path(importlib.import_module(name).__file__ or name).resolve()
        if not any(path.is_relative_to(d) for d in dirs):
            outside.append(f"{name} from {path.parent}")
    return outside


def check_installed(names: Iterable[str]) -> None:
    """With ``PURGATORY_EXPECT_INSTALLED`` set, end the session at once (usage error)
    unless every package of ``names`` comes from an installation directory."""
    if not EXPECT_INSTALLED:
        return
    outside = not_installed(names)
    if outside:
        pytest.exit(
            f"PURGATORY_EXPECT_INSTALLED is set, but imported {'; '.join(outside)}, not from "
            "site-packages: install the wheels (tests/install_wheels.sh), not editable",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
