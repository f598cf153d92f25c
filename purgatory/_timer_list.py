"""Timer tasks, their entries, and the buckets (doubly linked lists) that hold them.

A :class:`TimerTask` is what a user schedules. Scheduling wraps it in a
:class:`TimerTaskEntry` (the task plus its absolute expiration) that lives in one
bucket, a :class:`TimerTaskList`. The task points at its one live entry:

* scheduling a task again creates a new entry, and the old one leaves its bucket
  (the task *moves*); an entry whose task points elsewhere is *cancelled*;
* cancelling a task removes its entry from its bucket: O(1), since a bucket is a
  circular doubly linked list with a sentinel root.

A bucket has an expiration (the start of the tick it covers), unset (-1) while
it is empty and new. :meth:`TimerTaskList.set_expiration` reports whether the
value changed, and only then does the wheel offer the bucket to the delay queue,
so a bucket enters the queue once per rotation however many tasks it takes.
:meth:`TimerTaskList.flush` empties a bucket through a function (the timer's
reinsert) and unsets the expiration.

Every bucket of every wheel level shares one :class:`TaskCounter`, so the timer's
size is one integer read.

Example, one bucket ``b`` and two tasks::

    b.add(TimerTaskEntry(t1, 10)); b.add(TimerTaskEntry(t2, 12))  # counter 2
    t1.cancel()                                                   # counter 1, O(1)
    b.set_expiration(10) -> True; b.set_expiration(10) -> False
    b.flush(f)              # f(entry of t2); counter 0; expiration -1
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

__all__ = ["TaskCounter", "TimerTask", "TimerTaskEntry", "TimerTaskList"]


class TaskCounter:
    """The number of entries in all buckets sharing this counter."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0  # invariant: == sum of the lengths of the buckets sharing it


class TimerTask:
    """A task to run once after ``delay_ms``: subclass it and override :meth:`run`.

    ``delay_ms`` is a plain attribute, read when the task is added to a timer: an
    ``int`` (or a finite ``float``, rounded up); a negative delay means due now.
    """

    __slots__ = ("_timer_entry", "delay_ms")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        # invariant: None, or the task's one live entry (entry.task is self)
        self._timer_entry: TimerTaskEntry | None = None

    def run(self) -> None:
        """Called once, on the loop thread, when the task is due. Override it."""
        raise NotImplementedError(f"{type(self).__name__} must override run()")

    def cancel(self) -> None:
        """Unschedule the task; it will not run unless added again. O(1); idempotent."""
        entry = self._timer_entry
        if entry is not None:
            self._timer_entry = None
            bucket = entry.list
            if bucket is not None:
                bucket.remove(entry)

    @property
    def is_scheduled(self) -> bool:
        """Whether the task is in a timer, waiting to run. O(1)."""
        return self._timer_entry is not None

    def __repr__(self) -> str:
        state = "scheduled" if self._timer_entry is not None else "idle"
        return f"<{type(self).__name__} delay_ms={self.delay_ms!r} {state}>"


class TimerTaskEntry:
    """One scheduling of a task: the task, its expiration, and its place in a bucket.

    Creating an entry makes it the task's live entry; the task's previous entry,
    if any, leaves its bucket. O(1).
    """

    __slots__ = ("expiration_ms", "list", "next", "prev", "task")

    def __init__(self, task: TimerTask, expiration_ms: int) -> None:
        old = task._timer_entry
        if old is not None:
            bucket = old.list
            if bucket is not None:
                bucket.remove(old)
        task._timer_entry = self
        self.task = task
        self.expiration_ms = expiration_ms
        # invariant: list is None, or list holds self and next/prev are its neighbours
        self.list: TimerTaskList | None = None
        self.next: TimerTaskEntry | None = None
        self.prev: TimerTaskEntry | None = None

    @property
    def cancelled(self) -> bool:
        """True once the task was cancelled or moved to another entry. O(1)."""
        return self.task._timer_entry is not self

    def __repr__(self) -> str:
        return f"<TimerTaskEntry expiration_ms={self.expiration_ms} task={self.task!r}>"


class _Root(TimerTaskEntry):
    """The sentinel of a bucket's circular list; never a live entry."""

    __slots__ = ()

    def __init__(self) -> None:  # no task: skip TimerTaskEntry.__init__ on purpose
        self.list = None
        self.next = self
        self.prev = self


class TimerTaskList:
    """A bucket: a circular doubly linked list of entries with one expiration.

    ``add`` and ``remove`` are O(1); ``flush`` is O(entries); ``set_expiration``
    and ``expiration_ms`` are O(1).
    """

    __slots__ = ("_counter", "_root", "_size", "expiration_ms")

    def __init__(self, counter: TaskCounter) -> None:
        self._root: TimerTaskEntry = _Root()
        self._counter = counter
        # invariant: -1 (unset) after creation and after each flush; otherwise the
        # start of the tick every entry of this bucket expires in
        self.expiration_ms = -1
        self._size = 0  # invariant: == number of entries linked from _root

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[TimerTaskEntry]:
        """The entries, oldest first. Do not mutate the bucket while iterating."""
        root = self._root
        node = root.next
        while node is not root:
            assert node is not None
            yield node
            node = node.next

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True if it changed. O(1)."""
        if self.expiration_ms == expiration_ms:
            return False
        self.expiration_ms = expiration_ms
        return True

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry`` (which must be in no bucket). O(1)."""
        root = self._root
        tail = root.prev
        assert tail is not None
        entry.next = root
        entry.prev = tail
        entry.list = self
        tail.next = entry
        root.prev = entry
        self._size += 1
        self._counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        """Unlink ``entry`` if it is in this bucket. O(1)."""
        if entry.list is not self:
            return
        nxt = entry.next
        prv = entry.prev
        assert nxt is not None and prv is not None
        prv.next = nxt
        nxt.prev = prv
        entry.next = entry.prev = None
        entry.list = None
        self._size -= 1
        self._counter.value -= 1

    def flush(self, f: Callable[[TimerTaskEntry], object]) -> None:
        """Remove every entry, handing each to ``f``, then unset the expiration.

        Entries are unlinked one at a time, so ``f`` may cancel other entries of
        this bucket safely. O(entries).
        """
        root = self._root
        head = root.next
        while head is not root:
            assert head is not None
            self.remove(head)
            f(head)
            head = root.next
        self.expiration_ms = -1

    def _check_invariants(self) -> None:
        """Check the links, the size and that every entry is live. O(entries)."""
        root = self._root
        count = 0
        node = root.next
        prev = root
        while node is not root:
            assert node is not None
            assert node.prev is prev, "broken back link"
            assert node.list is self, "entry does not know its bucket"
            assert node.task._timer_entry is node, "cancelled entry left in a bucket"
            count += 1
            prev = node
            node = node.next
        assert root.prev is prev, "broken tail link"
        assert count == self._size, f"size {self._size} but {count} entries"

    def __repr__(self) -> str:
        return f"<TimerTaskList expiration_ms={self.expiration_ms} size={self._size}>"
