"""Which build of the core's modules Python loads: compiled, or the pure ones.

The compiled core is the same ``.py`` modules compiled in place (an extension
module ``timer.cpython-311-x86_64-linux-gnu.so`` beside ``timer.py``), and Python
prefers an extension module to a source file of the same name. With the
environment variable ``PURGATORY_NO_EXTENSIONS`` set (to anything but ``0`` or
empty) when the package is first imported, this package's modules are looked
up by a finder that knows only source files, so the ``.py`` files load even
where compiled ones sit beside them, as aio-libs' ``*_NO_EXTENSIONS`` variables
do. It must run before any module of the package is imported: ``__init__``
imports it first.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, SourceFileLoader

__all__ = ["NO_EXTENSIONS"]

#: True when PURGATORY_NO_EXTENSIONS asked for the pure-Python core
NO_EXTENSIONS: bool = os.environ.get("PURGATORY_NO_EXTENSIONS", "") not in ("", "0")

if NO_EXTENSIONS:
    for _directory in sys.modules[__name__.rpartition(".")[0]].__path__:
        sys.path_importer_cache[_directory] = FileFinder(
            _directory, (SourceFileLoader, SOURCE_SUFFIXES)
        )
