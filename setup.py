"""Build the package; compile the synchronous core with Cython when a compiler is there.

Everything else is in pyproject.toml. The core's modules (``purgatory/core/*.py``)
are plain Python that Cython compiles in its pure-Python mode, typed by the
``.pxd`` file beside each one (see ``purgatory/core/build.py``). The build
falls back to the pure-Python core, with a warning, when:

* ``PURGATORY_NO_EXTENSIONS`` is set (to anything but ``0`` or empty),
* Cython is not importable (the build requirements pin it, so only outside an
  isolated build), or
* a module fails to compile (no C compiler, no Python headers).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: the core modules compiled, in purgatory/core/ (the rest stay Python: protocols,
#: exceptions, small helpers nobody calls per operation)
COMPILED_MODULES = [
    "timer_list",
    "delay_queue",
    "timing_wheel",
    "timer",
    "histogram",
    "operation",
    "purgatory",
    "idle",
]

DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,  # the .pxd files type the code; annotations are for mypy
    "embedsignature": True,
    "binding": True,
}


def _no_extensions() -> bool:
    return os.environ.get("PURGATORY_NO_EXTENSIONS", "") not in ("", "0")


def _extensions() -> list[Extension]:
    if _no_extensions():
        print("purgatory: PURGATORY_NO_EXTENSIONS set, building the pure-Python core")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("purgatory: Cython not found, building the pure-Python core", file=sys.stderr)
        return []
    modules = [
        Extension(f"purgatory.core.{name}", [f"purgatory/core/{name}.py"])
        for name in COMPILED_MODULES
    ]
    return cythonize(modules, compiler_directives=DIRECTIVES, quiet=True)  # type: ignore[no-untyped-call,no-any-return]


class OptionalBuildExt(build_ext):  # type: ignore[misc]
    """build_ext that leaves the pure-Python core when compiling fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means: pure Python
            self._fall_back(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - as above, one module at a time
            self._fall_back(exc, ext.name)

    @staticmethod
    def _fall_back(exc: Exception, name: str = "the core") -> None:
        print(
            f"purgatory: could not compile {name} ({exc}); the pure-Python core is used",
            file=sys.stderr,
        )


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
