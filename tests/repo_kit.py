"""The repository's files that some tests read, and the skip when one is absent.

The suite runs in three places: the repository; the library's sdist, unpacked (it
carries ``tests/``, ``examples/``, ``docs/``, ``CHANGES/``, ``setup.py`` and the
README, never ``broker/``, the application's own distribution); and a bare copy of
``tests/`` beside an installed wheel (a packager's check, a wheel's test run). A test
about a repository file (an example, the docs, the changelog, the build script) names
it through :func:`needs` (a mark, for a module or a test) or :func:`need` (a call, at
a module's top before it imports an example, or in a fixture), which skip it with a
reason where the file is absent; every other test reads nothing but the installed
package. Checking is one ``stat`` per file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: the folder above the tests: the project (the repository, or the unpacked sdist; the
#: application's suite links this file, so links are not followed: there it is broker/)
ROOT = Path(__file__).absolute().parents[1]


def missing(*paths: str) -> str | None:
    """The reason to skip a test that reads ``paths`` (relative to :data:`ROOT`), or
    None if all are here."""
    absent = [path for path in paths if not (ROOT / path).exists()]
    if not absent:
        return None
    return f"{', '.join(absent)} not here: the tests run without that part of the repository"


def needs(*paths: str) -> pytest.MarkDecorator:
    """A mark: skip unless every one of ``paths`` is here (``pytestmark = needs(...)``)."""
    reason = missing(*paths)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def need(*paths: str) -> Path:
    """Skip now (the module, at its top; else the test) unless every one of ``paths`` is
    here; :data:`ROOT` otherwise."""
    reason = missing(*paths)
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)
    return ROOT
