"""The purge at work: ``purge_interval=1``, three operations on overlapping keys.

r1 waits on t1; r2 on t1 and t2; r3 on t1, t2 and t3. Completing r2 and r3 directly
(not through a key) leaves their entries in the watcher lists until the purge.
"""

from __future__ import annotations

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer
from purgatory.testing import ManualClock


class Never(DelayedOperation[None]):
    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        return None


def main() -> tuple[int, int]:
    timer = SystemTimer("purge", clock=ManualClock())
    purgatory = DelayedOperationPurgatory[Never](
        "purge", timer=timer, purge_interval=1, reaper_enabled=False
    )
    r1, r2, r3 = Never(1_000), Never(1_000), Never(1_000)
    purgatory.try_complete_else_watch(r1, ["t1"])
    purgatory.try_complete_else_watch(r2, ["t1", "t2"])
    purgatory.try_complete_else_watch(r3, ["t1", "t2", "t3"])
    print("watched", purgatory.watched, "delayed", purgatory.num_delayed)
    r2.force_complete()  # estimate 3 - delayed 2 = 1: not above purge_interval
    print("watched", purgatory.watched, "delayed", purgatory.num_delayed)
    r3.force_complete()  # estimate 3 - delayed 1 = 2 > 1: purge
    stats = purgatory.statistics()
    print("watched", stats.watched, "delayed", stats.num_delayed, "keys", stats.keys)
    print("purges", stats.purges, "purged", stats.purged)
    return stats.watched, stats.purges


if __name__ == "__main__":
    main()
