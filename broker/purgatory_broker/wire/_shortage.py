"""Running short of a resource: one warning when a shortage starts, one line when it ends.

A broker out of file descriptors fails every accept and every partition it tries
to create until descriptors free up; logging each failure (asyncio's server logs
a traceback per accept attempt) buries the one useful line under megabytes. A
:class:`Shortage` counts failures and logs only the transitions::

    fail("cannot accept connections: [Errno 24] ...")   WARNING, shortage starts
    fail(...) x 40                                     counted (DEBUG only)
    clear()                                            "accepting connections again
                                                        after 6.2 s (41 failures)"

:data:`OUT_OF_DESCRIPTORS` names what counts as running out (as opposed to a
real error that should propagate). :func:`fit_descriptor_limit` is the command line's
first defence: like Go's runtime, it raises the process's soft limit on open
files toward the hard one, as far as ``max_partitions`` and connections need, and
lowers the cap when the limit cannot fit it. It owns the raise: the limit is
put back when the run ends (:func:`purgatory_broker.process.raised_open_file_limit`).
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from purgatory_broker.process import raised_open_file_limit

__all__ = [
    "DESCRIPTORS_PER_PARTITION",
    "OUT_OF_DESCRIPTORS",
    "Shortage",
    "fit_descriptor_limit",
]

#: The process (EMFILE) or the system (ENFILE) has no file descriptor left.
OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
#: A partition's log file, its offset index and the index's memory map (a dup).
DESCRIPTORS_PER_PARTITION = 3
#: Room kept for connections, the event loop and the rest of the process.
DESCRIPTORS_FOR_CONNECTIONS = 1024


class Shortage:
    """Counts failures for lack of one resource; logs the start and the end of each
    shortage once. ``fail`` and ``clear`` are O(1)."""

    __slots__ = ("_log", "_since_s", "_streak", "failures", "name", "shortages")

    def __init__(self, name: str, logger: logging.Logger) -> None:
        self.name = name  # what works again when it ends: "accepting connections"
        self._log = logger
        self.failures = 0  # every failure so far
        self.shortages = 0  # shortages started so far
        self._streak = 0  # failures in the current shortage
        # invariant: None exactly when no shortage is going on
        self._since_s: float | None = None

    @property
    def active(self) -> bool:
        """Whether the last attempt failed. O(1)."""
        return self._since_s is not None

    def fail(self, message: str) -> bool:
        """Count a failure; ``message`` is logged as a warning only if it starts a
        shortage (else at DEBUG). Returns whether it started one. O(1)."""
        self.failures += 1
        self._streak += 1
        if self._since_s is not None:
            self._log.debug("still short: %s", message)
            return False
        self._since_s = time.monotonic()
        self.shortages += 1
        self._log.warning("%s", message)
        return True

    def clear(self) -> None:
        """An attempt succeeded: end the shortage, if there is one, with one line. O(1)."""
        if self._since_s is None:
            return
        self._log.warning(
            "%s again after %.1f s (%d failed attempts)",
            self.name,
            time.monotonic() - self._since_s,
            self._streak,
        )
        self._since_s = None
        self._streak = 0

    def __repr__(self) -> str:
        state = "short" if self.active else "ok"
        return f"<Shortage {self.name!r} {state} failures={self.failures}>"


@contextmanager
def fit_descriptor_limit(max_partitions: int, logger: logging.Logger) -> Iterator[int]:
    """While the body runs, the open-file limit raised for ``max_partitions``; yields
    the partition cap that limit allows. The limit is put back on exit. O(1).

    Raises the soft RLIMIT_NOFILE (up to the hard one) to what ``max_partitions``
    partitions and :data:`DESCRIPTORS_FOR_CONNECTIONS` need. If it stays short,
    partitions may take at most three quarters of it: the cap is lowered to fit,
    with one warning, so that partitions can never leave the broker unable to
    accept a connection. Yields ``max_partitions`` or the lowered cap.
    """
    wanted = max_partitions * DESCRIPTORS_PER_PARTITION + DESCRIPTORS_FOR_CONNECTIONS
    with raised_open_file_limit(wanted, logger) as soft:
        if soft is None or soft >= wanted:
            yield max_partitions
        else:
            yield _partitions_within(soft, max_partitions, logger)


def _partitions_within(soft: int, max_partitions: int, logger: logging.Logger) -> int:
    """The cap on partitions that an open-file limit of ``soft``, too low for
    ``max_partitions`` and the connections, allows (three quarters of it)."""
    fits = soft * 3 // 4 // DESCRIPTORS_PER_PARTITION
    if fits >= max_partitions:
        return max_partitions
    logger.warning(
        "the open-file limit (%d) fits %d partitions beside connections, not %d: "
        "--max-partitions lowered to %d (raise the limit with ulimit -n)",
        soft,
        fits,
        max_partitions,
        fits,
    )
    return fits
