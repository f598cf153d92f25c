"""The broker simulation, the project's main job: an application over the broker.

One broker leads a topic's partitions, replicated to simulated followers; open
loop producers and long-polling consumers load it; one follower stalls and one
partition changes leader; the run ends with a summary, a Parquet trace and a
read-back of every acknowledged record from the reopened logs. It uses only the
public APIs of :mod:`purgatory`, :mod:`purgatory_broker.broker` and
:mod:`purgatory_broker.tracing` (a test checks it).

* :mod:`.config`: :class:`SimulationConfig`, every setting once, with its help;
* :mod:`.clients`: producers and consumers;
* :mod:`.simulation`: the run, in phases: the broker, followers, scenario; its
  clock (real time, or virtual with ``virtual_time``); :func:`run`;
* :mod:`.result`: what each phase found, and the flat summary made from it;
* :mod:`.hooks`: the process-wide hooks of a run (the collector's, the signals'),
  each put back when it ends;
* :mod:`.summary`: the figures and their grouped table;
* :mod:`.progress`: the progress line, fitted to the terminal;
* :mod:`.paths`: the output paths, checked before the run;
* :mod:`.readback`: the check of every acknowledged record;
* :mod:`.cli`: the command line, generated from the config's fields
  (``purgatory-broker-simulate --help``, or ``python -m purgatory_broker.sim --help``).
"""

from .cli import build_parser, config_from_args, main
from .config import SimulationConfig
from .readback import read_back
from .simulation import TOPIC, run, run_async
from .summary import SUMMARY_GROUPS, SUMMARY_KEYS, format_summary, summarize

__all__ = [
    "SUMMARY_GROUPS",
    "SUMMARY_KEYS",
    "TOPIC",
    "SimulationConfig",
    "build_parser",
    "config_from_args",
    "format_summary",
    "main",
    "read_back",
    "run",
    "run_async",
    "summarize",
]
