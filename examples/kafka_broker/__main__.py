"""Start the Kafka-wire example broker: ``python -m examples.kafka_broker [options]``.

Run from the repository root. Listens on 127.0.0.1:9092 by default; Ctrl-C stops it.
Try it with any Kafka client, e.g. ``kcat -b 127.0.0.1:9092 -P -t demo -X acks=all``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import signal
from collections.abc import Sequence
from typing import Any

from ._config import WireConfig
from ._server import KafkaWireBroker
from ._shortage import fit_descriptor_limit

_D = WireConfig()


def parse_args(argv: Sequence[str] | None = None) -> tuple[WireConfig, bool]:
    """The config and whether to run on uvloop; exits with a usage error on bad options."""
    p = argparse.ArgumentParser(
        prog="python -m examples.kafka_broker",
        description=(
            "A one-broker Kafka cluster for unmodified clients, backed by the purgatory: "
            "acks=all produces wait in a DelayedProduce until simulated followers "
            "replicate, long-poll fetches wait in a DelayedFetch."
        ),
    )
    p.add_argument("--host", default=_D.host, help="address to bind (default %(default)s)")
    p.add_argument("--port", type=int, default=_D.port, help="0 picks one (default %(default)s)")
    p.add_argument("--data-dir", default=None, help="partition logs (default: a temp dir)")
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
    p.add_argument("--min-insync-replicas", type=int, default=_D.min_insync_replicas)
    p.add_argument("--replica-lag-time-max-ms", type=int, default=_D.replica_lag_time_max_ms)
    p.add_argument("--max-frame-bytes", type=int, default=_D.max_frame_bytes)
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
        flush_messages=args.flush_messages,
        flush_ms=args.flush_ms,
    )
    try:
        config.validate()
    except ValueError as exc:
        p.error(str(exc))
    return config, args.uvloop


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """The options that keep one client from taking the broker down (README: limits)."""
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


async def serve(config: WireConfig) -> None:
    """Serve until SIGINT or SIGTERM."""
    fits = fit_descriptor_limit(config.max_partitions, logging.getLogger("examples.kafka_broker"))
    if fits < config.max_partitions:
        config = dataclasses.replace(config, max_partitions=max(fits, config.partitions))
    wire = KafkaWireBroker(config)
    await wire.start()
    print(f"kafka-wire example broker listening on {wire.bootstrap_servers}", flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, lambda: loop.create_task(wire.close()))
    await wire.serve_forever()


def main(argv: Sequence[str] | None = None) -> None:
    config, use_uvloop = parse_args(argv)
    factory = None
    if use_uvloop:
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(config))


if __name__ == "__main__":
    main()
