"""A failed Spark job in one line, chosen by the exception's type.

The exceptions are PySpark's and py4j's own classes: built directly where they
need no JVM, raised by a real Spark session in the tests marked ``system``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from purgatory_broker.analytics.__main__ import _failure
from purgatory_broker.analytics._failures import failure_line, is_spark_error
from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import (
    AnalysisException,
    ParseException,
    PySparkTypeError,
    PySparkValueError,
    PythonException,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

_TRACEBACK = """\
Traceback (most recent call last):
  File "/opt/spark/python/pyspark/worker.py", line 1247, in main
    process()
  File "task.py", line 3, in boom
    raise ValueError("bad value <x>")
ValueError: bad value <x>
"""

_CHAINED = """\
Traceback (most recent call last):
  File "task.py", line 2, in load
    return table[key]
           ~~~~~^^^^^
KeyError: 'tick_ms'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "task.py", line 4, in load
    raise LookupError(f"no setting {key}")
LookupError: no setting tick_ms
"""


def _python_exception(traceback: str | None) -> PythonException:
    """A PythonException as Spark Connect builds it on the driver (no JVM)."""
    parameters = {"msg": "An exception was thrown from the Python worker"}
    if traceback is not None:
        parameters["traceback"] = traceback
    return PythonException(
        message="An exception was thrown from the Python worker",
        errorClass="PYTHON_EXCEPTION",
        messageParameters=parameters,
    )


@pytest.mark.parametrize(
    ("traceback", "line"),
    [
        (_TRACEBACK, "ValueError: bad value <x>"),
        (_CHAINED, "LookupError: no setting tick_ms"),
        # no traceback to read: the exception's own first line
        (None, "[PYTHON_EXCEPTION] An exception was thrown from the Python worker"),
    ],
)
def test_python_code_that_failed_on_an_executor_is_its_exception(
    traceback: str | None, line: str
) -> None:
    assert failure_line(_python_exception(traceback)) == line


def test_a_converted_java_exception_is_its_type_and_first_line() -> None:
    missing = AnalysisException(
        message="Path does not exist: file:/x. SQLSTATE: 42K03",
        errorClass="PATH_NOT_FOUND",
        messageParameters={"path": "file:/x"},
    )
    assert failure_line(missing) == (
        "AnalysisException: [PATH_NOT_FOUND] Path does not exist: file:/x. SQLSTATE: 42K03"
    )
    parse = ParseException("\n[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'.\n\nSELEC 1")
    assert failure_line(parse) == (
        "ParseException: [PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'."
    )


class _Throwable:
    """The three methods of java.lang.Throwable the classification calls, for a
    Py4JJavaError built without a JVM (and the id py4j keeps of a Java object)."""

    _target_id = "o1"

    def __init__(self, name: str, message: str | None, cause: _Throwable | None = None) -> None:
        self._name, self._message, self._cause = name, message, cause

    def getMessage(self) -> str | None:
        return self._message

    def getCause(self) -> _Throwable | None:
        return self._cause

    def getClass(self) -> Any:
        name = self._name

        class _Class:
            def getName(self) -> str:
                return name

        return _Class()


def test_an_unconverted_java_exception_is_its_innermost_cause_with_a_message() -> None:
    crashed = _Throwable(
        "org.apache.spark.SparkException",
        "Job aborted due to stage failure: Task 0 failed\nDriver stacktrace:",
        _Throwable(
            "org.apache.spark.SparkException",
            "Python worker exited unexpectedly (crashed)",
            _Throwable("java.io.EOFException", None),
        ),
    )
    error = Py4JJavaError("An error occurred while calling o42.collect.\n", crashed)
    assert failure_line(error) == (
        "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)"
    )


def test_other_failures_are_their_first_line_or_their_type() -> None:
    assert failure_line(OSError(2, "No such file or directory", "x")) == (
        "[Errno 2] No such file or directory: 'x'"
    )
    gone = Py4JError("An error occurred while trying to connect to the Java server\nmore")
    assert failure_line(gone) == "An error occurred while trying to connect to the Java server"
    assert failure_line(RuntimeError()) == "RuntimeError"


def test_a_value_error_of_sparks_is_a_failure_not_bad_input(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"  # absent: the line names no log
    own = PySparkValueError(errorClass="CANNOT_BE_EMPTY", messageParameters={"item": "schema"})
    assert is_spark_error(own) and is_spark_error(PySparkTypeError("x"))
    assert not is_spark_error(ValueError("x"))
    line, status = _failure(own, interrupted=False, jvm_log=log)
    assert status == 1 and line.startswith("failed: PySparkValueError: [CANNOT_BE_EMPTY]")
    assert _failure(ValueError("--grid: bad"), interrupted=False, jvm_log=log) == (
        "--grid: bad",
        2,
    )
    assert _failure(own, interrupted=True, jvm_log=log) == ("interrupted", 130)
    log.write_text("the JVM's words")
    assert _failure(RuntimeError("x"), interrupted=False, jvm_log=log) == (
        f"failed: x (Spark's log: {log})",
        1,
    )


# -- the exceptions a real session raises --


def _raised(action: Any) -> BaseException:
    with pytest.raises(Exception) as info:
        action()
    return info.value


@pytest.mark.system  # Java: a Spark session
def test_failures_of_a_real_session(spark: SparkSession, tmp_path: Path) -> None:
    # The executor's functions are local: Spark pickles them by value. A module-level
    # function is pickled by reference, and an executor's Python worker cannot import
    # broker_tests when the suite runs against the installed wheels.
    def _bad_value(_: object) -> object:
        raise ValueError("bad value <x>")

    def _bad_batches(batches: Iterator[Any]) -> Iterator[Any]:
        for _ in batches:
            raise KeyError("nope")
        yield from ()

    missing = _raised(lambda: spark.read.parquet(str(tmp_path / "nope")))
    assert isinstance(missing, AnalysisException)
    assert failure_line(missing).startswith("AnalysisException: [PATH_NOT_FOUND]")

    rdd = spark.sparkContext.parallelize([1], 1).map(_bad_value)
    assert failure_line(_raised(rdd.collect)) == "ValueError: bad value <x>"

    # collect(), not toPandas(): with Arrow on, toPandas() also warns on the way out
    frame = spark.range(3).mapInPandas(_bad_batches, "id long")
    assert failure_line(_raised(frame.collect)) == "KeyError: 'nope'"

    unwritable = _raised(lambda: spark.range(3).write.parquet("nosuch://host/x"))
    assert isinstance(unwritable, Py4JJavaError)
    assert failure_line(unwritable) == (
        'org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "nosuch"'
    )
