"""One line for a failed Spark job, chosen by the type of the exception PySpark raised.

What reaches the driver when a job fails, and the line told for it:

=====================================  ==============================================
exception (its type)                   the line
=====================================  ==============================================
``pyspark.errors.PythonException``     the Python exception the executor raised:
(Python code on an executor raised)    ``ValueError: bad value``
other ``pyspark.errors``               the type and the first line of its message:
``PySparkException`` (``Analysis``,    ``AnalysisException: [PATH_NOT_FOUND] Path
``IllegalArgument``, ...: a Java       does not exist: file:/x. SQLSTATE: 42K03``
exception PySpark converts)
``py4j.protocol.Py4JJavaError`` (a     the innermost Java cause that has a message:
Java exception PySpark does not        ``org.apache.hadoop.fs.UnsupportedFile
convert: Hadoop, I/O, a crashed        SystemException: No FileSystem for scheme
worker)                                "s3a"``
``py4j.protocol.Py4JError`` (the JVM   py4j's first line
does not answer)
anything else                          its first line (or its type's name)
=====================================  ==============================================

Only the first row reads a message: a Python exception raised on an executor
reaches the driver as the text of its traceback (PythonException's
``traceback`` parameter), never as an object, so its type is read from that
text. pyspark and py4j are imported only when the exception is one of theirs
(they are loaded already, then). Cost: O(length of the message).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["failure_line", "is_spark_error"]

#: how deep :func:`_java_cause` follows a chain of causes (a bound against a cycle)
MAX_CAUSES = 32


def failure_line(exc: BaseException) -> str:
    """The line that says why a Spark job failed (see the module doc). O(message)."""
    if "pyspark" in sys.modules:
        from pyspark.errors import PySparkException, PythonException

        if isinstance(exc, PythonException):
            return _python_exception(exc)
        if isinstance(exc, PySparkException):
            return f"{type(exc).__name__}: {_first_line(_text(exc), _NO_MESSAGE)}"
    if "py4j" in sys.modules:
        from py4j.protocol import Py4JJavaError

        if isinstance(exc, Py4JJavaError) and exc.java_exception is not None:
            try:
                return _java_cause(exc.java_exception)
            except Exception:  # noqa: BLE001 - the JVM that holds the causes may be gone
                pass
    return _first_line(_text(exc), type(exc).__name__)


def is_spark_error(exc: BaseException) -> bool:
    """True for an exception of PySpark's (``pyspark.errors.PySparkException``): a
    failure of Spark's, even when it is also a ValueError or a TypeError. O(1)."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark.errors import PySparkException

    return isinstance(exc, PySparkException)


#: what stands for the text of an exception that has none
_NO_MESSAGE = "(no message)"


def _first_line(text: str, otherwise: str) -> str:
    """The first non-blank line of ``text``, stripped, else ``otherwise``."""
    return next((line.strip() for line in text.splitlines() if line.strip()), otherwise)


def _text(exc: BaseException) -> str:
    """``str(exc)``, or "" when that fails."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a converted exception asks the JVM, which may be gone
        return ""


def _python_exception(exc: Any) -> str:
    """The executor's exception from PythonException's traceback text: the first
    line after the last frame (frame lines are indented, the exception's are not)."""
    try:
        parameters = exc.getMessageParameters() or {}
    except Exception:  # noqa: BLE001 - a converted exception asks the JVM, which may be gone
        parameters = {}
    lines = [line for line in str(parameters.get("traceback", "")).splitlines() if line.strip()]
    last_frame = max((i for i, line in enumerate(lines) if line[:1].isspace()), default=-1)
    tail = lines[last_frame + 1 :]
    return tail[0].strip() if tail else _first_line(_text(exc), type(exc).__name__)


def _java_cause(java_exception: Any) -> str:
    """``class: message`` of the innermost Java cause that has a message (a
    "Job aborted" SparkException wraps the task's failure, which may wrap an
    exception without a message, such as an EOFException)."""
    chosen = java_exception
    cause = java_exception
    for _ in range(MAX_CAUSES):
        if cause is None:
            break
        if cause.getMessage():
            chosen = cause
        cause = cause.getCause()
    return f"{chosen.getClass().getName()}: {_first_line(chosen.getMessage() or '', _NO_MESSAGE)}"
