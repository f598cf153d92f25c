"""Shipping the pipeline's own code to executors that have never seen the project.

On a cluster, Python tasks (the sweep's configurations) are unpickled on
executors, which must import ``purgatory_broker`` and the library it builds on,
``purgatory`` (and the task's module), there. The workers are not expected to have
the project installed: :func:`ship` zips each package the driver imported (its
``.py`` files and ``py.typed``;
compiled extensions are left out, since Python cannot import them from a zip
and the worker's interpreter may differ: the pure-Python core is used there)
and adds the zip with ``SparkContext.addPyFile``, which puts it on every
executor's ``sys.path`` before any task runs. A sweep task whose module lives
outside both is shipped the same way: a top-level module as its file,
a module inside a package as a zip of its top-level package.

The zip is built once per content (named by a hash of the files' paths and
bytes, in the temp directory) and written atomically, so repeated runs and
concurrent drivers reuse it. O(size of the package) to hash, about 1 MiB.

In local mode nothing is shipped: the executors are threads of the driver's
JVM running the driver's own interpreter.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["module_archive", "package_archive", "ship"]

_SUFFIXES = (".py", ".typed")
#: the packages every sweep needs on the executors: the application and the library
_SHIPPED = ("purgatory", "purgatory_broker")


def _package_files(root: Path) -> list[Path]:
    """The package's importable source files under ``root``, sorted."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix in _SUFFIXES and "__pycache__" not in p.parts
    )


def _zip(name: str, base: Path, files: Iterable[Path]) -> Path:
    """A zip of ``files`` (paths relative to ``base``), cached by content."""
    listed = list(files)
    digest = hashlib.sha256()
    for file in listed:
        digest.update(str(file.relative_to(base)).encode())
        digest.update(file.read_bytes())
    target = Path(tempfile.gettempdir()) / f"{name}-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in listed:
            archive.write(file, str(file.relative_to(base)))
    tmp.replace(target)  # atomic: a concurrent driver never ships a half-written zip
    return target


def package_archive(package_dir: Path) -> Path:
    """A zip holding the package at ``package_dir`` under its own name."""
    return _zip(f"{package_dir.name}-pyfiles", package_dir.parent, _package_files(package_dir))


def module_archive(module_name: str) -> Path | None:
    """What makes ``module_name`` importable elsewhere: its file for a top-level
    module, a zip of its top-level package otherwise; None when it is part of
    a package shipped anyway, built in, or not found."""
    top = module_name.partition(".")[0]
    if top in _SHIPPED:
        return None
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    if spec.submodule_search_locations:  # a package: ship all of it
        return package_archive(origin.parent)
    return origin if origin.suffix == ".py" else None


def ship(sc: SparkContext, task_module: str | None = None) -> list[Path]:
    """Add ``purgatory`` and ``purgatory_broker`` (and ``task_module``'s code) to the
    executors' path.

    Does nothing in local mode. Returns what was added.
    """
    from ._session import is_local_master

    if is_local_master(sc.master or ""):
        return []
    import purgatory
    import purgatory_broker

    shipped = [
        package_archive(Path(package.__file__ or "").parent)
        for package in (purgatory, purgatory_broker)
    ]
    if task_module is not None:
        extra = module_archive(task_module)
        if extra is not None:
            shipped.append(extra)
    for path in shipped:
        sc.addPyFile(str(path))
    return shipped
