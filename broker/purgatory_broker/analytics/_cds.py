"""Java class-data sharing for the driver JVM: the classes of a report, loaded from a map.

A cold report on a small trace is mostly the JVM starting: Spark's driver loads
some 18,000 classes from 280 jars, parsing and verifying each one. Java 13+
can record the classes a run loaded in a *dynamic class-data-sharing archive*
(``-XX:ArchiveClassesAtExit=FILE``, written when the JVM exits) and a later JVM
maps that archive instead of loading the classes again
(``-XX:SharedArchiveFile=FILE``): the session starts faster and the first
queries run faster too (measured in BENCHMARKS.md, issue 17). Writing the
archive slows the run that writes it (the JVM records as it loads, then
writes the archive at exit), once per key.

The archive lives in a per-user cache folder (:func:`cache_dir`:
``$XDG_CACHE_HOME/aio-purgatory`` or ``~/.cache/aio-purgatory``), one file per
*key*: the Spark version, the Java version, and a fingerprint of the Java
installation and of Spark's jars (their names, sizes and modification times).
A changed jar or another Java gives another key, hence another archive, so a
stale archive is never offered; the JVM also checks an archive against its
class path itself and, if they disagree, runs without it (its warning goes to
the JVM's log, never to the terminal: ``-Xlog:disable -Xlog:all=warning:stderr``).

The lifecycle, per key:

1. no archive yet: :func:`plan` returns options that make the JVM write one to
   a temporary file ``KEY.PID.tmp`` (unique to this process) when it exits;
2. the run ends: :func:`adopt` is called after the JVM has exited and renames the
   temporary file to ``KEY.jsa`` (atomic, so concurrent first runs each
   install a whole archive and the last one wins);
3. later runs: :func:`plan` returns ``-XX:SharedArchiveFile=KEY.jsa``.

Nothing here fails a run: an unwritable cache folder (or one whose path holds
a space or a quote, which Spark's JVM options cannot carry), an unknown or older Java
(before 13, or no ``release`` file to read its version from) or a missing jars
folder means no archive options at all. ``PURGATORY_SPARK_CDS=0`` turns the
archive off (for comparisons). Temporary files older than
:data:`STALE_TMP_S` (a run that died before :func:`adopt`) are removed by the
next :func:`plan`; only the :data:`KEEP_ARCHIVES` most recently used archives
are kept (each is one to two hundred MiB).

Cost: :func:`plan` stats the jars folder (O(jars), about a millisecond for
Spark's 280) and reads one small file of the Java installation.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CDS_ENV",
    "KEEP_ARCHIVES",
    "STALE_TMP_S",
    "ArchivePlan",
    "adopt",
    "archive_key",
    "cache_dir",
    "java_home",
    "java_version",
    "plan",
]

#: set to 0 (or off, false, no) to start the JVM without a class archive
CDS_ENV = "PURGATORY_SPARK_CDS"
#: the oldest Java whose JVM writes dynamic archives (-XX:ArchiveClassesAtExit)
MIN_JAVA_MAJOR = 13
#: temporary archives older than this are from runs that died: removed
STALE_TMP_S = 600.0
#: archives kept in the cache folder (the most recently used), one per key
KEEP_ARCHIVES = 3
#: the JVM's own warnings (a stale archive, say) to its stderr, which the
#: pipeline sends to Spark's log file, instead of its stdout (the terminal)
QUIET_JVM_LOG = "-Xlog:disable -Xlog:all=warning:stderr"

_SUFFIX = ".jsa"
_TMP = ".tmp"


@dataclass(frozen=True)
class ArchivePlan:
    """The JVM options for one run, and the archive they use or write.

    Invariant: exactly one of ``archive`` (an existing archive to map) and
    ``writing`` (the temporary file the JVM writes at exit) is set.
    """

    java_options: str
    archive: Path | None = None
    writing: Path | None = None
    final: Path | None = None  # where ``writing`` goes once the JVM has exited


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/aio-purgatory``, else ``~/.cache/aio-purgatory``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "aio-purgatory"


def java_home(env: Mapping[str, str] | None = None) -> Path | None:
    """The Java installation Spark's launcher runs: ``$JAVA_HOME``, else ``java`` on the PATH."""
    env = os.environ if env is None else env
    if env.get("JAVA_HOME"):
        return Path(env["JAVA_HOME"])
    java = shutil.which("java", path=env.get("PATH"))
    if java is None:
        return None
    return Path(java).resolve().parent.parent


_VERSION = re.compile(r'^JAVA_VERSION="([^"]+)"', re.MULTILINE)


def java_version(home: Path) -> str | None:
    """``JAVA_VERSION`` from the installation's ``release`` file (``17.0.15``), if readable."""
    try:
        found = _VERSION.search((home / "release").read_text(errors="replace"))
    except OSError:
        return None
    return found.group(1) if found else None


def _major(version: str) -> int:
    parts = version.split(".")
    head = parts[1] if parts[0] == "1" and len(parts) > 1 else parts[0]  # 1.8.0_392
    return int(head) if head.isdigit() else 0


def archive_key(spark_version: str, spark_home: Path, home: Path, version: str) -> str | None:
    """The archive's name for this Spark and Java: versions plus a fingerprint of
    the Java installation's path and of every jar (name, size, mtime). None when
    the jars folder cannot be read. O(jars)."""
    digest = hashlib.sha256(f"{home.resolve()}\0{spark_home.resolve()}\0".encode())
    try:
        jars = sorted(os.scandir(spark_home / "jars"), key=lambda e: e.name)
        for jar in jars:
            stat = jar.stat()
            digest.update(f"{jar.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    except OSError:
        return None
    if not jars:
        return None
    safe = re.sub(r"[^A-Za-z0-9.-]+", "_", f"spark-{spark_version}-java-{version}")
    return f"{safe}-{digest.hexdigest()[:16]}"


def _enabled(env: Mapping[str, str]) -> bool:
    return env.get(CDS_ENV, "1").strip().lower() not in {"0", "off", "false", "no"}


def _key(spark_version: str, spark_home: Path, env: Mapping[str, str]) -> str | None:
    """The archive key for the Java that ``env`` finds, or None (no Java 13+ known)."""
    home = java_home(env)
    version = None if home is None else java_version(home)
    if home is None or version is None or _major(version) < MIN_JAVA_MAJOR:
        return None
    return archive_key(spark_version, spark_home, home, version)


def plan(
    spark_version: str,
    spark_home: Path,
    *,
    env: Mapping[str, str] | None = None,
    folder: Path | None = None,
) -> ArchivePlan | None:
    """The class-archive options for a JVM about to start, or None for none.

    Uses the key's archive when the cache folder has it, else asks the JVM to
    write one (:func:`adopt` installs it after the JVM exits). Never raises for
    a missing or unwritable folder or an unknown Java: returns None instead.
    """
    env = os.environ if env is None else env
    key = _key(spark_version, spark_home, env) if _enabled(env) else None
    if key is None:
        return None
    folder = cache_dir(env) if folder is None else folder
    if re.search(r"[\s'\"]", str(folder)):
        return None  # Spark splits its JVM options at spaces: no archive rather than a bad path
    archive = folder / f"{key}{_SUFFIX}"
    try:
        if archive.is_file() and archive.stat().st_size > 0:
            with contextlib.suppress(OSError):  # most recently used: kept by _prune
                os.utime(archive)
            return ArchivePlan(
                java_options=f"-XX:SharedArchiveFile={archive} {QUIET_JVM_LOG}", archive=archive
            )
        folder.mkdir(parents=True, exist_ok=True)
        _prune(folder)
        writing = folder / f"{key}.{os.getpid()}{_TMP}"
        writing.unlink(missing_ok=True)
        if not os.access(folder, os.W_OK):
            return None
    except OSError:
        return None
    return ArchivePlan(
        java_options=f"-XX:ArchiveClassesAtExit={writing} {QUIET_JVM_LOG}",
        writing=writing,
        final=archive,
    )


def adopt(archive_plan: ArchivePlan | None) -> Path | None:
    """After the JVM has exited: install the archive it wrote, if it wrote one.

    Returns the installed archive's path, or None (nothing was being written,
    the JVM wrote nothing, or the rename failed; the temporary file is removed).
    """
    if archive_plan is None or archive_plan.writing is None or archive_plan.final is None:
        return None
    writing = archive_plan.writing
    try:
        if writing.is_file() and writing.stat().st_size > 0:
            os.replace(writing, archive_plan.final)
            return archive_plan.final
        writing.unlink(missing_ok=True)
    except OSError:
        with contextlib.suppress(OSError):
            writing.unlink(missing_ok=True)
    return None


def _prune(folder: Path, now_s: float | None = None) -> None:
    """Remove temporary files of dead runs and all but the newest archives."""
    now_s = time.time() if now_s is None else now_s
    archives = []
    for entry in folder.iterdir():
        try:
            if entry.name.endswith(_TMP) and now_s - entry.stat().st_mtime > STALE_TMP_S:
                entry.unlink()
            elif entry.name.endswith(_SUFFIX):
                archives.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    archives.sort(reverse=True)
    for _, old in archives[KEEP_ARCHIVES - 1 :]:  # room for the one about to be written
        try:
            old.unlink()
        except OSError:
            continue
