"""Run the broker simulation: ``python -m purgatory_broker.sim [options]``.

The same program as the console script ``purgatory-broker-simulate`` (see
:mod:`purgatory_broker.sim.cli`; ``--help`` lists the options).
"""

from __future__ import annotations

import sys

from purgatory_broker.sim.cli import main

if __name__ == "__main__":
    sys.exit(main())
