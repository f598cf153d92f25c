"""The SparkSession the pipeline runs on, configured to be quiet and quick.

:func:`build_session` starts (or reuses) a session with:

* master ``local[*]`` unless told otherwise (``--master spark://host:7077``,
  ``yarn``, ...); under ``spark-submit`` with no master given, the submitted
  one (the local-mode settings below are then left to spark-submit);
* no Spark UI and no console progress bars; the JVM's log4j at WARN from its
  first line (the package's ``log4j2.properties`` replaces Spark's
  default profile, so the "Using Spark's default log4j profile" banner and the
  native-Hadoop warning do not appear; a cache spilling to disk, which is
  expected on a small machine, is not warned about either);
* in local mode, Python workers on this interpreter (``PYSPARK_PYTHON`` and
  ``PYSPARK_DRIVER_PYTHON`` = ``sys.executable``); on a cluster the workers'
  own Python, never the driver's path (which the workers may not have): set
  ``spark.pyspark.python`` (``--conf``) or ``PYSPARK_PYTHON`` to choose it;
* the master URL and driver memory checked before the JVM starts, and the
  JVM's own reason in one line (:class:`SparkStartError`) when it fails;
  optionally the JVM's stderr (its log) in a file rather than on the terminal;
* under ``spark-submit`` the JVM is already running when Python starts, with
  Spark's own log profile: pass ``--driver-java-options
  -Dlog4j2.configurationFile=broker/purgatory_broker/analytics/log4j2.properties`` for the
  same quiet log (the command in docs/broker/pipeline.md does);
* in local mode, the driver bound to 127.0.0.1 (``SPARK_LOCAL_IP``,
  ``spark.driver.host``, ``spark.driver.bindAddress``) and few shuffle
  partitions (twice the cores), since a local run never needs Spark's 200;
* session time zone UTC, so time windows print the same everywhere;
* with ``class_archive=True`` (the command line), a Java class-data-sharing
  archive of Spark's classes, kept in a per-user cache (:mod:`._cds`): the
  first run writes it when its JVM exits (:func:`stop_session` waits for that
  and installs it), later runs map it and start faster.

:class:`Progress` prints one short line per pipeline stage on stderr, the
pipeline's own replacement for Spark's progress bars.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from . import _cds

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "Progress",
    "SparkStartError",
    "build_session",
    "check_spark_options",
    "is_local_master",
    "stop_session",
]

DEFAULT_MASTER = "local[*]"
LOOPBACK = "127.0.0.1"

#: log4j2 configuration for the driver JVM: WARN everywhere, a few chatty
#: loggers lower still. Replaces Spark's default profile (INFO, plus a banner).
LOG4J2_FILE = Path(__file__).with_name("log4j2.properties")


def is_local_master(master: str) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]`` and ``local[N,F]`` masters."""
    return master == "local" or master.startswith("local[")


#: master URLs the pipeline accepts (what Spark's SparkContext can start on)
_MASTER = re.compile(
    r"local(\[(\*|[1-9][0-9]*)(,[0-9]+)?\])?"
    r"|local-cluster\[[0-9]+,[0-9]+,[0-9]+\]"
    r"|spark://[^/\s]+:[0-9]+(,[^/\s]+:[0-9]+)*"
    r"|yarn|k8s://\S+"
)
#: JVM memory sizes as Spark reads them: 512m, 2g, 2gb, 1073741824
_MEMORY = re.compile(r"[0-9]+([kmgtp]b?|b)?", re.IGNORECASE)


#: JVM options for a small local input: the quick compiler only (a short run is
#: mostly warm-up, which the optimising compiler would lengthen) and the serial
#: collector (a small heap needs no concurrent GC threads competing for the
#: cores; measured in BENCHMARKS.md, issue 17)
SMALL_INPUT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkStartError(RuntimeError):
    """Spark could not start (a bad setting, no Java, the master unreachable)."""


def check_spark_options(master: str | None, driver_memory: str | None) -> None:
    """Refuse a master URL or a memory size Spark would refuse, before its JVM starts.

    Raises ValueError naming the value and what is expected. O(len of the values).
    """
    if master is not None and not _MASTER.fullmatch(master):
        raise ValueError(
            f"--master {master!r} is not a Spark master URL: use local[*], local[N], "
            "spark://HOST:PORT, yarn or k8s://URL"
        )
    if driver_memory is not None and not _MEMORY.fullmatch(driver_memory):
        raise ValueError(
            f"--driver-memory {driver_memory!r} is not a memory size: use e.g. 512m or 2g"
        )


@contextmanager
def _stderr_to(log: Path | None) -> Iterator[None]:
    """Point file descriptor 2 at ``log`` while the body runs (the JVM started
    in it inherits the file as its stderr for good); Python's own stderr is
    back on the terminal afterwards."""
    if log is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _why_not_started(log: Path | None, exc: BaseException) -> str:
    """The JVM's own reason, from its log: the last exception or error line."""
    lines: list[str] = []
    if log is not None and log.exists():
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    for line in reversed(lines):
        if ("Exception" in line or "Error" in line) and not line.startswith("at "):
            return line.removeprefix('Exception in thread "main" ')
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def build_session(
    master: str | None = None,
    *,
    app_name: str = "purgatory-analytics",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    conf: Mapping[str, str] | None = None,
    jvm_log: Path | None = None,
    small_input: bool = False,
    class_archive: bool = False,
) -> SparkSession:
    """Start a quiet SparkSession, or return the active one as it is.

    ``master`` defaults to ``local[*]``. ``shuffle_partitions`` defaults to twice
    the local cores in local mode and to Spark's own setting (with adaptive
    coalescing) on a cluster. ``conf`` adds or overrides any Spark setting
    (``spark.pyspark.python`` names the executors' Python on a cluster).
    ``jvm_log``, when given, receives the JVM's stderr (its log) instead of the
    terminal. ``small_input`` (a local run over little data, which the caller
    knows from the files' sizes) starts the JVM with its quick compiler only
    and the serial collector (:data:`SMALL_INPUT_JAVA_OPTIONS`): a short run
    is mostly JVM warm-up, which this shortens, while long runs want the
    optimising compiler and a parallel collector.
    ``class_archive`` starts a JVM this process launches with the per-user
    class archive (:mod:`._cds`), or has it write one at exit: call
    :func:`stop_session` at the end so it is installed. An active
    session is returned unchanged when ``master`` is None or its own. Raises
    :class:`SparkStartError` with the JVM's reason when Spark does not start.
    Starting the JVM takes a few seconds; reusing a running session is free.
    """
    from pyspark.sql import SparkSession

    check_spark_options(master, driver_memory)
    active = SparkSession.getActiveSession()
    if active is not None and master in (None, active.sparkContext.master):
        return active  # already running (a test fixture, spark-submit): its settings win
    # under spark-submit the JVM is already up and its --master must win
    submitted = master is None and "PYSPARK_GATEWAY_PORT" in os.environ
    master = master or DEFAULT_MASTER
    local = not submitted and is_local_master(master)
    conf = conf or {}
    _choose_pythons(conf, local)
    # a user's own extraJavaOptions replace ours, the archive's with them
    own_options = "spark.driver.extraJavaOptions" in conf
    archive = _archive_plan() if class_archive and not submitted and not own_options else None
    settings = _settings(
        _java_options(small_input and local, archive),
        local=local,
        shuffle_partitions=shuffle_partitions,
        driver_memory=driver_memory,
        conf=conf,
    )
    spark = _start(app_name, None if submitted else master, settings, jvm_log)
    if archive is not None and archive.writing:
        _writing_archive[spark.sparkContext] = archive
    return spark


def _choose_pythons(conf: Mapping[str, str], local: bool) -> None:
    """The Python of the executors (and of the driver in local mode), in the
    environment pyspark reads when the context starts."""
    workers_python = conf.get("spark.pyspark.python")
    if workers_python is not None:
        # spark-submit turns the setting into the variable; we do it here
        os.environ["PYSPARK_PYTHON"] = workers_python
    elif local:
        # local executors are the driver's threads: they must run this interpreter
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # on a cluster the workers' own Python is used: PYSPARK_PYTHON or
    # spark.pyspark.python when the user sets one, else Spark's default python3


def _java_options(small_input: bool, archive: _cds.ArchivePlan | None) -> str:
    """The driver JVM's options: the quiet log, then the small input's and the archive's."""
    options = [f"-Dlog4j2.configurationFile=file:{LOG4J2_FILE}"]
    if small_input:
        options.append(SMALL_INPUT_JAVA_OPTIONS)
    if archive is not None:
        options.append(archive.java_options)
    return " ".join(options)


def _settings(
    java_options: str,
    *,
    local: bool,
    shuffle_partitions: int | None,
    driver_memory: str | None,
    conf: Mapping[str, str],
) -> dict[str, str]:
    """Every Spark setting of the session, the user's ``conf`` last (it wins).
    In local mode the driver is bound to the loopback address (``SPARK_LOCAL_IP``
    too, which the JVM reads from the environment)."""
    settings: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": java_options,
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
    settings.update(conf)
    return settings


def _start(
    app_name: str, master: str | None, settings: Mapping[str, str], jvm_log: Path | None
) -> SparkSession:
    """Start the session (on ``master``, or spark-submit's when None) with its JVM's
    stderr in ``jvm_log``; raises SparkStartError with the JVM's reason."""
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        with _stderr_to(jvm_log):
            spark = builder.getOrCreate()
    except (PySparkException, OSError) as exc:
        where = master or DEFAULT_MASTER
        raise SparkStartError(
            f"Spark did not start on {where}: {_why_not_started(jvm_log, exc)}"
        ) from None
    spark.sparkContext.setLogLevel("WARN")
    return spark


#: the class archive the JVM of a session is writing, to install when the session
#: stops (:func:`stop_session`); a session's entry goes with it
_writing_archive: weakref.WeakKeyDictionary[SparkContext, _cds.ArchivePlan] = (
    weakref.WeakKeyDictionary()
)


def _archive_plan() -> _cds.ArchivePlan | None:
    import pyspark

    spark_home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    return _cds.plan(pyspark.__version__, spark_home)


#: how long :func:`stop_session` waits for the JVM to write its class archive
ARCHIVE_WAIT_S = 120.0


def stop_session(spark: SparkSession, *, wait_s: float = ARCHIVE_WAIT_S) -> Path | None:
    """At the end of a run: when the JVM is writing a class archive (a first run,
    see :mod:`._cds`), stop Spark, let the JVM exit, wait up to ``wait_s`` for it
    and install the archive; returns its path. Otherwise does nothing (the JVM
    exits with this process) and returns None. Never raises for the archive.
    """
    archive = _writing_archive.pop(spark.sparkContext, None)
    if archive is None:
        return None
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    spark.stop()
    if process is None or process.stdin is None:
        return None
    import subprocess

    try:
        process.stdin.close()  # the gateway JVM exits on end of input, writing the archive
        process.wait(timeout=wait_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return _cds.adopt(archive)


class Progress:
    """One line per stage on ``stream`` (stderr): ``[report 2/7] rows checked: 1.3 s``.

    ``total`` is the number of stages announced; ``enabled=False`` silences it.
    """

    __slots__ = ("_done", "_lock", "_started", "enabled", "label", "stream", "total")

    def __init__(
        self,
        label: str,
        total: int,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        done: int = 0,
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream
        self.enabled = enabled
        self._done = done
        self._lock = threading.Lock()
        self._started = time.perf_counter()

    def announce(self, text: str) -> None:
        """Print ``text`` as the next stage's line before a long stage starts."""
        if self.enabled:
            print(
                f"[{self.label} {self._done + 1}/{self.total}] {text}",
                file=self.stream or sys.stderr,
                flush=True,
            )

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the body and print its line when it finishes (not if it raises)."""
        start = time.perf_counter()
        yield
        with self._lock:  # stages may finish in several threads at once
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
