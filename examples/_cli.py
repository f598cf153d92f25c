"""The examples' command lines: :mod:`argparse`, whose refusals are one line.

argparse prints its usage block above the error when it refuses an option; a
program of this project prints the error alone, ``PROG: error: WHAT (see
--help)``, and exits with status 2 (a failure at run time: the same line, status
1), as the broker's command lines do. The examples import this module from their
own folder (``python examples/NAME.py`` puts it on the path).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = ["PORT", "Parser", "integer"]


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low`` (to ``high``), refused as
    ``argument --NAME: must be an integer >= LOW, not VALUE`` (or ``from LOW to
    HIGH``); text that is no integer as argparse refuses an ``int``."""
    wanted = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def int_in_range(text: str) -> int:
        value = int(text)  # ValueError: argparse's "invalid int value: 'TEXT'"
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {wanted}, not {value}")
        return value

    int_in_range.__name__ = "int"  # the name argparse puts in "invalid int value"
    return int_in_range


#: a TCP port to listen on; 0 picks a free one
PORT = integer(0, 65535)


class Parser(argparse.ArgumentParser):
    """argparse's parser with one-line refusals; ``--help`` shows every default."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(**kwargs)

    def error(self, message: str) -> NoReturn:
        """Refuse an option: one line, status 2."""
        self.fail(2, f"{message} (see --help)")

    def fail(self, status: int, message: str) -> NoReturn:
        """Exit with ``status`` after one line on stderr, ``PROG: error: MESSAGE``."""
        self.exit(status, f"{self.prog}: error: {' '.join(message.split())}\n")
