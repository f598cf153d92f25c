"""One purgatory program on asyncio and on trio, through anyio.

A producer task appends to a log and tells the purgatory; the main task waits for an
offset. The code uses only anyio and purgatory, so ``anyio.run`` runs it unchanged on
either backend. (Nothing waits for a timeout here: the producer completes the
operation at once.)
"""

from __future__ import annotations

import anyio

from purgatory import DelayedOperation, DelayedOperationPurgatory, TopicPartition

TP = TopicPartition("orders", 0)


class Log:
    def __init__(self) -> None:
        self.end_offset = 0


class WaitForOffset(DelayedOperation[int]):
    def __init__(self, log: Log, offset: int, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.log, self.offset = log, offset

    def try_complete(self) -> bool:
        return self.log.end_offset >= self.offset and self.force_complete()

    def on_complete(self) -> int:
        return self.log.end_offset


# [start-anyio]
async def produce(log: Log, purgatory: DelayedOperationPurgatory[WaitForOffset]) -> None:
    for _ in range(3):
        await anyio.sleep(0)  # let the other task run
        log.end_offset += 1
        purgatory.check_and_complete(TP)


async def main(backend: str) -> int:
    log = Log()
    async with DelayedOperationPurgatory[WaitForOffset]("fetch") as purgatory:
        op = WaitForOffset(log, 3, timeout_ms=30_000)
        purgatory.try_complete_else_watch(op, [TP])
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce, log, purgatory)
            offset = await op
    print(backend, "offset", offset, op.outcome.name)
    return offset


def run_on_both() -> list[int]:
    return [anyio.run(main, backend, backend=backend) for backend in ("asyncio", "trio")]


# [end-anyio]

if __name__ == "__main__":
    run_on_both()
