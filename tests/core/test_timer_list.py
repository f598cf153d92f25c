"""Kafka's TimerTaskListTest, ported: buckets share one counter while tasks move and cancel."""

from __future__ import annotations

from purgatory.core.timer_list import TaskCounter, TaskSink, TimerTask, TimerTaskList
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
    sink = Sink()
    lists[2].flush(sink)
    assert counter.value == 10 and len(sink.reinserted) == 5 and sink.ran == []
    assert lists[2].expiration_ms == -1


class Sink(TaskSink):
    """Records what a flush hands it."""

    def __init__(self) -> None:
        self.ran: list[TimerTask] = []
        self.reinserted: list[TimerTask] = []

    def _run_due(self, task: TimerTask) -> None:
        self.ran.append(task)

    def _reinsert(self, task: TimerTask) -> None:
        self.reinserted.append(task)


def test_a_finest_bucket_runs_its_tasks_and_a_coarser_one_reinserts_them() -> None:
    counter = TaskCounter()
    finest, coarse = TimerTaskList(counter, finest=True), TimerTaskList(counter)
    tasks = [TimerTask(1) for _ in range(4)]
    for i, task in enumerate(tasks):
        (finest if i % 2 else coarse).add(task, 10)
    sink = Sink()
    finest.flush(sink)
    coarse.flush(sink)
    assert sink.ran == tasks[1::2] and sink.reinserted == tasks[0::2]
    assert counter.value == 0 and not finest and not coarse
