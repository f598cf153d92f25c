"""Build purgatory-broker; compile a broker request's path with Cython when a compiler is there.

Everything else is in pyproject.toml. The compiled modules (:data:`COMPILED_MODULES`)
are the ones every produce and fetch of the broker runs through, the simulated clients
that build every batch of the simulation, and the trace's row and writer (one row a
request): compiled as they are but for the ``.pxd`` of ten classes, which makes their
``__slots__`` C fields, and the batch work of ``storage/segment.py`` and
``storage/records.py``, which checks headers, computes CRC-32C and stamps offsets in C
(``storage/cbatch.pxd``); BENCHMARKS.md has the measurements. How they are built is
``cython_build.py``, shared with the library's ``setup.py`` (in the repository a link to
``../cython_build.py``; the sdist holds the file): the pure build only when
``PURGATORY_NO_EXTENSIONS`` asks for it, a failed compile fails the install naming that
switch, the C is written under ``build/cython/``.
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

#: the modules every produce and fetch of the broker runs through, the simulated
#: clients that build every batch of the simulation, and the trace (a row a request)
COMPILED_MODULES = [
    "purgatory_broker.broker.storage.records",
    "purgatory_broker.broker.storage.offset_index",
    "purgatory_broker.broker.storage.segment",
    "purgatory_broker.broker.storage.log",
    "purgatory_broker.broker.replication",
    "purgatory_broker.broker.delayed",
    "purgatory_broker.broker.broker",
    "purgatory_broker.sim.clients",
    "purgatory_broker.tracing",
]

StrictBuildExt = strict_build_ext("purgatory-broker")

__all__ = ["COMPILED_MODULES", "CYTHON_BUILD_DIR", "DIRECTIVES", "StrictBuildExt"]

setup(
    ext_modules=cython_extensions("purgatory-broker", COMPILED_MODULES),
    cmdclass={"build_ext": StrictBuildExt},
)
