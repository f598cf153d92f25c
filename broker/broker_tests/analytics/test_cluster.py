"""The pipeline on a real standalone Spark cluster whose worker has never seen the project.

A master and one worker (1 core, 1 GiB) are started with pyspark's own
``bin/spark-class`` on 127.0.0.1, on free ports. The executors' Python is a
wrapper script that runs this virtualenv's interpreter with ``-S`` (no
site-packages, so neither the editable install's finder nor the project's
dependencies) and only pyspark and py4j on its path: the project is not
importable there (checked first). Then, against ``spark://127.0.0.1:PORT``:

* ``report`` through ``spark-submit`` (client mode), the README's entry point:
  its tables equal local mode's (the session ``report`` fixture), and its
  console holds the pipeline's lines, not Spark's INFO log;
* a small ``sweep`` through ``python -m purgatory_broker.analytics``, whose task lives
  in a module outside the project (shipped as its file): each task reports
  where ``purgatory`` was imported from (the zip the pipeline shipped) and a
  figure computed with the project's own code, equal to local mode's (the
  same sweep on the test session).

The cluster is stopped by pid. The test runs once per suite run, with the
compiled core loaded: executors import the shipped source files (Python
cannot import extension modules from a zip), so the cluster runs the same
pure-Python code whichever core the driver loaded, and a second ~40 s run
under ``PURGATORY_NO_EXTENSIONS=1`` would test nothing new.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow.parquet as pq
import pytest
from purgatory_broker.analytics import expand_grid, run_sweep

import purgatory
from broker_tests.cli_kit import ROOT, run_cli

from .conftest import REPORT_OPTIONS, Report

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [
    pytest.mark.system,  # Java: a Spark cluster
    pytest.mark.skipif(
        shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
        reason="Java is missing: a Spark cluster needs it",
    ),
    pytest.mark.skipif(
        not purgatory.compiled,
        reason="runs once, with the compiled core: the cluster runs the shipped pure-Python "
        "code whichever core the driver loaded",
    ),
]

#: the sweep task, in a module the workers can only get from the pipeline
_TASK = """
import importlib.util

def where(config):
    import purgatory
    from purgatory.core import exact_quantile

    values = sorted(range(config["n"]))
    return {
        "purgatory_file": purgatory.__file__,
        "compiled": purgatory.compiled,
        "p90": exact_quantile(values, 0.9),
        "site_packages_importable": importlib.util.find_spec("pandas") is not None,
    }
"""

_PYSPARK = Path(str(__import__("pyspark").__file__)).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"{text!r} not seen in {log}:\n{log.read_text(errors='replace')[-3000:]}")


def _daemon_env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PURGATORY_", "PYSPARK_"))}
    env.pop("PYTHONPATH", None)
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(work), SPARK_WORKER_DIR=str(work))
    return env


def _python_without_project(work: Path) -> Path:
    """A Python for the executors: no site-packages, only pyspark and py4j."""
    libs = work / "pyspark-only"
    libs.mkdir()
    for name in ("pyspark", "py4j"):
        (libs / name).symlink_to(Path(str(__import__(name).__file__)).parent)
    wrapper = work / "python-without-purgatory"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{libs}${{PYTHONPATH:+:$PYTHONPATH}}" exec {sys.executable} -S "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def _start(
    daemon: str, args: list[str], log: Path, ready: str, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start a Spark daemon with spark-class (which execs java: the pid is the JVM's)
    and wait for ``ready`` in its log."""
    spark_class = str(_PYSPARK / "bin" / "spark-class")
    common = ["--host", "127.0.0.1", "--webui-port", str(_free_port())]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [spark_class, f"org.apache.spark.deploy.{daemon}", *common, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        _wait_for(log, ready, proc, 90)
    except BaseException:
        _stop(proc)
        raise
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``(master URL, executors' Python)``; the master and worker stopped by pid after."""
    work = tmp_path_factory.mktemp("cluster")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    env = _daemon_env(work)
    master = _start(
        "master.Master", ["--port", str(port)], work / "master.log", "elected leader", env
    )
    try:
        worker_args = [url, "--cores", "1", "--memory", "1g", "--work-dir", str(work / "w")]
        worker = _start(
            "worker.Worker", worker_args, work / "worker.log", "registered with master", env
        )
        try:
            yield url, _python_without_project(work)
        finally:
            _stop(worker)
    finally:
        _stop(master)


def _tables(folder: Path) -> dict[str, pd.DataFrame]:
    return {table.name: pq.read_table(table).to_pandas() for table in sorted(folder.iterdir())}


#: the same input split and shuffle partitions as the local[2] fixture session
_LIKE_LOCAL = [
    "--conf",
    "spark.default.parallelism=2",
    "--conf",
    "spark.sql.shuffle.partitions=4",
    "--conf",
    "spark.executor.memory=512m",
]


def test_the_workers_python_cannot_import_the_project(cluster: tuple[str, Path]) -> None:
    _, python = cluster
    done = subprocess.run(
        [str(python), "-c", "import pyspark, py4j; import purgatory"],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    assert done.returncode == 1
    assert "No module named 'purgatory'" in done.stderr


def test_report_under_spark_submit_equals_local_mode(
    cluster: tuple[str, Path], trace_dir: Path, report: Report, tmp_path: Path
) -> None:
    url, python = cluster
    out = tmp_path / "out"
    # the README's command: .venv/bin/spark-submit, the driver on the venv's Python
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        url,
        "--driver-java-options",
        "-Dlog4j2.configurationFile=purgatory_broker/analytics/log4j2.properties",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--conf",
        f"spark.pyspark.python={python}",
        *_LIKE_LOCAL,
        "purgatory_broker/analytics/__main__.py",
        "report",
        str(trace_dir),
        "--out",
        str(out),
        *REPORT_OPTIONS,
    ]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    console = done.stdout + done.stderr  # spark-submit merges the driver's stderr into stdout
    assert "[report 2/6] trace read" in console
    cluster_tables = _tables(out / "tables")
    local_tables = _tables(report.out / "tables")
    assert list(cluster_tables) == list(local_tables)
    for name, local in local_tables.items():
        pd.testing.assert_frame_equal(cluster_tables[name], local, obj=name)
    # quiet: the pipeline's lines, not Spark's INFO log
    assert " INFO " not in console and "log4j profile" not in console, console


def test_sweep_ships_the_project_and_the_task(
    cluster: tuple[str, Path], spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, python = cluster
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "where_task.py").write_text(_TASK)
    env = {"PYTHONPATH": f"{tmp_path / 'task'}{os.pathsep}{ROOT}"}
    args = ["-m", "purgatory_broker.analytics", "sweep", "--task", "where_task:where"]
    args += ["--grid", "n=10,101", "--quiet"]
    on_cluster = run_cli(
        [
            *args,
            "--out",
            str(tmp_path / "c"),
            "--master",
            url,
            "--conf",
            f"spark.pyspark.python={python}",
            *_LIKE_LOCAL,
        ],
        env=env,
        timeout_s=240,
    )
    assert on_cluster.returncode == 0, on_cluster.stderr
    # local mode: the same sweep on the test session (local[2], no JVM to start)
    monkeypatch.syspath_prepend(str(tmp_path / "task"))
    # local workers are the test's own Python processes: give them the module too
    spark.sparkContext.addPyFile(str(tmp_path / "task" / "where_task.py"))
    configs = expand_grid({"n": [10, 101]})
    here = run_sweep(spark, configs, tmp_path / "l", task="where_task:where", progress=False)
    remote = pq.read_table(tmp_path / "c" / "summaries.parquet").to_pandas()
    # imported from the zip the pipeline shipped, pure Python there, no site-packages
    for file in remote["purgatory_file"]:
        assert ".zip/purgatory/__init__.py" in file, file
    assert not remote["compiled"].any()
    assert not remote["site_packages_importable"].any()
    assert here.summaries["site_packages_importable"].all()  # the check can tell
    same = ["config_id", "n", "p90", "error"]
    pd.testing.assert_frame_equal(remote[same], here.summaries[same])
