"""Exceptions of the purgatory."""

from __future__ import annotations

__all__ = ["OperationCancelledError", "PurgatoryClosedError"]


class OperationCancelledError(Exception):
    """The operation was cancelled (``op.cancel()``, ``cancel_for_key``, or its
    purgatory closed): it will never complete.

    Awaiters of a cancelled operation raise this.
    """


class PurgatoryClosedError(OperationCancelledError, RuntimeError):
    """The purgatory is closed: raised by every use of a closed purgatory
    (submitting an operation, entering it again) and by the awaiters of the
    operations it cancelled when it closed.

    A :class:`RuntimeError` too, so ``except RuntimeError`` catches it.
    """
