"""The simulation's command line, generated from :class:`~.config.SimulationConfig`.

Each field ``name`` becomes the option ``--name`` with underscores as dashes
(``duration_s`` -> ``--duration-s``), its type from the field's annotation, its
default from the field (shown by ``--help``), its help text from the field's
metadata. So a setting has one name everywhere, and a field added to the config
is on the command line at once. The rules, by annotation:

=================  =============================================================
``int``, ``float``  ``--name VALUE``
``str``             ``--name VALUE``
``bool``            ``--name`` / ``--no-name``
``T | None``        ``--name VALUE``; if the default is not None, ``--no-name``
                    sets None (``--no-trace-path``: no trace)
=================  =============================================================

The command line shows the progress bar by default (:data:`CLI_DEFAULTS`),
when stderr is a terminal. Errors are one line on stderr and exit status 2: a
bad option (argparse's own usage errors included), a bad setting, an output
path the run could not write (checked before it starts). SIGINT (Ctrl-C) and
SIGTERM stop the run early: the summary of what ran is printed, and the exit
status is 130 or 143. Older spellings still work but are not listed:
``--duration``, ``--min-isr``, ``--trace``, ``--no-trace``, ``--quiet``
(:data:`HIDDEN_ALIASES`, :data:`HIDDEN_SWITCHES`).

The program is ``purgatory-broker-simulate`` (the console script), ``python -m
purgatory_broker.sim`` or ``python broker/examples/simulate.py``; its usage and
error lines name it as it was started.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import types
import typing
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from ..cli import Parser
from .config import HELP, SimulationConfig
from .simulation import run
from .summary import format_summary

__all__ = [
    "CLI_DEFAULTS",
    "EPILOG",
    "HIDDEN_ALIASES",
    "HIDDEN_SWITCHES",
    "SIGNAL_EXIT_STATUS",
    "build_parser",
    "config_from_args",
    "main",
]

DESCRIPTION = (
    "Simulate a Kafka broker's produce and fetch purgatories: producers with "
    "exponential arrivals (acks=-1), long-polling consumers, followers "
    "replicating with lag, one follower stalling and recovering (the ISR "
    "shrinks and grows), one leadership change. Ends with a summary table, "
    "a Parquet trace and a read-back check of every acknowledged record."
)

EPILOG = (
    "Seeded and real time: --seed fixes each producer's arrival schedule, "
    "partition choice and record values. Everything else runs in real time on "
    "this machine: how many requests fit in --duration-s, when followers fetch, "
    "which produces expire, latencies, lateness, ISR changes and CPU figures "
    "differ from run to run with the same seed. With --virtual-time the clock "
    "jumps to the next timer whenever nothing is ready, so a run is determined "
    "by its options: the same summary, trace and logs every time, in the CPU "
    "time the run needs (CPU figures are then not measured). "
    "Exit status: 0 when every acknowledged record read back, 1 if not, 2 for "
    "a bad option or output path, 130 after Ctrl-C (SIGINT), 143 after SIGTERM "
    "(the summary of what ran is printed first; a second signal cuts the drain)."
)

#: exit status after each stopping signal (128 + its number)
SIGNAL_EXIT_STATUS = {"SIGINT": 130, "SIGTERM": 143}

#: defaults of the command line that differ from the config's (a library caller
#: gets no progress bar unless it asks)
CLI_DEFAULTS: dict[str, Any] = {"progress": True}

#: older spellings, accepted but not listed: option -> the field it sets
HIDDEN_ALIASES: dict[str, str] = {
    "--duration": "duration_s",
    "--min-isr": "min_insync_replicas",
    "--trace": "trace_path",
}
#: older switches, accepted but not listed: option -> (field, the value it sets)
HIDDEN_SWITCHES: dict[str, tuple[str, Any]] = {
    "--no-trace": ("trace_path", None),
    "--quiet": ("progress", False),
}
#: what an option's value is called in ``--help``, by type
_METAVARS = {int: "N", float: "X", str: "PATH"}


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _value_type(annotation: Any) -> tuple[type, bool]:
    """The type a field's values parse to, and whether None is allowed."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        [inner] = [a for a in args if a is not type(None)]
        return inner, True
    return annotation, False


def build_parser() -> argparse.ArgumentParser:
    """One option per :class:`SimulationConfig` field (see the module doc). O(fields)."""
    parser = Parser(
        module="purgatory_broker.sim",  # named as it was started (purgatory_broker.cli)
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    hints = typing.get_type_hints(SimulationConfig)
    for f in fields(SimulationConfig):
        default = CLI_DEFAULTS.get(f.name, f.default)
        kind, optional = _value_type(hints[f.name])
        help_text = f.metadata[HELP]
        if kind is bool:
            parser.add_argument(
                _option(f.name),
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=help_text,
            )
            continue
        parser.add_argument(
            _option(f.name),
            dest=f.name,
            type=kind,
            default=default,
            help=help_text,
            metavar=_METAVARS[kind],
        )
        if optional and default is not None:
            parser.add_argument(
                "--no-" + _option(f.name)[2:],
                dest=f.name,
                action="store_const",
                const=None,
                default=argparse.SUPPRESS,
                help=f"set {f.name} to None",
            )
    for alias, name in HIDDEN_ALIASES.items():
        kind, _ = _value_type(hints[name])
        parser.add_argument(
            alias, dest=name, type=kind, default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
    for switch, (name, value) in HIDDEN_SWITCHES.items():
        parser.add_argument(
            switch,
            dest=name,
            action="store_const",
            const=value,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )
    return parser


def config_from_args(args: argparse.Namespace) -> SimulationConfig:
    """The config the parsed options describe (not validated). O(fields)."""
    return SimulationConfig(**{f.name: getattr(args, f.name) for f in fields(SimulationConfig)})


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, validate, run, print the summary; the exit status (see :data:`EPILOG`).
    A refused option or setting exits at once with status 2 (``SystemExit``, as
    argparse does), in one line. Costs the run (see :func:`.simulation.run`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
        config.validate()
        # the bar only on a terminal: redirected output gets the table alone
        config = replace(config, progress=config.progress and sys.stderr.isatty())
        summary = run(config, handle_signals=True)
    except ValueError as exc:  # a bad setting or output path: nothing ran
        parser.error(str(exc))
    except KeyboardInterrupt:  # before the run's own handlers, or during the read-back
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return SIGNAL_EXIT_STATUS["SIGINT"]
    print(format_summary(summary, min(100, shutil.get_terminal_size().columns)))
    if "trace_error" in summary:
        print(
            f"{parser.prog}: the trace was not written: {summary['trace_error']}",
            file=sys.stderr,
        )
    if summary["drain_cut"]:
        print(
            f"\nnote: the drain was cut after {summary['drain_s']} s: "
            f"{summary['unanswered_produces']} produces were never answered",
        )
    if not summary["read_back_ok"]:
        print(
            f"\nFAILED: read-back found {summary['read_back_records']} of "
            f"{summary['acked_records']} acknowledged records; problems:",
            file=sys.stderr,
        )
        for problem in summary["read_back_problems"]:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(
        f"\nread-back OK: all {summary['acked_records']} acknowledged records are in the "
        "logs, at their offsets, in order"
    )
    if summary["interrupted"] is not None:
        return SIGNAL_EXIT_STATUS[summary["interrupted"]]
    return 0 if "trace_error" not in summary else 1
