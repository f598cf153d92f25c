"""Run the broker simulation: producers, consumers and followers around the purgatory.

    python broker/examples/simulate.py                      # the default run (20 s of load)
    python broker/examples/simulate.py --duration-s 5 --no-progress --trace-path out/short.parquet

Prints a live progress bar on stderr (when it is a terminal), then a summary
table; writes the trace of every delayed operation as Parquet; reads every
acknowledged record back from the reopened logs and exits with status 1, loudly,
if one is missing, changed or out of order. Ctrl-C (or SIGTERM) stops the load early
and prints the summary of what ran (exit status 130, or 143); a bad option or an
output path it could not write fails at once with one line (exit status 2). The
options are :class:`purgatory_broker.sim.SimulationConfig`'s fields (``--help`` lists
them with their defaults); see :mod:`purgatory_broker.sim` for what runs.
"""

from __future__ import annotations

import sys

from purgatory_broker.sim import main

if __name__ == "__main__":
    sys.exit(main())
