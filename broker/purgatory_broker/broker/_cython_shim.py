"""Stands in for Cython's ``cython`` module in the broker's compiled modules when
Cython is not installed (as :mod:`purgatory.core`'s own stand-in does for the core:
the parts reach each other only through public modules). The modules that ask
``cython.compiled`` get ``False`` here when they run as plain Python, and
``@cython.locals`` leaves the function as it is.
"""

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

compiled = False


def locals(**types: object) -> Callable[[F], F]:
    """Cython's ``@cython.locals``, which types a function's locals when compiled:
    here the function as it is."""

    def unchanged(function: F) -> F:
        return function

    return unchanged
