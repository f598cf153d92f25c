"""The SparkSession the pipeline runs on, configured to be quiet and quick.

:func:`build_session` starts (or reuses) a session with:

* master ``local[*]`` unless told otherwise (``--master spark://host:7077``,
  ``yarn``, ...); under ``spark-submit`` with no master given, the submitted
  one (the local-mode settings below are then left to spark-submit);
* no Spark UI and no console progress bars; the JVM's log4j at WARN from its
  first line (a log4j2 file written to the temp directory replaces Spark's
  default profile, so the "Using Spark's default log4j profile" banner and the
  native-Hadoop warning do not appear; a cache spilling to disk, which is
  expected on a small machine, is not warned about either);
* Python workers on this interpreter (``PYSPARK_PYTHON`` and
  ``PYSPARK_DRIVER_PYTHON`` = ``sys.executable``);
* in local mode, the driver bound to 127.0.0.1 (``SPARK_LOCAL_IP``,
  ``spark.driver.host``, ``spark.driver.bindAddress``) and few shuffle
  partitions (twice the cores), since a local run never needs Spark's 200;
* session time zone UTC, so time windows print the same everywhere.

:class:`Progress` prints one short line per pipeline stage on stderr, the
pipeline's own replacement for Spark's progress bars.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "Progress", "build_session", "is_local_master"]

DEFAULT_MASTER = "local[*]"
LOOPBACK = "127.0.0.1"

#: log4j2 configuration for the driver JVM: WARN everywhere, a few chatty
#: loggers lower still. Replaces Spark's default profile (INFO, plus a banner).
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoop_native.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop_native.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = error
logger.sparkenv.name = org.apache.spark.SparkEnv
logger.sparkenv.level = error
logger.memorystore.name = org.apache.spark.storage.memory.MemoryStore
logger.memorystore.level = error
logger.blockmanager.name = org.apache.spark.storage.BlockManager
logger.blockmanager.level = error
logger.metastore.name = org.apache.hadoop.hive
logger.metastore.level = error
"""


def is_local_master(master: str) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]`` and ``local[N,F]`` masters."""
    return master == "local" or master.startswith("local[")


def _log4j2_file() -> Path:
    """The log4j2 file, written once per content into the temp directory."""
    digest = hashlib.sha256(_LOG4J2.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"purgatory-analytics-log4j2-{digest}.properties"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)  # atomic: concurrent starts never read a half-written file
    return path


def build_session(
    master: str | None = None,
    *,
    app_name: str = "purgatory-analytics",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start a quiet SparkSession, or return the active one as it is.

    ``master`` defaults to ``local[*]``. ``shuffle_partitions`` defaults to twice
    the local cores in local mode and to Spark's own setting (with adaptive
    coalescing) on a cluster. ``conf`` adds or overrides any Spark setting.
    An active session is returned unchanged when ``master`` is None or its own.
    Starting the JVM takes a few seconds; reusing a running session is free.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master in (None, active.sparkContext.master):
        return active  # already running (a test fixture, spark-submit): its settings win
    # under spark-submit the JVM is already up and its --master must win
    submitted = master is None and "PYSPARK_GATEWAY_PORT" in os.environ
    master = master or DEFAULT_MASTER
    local = not submitted and is_local_master(master)
    # the workers must run this interpreter; on a cluster respect an explicit choice
    for var in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        if local:
            os.environ[var] = sys.executable
        else:
            os.environ.setdefault(var, sys.executable)
    settings: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_log4j2_file()}",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if local:
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK
        settings["spark.driver.host"] = LOOPBACK
        settings["spark.driver.bindAddress"] = LOOPBACK
        cores = os.cpu_count() or 2
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions or 2 * cores)
    elif shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if driver_memory is not None:
        settings["spark.driver.memory"] = driver_memory
    settings.update(conf or {})

    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


class Progress:
    """One line per stage on ``stream`` (stderr): ``[report 2/7] rows checked: 1.3 s``.

    ``total`` is the number of stages announced; ``enabled=False`` silences it.
    """

    __slots__ = ("_done", "_started", "enabled", "label", "stream", "total")

    def __init__(
        self, label: str, total: int, *, stream: TextIO | None = None, enabled: bool = True
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream
        self.enabled = enabled
        self._done = 0
        self._started = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the body and print its line when it finishes (not if it raises)."""
        start = time.perf_counter()
        yield
        self._done += 1
        if self.enabled:
            elapsed = time.perf_counter() - start
            print(
                f"[{self.label} {self._done}/{self.total}] {name}: {elapsed:.1f} s",
                file=self.stream or sys.stderr,
                flush=True,
            )

    @property
    def elapsed_s(self) -> float:
        """Seconds since the progress was created."""
        return time.perf_counter() - self._started
