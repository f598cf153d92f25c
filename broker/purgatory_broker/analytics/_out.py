"""Where a command's output goes: a local folder, or a URL Spark can write to.

``--out`` is either a local path (``report-out``, ``/data/x``, or a
``file:`` URL, which is the same thing) or a URL of any other Hadoop
filesystem Spark is configured for (``hdfs://nn:8020/x``, ``s3a://bucket/x``).

* Tables are written by Spark (``DataFrame.write``) under ``OUT/...``
  wherever Spark can write, whatever the master.
* Small files written by the driver (``report.html``, ``sweep.html``, the
  sweep's ``summaries.parquet``) go to a local folder with ordinary file
  calls, and to a URL through Hadoop's ``FileSystem`` API in the driver's JVM
  (``FileSystem.create``), so they land next to the tables.

A local folder is checked before Spark starts (:meth:`Output.check`): not a
file, writable (or creatable), and, for commands that refuse to mix old and new
results, empty. The folder is created only when the work starts
(:meth:`Output.create`) and, when the command fails, removed again if it did
not exist before (:meth:`Output.discard`): no empty or half-written output
is left behind. A URL is checked by the filesystem itself when written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Output"]


def _can_write(folder: Path) -> bool:
    """Whether a file can be made in ``folder``, found out by making one (and it is
    gone at once): permission bits do not tell for root, nor for every filesystem."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _local_path(text: str) -> Path | None:
    """The local path ``text`` names (a path or a ``file:`` URL), else None."""
    parsed = urlparse(text)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if len(parsed.scheme) > 1 and "://" in text:  # a URL (one letter: a Windows drive)
        return None
    return Path(text)


class Output:
    """An output folder or URL; ``OUT/name`` is :meth:`url` for Spark."""

    __slots__ = ("_created", "local", "text")

    def __init__(self, text: str | os.PathLike[str]) -> None:
        self.text = os.fspath(text)
        #: the local folder, or None for a URL of another filesystem
        self.local: Path | None = _local_path(self.text)
        self._created: Path | None = None

    def check(self, *, must_be_empty: bool = False) -> None:
        """Refuse a local folder that cannot receive output (ValueError, O(1)).

        Nothing is created here.
        """
        if self.local is None:
            return
        path = self.local
        if path.exists() and not path.is_dir():
            raise ValueError(f"--out {self.text} is a file, not a folder")
        if path.is_dir():
            if not _can_write(path):
                raise ValueError(f"--out {self.text} is not writable")
            if must_be_empty and any(path.iterdir()):
                raise ValueError(
                    f"{self.text} is not empty: name a new or empty folder "
                    "(old files would mix with the new ones)"
                )
            return
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir() or not _can_write(parent):
            raise ValueError(f"--out {self.text}: cannot create it in {parent} (not writable)")

    def create(self) -> None:
        """Create the local folder and any missing parents (remembering the
        topmost one this run created)."""
        if self.local is None or self.local.exists():
            return
        top = self.local
        while not top.parent.exists():
            top = top.parent
        self.local.mkdir(parents=True)
        self._created = top

    def discard(self) -> None:
        """After a failure: remove what this run created (the folder, and the
        parents it had to create), nothing that was there before."""
        if self._created is not None:
            shutil.rmtree(self._created, ignore_errors=True)
            self._created = None

    def url(self, name: str) -> str:
        """``OUT/name`` as Spark's writer and reader take it."""
        if self.local is not None:
            return str(self.local / name)
        return f"{self.text.rstrip('/')}/{name}"

    def write_bytes(self, spark: SparkSession | None, name: str, data: bytes) -> str:
        """Write ``OUT/name`` from the driver; returns where it went.

        A local file is replaced atomically; a URL is written through Hadoop's
        FileSystem (``spark`` must be running). O(len(data)).
        """
        if self.local is not None:
            target = self.local / name
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
            return str(target)
        if spark is None:
            raise ValueError(f"writing {self.url(name)} needs a running Spark session")
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        hadoop_path = jvm.org.apache.hadoop.fs.Path(self.url(name))
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        stream = hadoop_path.getFileSystem(conf).create(hadoop_path, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()
        return self.url(name)
