"""Start the Kafka-wire example broker: ``purgatory-broker-wire [options]`` (the console
script), or ``python -m purgatory_broker.wire [options]``.

Run from the repository root. Listens on 127.0.0.1:9092 by default; Ctrl-C stops it.
Try it with any Kafka client, e.g. ``kcat -b 127.0.0.1:9092 -P -t demo -X acks=all``.

What cannot work is said in one line on stderr before anything starts, with exit
status 2: a ``--data-dir`` that is a file or cannot be written (or created), a
port in use, a host that does not resolve. A ``--data-dir`` that already holds
data is reopened (its topics' logs and the committed offsets), which one line
on stderr says. A failure once serving exits with status 1, in one line too.

A run changes the process only while it lasts, each change owned by an object
of :mod:`purgatory_broker.process` that puts back what was there: the root
logger (:func:`main`: a handler on stderr, unless logging is set up already),
the open-file limit and the handlers of SIGINT and SIGTERM (:func:`serve`).
So ``main()`` called from a test or another program, however it ends, leaves
the process as it found it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from purgatory_broker.cli import Parser, port, program_name
from purgatory_broker.process import basic_logging, loop_signal_handlers

from ._config import WireConfig
from ._server import KafkaWireBroker, existing_topics
from ._shortage import fit_descriptor_limit

#: what ``python -m`` runs; the usage and error lines name the program as it was started
MODULE = "purgatory_broker.wire"
#: what the log lines look like (on stderr), unless whoever runs main() set up logging
LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
#: either stops the broker cleanly
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StartupError(Exception):
    """What stops the broker from starting, said in one line; ``status`` is the exit code."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


_D = WireConfig()

# The integer options, one table per group of --help: (config field, help). The flag is
# the field's name with dashes, the default the config's.

#: the broker's shape: partitions, followers, replication, frames, flushing
BROKER_OPTIONS = (
    ("partitions", "partitions of each topic created on first use (default %(default)s)"),
    ("followers", "simulated followers per partition (default %(default)s)"),
    ("follower_lag_ms", "pause between a follower's fetches (default %(default)s)"),
    (
        "min_insync_replicas",
        "an acks=all produce needs this many replicas in sync, the leader included, "
        "else NOT_ENOUGH_REPLICAS (Kafka's min.insync.replicas; default %(default)s)",
    ),
    (
        "replica_lag_time_max_ms",
        "a follower not caught up with the leader for this long leaves the ISR "
        "(Kafka's replica.lag.time.max.ms; default %(default)s)",
    ),
    (
        "max_frame_bytes",
        "close a connection that sends a larger request "
        "(Kafka's socket.request.max.bytes; default %(default)s)",
    ),
    (
        "flush_messages",
        "fsync a partition after this many records (Kafka's flush.messages; "
        "default: never; acknowledged records are in the files either way)",
    ),
    (
        "flush_ms",
        "fsync a partition this long after its first unflushed write "
        "(Kafka's flush.ms; default: never)",
    ),
)

#: the options that keep one client from taking the broker down (docs/broker/wire.md)
LIMIT_OPTIONS = (
    (
        "max_partitions",
        "topics are auto-created only while the broker leads at most this many "
        "partitions (each holds about 3 file descriptors); past it a new topic is "
        "answered UNKNOWN_TOPIC_OR_PARTITION (default %(default)s)",
    ),
    (
        "connections_max_idle_ms",
        "close a connection silent this long, unless it waits for a delayed reply "
        "(Kafka's connections.max.idle.ms; default %(default)s)",
    ),
    (
        "max_frame_wait_ms",
        "close a connection whose request has not fully arrived this long after its "
        "first byte (default %(default)s)",
    ),
    (
        "max_pending_response_bytes",
        "per connection: stop reading requests while the replies not yet taken by the "
        "client hold this many bytes (a waiting fetch counts its max_bytes; "
        "default %(default)s)",
    ),
    (
        "max_pending_responses",
        "per connection: stop reading requests while this many replies are not yet "
        "written (default %(default)s)",
    ),
    (
        "producer_id_expiration_ms",
        "forget an idempotent producer's state (per partition) this long after its "
        "last write (Kafka's producer.id.expiration.ms; default %(default)s)",
    ),
)

#: the consumer-group coordinator's settings (docs/broker/wire.md: consumer groups)
GROUP_OPTIONS = (
    (
        "group_initial_rebalance_delay_ms",
        "an empty group's first rebalance waits this long for more members, again "
        "while they keep coming, up to the rebalance timeout "
        "(Kafka's group.initial.rebalance.delay.ms); default %(default)s",
    ),
    (
        "group_min_session_timeout_ms",
        "the shortest session timeout a member may ask for, else INVALID_SESSION_TIMEOUT "
        "(Kafka's group.min.session.timeout.ms); default %(default)s",
    ),
    (
        "group_max_session_timeout_ms",
        "the longest session timeout a member may ask for "
        "(Kafka's group.max.session.timeout.ms); default %(default)s",
    ),
    (
        "offsets_retention_minutes",
        "committed offsets of a group without members are dropped this long after the "
        "later of their commit and the group emptying (Kafka's offsets.retention.minutes); "
        "default %(default)s",
    ),
)

#: every integer option's table
INT_OPTIONS = (BROKER_OPTIONS, LIMIT_OPTIONS, GROUP_OPTIONS)


@dataclasses.dataclass(frozen=True)
class Command:
    """What the command line asks for."""

    config: WireConfig
    uvloop: bool  # run on uvloop rather than asyncio's own loop
    verbose: bool  # log at INFO (connections, topics), else at WARNING


def parse_args(argv: Sequence[str] | None = None) -> Command:
    """What ``argv`` asks for; exits with a usage error on bad options. Changes
    nothing else: :func:`main` sets up the logging, for the run only."""
    parser = build_parser()
    args = parser.parse_args(argv)
    config = WireConfig(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        advertise_followers=not args.no_advertise_followers,
        **{field: getattr(args, field) for table in INT_OPTIONS for field, _ in table},
    )
    try:
        config.validate()
    except ValueError as exc:
        parser.error(str(exc))
    return Command(config, uvloop=args.uvloop, verbose=args.verbose)


def build_parser() -> Parser:
    """Every option, in --help's order: where to listen and store, the broker's shape,
    then the limits and the consumer groups, each in its own group."""
    parser = Parser(
        module=MODULE,
        description=(
            "A one-broker Kafka cluster for unmodified clients, backed by the purgatory: "
            "acks=all produces wait in a DelayedProduce until simulated followers "
            "replicate, long-poll fetches wait in a DelayedFetch."
        ),
    )
    parser.add_argument("--host", default=_D.host, help="address to bind (default %(default)s)")
    parser.add_argument(
        "--port", type=port, default=_D.port, help="0 picks one (default %(default)s)"
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="partition logs and committed offsets; one that holds data is reopened "
        "(default: a temporary directory, removed at exit)",
    )
    add_int_options(parser, BROKER_OPTIONS)
    parser.add_argument(
        "--no-advertise-followers",
        action="store_true",
        help="list only broker 0 in Metadata replicas and ISR",
    )
    add_int_options(parser.add_argument_group("limits"), LIMIT_OPTIONS)
    add_int_options(parser.add_argument_group("consumer groups"), GROUP_OPTIONS)
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    parser.add_argument("-v", "--verbose", action="store_true", help="log connections and topics")
    return parser


class _Options(Protocol):
    """A parser, or a group of its options."""

    def add_argument(self, *names: str, **settings: Any) -> argparse.Action: ...


def add_int_options(group: _Options, options: Sequence[tuple[str, str]]) -> None:
    """Add each (config field, help) of ``options`` as ``--field-name``, an int
    defaulting to the config's."""
    for field, text in options:
        group.add_argument(
            "--" + field.replace("_", "-"), type=int, default=getattr(_D, field), help=text
        )


def check_data_dir(path: str) -> str | None:
    """Raise :class:`StartupError` if ``path`` cannot hold the broker's data (a file, not
    writable, not creatable); nothing is created. Returns the line to print when it
    already holds data (it is reopened), else None. O(entries)."""
    directory = Path(path)
    if directory.exists():
        if not directory.is_dir():
            raise StartupError(f"--data-dir {path} is not a directory; name a directory")
        _check_writable(directory, f"--data-dir {path}")
        if not any(directory.iterdir()):
            return None
        topics = existing_topics(directory)
        offsets = (directory / "__consumer_offsets").is_dir()
        held = f"{len(topics)} topic(s)" + (" and committed offsets" if offsets else "")
        return f"--data-dir {path} is not empty: reopening its existing logs ({held})"
    parent = directory.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise StartupError(f"--data-dir {path} cannot be created: {parent} is not a directory")
    _check_writable(parent, f"--data-dir {path} cannot be created: {parent}")
    return None


def _check_writable(directory: Path, what: str) -> None:
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise StartupError(f"{what} is not writable ({exc.strerror}); pick another") from None


async def serve(config: WireConfig) -> None:
    """Serve until SIGINT or SIGTERM. Raises :class:`StartupError` if it cannot start.
    Owns the open-file limit and the two signals' handlers while it runs (module doc)."""
    log = logging.getLogger("purgatory_broker.wire")
    with fit_descriptor_limit(config.max_partitions, log) as fits:
        if fits < config.max_partitions:
            config = dataclasses.replace(config, max_partitions=max(fits, config.partitions))
        wire = await _started(config)
        loop = asyncio.get_running_loop()
        with loop_signal_handlers(loop, STOP_SIGNALS, lambda: loop.create_task(wire.close())):
            # said once Ctrl-C and SIGTERM stop it cleanly
            print(f"kafka-wire example broker listening on {wire.bootstrap_servers}", flush=True)
            await wire.serve_forever()


async def _started(config: WireConfig) -> KafkaWireBroker:
    """A broker listening and open, or :class:`StartupError` saying why not."""
    wire = KafkaWireBroker(config)
    try:
        await wire.start()
    except OSError as exc:
        where = f"{config.host}:{config.port}"
        reason = exc.strerror or str(exc)
        if wire.port == 0:  # the listener failed: the address is the problem
            raise StartupError(f"cannot listen on {where}: {reason}") from None
        raise StartupError(f"cannot open the broker's data: {reason}", status=1) from None
    return wire


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line; a failure exits with its status, in one line. Owns the
    root logger's set-up while it runs (module doc)."""
    command = parse_args(argv)
    prog = program_name(MODULE)
    with basic_logging(logging.INFO if command.verbose else logging.WARNING, LOG_FORMAT):
        try:
            _run(command)
        except StartupError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            sys.exit(exc.status)
        except OSError as exc:  # while serving: the disk, the descriptors
            print(f"{prog}: error: {exc}", file=sys.stderr)
            sys.exit(1)


def _run(command: Command) -> None:
    """Check the data directory, then serve on the loop asked for."""
    factory = None
    if command.uvloop:
        import uvloop

        factory = uvloop.new_event_loop
    config = command.config
    if config.data_dir is not None:
        notice = check_data_dir(config.data_dir)
        if notice is not None:
            print(notice, file=sys.stderr, flush=True)
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(config))


if __name__ == "__main__":
    main()
