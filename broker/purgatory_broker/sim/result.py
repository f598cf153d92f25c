"""What a run found, phase by phase, and the flat summary dict made from it.

A run goes through four phases (:mod:`.simulation`): setup, load, drain, summary.
Each of the middle two returns what it measured (:class:`LoadResult`,
:class:`DrainResult`); the summary phase adds the broker's figures, the read-back
(:class:`~.readback.ReadBack`) and the trace's fate into one :class:`RunResult`.
:meth:`RunResult.summary` flattens that into the dict of
:data:`~.summary.SUMMARY_KEYS` (plus ``read_back_problems`` and, if the trace could
not be written, ``trace_error``) that :func:`~.simulation.run` returns, so a sweep can
put one run per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from purgatory import PurgatoryStatistics

from .readback import ReadBack

__all__ = ["DrainResult", "LoadResult", "RunResult"]


@dataclass(frozen=True, slots=True)
class LoadResult:
    """The load phase: the producers ran for ``load_s`` (the duration, or less if a
    signal ended it) and sent ``sent`` requests."""

    load_s: float
    sent: int
    behind_s: float  # the furthest behind schedule a producer was when it stopped


@dataclass(frozen=True, slots=True)
class DrainResult:
    """The drain phase: the wait for the produces in flight, then the clients' last
    round; both purgatories' statistics once every client stopped."""

    drain_s: float
    cut: bool  # the wait hit its bound (or a second signal cut it)
    produce: PurgatoryStatistics
    fetch: PurgatoryStatistics


@dataclass(frozen=True, slots=True)
class RunResult:
    """Everything a run found. ``figures`` are :func:`~.summary.summarize`'s (the
    broker's counters and the trace's percentiles, keyed as the summary table)."""

    figures: dict[str, Any]
    offered_produce_rate: float
    load: LoadResult
    drain: DrainResult
    interrupted: str | None  # the name of the signal that ended the load early
    unanswered_produces: int  # never answered: the broker closed first
    log_flushes: int
    read_back: ReadBack
    trace_path: str | None  # where the trace was written (None: not asked, or failed)
    trace_error: str | None  # why it could not be written

    def summary(self) -> dict[str, Any]:
        """The flat summary dict (see the module doc). O(keys)."""
        load = self.load
        summary = dict(self.figures)
        summary.update(
            load_s=round(load.load_s, 2),
            offered_produce_rate=self.offered_produce_rate,
            achieved_produce_rate=round(load.sent / max(load.load_s, 1e-9), 1),
            produce_behind_schedule_s=round(load.behind_s, 2),
            drain_s=round(self.drain.drain_s, 2),
            drain_cut=self.drain.cut,
            interrupted=self.interrupted,
            unanswered_produces=self.unanswered_produces,
            log_flushes=self.log_flushes,
        )
        summary.update(self.read_back.figures())
        summary["trace_path"] = self.trace_path
        if self.trace_error is not None:
            summary["trace_error"] = self.trace_error
        return summary
