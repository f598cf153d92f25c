"""Exceptions of the purgatory."""

from __future__ import annotations

__all__ = ["OperationCancelledError", "PurgatoryClosedError"]


class OperationCancelledError(Exception):
    """The operation was cancelled (``cancel_for_key``): it will never complete.

    Awaiters of a cancelled operation raise this.
    """


class PurgatoryClosedError(OperationCancelledError):
    """The purgatory was closed while the operation was pending."""
