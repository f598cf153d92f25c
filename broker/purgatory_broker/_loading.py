"""Which build of the app's compiled modules Python loads: compiled, or the pure ones.

``setup.py`` compiles the modules a broker request runs through and the simulated
clients in place (an extension module beside each ``.py``), and Python prefers
an extension module to a source file of the same name. With the environment
variable ``PURGATORY_NO_EXTENSIONS`` set (to anything but ``0`` or empty) when
:mod:`purgatory_broker` is first imported, every directory of the package is
looked up by a finder that knows only source files (the library's public
:func:`purgatory.core.build.prefer_sources`, which the library applies to its own
package), so the ``.py`` files load even where compiled ones sit beside them: one
switch for both distributions.
"""

from __future__ import annotations

import sys

from purgatory.core.build import NO_EXTENSIONS, prefer_sources

__all__ = ["NO_EXTENSIONS"]

if NO_EXTENSIONS:
    prefer_sources(list(sys.modules[__name__.partition(".")[0]].__path__))
