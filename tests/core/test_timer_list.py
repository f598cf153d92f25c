"""Kafka's TimerTaskListTest, ported: buckets share one counter while tasks move and cancel."""

from __future__ import annotations

from purgatory.core.timer_list import TaskCounter, TimerTask, TimerTaskList
from purgatory.testing import ManualClock

from ..timer_kit import Recorder


def test_buckets_share_one_counter_while_tasks_move_and_cancel() -> None:
    counter = TaskCounter()
    clock = ManualClock()
    lists = [TimerTaskList(counter) for _ in range(3)]
    log: list[tuple[object, int]] = []
    tasks = [Recorder(10, i, clock, log) for i in range(10)]
    for task in tasks:
        lists[0].add(task, 10)
    assert counter.value == 10
    # more tasks into the second list
    more = [Recorder(10, i, clock, log) for i in range(10, 20)]
    for task in more:
        lists[1].add(task, 10)
    assert counter.value == 20
    # re-adding the first tasks to the third list moves them: the count stays
    for task in tasks:
        lists[2].add(task, 15)
    assert counter.value == 20
    assert len(lists[0]) == 0 and len(lists[2]) == 10
    # cancelling half of them
    for task in tasks[:5]:
        task.cancel()
    assert counter.value == 15
    for bucket in lists:
        bucket._check_invariants()
    flushed: list[TimerTask] = []
    lists[2].flush(flushed.append)
    assert counter.value == 10 and len(flushed) == 5
    assert lists[2].expiration_ms == -1
