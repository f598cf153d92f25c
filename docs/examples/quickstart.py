"""The example of the documentation's front page: wait for a key to reach a value."""

from __future__ import annotations

import asyncio

from purgatory import DelayedOperation, DelayedOperationPurgatory

values: dict[str, int] = {}


class WaitFor(DelayedOperation[int]):
    def __init__(self, key: str, target: int, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.key, self.target = key, target

    def try_complete(self) -> bool:
        return values.get(self.key, 0) >= self.target and self.force_complete()

    def on_complete(self) -> int:  # exactly once: early, or at the timeout
        return values.get(self.key, 0)


async def main() -> int:
    async with DelayedOperationPurgatory[WaitFor]("demo") as purgatory:
        op = WaitFor("offset", 42, timeout_ms=30_000)
        purgatory.try_complete_else_watch(op, [op.key])  # False: not yet
        values["offset"] = 42
        purgatory.check_and_complete("offset")  # completes it, long before 30 s
        result = await op
    print(result, op.outcome)  # 42 Outcome.COMPLETED
    return result


if __name__ == "__main__":
    asyncio.run(main())
