"""Which build of the compiled modules Python loads: compiled, or the pure ones.

A compiled module is the same ``.py`` module compiled in place (an extension
module ``timer.cpython-311-x86_64-linux-gnu.so`` beside ``timer.py``), and Python
prefers an extension module to a source file of the same name. With the
environment variable ``PURGATORY_NO_EXTENSIONS`` set (to anything but ``0`` or
empty) when the package is first imported, the modules of the package (the
core's compiled ones, see ``setup.py``) are looked up by a finder that knows only
source files (:func:`prefer_sources`, public in :mod:`purgatory.core.build` for a
package compiled the same way, as ``purgatory_broker`` is), so the
``.py`` files load even where compiled ones sit beside them, as aio-libs'
``*_NO_EXTENSIONS`` variables do. It must run before any compiled module is
imported: ``purgatory/__init__`` imports the core first, and the core imports
this first. It imports none of the packages it covers: it only walks their
directories.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, SourceFileLoader

__all__ = ["NO_EXTENSIONS", "prefer_sources"]

#: True when PURGATORY_NO_EXTENSIONS asked for the pure-Python core
NO_EXTENSIONS: bool = os.environ.get("PURGATORY_NO_EXTENSIONS", "") not in ("", "0")


def prefer_sources(roots: list[str]) -> None:
    """Look every package directory under ``roots`` up by a source-only finder
    (public through :mod:`purgatory.core.build`, for a package compiled the same way)."""
    for root in roots:
        for directory, subdirectories, _ in os.walk(root):
            subdirectories[:] = [d for d in subdirectories if d != "__pycache__"]
            sys.path_importer_cache[directory] = FileFinder(
                directory, (SourceFileLoader, SOURCE_SUFFIXES)
            )


if NO_EXTENSIONS:
    prefer_sources(list(sys.modules[__name__.partition(".")[0]].__path__))
