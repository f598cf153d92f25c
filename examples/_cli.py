"""The examples' command lines: :mod:`argparse`, whose refusals are one line.

argparse prints its usage block above the error when it refuses an option; a
program of this project prints the error alone, ``PROG: error: WHAT (see
--help)``, and exits with status 2 (a failure at run time: the same line, status
1), as the broker's command lines do. The examples import this module from their
own folder (``python examples/NAME.py`` puts it on the path).
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

__all__ = ["Parser"]


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
