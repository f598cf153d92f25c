"""The broker classes declared in a ``.pxd``: their fields match their ``__slots__``.

In the compiled build each such class is an extension type whose fields are exactly
those the ``.pxd`` declares; the pure build takes them from ``__slots__``. A name in
one list and not the other would work in one build and fail in the other, so the
lists must be equal. In the compiled build the class must also really be an
extension type (not a Python class), or the ``.pxd`` was not applied.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from purgatory.core.build import COMPILED

ROOT = Path(__file__).resolve().parents[2]
CLASSES = [
    ("purgatory_broker.broker.storage.segment", "LogSegment"),
    ("purgatory_broker.broker.storage.log", "PartitionLog"),
    ("purgatory_broker.broker.storage.offset_index", "OffsetIndex"),
    ("purgatory_broker.broker.replication", "LeaderPartition"),
    ("purgatory_broker.broker.delayed", "ProducePartitionStatus"),
    ("purgatory_broker.broker.broker", "BrokerCounters"),
    ("purgatory_broker.broker.broker", "Broker"),
    ("purgatory_broker.sim.clients", "Producer"),
    ("purgatory_broker.tracing", "TraceRow"),
    ("purgatory_broker.tracing", "TraceWriter"),
]
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: set for classes made by a class statement


def _slots(source: Path, name: str) -> list[str]:
    tree = ast.parse(source.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and isinstance(item.targets[0], ast.Name)
                    and item.targets[0].id == "__slots__"
                ):
                    return [ast.literal_eval(e) for e in item.value.elts]  # type: ignore[attr-defined]
    raise AssertionError(f"{name} has no __slots__ in {source}")


def _fields(pxd: Path, name: str) -> list[str]:
    text = pxd.read_text()
    body = text.split(f"cdef class {name}:", 1)[1].split("\ncdef class ", 1)[0]
    return re.findall(r"^    cdef public \w+ (\w+)$", body, re.MULTILINE)


@pytest.mark.parametrize(("module", "name"), CLASSES)
def test_pxd_fields_are_the_slots(module: str, name: str) -> None:
    source = ROOT / (module.replace(".", "/") + ".py")
    assert sorted(_fields(source.with_suffix(".pxd"), name)) == sorted(_slots(source, name))


@pytest.mark.parametrize(("module", "name"), CLASSES)
def test_the_class_is_an_extension_type_exactly_when_compiled(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert (not cls.__flags__ & _HEAPTYPE) == COMPILED, (module, name, COMPILED)
