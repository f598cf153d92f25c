"""The core's platform-specific C compiles where the platform lacks it.

``cmonotonic.pxd`` reads the POSIX clocks (``clock_gettime``) on Linux; elsewhere
(Windows and MSVC: no ``<sys/time.h>``, no ``clock_gettime``) a preprocessor guard
leaves a stub the Python side never calls (``clock.C_CLOCKS`` is False there).

The tests (:class:`.portability_kit.PlatformCChecks`) run Cython on every compiled
module of setup.py whose ``.pxd`` cimports it and compile the C with the machine's
``cc``, syntax only, twice: as it is, where a Linux build must read the C clock;
and as for a platform without it, where no POSIX clock function is left in the
module's own code.
"""

from __future__ import annotations

from ..repo_kit import ROOT, needs
from .portability_kit import PlatformCChecks


@needs("setup.py", "cython_build.py", "purgatory/core/cmonotonic.pxd")
class TestTheCore(PlatformCChecks):
    ROOT = ROOT
    PACKAGE = "purgatory"
    PLATFORM_PXD = frozenset({"purgatory/core/cmonotonic.pxd"})
    EXPECTED = "purgatory.core.clock"
