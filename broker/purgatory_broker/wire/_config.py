"""The wire broker's settings, one frozen dataclass; the CLI exposes each field."""

from __future__ import annotations

from dataclasses import dataclass

from purgatory.core import DEFAULT_TICK_MS, DEFAULT_WHEEL_SIZE
from purgatory_broker.broker import GroupConfig

from ._idempotence import DEFAULT_PRODUCER_ID_EXPIRATION_MS

__all__ = ["DEFAULT_PORT", "WireConfig"]

DEFAULT_PORT = 9092


@dataclass(frozen=True, slots=True)
class WireConfig:
    """Every knob of :class:`~._server.KafkaWireBroker`.

    ``port=0`` picks a free port (tests); ``data_dir=None`` uses a temporary
    directory removed at close.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    data_dir: str | None = None
    partitions: int = 1  # of each topic created on first use (Kafka's num.partitions)
    # topics are auto-created only while the broker leads at most this many partitions
    max_partitions: int = 1000
    followers: int = 2  # simulated followers of every partition (replica ids 1..n)
    follower_lag_ms: int = 20  # each follower sleeps this long between fetches
    follower_max_wait_ms: int = 500  # a follower's long poll
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 10_000
    advertise_followers: bool = True  # list follower ids in Metadata replicas / ISR
    max_frame_bytes: int = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
    max_pending_responses: int = 100  # per connection; reading pauses beyond it
    # per connection: reading pauses while the replies not yet written reserve this much
    max_pending_response_bytes: int = 16 * 1024 * 1024
    connections_max_idle_ms: int = 600_000  # Kafka's connections.max.idle.ms
    max_frame_wait_ms: int = 30_000  # from a request's first byte to its last
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS  # one day
    cluster_id: str = "purgatory-wire-example"
    tick_ms: int = DEFAULT_TICK_MS
    wheel_size: int = DEFAULT_WHEEL_SIZE
    flush_messages: int | None = None  # Kafka's flush.messages (fsync); None: never
    flush_ms: int | None = None  # Kafka's flush.ms; None: never
    # consumer groups (Kafka's group.* and offsets.* settings)
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    offsets_retention_minutes: int = 10_080  # 7 days

    def group_config(self) -> GroupConfig:
        """The coordinator's settings. O(1)."""
        return GroupConfig(
            initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=self.group_min_session_timeout_ms,
            max_session_timeout_ms=self.group_max_session_timeout_ms,
            offsets_retention_minutes=self.offsets_retention_minutes,
        )

    def validate(self) -> None:
        """Raise ValueError naming the first bad option."""
        checks: list[tuple[bool, str]] = [
            (0 <= self.port <= 65535, "port must be in [0, 65535]"),
            (1 <= self.partitions <= 10_000, "partitions must be in [1, 10000]"),
            (self.max_partitions >= self.partitions, "max_partitions must be >= partitions"),
            (0 <= self.followers <= 100, "followers must be in [0, 100]"),
            (self.follower_lag_ms >= 0, "follower_lag_ms must be >= 0"),
            (self.follower_max_wait_ms >= 0, "follower_max_wait_ms must be >= 0"),
            (
                1 <= self.min_insync_replicas <= self.followers + 1,
                "min_insync_replicas must be in [1, followers + 1]",
            ),
            (self.replica_lag_time_max_ms >= 1, "replica_lag_time_max_ms must be >= 1"),
            (self.max_frame_bytes >= 64, "max_frame_bytes must be >= 64"),
            (self.max_pending_responses >= 1, "max_pending_responses must be >= 1"),
            (self.max_pending_response_bytes >= 1, "max_pending_response_bytes must be >= 1"),
            (self.connections_max_idle_ms >= 1, "connections_max_idle_ms must be >= 1"),
            (self.max_frame_wait_ms >= 1, "max_frame_wait_ms must be >= 1"),
            (self.producer_id_expiration_ms >= 1, "producer_id_expiration_ms must be >= 1"),
            (self.tick_ms >= 1, "tick_ms must be >= 1"),
            (self.wheel_size >= 2, "wheel_size must be >= 2"),
            (
                self.flush_messages is None or self.flush_messages >= 1,
                "flush_messages must be >= 1",
            ),
            (self.flush_ms is None or self.flush_ms >= 1, "flush_ms must be >= 1"),
            (
                self.group_initial_rebalance_delay_ms >= 0,
                "group_initial_rebalance_delay_ms must be >= 0",
            ),
            (self.group_min_session_timeout_ms >= 1, "group_min_session_timeout_ms must be >= 1"),
            (
                self.group_max_session_timeout_ms >= self.group_min_session_timeout_ms,
                "group_max_session_timeout_ms must be >= group_min_session_timeout_ms",
            ),
            (self.offsets_retention_minutes >= 1, "offsets_retention_minutes must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
