"""A bounded set of open files: the least recently used is closed when one too many opens.

Each open file costs a descriptor, and a process has a limit (``ulimit -n``;
EMFILE past it). A log segment holds two kinds of file that can be closed and
opened again at will: a rolled segment's log file (read-only, read by lagging
readers) and the memory map of any segment's offset index. A memory map costs a
descriptor too: CPython's ``mmap`` keeps a ``dup`` of the descriptor it maps for
as long as the map lives (``trackfd=False`` avoids that only from Python 3.13).
So these are opened on use and registered here; when more than ``capacity`` are
open, the least recently used owner is told to close its file
(:meth:`Reopenable.close_files`), and opens it again the next time it needs it.

An active segment's log file is not managed here: it takes every append, so it
stays open. Together: N partitions cost N descriptors, plus at most
``capacity`` for everything else, however many segments they hold.

Example, ``capacity=2``::

    touch(index A)   open: [A]
    touch(log B)     open: [A, B]
    touch(index A)   open: [B, A]         (A is now the most recent)
    touch(index C)   open: [A, C]         B.close_files() called
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

__all__ = ["DEFAULT_MAX_OPEN_FILES", "OpenFiles", "Reopenable"]

#: How many reopenable files (rolled logs, index maps) an :class:`OpenFiles` keeps.
DEFAULT_MAX_OPEN_FILES = 64


class Reopenable(Protocol):
    """An owner of a file it can close now and reopen when next used."""

    def close_files(self) -> None:
        """Close the file (it is reopened on next use). Must not call back into the set."""


class OpenFiles:
    """The owners whose reopenable file is open, least recently used first.

    ``touch`` and ``forget`` are O(1) (plus one ``close_files`` on eviction). Not
    thread-safe: share one set only among logs used from one thread.
    """

    __slots__ = ("_capacity", "_owners")

    def __init__(self, capacity: int = DEFAULT_MAX_OPEN_FILES) -> None:
        if type(capacity) is not int or capacity < 1:
            raise ValueError(f"capacity must be a positive int, not {capacity!r}")
        self._capacity = capacity
        # invariant: len <= _capacity; the owners whose file is open, least
        # recently used first
        self._owners: OrderedDict[Reopenable, None] = OrderedDict()

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        """How many owners have their file open. O(1)."""
        return len(self._owners)

    def __contains__(self, owner: object) -> bool:
        return owner in self._owners

    def touch(self, owner: Reopenable) -> None:
        """``owner``'s file is open and was just used; may close the least recent. O(1)."""
        owners = self._owners
        if owner in owners:
            owners.move_to_end(owner)
            return
        owners[owner] = None
        if len(owners) > self._capacity:
            evicted, _ = owners.popitem(last=False)
            evicted.close_files()

    def forget(self, owner: Reopenable) -> None:
        """``owner`` closed its file itself (or will keep it open unmanaged). O(1)."""
        self._owners.pop(owner, None)

    def close(self) -> None:
        """Close every open file. O(open files)."""
        while self._owners:
            owner, _ = self._owners.popitem(last=False)
            owner.close_files()

    def __repr__(self) -> str:
        return f"<OpenFiles open={len(self._owners)}/{self._capacity}>"
