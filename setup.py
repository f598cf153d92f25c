"""Build the library; compile the synchronous core with Cython when a compiler is there.

Everything else is in pyproject.toml. The compiled modules (:data:`COMPILED_MODULES`)
are the core's, plain Python that Cython compiles in its pure-Python mode, typed by
the ``.pxd`` file beside each one (see ``purgatory/core/build.py``); BENCHMARKS.md has
the measurements. How they are built (the pure build only when
``PURGATORY_NO_EXTENSIONS`` asks for it, a failed compile that fails the install
naming that switch, the C written under ``build/cython/``) is ``cython_build.py``,
which ``broker/setup.py`` shares.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cython_build import (
    CYTHON_BUILD_DIR,
    DIRECTIVES,
    cython_extensions,
    strict_build_ext,
)

#: the core modules compiled, in purgatory/core/ (the rest stay Python: protocols,
#: exceptions, small helpers nobody calls per operation)
CORE_MODULES = [
    "clock",
    "timer_list",
    "delay_queue",
    "timing_wheel",
    "timer",
    "histogram",
    "operation",
    "purgatory",
    "idle",
]
#: every compiled module, by its dotted name
COMPILED_MODULES = [f"purgatory.core.{name}" for name in CORE_MODULES]

StrictBuildExt = strict_build_ext("purgatory")

__all__ = ["COMPILED_MODULES", "CYTHON_BUILD_DIR", "DIRECTIVES", "StrictBuildExt"]

setup(
    ext_modules=cython_extensions("purgatory", COMPILED_MODULES),
    cmdclass={"build_ext": StrictBuildExt},
)
