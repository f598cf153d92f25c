"""Test kit for the purgatory: a controllable operation and a purgatory on a manual clock."""

from __future__ import annotations

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer
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


def manual_purgatory(
    clock: ManualClock, purge_interval: int = 1000, **kwargs: int
) -> DelayedOperationPurgatory[MockOp]:
    timer = SystemTimer("test", clock=clock, **kwargs)
    return DelayedOperationPurgatory(
        "test", timer=timer, purge_interval=purge_interval, reaper_enabled=False
    )
