"""The progress line: what the run is doing, fitted to the terminal's width.

One line, redrawn in place (``\\r``), so it must never be wider than the terminal
(a wider line wraps and every redraw leaves a new line behind). Every figure has
its label. :func:`format_progress` builds it for a width: the fields, most
important first, are kept while they fit in ``width - 1`` columns (the last
column is left free: some terminals wrap when it is written) next to a bar of
at least :data:`MIN_BAR` cells, which then grows into what is left, up to
:data:`MAX_BAR`; on a very narrow terminal the bar goes first. At 80 columns::

    [#####............] 6.2/20 s | 9,312 produce req | waiting: 25 produce, 2 fetch

and the ISR (``smallest ISR 2/3``: the smallest in-sync replica set over the
partitions, of 3 replicas) joins on wider terminals.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_BAR", "MIN_BAR", "ProgressState", "format_progress"]

#: the bar's width bounds, in cells
MIN_BAR = 10
MAX_BAR = 30


@dataclass(frozen=True, slots=True)
class ProgressState:
    """The figures the progress line shows."""

    elapsed_s: float
    duration_s: float
    produce_requests: int
    waiting_produces: int
    waiting_fetches: int
    smallest_isr: int  # the smallest ISR over the partitions, replicas in it
    replicas: int  # replicas per partition (leader + followers)
    draining: bool = False


def format_progress(state: ProgressState, width: int) -> str:
    """The progress line for a terminal ``width`` columns wide; never longer than
    ``width - 1`` characters (empty if even the time does not fit). O(1)."""
    limit = max(0, width - 1)
    elapsed = min(state.elapsed_s, state.duration_s)
    when = (
        f"draining, {state.elapsed_s:.1f} s"
        if state.draining
        else f"{elapsed:.1f}/{state.duration_s:g} s"
    )
    fields = [
        when,
        f"{state.produce_requests:,} produce req",
        f"waiting: {state.waiting_produces} produce, {state.waiting_fetches} fetch",
        f"smallest ISR {state.smallest_isr}/{state.replicas}",
    ]
    budget = limit - (MIN_BAR + 3)  # "[", the bar, "] "
    if budget < len(fields[0]):
        budget = limit  # too narrow for a bar
    text = ""
    for field in fields:
        candidate = f"{text} | {field}" if text else field
        if len(candidate) > budget:
            break
        text = candidate
    room = limit - len(text) - 3  # "[" "]" and a space
    if room >= MIN_BAR:
        cells = min(MAX_BAR, room)
        filled = int(min(1.0, elapsed / state.duration_s) * cells)
        text = f"[{'#' * filled}{'.' * (cells - filled)}] {text}"
    return text
