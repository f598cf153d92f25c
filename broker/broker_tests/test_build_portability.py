"""The application's platform-specific C compiles where the platform lacks it.

``cbatch.pxd`` uses the x86-64 CRC32 instruction with GCC or Clang; elsewhere
(other CPUs and compilers, MSVC) a preprocessor guard leaves the portable CRC table.
The tests (:class:`.portability_kit.PlatformCChecks`, the library suite's tool) run
Cython on every compiled module of broker/setup.py whose ``.pxd`` cimports it and
compile the C with the machine's ``cc``, syntax only, twice: as it is, where an
x86-64 build must use the instruction; and as for a platform without it, where
neither the instruction nor a POSIX clock function is left in the module's own code.
"""

from __future__ import annotations

from pathlib import Path

from .portability_kit import PlatformCChecks


class TestTheRequestPath(PlatformCChecks):
    ROOT = Path(__file__).resolve().parents[1]
    PACKAGE = "purgatory_broker"
    PLATFORM_PXD = frozenset({"purgatory_broker/broker/storage/cbatch.pxd"})
    EXPECTED = "purgatory_broker.broker.storage.records"
