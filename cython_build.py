"""The strict Cython build both distributions of this repository share.

``setup.py`` (``aio-purgatory``) and ``broker/setup.py`` (``purgatory-broker``) each
list their compiled modules and load this module from beside themselves (in the
repository, ``broker/cython_build.py`` is a link to this file; each sdist holds a
copy of its own, so it builds on its own). Each module is plain Python that Cython
compiles in its pure-Python mode, typed by the ``.pxd`` file beside it.

The build says what it built, and builds the pure-Python package only when asked:
``PURGATORY_NO_EXTENSIONS`` set (to anything but ``0`` or empty) builds no extension
(the wheel is then ``py3-none-any``). Otherwise a module that fails to compile (no C
compiler, no Python headers) or a missing Cython (only outside an isolated build: the
build requirements bring it) fails the build with one message that names that
variable: a machine without a compiler never gets a pure build that looks compiled.
Cython writes its C into ``build/cython/``, never beside the sources, so no generated
file lands in the source tree or the sdist.
"""

from __future__ import annotations

import os

from setuptools import Extension
from setuptools.command.build_ext import build_ext

__all__ = [
    "ASK_FOR_PURE",
    "CYTHON_BUILD_DIR",
    "DIRECTIVES",
    "BuildFailed",
    "cython_extensions",
    "strict_build_ext",
]

DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,  # the .pxd files type the code; annotations are for mypy
    "embedsignature": True,
    "binding": True,
}

#: where Cython writes the C it generates (out of the source tree and the sdist)
CYTHON_BUILD_DIR = os.path.join("build", "cython")

#: the end of every build failure's message: how to get the pure build instead
ASK_FOR_PURE = (
    "install a C compiler and Python's headers, or set PURGATORY_NO_EXTENSIONS=1 "
    "to build the pure-Python package"
)


class BuildFailed(SystemExit):
    """The compiled build failed and the pure one was not asked for."""


def _no_extensions() -> bool:
    return os.environ.get("PURGATORY_NO_EXTENSIONS", "") not in ("", "0")


def cython_extensions(project: str, modules: list[str]) -> list[Extension]:
    """The extension modules of ``modules`` (dotted names, each a ``.py`` file under
    the current directory), cythonized; none when the pure build is asked for."""
    if _no_extensions():
        print(f"{project}: PURGATORY_NO_EXTENSIONS set, building the pure-Python package")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        raise BuildFailed(f"{project}: Cython is not installed; {ASK_FOR_PURE}") from None
    # -g0: no C debug info (Python's own flags ask for it): the generated C is large, and
    # without it every module compiles about a third faster and its .so is 8x smaller
    extensions = [
        Extension(name, [name.replace(".", "/") + ".py"], extra_compile_args=["-g0"])
        for name in modules
    ]
    return cythonize(  # type: ignore[no-untyped-call,no-any-return]
        extensions,
        compiler_directives=DIRECTIVES,
        quiet=True,
        nthreads=os.cpu_count() or 1,
        build_dir=CYTHON_BUILD_DIR,
    )


def strict_build_ext(project: str) -> type[build_ext]:
    """A build_ext that fails with one message, starting with ``project``, naming
    ``PURGATORY_NO_EXTENSIONS`` when a module does not compile, and compiles the
    modules in parallel, one per CPU (unless ``--parallel`` says otherwise)."""

    class StrictBuildExt(build_ext):  # type: ignore[misc]
        def finalize_options(self) -> None:
            super().finalize_options()
            if getattr(self, "parallel", None) is None:  # build_ext's option, untyped
                self.parallel = os.cpu_count() or 1

        def build_extension(self, ext: Extension) -> None:
            try:
                super().build_extension(ext)
            except Exception as exc:  # any compile error: one clear message
                raise BuildFailed(
                    f"{project}: could not compile {ext.name} ({exc}); {ASK_FOR_PURE}"
                ) from exc

    return StrictBuildExt
