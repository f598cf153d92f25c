"""The driver JVM's class archive (``purgatory_broker.analytics._cds``): where it lives,
when it is written, used, ignored, and that it never fails a run.

The unit tests use a fake Java installation (a ``release`` file) and a fake
Spark (a jars folder); one test runs the real command line with a corrupt
archive planted under the key's name and an unwritable cache. That one (~50 s,
two JVM starts) runs once per suite run, with the compiled core loaded: the
archive is the JVM's business and the report's code is pure Python in both
builds, so a second run under ``PURGATORY_NO_EXTENSIONS=1`` would test nothing new.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from purgatory_broker.analytics import _cds

import purgatory
from broker_tests.cli_kit import run_cli

pytestmark = pytest.mark.system  # Java: Spark's JVM


def _java(tmp_path: Path, version: str = "17.0.15") -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
    return home


def _spark(tmp_path: Path) -> Path:
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (jars / name).write_bytes(b"PK" + name.encode())
    return jars.parent


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"JAVA_HOME": str(_java(tmp_path)), "XDG_CACHE_HOME": str(tmp_path / "cache"), **more}


def _jvm_writes(plan: _cds.ArchivePlan) -> None:
    """What the JVM does at exit with -XX:ArchiveClassesAtExit."""
    assert plan.writing is not None
    plan.writing.write_bytes(b"archive")


def test_cache_dir_follows_xdg_then_home(tmp_path: Path) -> None:
    assert _cds.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "aio-purgatory"
    home_cache = Path.home() / ".cache" / "aio-purgatory"
    assert _cds.cache_dir({}) == home_cache
    assert _cds.cache_dir({"XDG_CACHE_HOME": "relative/ignored"}) == home_cache


def test_java_version_from_the_release_file(tmp_path: Path) -> None:
    assert _cds.java_version(_java(tmp_path, "21.0.2")) == "21.0.2"
    assert _cds.java_version(tmp_path / "nowhere") is None


def test_first_run_writes_then_later_runs_map(tmp_path: Path) -> None:
    env, spark_home = _env(tmp_path), _spark(tmp_path)
    first = _cds.plan("4.0.0", spark_home, env=env)
    assert first is not None and first.writing is not None and first.archive is None
    assert f"-XX:ArchiveClassesAtExit={first.writing}" in first.java_options
    assert first.writing.parent == tmp_path / "cache" / "aio-purgatory"
    assert _cds.QUIET_JVM_LOG in first.java_options  # the JVM's warnings to its log
    _jvm_writes(first)
    installed = _cds.adopt(first)
    assert installed == first.final and installed is not None and installed.is_file()
    assert not first.writing.exists()
    later = _cds.plan("4.0.0", spark_home, env=env)
    assert later is not None and later.archive == installed and later.writing is None
    assert f"-XX:SharedArchiveFile={installed}" in later.java_options
    assert "spark-4.0.0-java-17.0.15" in installed.name


def test_adopt_without_an_archive_written_installs_nothing(tmp_path: Path) -> None:
    plan = _cds.plan("4.0.0", _spark(tmp_path), env=_env(tmp_path))
    assert plan is not None and plan.writing is not None
    assert _cds.adopt(plan) is None  # the JVM died before writing
    assert _cds.adopt(None) is None
    assert list(plan.writing.parent.iterdir()) == []


def test_a_changed_jar_or_java_is_another_key(tmp_path: Path) -> None:
    """A stale archive is never offered: the key covers the jars and the Java."""
    env, spark_home = _env(tmp_path), _spark(tmp_path)
    first = _cds.plan("4.0.0", spark_home, env=env)
    assert first is not None
    _jvm_writes(first)
    assert _cds.adopt(first) is not None
    (spark_home / "jars" / "spark-sql.jar").write_bytes(b"PK changed, longer")
    after_upgrade = _cds.plan("4.0.0", spark_home, env=env)
    assert after_upgrade is not None and after_upgrade.writing is not None
    assert after_upgrade.final != first.final
    assert _cds.archive_key("4.0.0", spark_home, tmp_path / "jdk", "21.0.1") != (
        _cds.archive_key("4.0.0", spark_home, tmp_path / "jdk", "17.0.15")
    )


@pytest.mark.parametrize(
    "change",
    ["off", "old java", "no java", "no jars", "cache is a file", "space in the cache path"],
)
def test_no_archive_options_rather_than_a_failure(tmp_path: Path, change: str) -> None:
    env, spark_home = _env(tmp_path), _spark(tmp_path)
    if change == "off":
        env[_cds.CDS_ENV] = "0"
    elif change == "old java":
        (tmp_path / "jdk" / "release").write_text('JAVA_VERSION="1.8.0_392"\n')
    elif change == "no java":
        env = {"PATH": str(tmp_path / "empty"), "XDG_CACHE_HOME": env["XDG_CACHE_HOME"]}
    elif change == "no jars":
        spark_home = tmp_path / "not-spark"
    elif change == "cache is a file":
        (tmp_path / "cache").write_text("a file where the cache folder should be")
    else:
        env["XDG_CACHE_HOME"] = str(tmp_path / "my cache")
    assert _cds.plan("4.0.0", spark_home, env=env) is None


def test_prune_removes_dead_runs_and_keeps_the_newest_archives(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    now = time.time()
    for i in range(_cds.KEEP_ARCHIVES + 2):
        archive = folder / f"k{i}.jsa"
        archive.write_bytes(b"a")
        os.utime(archive, (now - 100 * i, now - 100 * i))  # k0 newest
    dead = folder / "k9.123.tmp"
    dead.write_bytes(b"half")
    os.utime(dead, (now - 2 * _cds.STALE_TMP_S, now - 2 * _cds.STALE_TMP_S))
    running = folder / "k8.456.tmp"  # another run writing right now
    running.write_bytes(b"half")
    _cds._prune(folder, now)
    left = sorted(p.name for p in folder.iterdir())
    kept = [f"k{i}.jsa" for i in range(_cds.KEEP_ARCHIVES - 1)]  # room for one more
    assert left == sorted([*kept, running.name])


@pytest.mark.skipif(
    not purgatory.compiled,
    reason="runs once, with the compiled core: the archive and the report's code do not "
    "depend on the build",
)
def test_report_writes_the_archive_then_survives_a_corrupt_one(tmp_path: Path) -> None:
    """The real JVM: a first run installs the archive; a corrupt archive under
    the key's name is then ignored without a word on the terminal."""
    import pyspark
    from purgatory_broker.analytics import write_synthetic_trace

    trace = tmp_path / "trace"
    write_synthetic_trace(trace, 500, seed=3)
    spark_home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), _cds.CDS_ENV: "1"}
    plan = _cds.plan(pyspark.__version__, spark_home, env={**os.environ, **env})
    if plan is None:
        pytest.skip("no Java 13+ with a release file: the JVM gets no archive options")
    assert plan.final is not None and plan.writing is not None
    args = ["-m", "purgatory_broker.analytics", "report", str(trace)]
    first = run_cli([*args, "--out", str(tmp_path / "a")], env=env, timeout_s=300)
    assert first.returncode == 0, first.stderr
    assert "saved Java's class archive for faster starts" in first.stderr
    assert plan.final.is_file()
    assert list(plan.final.parent.glob("*.tmp")) == []
    plan.final.chmod(0o644)
    plan.final.write_bytes(b"not a class archive")
    again = run_cli([*args, "--out", str(tmp_path / "b"), "--quiet"], env=env, timeout_s=240)
    assert again.returncode == 0, again.stderr
    assert again.stderr == ""
    assert again.stdout.startswith("report: ") and "warning" not in again.stdout
