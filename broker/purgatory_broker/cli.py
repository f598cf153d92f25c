"""What the project's command lines share: one-line errors, shown defaults, exit codes.

Every program the project ships (the simulation, the pipeline, the examples)
answers bad input the same way: one line on stderr,
``PROG: error: WHAT (see --help)``, no traceback, and exit status 2 for a
command line it refuses (checked before anything runs) or 1 for a failure at
run time (a port in use, a host name that does not resolve). argparse itself
prints its usage line above the error; :class:`Parser` prints the error line
only, and :meth:`Parser.fail` is the same line for a failure at run time.
:class:`Parser` also shows every option's default in ``--help``.

``PROG`` is how the program was started (:func:`program_name`), as Python 3.14's
argparse names it: ``purgatory-broker-wire`` run as the console script,
``python -m purgatory_broker.wire`` run as a module, ``simulate.py`` run as a
file. Python 3.11 to 3.13 name the file alone (``__main__.py`` for a module), so
the parser asks :func:`program_name` on every version.

The argument types (:func:`int_at_least`, :func:`port`, :func:`seconds`) name
what they accept, so argparse's message reads
``argument --port: must be an integer from 0 to 65535, not '70000'``.
:func:`interrupted` ends a program stopped by Ctrl-C the way a shell expects
(status 130, no traceback). Standard library only.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = [
    "RUNTIME_ERROR",
    "USAGE_ERROR",
    "Parser",
    "int_at_least",
    "interrupted",
    "port",
    "program_name",
    "seconds",
]

#: the exit status of a refused command line (nothing ran)
USAGE_ERROR = 2
#: the exit status of a failure at run time (the command line was fine)
RUNTIME_ERROR = 1


class _ShowDefaults(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help, unless the help already says
    what the default is (``default`` in its text) or there is none (None)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "default" in text or default is None or default is argparse.SUPPRESS:
            return text
        if not action.option_strings:
            return text
        if action.nargs == 0:  # a flag: store_true / store_false
            return f"{text} (default: {'on' if default else 'off'})"
        return f"{text} (default: %(default)s)"


def program_name(module: str) -> str:
    """How this process was started, for its usage and error lines; O(1).

    Run as a module (``python -m purgatory_broker.wire``): ``python -m`` and the
    package (``python`` being the interpreter's file name); run as a script (a
    console script, or a file): the script's file name. ``module`` is the answer
    where neither tells: ``python -c``, or a ``__main__.py`` run as a file (as
    ``spark-submit`` runs the pipeline's).
    """
    python = os.path.basename(sys.executable) or "python"
    # __main__.__spec__ is set by -m (and by a folder or zip run as a script), else None
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name != "__main__":
        return f"{python} -m {spec.name.removesuffix('.__main__')}"
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    if spec is not None:  # a folder or zip file with a __main__.py
        return f"{python} {sys.argv[0]}"
    if script in ("", "-c", "__main__.py"):
        return f"{python} -m {module}"
    return script


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors are one line, exit status 2.

    ``module`` (the package ``python -m`` runs) names the program where no ``prog``
    is given: :func:`program_name`, how it was started.
    """

    def __init__(self, *args: Any, module: str = "", **kwargs: Any) -> None:
        if module and not args and "prog" not in kwargs:
            kwargs["prog"] = program_name(module)
        kwargs.setdefault("formatter_class", _ShowDefaults)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A refused command line: one line on stderr, exit status 2."""
        self._one_line(USAGE_ERROR, f"{message} (see --help)")

    def fail(self, message: str) -> NoReturn:
        """A failure at run time: one line on stderr, exit status 1."""
        self._one_line(RUNTIME_ERROR, message)

    def _one_line(self, status: int, message: str) -> NoReturn:
        text = " ".join(message.split())  # one line, whatever the message held
        self.exit(status, f"{self.prog}: error: {text}\n")


def int_at_least(low: int) -> Callable[[str], int]:
    """An argument type: an integer no smaller than ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {text!r}")
        return value

    return parse


def port(text: str) -> int:
    """An argument type: a TCP port, 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to 65535, not {text!r}")
    return value


def seconds(*, allow_zero: bool) -> Callable[[str], float]:
    """An argument type: a finite number of seconds, positive (or zero, if allowed)."""
    wanted = "a number >= 0" if allow_zero else "a number > 0"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"must be {wanted} (seconds), not {text!r}")
        return value

    return parse


def interrupted() -> NoReturn:
    """Ctrl-C: no traceback, the shell's status for SIGINT (128 + 2)."""
    sys.exit(130)
