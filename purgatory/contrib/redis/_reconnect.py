"""The waits before reconnect attempts (both sides of a bridge keep one schedule).

A connection that had worked for at least ``reconnect_max_ms`` and fails is retried at
once (a dropped connection to a Redis that is up comes back within a round trip); the
next failures wait a capped exponential with jitter, and never more than
``reconnect_max_ms`` between two attempts (so at most that long between Redis answering
again and the next attempt). A connection that fails sooner after it began working does
not restart the schedule, so nothing retries in a busy loop. The table and the rule are
:class:`ReconnectSchedule`'s.
"""

from __future__ import annotations

import random

__all__ = ["ReconnectSchedule"]


class ReconnectSchedule:
    """The waits before reconnect attempts, in integer milliseconds (both sides of a bridge
    keep one). O(1) per call.

    ``connected(now_ms)`` when a connection is confirmed working (the subscription
    confirmed and re-checked; a pipeline sent), ``failed(now_ms)`` when a connection or an
    attempt fails: it returns the wait before the next attempt. With ``min_ms`` 10 and
    ``max_ms`` 500 (the defaults of :class:`KeyEvents` and :class:`KeyPublisher`):

    ===============================================  ==============================
    failure                                          wait before the next attempt
    ===============================================  ==============================
    of a connection that had worked >= ``max_ms``    0 (retry at once)
    then the 2nd, 3rd, 4th, 5th... consecutive one   5-10, 10-20, 20-40, 40-80 ms...
    ... until the ceiling ``max_ms``                 250-500 ms each (capped)
    ===============================================  ==============================

    The k-th consecutive failure (k >= 2) waits a draw, uniform in [c/2, c], of
    c = min(``max_ms``, ``min_ms`` * 2**(k-2)): the jitter keeps a fleet of workers that
    lost Redis together from reconnecting in step, the ceiling bounds how long after
    Redis answers again the next attempt comes (at most ``max_ms``). The retry at once
    brings a dropped connection to a Redis that is up (``CLIENT KILL``, a proxy's idle
    timeout) back within a round trip. A connection that fails less than ``max_ms``
    after it began working does not reset the count (the waits go on growing): a Redis
    that accepts and then drops, or a ``refresh`` that keeps failing, costs at most one
    immediate retry per ``max_ms``, never a busy loop. Before any connection worked (a
    process starting while Redis is down), the first failure counts as the second.
    """

    __slots__ = ("failures", "max_ms", "min_ms", "up_since_ms", "_random")

    def __init__(self, min_ms: int, max_ms: int, rng: random.Random | None = None) -> None:
        self.min_ms = min_ms
        self.max_ms = max_ms
        #: consecutive failures since a connection last worked for max_ms (1 at the start:
        #: the first attempt of a process is no retry after a working connection)
        self.failures = 1
        #: when the current connection began working (None: no connection works now)
        self.up_since_ms: int | None = None
        self._random = rng if rng is not None else random.Random()

    def connected(self, now_ms: int) -> None:
        """A connection works (from ``now_ms`` on, if it did not already)."""
        if self.up_since_ms is None:
            self.up_since_ms = now_ms

    def failed(self, now_ms: int) -> int:
        """A connection or an attempt failed at ``now_ms``: the wait before the next one."""
        up_since, self.up_since_ms = self.up_since_ms, None
        if up_since is not None and now_ms - up_since >= self.max_ms:
            self.failures = 0  # it had worked long enough: start the schedule again
        self.failures += 1
        if self.failures == 1:
            return 0
        ceiling = min(self.max_ms, self.min_ms << min(self.failures - 2, 30))
        return round(self._random.uniform(ceiling / 2, ceiling))
