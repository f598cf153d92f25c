"""Callbacks that misbehave, and re-entrant calls: the core stays consistent.

A timer task or an operation callback may raise anything: an ``Exception``, a
``BaseException`` that is not one (``asyncio.CancelledError``, ``GeneratorExit``,
``trio.Cancelled`` raised by hand), or ``KeyboardInterrupt`` / ``SystemExit``.
The rules these tests pin down:

* anything but ``KeyboardInterrupt`` and ``SystemExit`` is a callback error like
  any other: reported (here, with no loop running: raised after the pass), and
  the pass goes on;
* ``KeyboardInterrupt`` and ``SystemExit`` propagate at once, leaving the timer
  and the purgatory consistent: what did not run yet stays scheduled and
  watched, and runs at the next poll or walk.

The purgatory's own methods may be called from its callbacks on the key being
walked (``check_and_complete``, ``cancel_for_key``, ``purge_completed``) and do
what they say; ``try_complete_else_watch`` validates everything before it
changes anything.

Real-loop versions (the reaper never dies) are in ``test_backends.py``.
"""

from __future__ import annotations


#: BaseExceptions that are callback errors, not interrupts


# -- the timer ------------------------------------------------------------------------


# -- the purgatory: errors from callbacks --------------------------------------------


# -- the purgatory: re-entrant calls --------------------------------------------------


# -- the purgatory: validation before any change --------------------------------------


# -- the purge counts cancelled operations -------------------------------------------
