"""The delay queue: buckets by expiration, stale entries dropped lazily, earlier work reported."""

from __future__ import annotations

from purgatory.core.delay_queue import DelayQueue
from purgatory.core.timer_list import TaskCounter, TimerTask, TimerTaskList


def _bucket(expiration_ms: int) -> TimerTaskList:
    bucket = TimerTaskList(TaskCounter())
    bucket.expiration_ms = expiration_ms
    return bucket


def test_buckets_come_out_by_expiration_and_only_once_expired() -> None:
    queue = DelayQueue()
    late, early, middle = _bucket(30), _bucket(10), _bucket(20)
    for bucket in (late, early, middle):
        queue.offer(bucket)
    assert len(queue) == 3
    assert queue.poll_expired(9) is None
    assert queue.poll_expired(25) is early
    assert queue.poll_expired(25) is middle
    assert queue.poll_expired(25) is None
    assert queue.buckets() == [late]


def test_an_entry_whose_bucket_moved_on_is_stale_and_skipped() -> None:
    queue = DelayQueue()
    bucket = _bucket(10)
    queue.offer(bucket)
    bucket.expiration_ms = 40  # the wheel reused the bucket for a later tick
    queue.offer(bucket)
    assert len(queue) == 2 and queue.buckets() == [bucket]
    assert queue.poll_expired(15) is None  # the entry at 10 was stale: dropped
    assert len(queue) == 1
    assert queue.poll_expired(40) is bucket


class _Task(TimerTask):
    def run(self) -> None:
        pass


def test_the_earliest_work_skips_and_drops_empty_buckets_and_stale_entries() -> None:
    queue = DelayQueue()
    empty, stale, held = _bucket(10), _bucket(20), _bucket(30)
    task = _Task(0)
    held.add(task, 30)
    for bucket in (empty, stale, held):
        queue.offer(bucket)
    stale.expiration_ms = 50  # moved on without a flush: its entry at 20 is stale
    assert queue.earliest_with_work() == 30
    assert len(queue) == 1 and queue.buckets() == [held]
    assert empty.expiration_ms == -1  # unset: a task added to it offers it again
    assert stale.expiration_ms == 50  # not its entry's: left alone
    task.cancel()
    assert queue.earliest_with_work() is None and len(queue) == 0


def test_on_earlier_hears_only_of_a_new_earliest_expiration() -> None:
    queue = DelayQueue()
    heard: list[int] = []
    queue.on_earlier = heard.append
    for expiration_ms in (50, 70, 20, 20, 30, 5):
        queue.offer(_bucket(expiration_ms))
    assert heard == [50, 20, 5]
