"""``__all__`` is the application's public API: every name in it exists, and every
public name a package defines is in it. ``__init__`` modules only re-export."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .api_kit import check_all_is_the_public_api, check_init_only_re_exports

PACKAGES = [
    "purgatory_broker",
    "purgatory_broker.broker",
    "purgatory_broker.broker.storage",
    "purgatory_broker.sim",
    "purgatory_broker.analytics",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_the_public_api(name: str) -> None:
    check_all_is_the_public_api(name, "purgatory_broker")


@pytest.mark.parametrize("name", PACKAGES)
def test_init_only_re_exports(name: str) -> None:
    check_init_only_re_exports(name)


def test_the_broker_imports_no_heavy_package() -> None:
    """The broker's core loads without the extras (pyarrow, Spark, Kafka's codec)."""
    code = (
        "import sys, purgatory_broker.broker;"
        "heavy = {'pyarrow', 'pyspark', 'pandas', 'uvloop', 'anyio', 'trio', 'kafka'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
