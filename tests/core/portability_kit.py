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
left: :data:`POSIX_CLOCKS`, :data:`CPU_CRC`.
"""

from __future__ import annotations

import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def platform_modules(root: Path, modules: list[str], platform_pxd: set[str]) -> list[str]:
    """The ``modules`` (under ``root``) whose .pxd cimports one of ``platform_pxd``."""
    return sorted(
        name
        for name in modules
        if (pxd := root.joinpath(*name.split(".")).with_suffix(".pxd")).is_file()
        and {p.relative_to(root).as_posix() for p in _cimported(root, pxd)} & platform_pxd
    )


def other_pxd_files_hold_no_platform_c(root: Path, package: str, platform_pxd: set[str]) -> None:
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
