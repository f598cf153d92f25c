"""The waits before reconnect attempts (both sides of a bridge keep one schedule).

A connection that had worked for at least ``reconnect_max_ms`` and fails is retried at
once (a dropped connection to a Redis that is up comes back within a round trip); the
next failures wait a capped exponential with jitter, and never more than
``reconnect_max_ms`` between two attempts (so at most that long between Redis answering
again and the next attempt). A connection that fails sooner after it began working does
not restart the schedule, so nothing retries in a busy loop. The table and the rule are
:class:`ReconnectSchedule`'s.

Probes: back within a probe interval, whatever the backoff. Once the waits have grown
past ``probe_ms`` (50 ms by default in the bridge), the side does not sleep through the
wait: every ``probe_ms`` it probes Redis (a TCP connect and an inline ``PING``; a
connect to a closed port on the same host is refused in microseconds), and the first
probe that is answered ends the wait. So the attempt comes at most ``probe_ms`` (plus a
round trip) after Redis answers again, after an outage of any length, while the attempts
themselves (a client, a connect, a ``SUBSCRIBE``) keep to the backoff. A Redis that
answers probes but fails attempts (full at ``maxclients``, loading its data) would turn
the probes into attempts every ``probe_ms``: so after an attempt started by a probe
fails, answered probes end no wait until a probe has failed again (or a connection has
worked), and the waits go on growing. Worked example (``min_ms`` 10, ``max_ms`` 500,
``probe_ms`` 50; Redis killed at 0 ms, a connection that had worked; accepting again at
1,020 ms):

==========  ==========================================  ===============================
time (ms)   event                                       then
==========  ==========================================  ===============================
0           attempt 1 fails (refused)                   retry at once
0           attempt 2 fails: wait 5-10 ms               sleep it (not over probe_ms)
~8 to ~60   attempts 3, 4 fail: waits 10-20, 20-40 ms   sleep them
~60         attempt 5 fails: wait 40-80 ms, say 70      probe at 110 (refused), sleep on
130         attempt 6 fails: wait 80-160 ms, say 120    probes at 180, 230 (refused)
250 ...     waits of 160-500 ms between attempts        a probe every 50 ms, refused
1,020       Redis accepts connections again
<= 1,070    the next probe is answered                  attempt now: subscribed
==========  ==========================================  ===============================
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

    With ``probe_ms`` (None: no probes), a wait longer than ``probe_ms`` is probed
    (see the module doc): :meth:`probing` says whether to probe a wait,
    :meth:`probed` takes each probe's outcome and says whether the attempt starts now.
    """

    __slots__ = (
        "failures",
        "max_ms",
        "min_ms",
        "probe_ms",
        "up_since_ms",
        "_armed",
        "_by_probe",
        "_random",
    )

    def __init__(
        self,
        min_ms: int,
        max_ms: int,
        rng: random.Random | None = None,
        probe_ms: int | None = None,
    ) -> None:
        self.min_ms = min_ms
        self.max_ms = max_ms
        #: the interval between probes during a wait longer than it (None: no probes)
        self.probe_ms = probe_ms
        #: consecutive failures since a connection last worked for max_ms (1 at the start:
        #: the first attempt of a process is no retry after a working connection)
        self.failures = 1
        #: when the current connection began working (None: no connection works now)
        self.up_since_ms: int | None = None
        #: an answered probe ends the wait (False after an attempt a probe started
        #: failed; True again after a probe fails or a connection works)
        self._armed = True
        #: the attempt going on was started by an answered probe
        self._by_probe = False
        self._random = rng if rng is not None else random.Random()

    def connected(self, now_ms: int) -> None:
        """A connection works (from ``now_ms`` on, if it did not already)."""
        if self.up_since_ms is None:
            self.up_since_ms = now_ms
        self._armed = True
        self._by_probe = False

    def failed(self, now_ms: int) -> int:
        """A connection or an attempt failed at ``now_ms``: the wait before the next one."""
        up_since, self.up_since_ms = self.up_since_ms, None
        if self._by_probe:  # probes are answered, attempts fail: probes wait for a failure
            self._armed = self._by_probe = False
        if up_since is not None and now_ms - up_since >= self.max_ms:
            self.failures = 0  # it had worked long enough: start the schedule again
        self.failures += 1
        if self.failures == 1:
            return 0
        ceiling = min(self.max_ms, self.min_ms << min(self.failures - 2, 30))
        return round(self._random.uniform(ceiling / 2, ceiling))

    def probing(self, wait_ms: int) -> bool:
        """Whether a wait of ``wait_ms`` is probed (every ``probe_ms``, the first probe
        ``probe_ms`` after it begins): probes are on and the wait is longer. O(1)."""
        return self.probe_ms is not None and wait_ms > self.probe_ms

    def probed(self, answered: bool) -> bool:
        """A probe during a wait was ``answered`` or not: True if the attempt starts now
        (the wait ends). O(1)."""
        if not answered:
            self._armed = True
            return False
        if self._armed:
            self._by_probe = True
            return True
        return False
