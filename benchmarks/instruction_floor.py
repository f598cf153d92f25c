"""Instructions per operation, one part at a time: what the timer and the purgatory cost
beside what Python itself costs around them.

Usage: python benchmarks/instruction_floor.py [--kinds K1,K2] [--ops N]

Each kind is a loop that does one more part of an operation than the kind before it
(iterate; create the task; add and cancel it), or the loop's own ``call_later``
instead. Each runs in a fresh process under valgrind's cachegrind (Debian's
``valgrind`` package), with ``PYTHONHASHSEED=0``, once with ``--ops`` operations and
once with one. The difference, divided by ``ops - 1``, is the instructions of one
operation: the set-up cancels out, and the count does not depend on the machine's
load (BENCHMARKS.md, "Where the core's time goes"). The kinds:

* timer, uvloop, 20,000 tasks pending 10-600 s ahead: ``loop`` (iterate over the
  delays), ``task`` (+ create a ``TimerTask`` subclass), ``task-init`` (a subclass
  with an ``__init__`` of its own that calls ``super().__init__``, instead),
  ``add+cancel`` (``task`` + add it and cancel it), ``call_later+cancel`` (uvloop's
  instead), ``asyncio-call_later`` (asyncio's);
* schedule+fire, uvloop, tasks 0-50 ms ahead, run by the reaper: ``fire-tasks`` (the
  tasks created and kept), ``fire-run`` (created, kept, then each one's ``run`` called
  from C in the order a timer runs them, with no timer: the floor ``fire`` stands on),
  ``fire`` (created, added, run), ``fire-call_later``;
* the purgatory, uvloop, one of 100 keys: ``request-loop``, ``request-op`` (+ create
  an operation), ``request`` (+ watch it and complete it from outside).

The core is the one installed (``PURGATORY_NO_EXTENSIONS=1``: the pure one).
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop
from _cli import Parser, integer

from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    SystemTimer,
    TimerTask,
    TopicPartition,
)

PENDING = 20_000
KEYS = [TopicPartition("floor", i) for i in range(100)]
RUN = operator.methodcaller("run")  # a task's run, called from C as a timer calls it


class Noop(TimerTask):
    __slots__ = ()

    def run(self) -> None:
        pass


class Stateful(Noop):
    """A task with state of its own, made as timer_bench.py's are: its ``__init__``
    calls ``super().__init__``."""

    __slots__ = ("box",)

    def __init__(self, delay_ms: int, box: list[int]) -> None:
        super().__init__(delay_ms)
        self.box = box


class Op(DelayedOperation[None]):
    __slots__ = ()

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        return None


def _noop() -> None:
    pass


def _delays(ops: int, draw: int, low: int, high: int) -> list[int]:
    """The first ``ops`` of ``max(ops, draw)`` delays drawn: both runs of a kind draw
    as many (``draw``), so that drawing cancels out of their difference."""
    rng = random.Random(1)
    return [rng.randint(low, high) for _ in range(max(ops, draw))][:ops]


def _deadline_order(draw: int) -> list[int]:
    """The indices of ``draw`` delays of 0-50 ms (``_delays``), by delay, stably."""
    delays = _delays(draw, draw, 0, 50)
    return sorted(range(draw), key=delays.__getitem__)


async def timer_kind(kind: str, ops: int, draw: int) -> None:
    """A timer with PENDING tasks far ahead, then ``ops`` operations of ``kind``
    (a loop of its own each: no test of the kind inside the loop)."""
    delays = _delays(ops, draw, 10_000, 600_000)
    call_later = asyncio.get_running_loop().call_later
    async with SystemTimer("floor") as timer:
        pending = [Noop(d) for d in _delays(PENDING, 0, 10_000, 600_000)]
        for task in pending:
            timer.add(task)
        add = timer.add
        if kind == "loop":
            for _d in delays:
                pass
        elif kind == "task":
            for d in delays:
                Noop(d)
        elif kind == "task-init":
            box = [0]
            for d in delays:
                Stateful(d, box)
        elif kind == "add+cancel":
            for d in delays:
                task = Noop(d)
                add(task)
                task.cancel()
        else:  # the loop's call_later
            for d in delays:
                call_later(d / 1000, _noop).cancel()
        for task in pending:
            task.cancel()


async def fire_kind(kind: str, ops: int, draw: int) -> None:
    """``ops`` tasks 0-50 ms ahead, run by the reaper (or the loop's call_later)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    left = [ops]

    def hit() -> None:
        left[0] -= 1
        if not left[0]:
            done.set_result(None)

    class Hit(TimerTask):
        __slots__ = ()

        def run(self) -> None:
            hit()

    delays = _delays(ops, draw, 0, 50)
    async with SystemTimer("floor") as timer:
        if kind == "fire-tasks":
            kept = [Hit(d) for d in delays]
            del kept
            return
        if kind == "fire-run":
            # the order a timer runs them in, sorted over all the delays drawn (so
            # that sorting cancels out of the difference, as drawing does)
            order = [i for i in _deadline_order(max(ops, draw)) if i < ops]
            kept = [Hit(d) for d in delays]
            for _ in map(RUN, map(kept.__getitem__, order)):
                pass
            return
        for d in delays:
            if kind == "fire":
                timer.add(Hit(d))
            else:
                loop.call_later(d / 1000, hit)
        await done


async def request_kind(kind: str, ops: int, draw: int) -> None:
    """``ops`` requests on one of 100 keys, completed from outside at once; the loop
    gets a turn every 200, as a server gives it."""
    async with DelayedOperationPurgatory[Op]("floor") as purgatory:
        watch = purgatory.try_complete_else_watch
        for start in range(0, ops, 200):
            if kind == "request-loop":
                for i in range(start, min(start + 200, ops)):
                    KEYS[i % 100]
            elif kind == "request-op":
                for i in range(start, min(start + 200, ops)):
                    KEYS[i % 100]
                    Op(200)
            else:
                for i in range(start, min(start + 200, ops)):
                    op = Op(200)
                    watch(op, (KEYS[i % 100],))
                    op.force_complete()
            await asyncio.sleep(0)


KINDS: dict[str, Callable[[str, int, int], Coroutine[Any, Any, None]]] = {
    **dict.fromkeys(
        ["loop", "task", "task-init", "add+cancel", "call_later+cancel", "asyncio-call_later"],
        timer_kind,
    ),
    **dict.fromkeys(["fire-tasks", "fire-run", "fire", "fire-call_later"], fire_kind),
    **dict.fromkeys(["request-loop", "request-op", "request"], request_kind),
}


def child(kind: str, ops: int, draw: int) -> None:
    runner = asyncio.run if kind.startswith("asyncio-") else uvloop.run
    runner(KINDS[kind](kind, ops, draw))


def instructions(kind: str, ops: int, draw: int) -> int:
    """The instructions of one process running ``ops`` operations of ``kind``."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    command += [sys.executable, __file__, "--child", kind, "--child-ops", str(ops)]
    command += ["--draw", str(draw)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode or found is None:
        last = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{kind}: the run under valgrind failed: {last[0]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds")
    parser.add_argument("--ops", type=integer(2), default=20_000, help="operations per run")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-ops", type=integer(1), default=1, help=argparse.SUPPRESS)
    parser.add_argument("--draw", type=integer(0), default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"argument --kinds: unknown {', '.join(unknown)}; known: {', '.join(KINDS)}")
    if args.child is not None:
        child(args.child, args.child_ops, args.draw)
        return
    if shutil.which("valgrind") is None:
        parser.fail(1, "valgrind is not installed (Debian: apt-get install valgrind)")
    import purgatory

    print(f"{'compiled' if purgatory.compiled else 'pure'} core; {args.ops} operations a run")
    for kind in kinds:
        try:
            many, one = (instructions(kind, n, args.ops) for n in (args.ops, 1))
        except RuntimeError as exc:
            parser.fail(1, str(exc))
        per_op = (many - one) / (args.ops - 1)
        print(f"{kind:20} {per_op:9,.0f} instructions an operation", flush=True)


if __name__ == "__main__":
    main()
