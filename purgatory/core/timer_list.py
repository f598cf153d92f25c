"""Timer tasks and the buckets (circular doubly linked lists) that hold them.

A :class:`TimerTask` is what a user schedules. While scheduled it sits in exactly
one bucket, a :class:`TimerTaskList`, with its absolute expiration:

* scheduling a task again takes it out of its bucket first (the task *moves*);
* cancelling a task unlinks it from its bucket: O(1), since a bucket is a
  circular doubly linked list whose sentinel is the bucket itself.

Kafka wraps each scheduling of a task in a separate entry object, so that
threads racing on a moved task can tell its stale entry from its live one. Here
everything runs on the event loop's thread, so the task carries its entry fields
itself (its bucket, links and deadline): scheduling allocates nothing,
and "an entry belongs to at most one list" holds by construction.

A bucket has an expiration (the start of the tick it covers), unset (-1) while
new and after each flush. The wheel sets it when it adds a task, and offers the
bucket to the delay queue only when the value changed, so a bucket enters the
queue once per rotation however many tasks it takes.
:meth:`TimerTaskList.flush` empties a bucket through a function (the timer's
reinsert) and unsets the expiration.

Every bucket of every wheel level shares one :class:`TaskCounter`, so the timer's
size is one integer read.

Example, one bucket ``b`` and two tasks::

    b.add(t1, 10); b.add(t2, 12)     # deadlines 10 and 12; counter 2
    t1.cancel()                      # counter 1, O(1)
    b.expiration_ms = 10             # the wheel: changed, so offer b to the queue
    b.flush(f)                       # f(t2); counter 0; expiration -1
"""

from __future__ import annotations

from collections.abc import Iterator

from ._signature import InitSignature, init_doc

__all__ = ["TaskCounter", "TaskSink", "TimerTask", "TimerTaskList"]


class TaskCounter:
    """The number of tasks in all buckets sharing this counter."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0  # invariant: == the number of tasks linked in those buckets


class _Link:
    """A node of a circular doubly linked list."""

    __slots__ = ("_next", "_prev")

    _next: _Link
    _prev: _Link


class TimerTask(_Link):
    """A task to run once after ``delay_ms``: subclass it and override :meth:`run`.

    ``delay_ms`` is a plain attribute, read when the task is added to a timer: an
    ``int`` (or a finite ``float``, rounded up); a negative delay means due now.
    The task carries its own scheduling state (Kafka's timer task entry): its
    bucket, its links there and its deadline.
    """

    __slots__ = ("_list", "deadline_ms", "delay_ms")

    #: the constructor's signature for ``inspect`` and ``help()`` in the compiled core too
    __signature__ = InitSignature()

    # invariant: None, or the bucket this task is linked in (then _next/_prev are
    # its neighbours there and deadline_ms is within that bucket's tick)
    _list: TimerTaskList | None
    # set by the timer's add: the clock's time then plus delay_ms, the time the task
    # was asked to run at (what lateness is measured from), and what the wheels
    # file it by (the timer's pad keeps it from running before it: WheelTimer)
    deadline_ms: int

    def __init__(self, delay_ms: int) -> None:
        "__init__(self, delay_ms)\n--\n\nA task to run ``delay_ms`` after it is added to a timer."
        self.delay_ms = delay_ms
        self._list = None

    def run(self) -> None:
        """Called once, on the loop thread, when the task is due. Override it."""
        raise NotImplementedError(f"{type(self).__name__} must override run()")

    def cancel(self) -> bool:
        """Unschedule the task; it will not run unless added again. True if it was
        scheduled. O(1); idempotent.

        (A :class:`~purgatory.DelayedOperation` overrides this: there it cancels the
        operation, in the timer and in its purgatory.)
        """
        return self._unlink()

    def _unlink(self) -> bool:
        """Take the task out of its bucket, if any; True if it was in one. O(1).

        What the timer itself uses to move or drop a task: never overridden.
        """
        bucket = self._list
        if bucket is None:
            return False
        nxt = self._next
        prv = self._prev
        prv._next = nxt
        nxt._prev = prv
        self._list = None
        bucket._counter.value -= 1
        return True

    @property
    def is_scheduled(self) -> bool:
        """Whether the task is in a timer, waiting to run. O(1)."""
        return self._list is not None

    def __repr__(self) -> str:
        state = f"due at {self.deadline_ms}" if self._list is not None else "idle"
        return f"<{type(self).__name__} delay_ms={self.delay_ms!r} {state}>"


init_doc(TimerTask)  # the text signature is for the compiled core only


class TaskSink:
    """Where :meth:`TimerTaskList.flush` hands a bucket's tasks: the timer.

    An interface of two methods (Kafka's ``flush(f)`` takes a function; two
    named methods let the compiled core call them in C): a task from a bucket
    of the finest wheel (or the due list) is due and goes to ``_run_due``; one
    from a coarser bucket goes to ``_reinsert``, to land in a finer bucket or
    run if it is due.
    """

    __slots__ = ()

    def _run_due(self, task: TimerTask) -> None:
        raise NotImplementedError

    def _reinsert(self, task: TimerTask) -> None:
        raise NotImplementedError


class TimerTaskList(_Link):
    """A bucket: a circular doubly linked list of tasks with one expiration.

    The bucket is the list's sentinel: ``_next`` is the oldest task, ``_prev``
    the newest. ``add`` is O(1); ``flush`` and ``len`` are O(tasks).
    """

    __slots__ = ("_counter", "expiration_ms", "finest")

    def __init__(self, counter: TaskCounter, *, finest: bool = False) -> None:
        self._next = self._prev = self
        self._counter = counter
        # True for the finest wheel's buckets: every task in one is due once it expires
        self.finest = finest
        # invariant: -1 (unset) after creation and after each flush; otherwise the
        # start of the tick every task in this bucket expires in
        self.expiration_ms = -1

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return self._next is not self

    def __iter__(self) -> Iterator[TimerTask]:
        """The tasks, oldest first. Do not mutate the bucket while iterating."""
        node = self._next
        while node is not self:
            assert isinstance(node, TimerTask)
            yield node
            node = node._next

    def add(self, task: TimerTask, deadline_ms: int) -> None:
        """Append ``task`` due at ``deadline_ms``, moving it out of any bucket. O(1)."""
        task._unlink()
        task.deadline_ms = deadline_ms
        tail = self._prev
        task._next = self
        task._prev = tail
        task._list = self
        tail._next = task
        self._prev = task
        self._counter.value += 1

    def flush(self, sink: TaskSink) -> None:
        """Remove every task, handing each to ``sink`` (``_run_due`` if this bucket
        is ``finest``, else ``_reinsert``), then unset the expiration.

        Tasks are unlinked one at a time, so the sink may cancel other tasks of
        this bucket safely. O(tasks).
        """
        counter = self._counter
        finest = self.finest
        head = self._next
        while head is not self:
            assert isinstance(head, TimerTask)
            # typed as a task (a C type test once), so that the compiled core sets
            # its _list in C: through the _Link it was a Python setattr a task
            task = head
            nxt = task._next  # task._unlink(), inlined: the expiry hot path
            self._next = nxt
            nxt._prev = self
            task._list = None
            counter.value -= 1
            if finest:
                sink._run_due(task)
            else:
                sink._reinsert(task)
            head = self._next
        self.expiration_ms = -1

    def _check_invariants(self) -> int:
        """Check the links; return the number of tasks. O(tasks)."""
        count = 0
        node = self._next
        prev: _Link = self
        while node is not self:
            assert isinstance(node, TimerTask)
            assert node._prev is prev, "broken back link"
            assert node._list is self, "task does not know its bucket"
            count += 1
            prev = node
            node = node._next
        assert self._prev is prev, "broken tail link"
        return count

    def __repr__(self) -> str:
        return f"<TimerTaskList expiration_ms={self.expiration_ms} size={len(self)}>"
