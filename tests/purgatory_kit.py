"""Test kit for the purgatory: a controllable operation and a purgatory on a manual clock."""

from __future__ import annotations

from collections.abc import Callable

from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    SystemTimer,
)
from purgatory.core import Purgatory, WheelTimer
from purgatory.testing import ManualClock


class MockOp(DelayedOperation[str]):
    """Completes when ``completable`` is set; records its callbacks."""

    def __init__(self, delay_ms: int, name: str = "op") -> None:
        super().__init__(delay_ms)
        self.name = name
        self.completable = False
        self.completions = 0
        self.expirations = 0
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        if self.completable:
            return self.force_complete()
        return False

    def on_complete(self) -> str:
        self.completions += 1
        return f"{self.name}:{'expired' if self._expiring else 'done'}"

    def on_expiration(self) -> None:
        self.expirations += 1


def manual_purgatory(clock: ManualClock, purge_interval: int = 1000, **kwargs: int) -> Purgatory:
    """The synchronous core's purgatory on a core timer: drive it with clock + poll.

    Kafka's filing (see tests/conftest.py): on the manual clock, expiries on time."""
    timer = WheelTimer("test", clock=clock, may_expire_early=True, **kwargs)
    return Purgatory("test", timer=timer, purge_interval=purge_interval)


def manual_shell_purgatory(clock: ManualClock) -> DelayedOperationPurgatory[MockOp]:
    """The async shell's purgatory on a manual clock, its reaper off (Kafka's filing)."""
    timer = SystemTimer("test", clock=clock, may_expire_early=True)
    return DelayedOperationPurgatory("test", timer=timer, reaper_enabled=False)


class Raising(MockOp):
    def __init__(self, delay_ms: int, where: str) -> None:
        super().__init__(delay_ms, where)
        self.where = where

    def try_complete(self) -> bool:
        if self.where == "try_complete":
            raise RuntimeError("try_complete failed")
        return super().try_complete()

    def on_complete(self) -> str:
        super().on_complete()
        if self.where == "on_complete":
            raise RuntimeError("on_complete failed")
        return "fine"


class Hostile(MockOp):
    """An operation whose ``try_complete`` runs ``action`` (once) first."""

    def __init__(self, delay_ms: int, name: str = "hostile") -> None:
        super().__init__(delay_ms, name)
        self.action: Callable[[], object] | None = None
        self.seen: list[object] = []

    def try_complete(self) -> bool:
        action, self.action = self.action, None
        if action is not None:
            self.seen.append(action())
        return super().try_complete()


async def await_outcome(op: MockOp) -> str:
    return await op
