"""Build the package; compile the hot modules with Cython when a compiler is there.

Everything else is in pyproject.toml. The compiled modules (:data:`COMPILED_MODULES`)
are plain Python that Cython compiles in its pure-Python mode: the synchronous
core's, typed by the ``.pxd`` file beside each one (see ``purgatory/core/build.py``),
and the modules a broker request runs through, compiled as they are but for the
``.pxd`` of six classes, which makes their ``__slots__`` C fields (it removes the
interpreter's dispatch and those attribute lookups), and the batch work of
``storage/segment.py`` and ``storage/records.py``, which reads headers, computes
CRC-32C and stamps offsets in C (``storage/cbatch.pxd``); BENCHMARKS.md has the
measurements.

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

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: the core modules compiled, in purgatory/core/ (the rest stay Python: protocols,
#: exceptions, small helpers nobody calls per operation)
CORE_MODULES = [
    "timer_list",
    "delay_queue",
    "timing_wheel",
    "timer",
    "histogram",
    "operation",
    "purgatory",
    "idle",
]
#: the modules every produce and fetch of the broker runs through, and the simulated
#: clients that build every batch of the simulation
BROKER_MODULES = [
    "purgatory.broker.storage.records",
    "purgatory.broker.storage.offset_index",
    "purgatory.broker.storage.segment",
    "purgatory.broker.storage.log",
    "purgatory.broker.replication",
    "purgatory.broker.delayed",
    "purgatory.broker.broker",
    "purgatory.sim.clients",
]
#: every compiled module, by its dotted name
COMPILED_MODULES = [f"purgatory.core.{name}" for name in CORE_MODULES] + BROKER_MODULES

DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,  # the .pxd files type the code; annotations are for mypy
    "embedsignature": True,
    "binding": True,
}


def _no_extensions() -> bool:
    return os.environ.get("PURGATORY_NO_EXTENSIONS", "") not in ("", "0")


#: where Cython writes the C it generates (out of the source tree and the sdist)
CYTHON_BUILD_DIR = os.path.join("build", "cython")

#: the end of every build failure's message: how to get the pure build instead
ASK_FOR_PURE = (
    "install a C compiler and Python's headers, or set PURGATORY_NO_EXTENSIONS=1 "
    "to build the pure-Python package"
)


class BuildFailed(SystemExit):
    """The compiled build failed and the pure one was not asked for."""


def _extensions() -> list[Extension]:
    if _no_extensions():
        print("purgatory: PURGATORY_NO_EXTENSIONS set, building the pure-Python package")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        raise BuildFailed(f"purgatory: Cython is not installed; {ASK_FOR_PURE}") from None
    # -g0: no C debug info (Python's own flags ask for it): the generated C is large, and
    # without it every module compiles about a third faster and its .so is 8x smaller
    modules = [
        Extension(name, [name.replace(".", "/") + ".py"], extra_compile_args=["-g0"])
        for name in COMPILED_MODULES
    ]
    return cythonize(  # type: ignore[no-untyped-call,no-any-return]
        modules,
        compiler_directives=DIRECTIVES,
        quiet=True,
        nthreads=os.cpu_count() or 1,
        build_dir=CYTHON_BUILD_DIR,
    )


class StrictBuildExt(build_ext):  # type: ignore[misc]
    """build_ext that fails with one message naming ``PURGATORY_NO_EXTENSIONS`` when a
    module does not compile, and compiles the modules in parallel, one per CPU (unless
    ``--parallel`` says otherwise)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if getattr(self, "parallel", None) is None:  # build_ext's option, untyped
            self.parallel = os.cpu_count() or 1

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # any compile error: one clear message
            raise BuildFailed(
                f"purgatory: could not compile {ext.name} ({exc}); {ASK_FOR_PURE}"
            ) from exc


setup(ext_modules=_extensions(), cmdclass={"build_ext": StrictBuildExt})
