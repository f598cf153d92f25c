"""Start the Kafka-wire example broker: ``python -m purgatory_broker.wire [options]``.

Run from the repository root. Listens on 127.0.0.1:9092 by default; Ctrl-C stops it.
Try it with any Kafka client, e.g. ``kcat -b 127.0.0.1:9092 -P -t demo -X acks=all``.

What cannot work is said in one line on stderr before anything starts, with exit
status 2: a ``--data-dir`` that is a file or cannot be written (or created), a
port in use, a host that does not resolve. A ``--data-dir`` that already holds
data is reopened (its topics' logs and the committed offsets), which one line
on stderr says. A failure once serving exits with status 1, in one line too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from purgatory_broker.cli import Parser, port

from ._config import WireConfig
from ._server import KafkaWireBroker, existing_topics
from ._shortage import fit_descriptor_limit

PROG = "python -m purgatory_broker.wire"


class StartupError(Exception):
    """What stops the broker from starting, said in one line; ``status`` is the exit code."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


_D = WireConfig()


def parse_args(argv: Sequence[str] | None = None) -> tuple[WireConfig, bool]:
    """The config and whether to run on uvloop; exits with a usage error on bad options."""
    p = Parser(
        prog=PROG,
        description=(
            "A one-broker Kafka cluster for unmodified clients, backed by the purgatory: "
            "acks=all produces wait in a DelayedProduce until simulated followers "
            "replicate, long-poll fetches wait in a DelayedFetch."
        ),
    )
    p.add_argument("--host", default=_D.host, help="address to bind (default %(default)s)")
    p.add_argument("--port", type=port, default=_D.port, help="0 picks one (default %(default)s)")
    p.add_argument(
        "--data-dir",
        default=None,
        help="partition logs and committed offsets; one that holds data is reopened "
        "(default: a temporary directory, removed at exit)",
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=_D.partitions,
        help="partitions of each topic created on first use (default %(default)s)",
    )
    p.add_argument(
        "--followers",
        type=int,
        default=_D.followers,
        help="simulated followers per partition (default %(default)s)",
    )
    p.add_argument(
        "--follower-lag-ms",
        type=int,
        default=_D.follower_lag_ms,
        help="pause between a follower's fetches (default %(default)s)",
    )
    p.add_argument(
        "--min-insync-replicas",
        type=int,
        default=_D.min_insync_replicas,
        help="an acks=all produce needs this many replicas in sync, the leader included, "
        "else NOT_ENOUGH_REPLICAS (Kafka's min.insync.replicas; default %(default)s)",
    )
    p.add_argument(
        "--replica-lag-time-max-ms",
        type=int,
        default=_D.replica_lag_time_max_ms,
        help="a follower not caught up with the leader for this long leaves the ISR "
        "(Kafka's replica.lag.time.max.ms; default %(default)s)",
    )
    p.add_argument(
        "--max-frame-bytes",
        type=int,
        default=_D.max_frame_bytes,
        help="close a connection that sends a larger request "
        "(Kafka's socket.request.max.bytes; default %(default)s)",
    )
    p.add_argument(
        "--flush-messages",
        type=int,
        default=_D.flush_messages,
        help="fsync a partition after this many records (Kafka's flush.messages; "
        "default: never; acknowledged records are in the files either way)",
    )
    p.add_argument(
        "--flush-ms",
        type=int,
        default=_D.flush_ms,
        help="fsync a partition this long after its first unflushed write "
        "(Kafka's flush.ms; default: never)",
    )
    p.add_argument(
        "--no-advertise-followers",
        action="store_true",
        help="list only broker 0 in Metadata replicas and ISR",
    )
    add_limit_options(p)
    add_group_options(p)
    p.add_argument("--uvloop", action="store_true", help="run on uvloop")
    p.add_argument("-v", "--verbose", action="store_true", help="log connections and topics")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    config = WireConfig(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        partitions=args.partitions,
        followers=args.followers,
        follower_lag_ms=args.follower_lag_ms,
        min_insync_replicas=args.min_insync_replicas,
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        max_frame_bytes=args.max_frame_bytes,
        advertise_followers=not args.no_advertise_followers,
        **limit_options(args),
        **group_options(args),
        flush_messages=args.flush_messages,
        flush_ms=args.flush_ms,
    )
    try:
        config.validate()
    except ValueError as exc:
        p.error(str(exc))
    return config, args.uvloop


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """The options that keep one client from taking the broker down (docs/broker/wire.md)."""
    g = p.add_argument_group("limits")
    g.add_argument(
        "--max-partitions",
        type=int,
        default=_D.max_partitions,
        help="topics are auto-created only while the broker leads at most this many "
        "partitions (each holds about 3 file descriptors); past it a new topic is "
        "answered UNKNOWN_TOPIC_OR_PARTITION (default %(default)s)",
    )
    g.add_argument(
        "--connections-max-idle-ms",
        type=int,
        default=_D.connections_max_idle_ms,
        help="close a connection silent this long, unless it waits for a delayed reply "
        "(Kafka's connections.max.idle.ms; default %(default)s)",
    )
    g.add_argument(
        "--max-frame-wait-ms",
        type=int,
        default=_D.max_frame_wait_ms,
        help="close a connection whose request has not fully arrived this long after its "
        "first byte (default %(default)s)",
    )
    g.add_argument(
        "--max-pending-response-bytes",
        type=int,
        default=_D.max_pending_response_bytes,
        help="per connection: stop reading requests while the replies not yet taken by the "
        "client hold this many bytes (a waiting fetch counts its max_bytes; "
        "default %(default)s)",
    )
    g.add_argument(
        "--max-pending-responses",
        type=int,
        default=_D.max_pending_responses,
        help="per connection: stop reading requests while this many replies are not yet "
        "written (default %(default)s)",
    )
    g.add_argument(
        "--producer-id-expiration-ms",
        type=int,
        default=_D.producer_id_expiration_ms,
        help="forget an idempotent producer's state (per partition) this long after its "
        "last write (Kafka's producer.id.expiration.ms; default %(default)s)",
    )


#: the consumer-group options: (config field, help); the flag is the field's name
GROUP_OPTIONS = (
    (
        "group_initial_rebalance_delay_ms",
        "an empty group's first rebalance waits this long for more members, again "
        "while they keep coming, up to the rebalance timeout "
        "(Kafka's group.initial.rebalance.delay.ms)",
    ),
    (
        "group_min_session_timeout_ms",
        "the shortest session timeout a member may ask for, else INVALID_SESSION_TIMEOUT "
        "(Kafka's group.min.session.timeout.ms)",
    ),
    (
        "group_max_session_timeout_ms",
        "the longest session timeout a member may ask for (Kafka's group.max.session.timeout.ms)",
    ),
    (
        "offsets_retention_minutes",
        "committed offsets of a group without members are dropped this long after the "
        "later of their commit and the group emptying (Kafka's offsets.retention.minutes)",
    ),
)


def add_group_options(p: argparse.ArgumentParser) -> None:
    """The consumer-group coordinator's settings (docs/broker/wire.md: consumer groups)."""
    g = p.add_argument_group("consumer groups")
    for field, text in GROUP_OPTIONS:
        g.add_argument(
            "--" + field.replace("_", "-"),
            type=int,
            default=getattr(_D, field),
            help=text + "; default %(default)s",
        )


def group_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`WireConfig` fields set by :func:`add_group_options`."""
    return {field: getattr(args, field) for field, _ in GROUP_OPTIONS}


def limit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`WireConfig` fields set by :func:`add_limit_options`."""
    names = (
        "max_partitions",
        "connections_max_idle_ms",
        "max_frame_wait_ms",
        "max_pending_response_bytes",
        "max_pending_responses",
        "producer_id_expiration_ms",
    )
    return {name: getattr(args, name) for name in names}


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
    """Serve until SIGINT or SIGTERM. Raises :class:`StartupError` if it cannot start."""
    fits = fit_descriptor_limit(config.max_partitions, logging.getLogger("purgatory_broker.wire"))
    if fits < config.max_partitions:
        config = dataclasses.replace(config, max_partitions=max(fits, config.partitions))
    wire = KafkaWireBroker(config)
    try:
        await wire.start()
    except OSError as exc:
        where = f"{config.host}:{config.port}"
        reason = exc.strerror or str(exc)
        if wire.port == 0:  # the listener failed: the address is the problem
            raise StartupError(f"cannot listen on {where}: {reason}") from None
        raise StartupError(f"cannot open the broker's data: {reason}", status=1) from None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, lambda: loop.create_task(wire.close()))
    # said once Ctrl-C and SIGTERM stop it cleanly
    print(f"kafka-wire example broker listening on {wire.bootstrap_servers}", flush=True)
    await wire.serve_forever()


def main(argv: Sequence[str] | None = None) -> None:
    config, use_uvloop = parse_args(argv)
    factory = None
    if use_uvloop:
        import uvloop

        factory = uvloop.new_event_loop
    try:
        if config.data_dir is not None:
            notice = check_data_dir(config.data_dir)
            if notice is not None:
                print(notice, file=sys.stderr, flush=True)
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(serve(config))
    except StartupError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        sys.exit(exc.status)
    except OSError as exc:  # while serving: the disk, the descriptors
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
