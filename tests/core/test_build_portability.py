"""The core's platform-specific C compiles where the platform lacks it.

``cmonotonic.pxd`` reads the POSIX clocks (``clock_gettime``) on Linux; elsewhere
(Windows and MSVC: no ``<sys/time.h>``, no ``clock_gettime``) a preprocessor guard
leaves a stub the Python side never calls (``timer.C_CLOCKS`` is False there).

These tests run Cython on every compiled module of setup.py whose ``.pxd`` cimports
it and compile the C with the machine's ``cc``, syntax only, twice: as it is, where
a Linux build must read the C clock; and as for a platform without it, where no
POSIX clock function is left in the module's own code (:mod:`.portability_kit`
says how).
"""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .portability_kit import (
    CPU_CRC,
    ELSEWHERE,
    POSIX_CLOCKS,
    compile_lines,
    cythonize,
    hidden_headers,
    other_pxd_files_hold_no_platform_c,
    platform_modules,
    setup_script,
)

ROOT = Path(__file__).resolve().parents[2]
#: the .pxd files whose C is written for a platform, guarded
PLATFORM_PXD = {"purgatory/core/cmonotonic.pxd"}
SCRIPT = setup_script(ROOT / "setup.py")
MODULES = platform_modules(ROOT, SCRIPT["COMPILED_MODULES"], PLATFORM_PXD)


def test_the_platform_c_lives_in_the_guarded_pxd_files_only() -> None:
    other_pxd_files_hold_no_platform_c(ROOT, "purgatory", PLATFORM_PXD)
    assert "purgatory.core.timer" in MODULES


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each of MODULES as Cython writes it for setup.py, by module name."""
    if importlib.util.find_spec("Cython") is None:
        pytest.fail("Cython is not installed (it is in the dev extra: pip install -e '.[dev]')")
    out = tmp_path_factory.mktemp("cython")
    with ThreadPoolExecutor() as pool:
        files = pool.map(lambda name: cythonize(ROOT, name, SCRIPT["DIRECTIVES"], out), MODULES)
        return dict(zip(MODULES, files, strict=True))


@pytest.mark.parametrize("name", MODULES)
def test_the_c_compiles_as_it_is(generated: dict[str, Path], name: str) -> None:
    """On Linux the clocks are read in C."""
    code = "\n".join(compile_lines(generated[name]))
    assert "purgatory_libuv_now_ms" in code, "no platform C in this module"
    if sys.platform.startswith("linux"):
        assert POSIX_CLOCKS.search(code), "the Linux build does not read the C clock"


@pytest.mark.parametrize("name", MODULES)
def test_the_c_compiles_without_posix_clocks(
    generated: dict[str, Path], tmp_path: Path, name: str
) -> None:
    hidden = hidden_headers(tmp_path)
    code = "\n".join(compile_lines(generated[name], *ELSEWHERE, "-I", str(hidden)))
    for forbidden in (POSIX_CLOCKS, CPU_CRC):
        found = sorted({m.group(0) for m in forbidden.finditer(code)})
        assert not found, f"{name} still uses {found} without the platform"
