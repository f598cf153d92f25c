"""The compiled modules' platform-specific C compiles where the platform lacks it.

Two ``.pxd`` files carry C written for a platform: ``cmonotonic.pxd`` reads the POSIX
clocks (``clock_gettime``) on Linux, and ``cbatch.pxd`` uses the x86-64 CRC32
instruction with GCC or Clang. Elsewhere (Windows and MSVC: no ``<sys/time.h>``, no
``clock_gettime``; other CPUs and compilers) a preprocessor guard leaves a stub the
Python side never calls (``timer.C_CLOCKS`` is False there) or the portable CRC table.

These tests run Cython on every compiled module whose ``.pxd`` cimports either file
(as setup.py does, with its directives, into a temporary directory) and compile the C
with the machine's ``cc``, syntax only, twice: as it is, where a Linux build must read
the C clock; and as for a platform without either: ``__linux__`` undefined and
``PURGATORY_NO_CPU_CRC32C`` defined, with a ``<time.h>`` and a ``<sys/time.h>`` that
stop the compile if the module's own code includes them (Python.h still may: it
needs them on every platform), and no mention of the POSIX clock functions or of the
CRC instruction left in the module's own code (its lines of the preprocessed output).
"""

from __future__ import annotations

import importlib.util
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
from typing import Any

import pytest
import setuptools

ROOT = Path(__file__).resolve().parents[2]
#: the .pxd files whose C is written for a platform, guarded
PLATFORM_PXD = {"purgatory/core/cmonotonic.pxd", "purgatory/broker/storage/cbatch.pxd"}
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


def _cimported(pxd: Path) -> set[Path]:
    """The repository's .pxd files that ``pxd`` cimports, directly or not."""
    seen: set[Path] = set()
    todo = [pxd]
    while todo:
        here = todo.pop()
        text = here.read_text()
        for dots, name in re.findall(r"^\s*from\s+(\.*)([\w.]+)\s+cimport", text, re.M):
            base = here.parent
            for _ in range(len(dots) - 1):
                base = base.parent
            found = (base if dots else ROOT).joinpath(*name.split(".")).with_suffix(".pxd")
            if found.is_file() and found not in seen:
                seen.add(found)
                todo.append(found)
    return seen


def _setup_script() -> dict[str, Any]:
    """setup.py's namespace, without cythonizing or building anything."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PURGATORY_NO_EXTENSIONS", "1")
        patch.setattr(setuptools, "setup", lambda **kwargs: None)
        return runpy.run_path(str(ROOT / "setup.py"))


SCRIPT = _setup_script()
#: the compiled modules that carry platform C: their .pxd cimports a PLATFORM_PXD
MODULES = sorted(
    name
    for name in SCRIPT["COMPILED_MODULES"]
    if (pxd := ROOT.joinpath(*name.split(".")).with_suffix(".pxd")).is_file()
    and {p.relative_to(ROOT).as_posix() for p in _cimported(pxd)} & PLATFORM_PXD
)


def test_the_platform_c_lives_in_the_guarded_pxd_files_only() -> None:
    """No other .pxd cimports POSIX declarations or writes C of its own, and the
    modules checked below are found (timer's and records' among them)."""
    for pxd in sorted(ROOT.joinpath("purgatory").rglob("*.pxd")):
        if pxd.relative_to(ROOT).as_posix() in PLATFORM_PXD:
            continue
        text = pxd.read_text()
        assert not re.search(r"\bposix\.|cdef extern from \*", text), pxd
    assert {"purgatory.core.timer", "purgatory.broker.storage.records"} <= set(MODULES)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each of MODULES as Cython writes it for setup.py, by module name."""
    if importlib.util.find_spec("Cython") is None:
        pytest.fail("Cython is not installed (it is in the dev extra: pip install -e '.[dev]')")
    out = tmp_path_factory.mktemp("cython")
    directives = [f"-X{key}={value}" for key, value in SCRIPT["DIRECTIVES"].items()]

    def cythonize(name: str) -> tuple[str, Path]:
        source = Path(*name.split(".")).with_suffix(".py")
        c_file = out / (name + ".c")
        command = [sys.executable, "-m", "cython", *directives, "-o", str(c_file), str(source)]
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
        assert done.returncode == 0, f"Cython failed on {name}:\n{done.stderr}"
        return name, c_file

    with ThreadPoolExecutor() as pool:
        return dict(pool.map(cythonize, MODULES))


@pytest.fixture(scope="module")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An include directory whose <time.h> and <sys/time.h> the module may not include."""
    where = tmp_path_factory.mktemp("hidden")
    for name in ("time.h", "sys/time.h"):
        (where / name).parent.mkdir(exist_ok=True)
        (where / name).write_text(HIDDEN_HEADER.format(name=name))
    return where


def _compile(c_file: Path, *flags: str) -> Iterator[str]:
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


@pytest.mark.parametrize("name", MODULES)
def test_the_c_compiles_as_it_is(generated: dict[str, Path], name: str) -> None:
    """On Linux the clocks are read in C; with GCC or Clang on x86-64 the CRC uses
    the CPU's instruction where it has it."""
    code = "\n".join(_compile(generated[name]))
    uses_clocks = "purgatory_libuv_now_ms" in code
    assert uses_clocks or "purgatory_crc32c" in code, "no platform C in this module"
    if uses_clocks and sys.platform.startswith("linux"):
        assert POSIX_CLOCKS.search(code), "the Linux build does not read the C clock"
    if "purgatory_crc32c" in code and platform.machine().lower() in ("x86_64", "amd64"):
        assert CPU_CRC.search(code), "the x86-64 build does not use the CRC instruction"


@pytest.mark.parametrize("name", MODULES)
def test_the_c_compiles_without_posix_clocks_or_the_crc_instruction(
    generated: dict[str, Path], hidden: Path, name: str
) -> None:
    code = "\n".join(_compile(generated[name], *ELSEWHERE, "-I", str(hidden)))
    for forbidden in (POSIX_CLOCKS, CPU_CRC):
        found = sorted({m.group(0) for m in forbidden.finditer(code)})
        assert not found, f"{name} still uses {found} without the platform"
