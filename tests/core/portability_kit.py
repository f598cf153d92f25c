"""Compile a package's platform-specific C as for a platform without it (the
portability tests' tool; the application's suite links this file).

A ``.pxd`` file may carry C written for a platform behind a preprocessor guard: the
library's ``cmonotonic.pxd`` reads the POSIX clocks (``clock_gettime``) on Linux,
the application's ``cbatch.pxd`` uses the x86-64 CRC32 instruction with GCC or
Clang. Elsewhere (Windows and MSVC: no ``<sys/time.h>``, no ``clock_gettime``;
other CPUs and compilers) the guard leaves a stub the Python side never calls, or
the portable CRC table.

:func:`platform_modules` finds the compiled modules (a ``setup.py``'s
``COMPILED_MODULES``) whose ``.pxd`` cimports such a file; :func:`cythonize` runs
Cython on one as that ``setup.py`` does (its directives, into a temporary
directory); :func:`compile_lines` compiles the C with the machine's ``cc``, syntax
only, as it is or with :data:`ELSEWHERE` (``__linux__`` undefined,
``PURGATORY_NO_CPU_CRC32C`` defined) and the :data:`HIDDEN_HEADER` stand-ins for
``<time.h>`` and ``<sys/time.h>`` that stop the compile if the module's own code
includes them (Python.h still may: it needs them on every platform), and returns
the module's own lines of the preprocessed output, to search for what must not be
left: :data:`POSIX_CLOCKS`, :data:`CPU_CRC`. :class:`PlatformCChecks` holds the
tests; each suite subclasses it with its package's paths. Both suites' build tests
also run a ``setup.py`` here (:func:`run_setup`), check where Cython writes
(:func:`check_cythonize_writes_outside_the_tree`) and import the pure build in a child
(:func:`run_pure`).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest
import setuptools

#: what the guards leave out elsewhere: the POSIX clocks, the CPU's CRC instruction
POSIX_CLOCKS = re.compile(r"\b(clock_gettime|clock_getres|clockid_t|timespec)\b")
CPU_CRC = re.compile(r"\b(__builtin_ia32_crc32\w*|__builtin_cpu_supports|_mm_crc32_u\w+)\b")
#: a C string or character literal
LITERAL = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])+'")
#: the flags that compile the C as for a platform with neither
ELSEWHERE = ["-U__linux__", "-DPURGATORY_NO_CPU_CRC32C"]
#: stands in for <time.h> and <sys/time.h>: Python.h (before the module's code) gets the
#: real one, the module's code (after Cython's preamble defines __PYX_EXTERN_C) an error
HIDDEN_HEADER = """\
#ifdef __PYX_EXTERN_C
#error "hidden: the module's own code includes a POSIX time header"
#else
#include_next <{name}>
#endif
"""
CC = shutil.which("cc")
TIMEOUT_S = 60


def setup_script(setup: Path) -> dict[str, Any]:
    """A setup.py's namespace, without cythonizing or building anything."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PURGATORY_NO_EXTENSIONS", "1")
        patch.setattr(setuptools, "setup", lambda **kwargs: None)
        return runpy.run_path(str(setup))


def run_setup(monkeypatch: pytest.MonkeyPatch, setup: Path) -> dict[str, Any]:
    """A setup.py's namespace as the environment leaves it, its ``setup()`` call
    captured (``namespace["captured"]``: the keyword arguments) instead of run."""
    captured: dict[str, Any] = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: captured.update(kwargs))
    monkeypatch.setattr(sys, "path", [*sys.path])  # the script inserts its folder
    namespace = runpy.run_path(str(setup))
    namespace["captured"] = captured
    return namespace


def run_setup_told_pure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], setup: Path, says: str
) -> dict[str, Any]:
    """A setup.py run with ``PURGATORY_NO_EXTENSIONS=1``: no extension module, and a
    line that ``says`` so on stdout; its namespace, for the caller's further checks."""
    monkeypatch.setenv("PURGATORY_NO_EXTENSIONS", "1")
    script = run_setup(monkeypatch, setup)
    assert script["captured"]["ext_modules"] == []
    assert says in capsys.readouterr().out
    return script


def run_pure(code: str) -> str:
    """The output of ``python -P -c code`` run with ``PURGATORY_NO_EXTENSIONS=1`` (the
    pure build, chosen at import)."""
    env = {**os.environ, "PURGATORY_NO_EXTENSIONS": "1"}
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout


def check_cythonize_writes_outside_the_tree(monkeypatch: pytest.MonkeyPatch, setup: Path) -> None:
    """A compiled build asks ``cythonize`` for every module of ``COMPILED_MODULES`` and
    to write the generated C under ``CYTHON_BUILD_DIR``, ``build/cython`` (nothing in
    the source tree, nothing in the sdist)."""
    import Cython.Build

    asked: dict[str, Any] = {}

    def cythonize(modules: list[setuptools.Extension], **options: Any) -> list[Any]:
        asked.update(options, modules=modules)
        return []

    monkeypatch.delenv("PURGATORY_NO_EXTENSIONS", raising=False)
    monkeypatch.setattr(Cython.Build, "cythonize", cythonize)
    script = run_setup(monkeypatch, setup)
    assert asked["build_dir"] == script["CYTHON_BUILD_DIR"] == os.path.join("build", "cython")
    assert {m.name for m in asked["modules"]} == set(script["COMPILED_MODULES"])


def _cimported(root: Path, pxd: Path) -> set[Path]:
    """The .pxd files under ``root`` that ``pxd`` cimports, directly or not."""
    seen: set[Path] = set()
    todo = [pxd]
    while todo:
        here = todo.pop()
        text = here.read_text()
        for dots, name in re.findall(r"^\s*from\s+(\.*)([\w.]+)\s+cimport", text, re.M):
            base = here.parent
            for _ in range(len(dots) - 1):
                base = base.parent
            found = (base if dots else root).joinpath(*name.split(".")).with_suffix(".pxd")
            if found.is_file() and found not in seen:
                seen.add(found)
                todo.append(found)
    return seen


def platform_modules(root: Path, modules: list[str], platform_pxd: frozenset[str]) -> list[str]:
    """The ``modules`` (under ``root``) whose .pxd cimports one of ``platform_pxd``."""
    return sorted(
        name
        for name in modules
        if (pxd := root.joinpath(*name.split(".")).with_suffix(".pxd")).is_file()
        and {p.relative_to(root).as_posix() for p in _cimported(root, pxd)} & platform_pxd
    )


def other_pxd_files_hold_no_platform_c(
    root: Path, package: str, platform_pxd: frozenset[str]
) -> None:
    """No .pxd but ``platform_pxd`` cimports POSIX declarations or writes C of its own."""
    for pxd in sorted(root.joinpath(package).rglob("*.pxd")):
        if pxd.relative_to(root).as_posix() in platform_pxd:
            continue
        text = pxd.read_text()
        assert not re.search(r"\bposix\.|cdef extern from \*", text), pxd


def cythonize(root: Path, name: str, directives: dict[str, object], out: Path) -> Path:
    """Module ``name`` (under ``root``) as Cython writes it for setup.py, in ``out``."""
    flags = [f"-X{key}={value}" for key, value in directives.items()]
    source = Path(*name.split(".")).with_suffix(".py")
    c_file = out / (name + ".c")
    command = [sys.executable, "-m", "cython", *flags, "-o", str(c_file), str(source)]
    done = subprocess.run(
        command, cwd=root, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    assert done.returncode == 0, f"Cython failed on {name}:\n{done.stderr}"
    return c_file


def hidden_headers(where: Path) -> Path:
    """An include directory whose <time.h> and <sys/time.h> the module may not include."""
    for name in ("time.h", "sys/time.h"):
        (where / name).parent.mkdir(exist_ok=True)
        (where / name).write_text(HIDDEN_HEADER.format(name=name))
    return where


def compile_lines(c_file: Path, *flags: str) -> Iterator[str]:
    """Compile ``c_file`` (syntax only; failing the test if it does not compile), then
    yield the lines of its preprocessed output that come from the file itself, their
    string literals emptied."""
    if CC is None:
        pytest.skip("no C compiler (cc) on this machine")
    include = sysconfig.get_paths()["include"]
    for mode in ("-fsyntax-only", "-E"):
        command = [CC, mode, *flags, "-I", include, str(c_file)]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
        assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr[-3000:]}"
    ours = False
    for line in done.stdout.splitlines():
        marker = re.match(r'# \d+ "(.*)"', line)
        if marker:
            ours = Path(marker.group(1)).name == c_file.name
        elif ours:
            yield LITERAL.sub('""', line)  # not docstrings: code


class PlatformCChecks:
    """The tests, for a subclass (``Test...``) that names its project: its folder
    (``ROOT``, with ``setup.py``), its package and its guarded .pxd files; ``EXPECTED``
    is a module that must be among those checked (so the search finds them)."""

    ROOT: ClassVar[Path]
    PACKAGE: ClassVar[str]
    PLATFORM_PXD: ClassVar[frozenset[str]]
    EXPECTED: ClassVar[str]

    @pytest.fixture(scope="class")
    @classmethod
    def generated(cls, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
        """Each compiled module with platform C, as Cython writes it for setup.py."""
        script = setup_script(cls.ROOT / "setup.py")
        if importlib.util.find_spec("Cython") is None:
            pytest.fail("Cython is not installed (it is in the dev extra)")
        modules = platform_modules(cls.ROOT, script["COMPILED_MODULES"], cls.PLATFORM_PXD)
        assert cls.EXPECTED in modules, modules
        out = tmp_path_factory.mktemp("cython")
        with ThreadPoolExecutor() as pool:
            files = pool.map(
                lambda name: cythonize(cls.ROOT, name, script["DIRECTIVES"], out), modules
            )
            return dict(zip(modules, files, strict=True))

    def test_the_platform_c_lives_in_the_guarded_pxd_files_only(self) -> None:
        other_pxd_files_hold_no_platform_c(self.ROOT, self.PACKAGE, self.PLATFORM_PXD)

    def test_the_c_compiles_as_it_is(self, generated: dict[str, Path]) -> None:
        """On Linux the clocks are read in C; with GCC or Clang on x86-64 the CRC uses
        the CPU's instruction where it has it."""
        for name, c_file in generated.items():
            code = "\n".join(compile_lines(c_file))
            uses_clocks = "purgatory_libuv_now_ms" in code
            assert uses_clocks or "purgatory_crc32c" in code, f"no platform C in {name}"
            if uses_clocks and sys.platform.startswith("linux"):
                assert POSIX_CLOCKS.search(code), f"{name}: Linux does not read the C clock"
            if "purgatory_crc32c" in code and platform.machine().lower() in ("x86_64", "amd64"):
                assert CPU_CRC.search(code), f"{name}: x86-64 does not use the CRC instruction"

    def test_the_c_compiles_without_the_platform(
        self, generated: dict[str, Path], tmp_path: Path
    ) -> None:
        hidden = hidden_headers(tmp_path)
        for name, c_file in generated.items():
            code = "\n".join(compile_lines(c_file, *ELSEWHERE, "-I", str(hidden)))
            for forbidden in (POSIX_CLOCKS, CPU_CRC):
                found = sorted({m.group(0) for m in forbidden.finditer(code)})
                assert not found, f"{name} still uses {found} without the platform"
