"""A timer task on a real event loop: the reaper runs it when it is due."""

from __future__ import annotations

import asyncio

from purgatory import SystemTimer, TimerTask


class Hello(TimerTask):
    def run(self) -> None:
        print("fired")


async def main() -> int:
    async with SystemTimer("demo") as timer:  # starts the reaper
        timer.add(Hello(delay_ms=250))
        print("scheduled:", len(timer))
        await asyncio.sleep(0.3)  # the reaper runs the task meanwhile
        print("scheduled:", len(timer))
        return len(timer)


if __name__ == "__main__":
    asyncio.run(main())
