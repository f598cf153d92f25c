"""``__all__`` is the application's public API: every name in it exists, and every
public name a package defines is in it. ``__init__`` modules only re-export."""

from __future__ import annotations

import pytest

from .api_kit import check_all_is_the_public_api, check_init_only_re_exports, loaded_on_import

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
    heavy = ["pyarrow", "pyspark", "pandas", "uvloop", "anyio", "trio", "kafka"]
    assert loaded_on_import(["purgatory_broker.broker"], heavy) == []
