"""Which build of the core is loaded: compiled with Cython, or pure Python.

The core's modules are one source, plain Python, that Cython compiles in its
pure-Python mode: each ``.py`` stays the readable reference of its algorithm,
and the ``.pxd`` file beside it declares the C types (classes become extension
types with C fields, hot locals C integers, ``time.monotonic`` a C function).
A single source rather than ``.pyx`` files beside the ``.py`` ones: every
algorithm is written once, the pure build is not a second implementation that
could drift, and the same tests cover both builds by construction; what it
costs is that the ``.py`` files keep to what Cython's pure mode compiles (no
``typing.Generic`` base on a compiled class: the public generic classes
subclass the core's).

``pip install`` compiles the modules when a C compiler is there (setup.py);
without one, or with ``PURGATORY_NO_EXTENSIONS=1`` at build or import time, the
pure-Python modules are used, with the same behaviour, the same exceptions and
the same messages. The test suite runs against both (the README's test
command runs it twice).

Python subclasses of the compiled classes (a user's ``TimerTask`` or
``DelayedOperation``, with ``__slots__`` or without) work as with the pure ones.
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from types import ModuleType

from . import (
    clock,
    delay_queue,
    histogram,
    idle,
    operation,
    purgatory,
    timer,
    timer_list,
    timing_wheel,
)
from ._loading import NO_EXTENSIONS, prefer_sources

__all__ = ["COMPILED", "COMPILED_MODULES", "NO_EXTENSIONS", "prefer_sources"]

_CORE: tuple[ModuleType, ...] = (
    clock,
    timer_list,
    delay_queue,
    timing_wheel,
    timer,
    histogram,
    operation,
    purgatory,
    idle,
)


def _is_extension(module: ModuleType) -> bool:
    return (module.__file__ or "").endswith(tuple(EXTENSION_SUFFIXES))


#: the core modules loaded compiled (all of them, or none unless a build failed)
COMPILED_MODULES: tuple[str, ...] = tuple(m.__name__ for m in _CORE if _is_extension(m))

#: True when every compiled module of the core is loaded compiled
COMPILED: bool = len(COMPILED_MODULES) == len(_CORE)
