"""What a cluster publisher holds between ``publish`` and Redis: one queue per primary.

A :class:`~._cluster.ClusterKeyPublisher` sends each primary's keys from a task of its own
(a stalled primary delays only its own shards' keys), so the keys it has taken from its
pending set wait in an :class:`Outbox`, which is synchronous bookkeeping and nothing else:

- ``parked``: keys to route (just taken from the pending set, or handed back by a sender
  after a failure, to follow the slot map to their owner now);
- ``queues[owner]``: a primary's keys, oldest first, each at most once (a key routed again
  while it waits there is sent once);
- ``flying[owner]``: the batch its sender is sending (one at a time); sent, it is gone;
  failed, it goes back to the front of the queue.

``flush()`` must know up to which ``publish`` call everything has reached Redis, while
the primaries drain at their own pace. Every key carries a *mark*, a count of ``publish``
calls that were all made before the first one the key stands for: a key taken from the
pending set (when the count was ``upto``) was published after the previous take, so its
mark is the count at that take, ``routed_upto`` (then ``upto`` becomes ``routed_upto``).
Two copies of a key that meet in one queue (a key handed back meets its newer copy)
become one with the smaller mark. So every call up to :attr:`Outbox.sent_upto`, the
smallest mark held (``routed_upto`` when nothing is held), has been sent; ``flush`` may
wait a little longer than it must (for the keys taken in with its own), never less. The
marks are counted in a dict (mark -> keys holding it): a new mark is never smaller than
the held ones, so the dict's first key is the smallest, O(1).

Worked example, primaries A and B; ``a1`` and ``a2`` are keys of A's shards, ``b1`` of B's:

=============================================  =================  =========
what happens                                   held (key: mark)   sent_upto
=============================================  =================  =========
publish a1, b1 (calls 1, 2); taken in, routed  A: a1:0, B: b1:0   0
B's batch sent                                 A: a1:0            0
publish a2, a1 (calls 3, 4); taken in, routed  A: a1:0, a2:2      0
(a1's new copy, mark 2, joins the queued one)
A's send fails; A's keys handed back, routed   A: a1:0, a2:2      0
again: to A (or to A's promoted replica)
A's batch sent                                 (nothing)          4
=============================================  =================  =========

``flush()`` called after call 2 returns when A's batch is sent: call 1 (``a1``) was A's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ._topology import Address

__all__ = ["Outbox"]


class Outbox:
    """The keys of a cluster publisher on their way to the primaries (see the module doc).
    Each method states its cost; ``n`` is the number of keys it moves."""

    __slots__ = ("_marks", "flying", "parked", "queues", "routed_upto")

    def __init__(self) -> None:
        #: keys to route: key -> mark, oldest first
        self.parked: dict[bytes, int] = {}
        #: per primary, the keys its sender sends next: key -> mark, oldest first
        self.queues: dict[Address, dict[bytes, int]] = {}
        #: per primary, the batch its sender is sending (absent: none)
        self.flying: dict[Address, dict[bytes, int]] = {}
        #: every publish() up to this count has been taken in (held here, or sent)
        self.routed_upto = 0
        #: mark -> how many keys held (parked, queued or flying) carry it; ascending
        #: marks, every count positive, the counts summing to the keys held
        self._marks: dict[int, int] = {}

    @property
    def sent_upto(self) -> int:
        """Every publish() up to this count has been sent. O(1)."""
        return next(iter(self._marks), self.routed_upto)

    @property
    def held(self) -> int:
        """Keys held: parked, queued or being sent. O(marks)."""
        return sum(self._marks.values())

    @property
    def waiting(self) -> int:
        """Keys parked or queued (not being sent). O(primaries)."""
        return len(self.parked) + sum(len(queue) for queue in self.queues.values())

    def queued(self, owner: Address) -> bool:
        """Whether ``owner`` has keys to send. O(1)."""
        return bool(self.queues.get(owner))

    def holds(self, owner: Address) -> bool:
        """Whether ``owner`` has keys queued or being sent. O(1)."""
        return bool(self.queues.get(owner)) or owner in self.flying

    def admit(self, messages: Iterable[bytes], upto: int) -> None:
        """Take in the keys of the pending set, taken when the publish count was ``upto``:
        parked, marked ``routed_upto``, which becomes ``upto``. O(n)."""
        mark, self.routed_upto = self.routed_upto, upto
        parked = self.parked
        added = 0
        for message in messages:
            old = parked.get(message)
            if old is None:
                parked[message] = mark
                added += 1
            # else: parked already (handed back), with a mark no greater: it stands for both
        if added:
            self._marks[mark] = self._marks.get(mark, 0) + added

    def route(self, owner_of: Callable[[bytes], Address | None]) -> set[Address]:
        """Move every parked key to its owner's queue (the end of it); a key ``owner_of``
        finds no owner for stays parked. Returns the owners that got keys. O(n)."""
        parked, self.parked = self.parked, {}
        woken: set[Address] = set()
        for message, mark in parked.items():
            owner = owner_of(message)
            if owner is None:
                self.parked[message] = mark
                continue
            queue = self.queues.get(owner)
            if queue is None:
                queue = self.queues[owner] = {}
            self._join(queue, message, mark)
            woken.add(owner)
        return woken

    def take(self, owner: Address, limit: int) -> list[bytes]:
        """Up to ``limit`` of ``owner``'s queued keys, oldest first, now being sent.
        ValueError if a batch of ``owner``'s is being sent. O(n)."""
        if owner in self.flying:
            raise ValueError(f"a batch to {owner} is being sent already")
        queue = self.queues.get(owner, {})
        if len(queue) <= limit:
            batch, self.queues[owner] = queue, {}
        else:
            batch = {}
            for message in queue:
                batch[message] = queue[message]
                if len(batch) == limit:
                    break
            for message in batch:
                del queue[message]
        self.flying[owner] = batch
        return list(batch)

    def sent(self, owner: Address) -> int:
        """``owner``'s batch reached Redis: forgotten. Returns its size. O(n)."""
        batch = self.flying.pop(owner, {})
        for mark in batch.values():
            self._forget(mark)
        return len(batch)

    def failed(self, owner: Address) -> None:
        """``owner``'s batch failed: back at the front of its queue. O(n + queue)."""
        batch = self.flying.pop(owner, None)
        if batch:
            self.queues[owner] = self._joined(batch, self.queues.get(owner, {}))

    def hand_back(self, owner: Address) -> None:
        """Park ``owner``'s queued keys again, ahead of the parked ones (routed again by
        the next :meth:`route`: to a new owner, after a failover). O(n + parked)."""
        queue = self.queues.pop(owner, None)
        if queue:
            self.parked = self._joined(queue, self.parked)

    def forget(self, owner: Address) -> None:
        """``owner``'s sender ended: its queue, empty, forgotten. ValueError if it holds
        keys. O(1)."""
        if self.holds(owner):
            raise ValueError(f"{owner} holds keys: its sender cannot end")
        self.queues.pop(owner, None)

    def clear(self) -> int:
        """Forget every key held (the publisher closed). Returns how many. O(marks)."""
        held = self.held
        self.parked, self.queues, self.flying, self._marks = {}, {}, {}, {}
        return held

    def _join(self, queue: dict[bytes, int], message: bytes, mark: int) -> None:
        """Add a held key to ``queue`` (its end); one copy of it there already: one
        key, the smaller mark."""
        old = queue.get(message)
        if old is None:
            queue[message] = mark
        else:
            queue[message] = min(old, mark)
            self._forget(max(old, mark))

    def _joined(self, front: dict[bytes, int], back: dict[bytes, int]) -> dict[bytes, int]:
        """``front``'s keys then ``back``'s, a key in both once with the smaller mark."""
        joined = dict(front)
        for message, mark in back.items():
            self._join(joined, message, mark)
        return joined

    def _forget(self, mark: int) -> None:
        count = self._marks[mark] - 1
        if count:
            self._marks[mark] = count
        else:
            del self._marks[mark]

    def _check_invariants(self) -> None:
        """AssertionError unless the marks count the keys held, ascending (for the
        tests, after every change). O(keys held)."""
        counts: dict[int, int] = {}
        queues = [self.parked, *self.queues.values(), *self.flying.values()]
        for queue in queues:
            for mark in queue.values():
                assert mark <= self.routed_upto, (mark, self.routed_upto)
                counts[mark] = counts.get(mark, 0) + 1
        assert counts == self._marks, (counts, self._marks)
        assert list(self._marks) == sorted(self._marks), self._marks
