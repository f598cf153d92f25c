"""The application's platform-specific C compiles where the platform lacks it.

``cbatch.pxd`` uses the x86-64 CRC32 instruction with GCC or Clang; elsewhere
(other CPUs and compilers, MSVC) a preprocessor guard leaves the portable CRC
table. These tests run Cython on every compiled module of broker/setup.py whose
``.pxd`` cimports it and compile the C with the machine's ``cc``, syntax only,
twice: as it is, where an x86-64 build must use the instruction; and as for a
platform without it, where neither the instruction nor a POSIX clock function is
left in the module's own code (:mod:`.portability_kit`, the library suite's tool,
says how).
"""

from __future__ import annotations

import importlib.util
import platform
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

ROOT = Path(__file__).resolve().parents[1]
#: the .pxd files whose C is written for a platform, guarded
PLATFORM_PXD = {"purgatory_broker/broker/storage/cbatch.pxd"}
SCRIPT = setup_script(ROOT / "setup.py")
MODULES = platform_modules(ROOT, SCRIPT["COMPILED_MODULES"], PLATFORM_PXD)


def test_the_platform_c_lives_in_the_guarded_pxd_files_only() -> None:
    other_pxd_files_hold_no_platform_c(ROOT, "purgatory_broker", PLATFORM_PXD)
    assert "purgatory_broker.broker.storage.records" in MODULES


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each of MODULES as Cython writes it for broker/setup.py, by module name."""
    if importlib.util.find_spec("Cython") is None:
        pytest.fail("Cython is not installed (it is in the dev extra)")
    out = tmp_path_factory.mktemp("cython")
    with ThreadPoolExecutor() as pool:
        files = pool.map(lambda name: cythonize(ROOT, name, SCRIPT["DIRECTIVES"], out), MODULES)
        return dict(zip(MODULES, files, strict=True))


@pytest.mark.parametrize("name", MODULES)
def test_the_c_compiles_as_it_is(generated: dict[str, Path], name: str) -> None:
    """With GCC or Clang on x86-64 the CRC uses the CPU's instruction where it has it."""
    code = "\n".join(compile_lines(generated[name]))
    assert "purgatory_crc32c" in code, "no platform C in this module"
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert CPU_CRC.search(code), "the x86-64 build does not use the CRC instruction"


@pytest.mark.parametrize("name", MODULES)
def test_the_c_compiles_without_the_crc_instruction(
    generated: dict[str, Path], tmp_path: Path, name: str
) -> None:
    hidden = hidden_headers(tmp_path)
    code = "\n".join(compile_lines(generated[name], *ELSEWHERE, "-I", str(hidden)))
    for forbidden in (POSIX_CLOCKS, CPU_CRC):
        found = sorted({m.group(0) for m in forbidden.finditer(code)})
        assert not found, f"{name} still uses {found} without the platform"
