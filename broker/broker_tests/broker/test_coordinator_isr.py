"""An idle follower stays in the ISR (issue #13's "while here"): a follower whose log
end equals the leader's is caught up however long ago it last fetched, as Kafka's
``Replica.isCaughtUp`` (``leaderEndOffset == logEndOffset``, or caught up within
``replica.lag.time.max.ms``)."""

from __future__ import annotations

from pathlib import Path

from purgatory_broker.broker import LeaderPartition, PartitionLog, build_batch

from purgatory import TopicPartition


def test_a_fully_caught_up_idle_follower_stays_in_the_isr(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0")
    try:
        p = LeaderPartition(TopicPartition("t", 0), log, (1, 2), replica_lag_time_max_ms=100)
        p.append_as_leader(build_batch([b"v"] * 3, base_timestamp_ms=0), required_acks=1)
        p.update_follower_fetch(1, 3, now_ms=10)  # caught up, then silent: nothing to fetch
        p.update_follower_fetch(2, 1, now_ms=10)  # behind, then silent
        assert p.maybe_shrink_isr(now_ms=10_000) == ([2], True)
        assert p.isr == {0, 1}
        # once the leader appends, the silent follower is behind: it goes after the lag
        p.append_as_leader(build_batch([b"v"], base_timestamp_ms=0), required_acks=1)
        assert p.maybe_shrink_isr(now_ms=10_050) == ([1], True)
        assert p.isr == {0}
    finally:
        log.close()
