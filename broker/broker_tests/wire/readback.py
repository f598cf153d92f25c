"""Checking what a consumer read against what a producer had acknowledged."""

from __future__ import annotations

from collections import defaultdict

Acked = list[tuple[int, int, bytes]]  # (partition, offset, value) in send order
Consumed = list[tuple[int, int, bytes]]  # in arrival order


def value(client: str, i: int) -> bytes:
    return f"{client}-{i:05d}".encode()


def check_read_back(acked: Acked, consumed: Consumed, expected: int) -> None:
    """Each acknowledged message exactly once, at its offset; per partition, offsets
    increase in arrival order, and acknowledged offsets increase in send order."""
    assert len(acked) == expected
    seen: dict[tuple[int, int], bytes] = {}
    last: dict[int, int] = defaultdict(lambda: -1)
    for p, offset, v in consumed:
        assert (p, offset) not in seen, f"offset {offset} of partition {p} delivered twice"
        assert offset > last[p], f"partition {p}: offset {offset} after {last[p]}"
        last[p] = offset
        seen[p, offset] = v
    sent_last: dict[int, int] = defaultdict(lambda: -1)
    for p, offset, v in acked:
        assert seen.get((p, offset)) == v, (
            f"acked {v!r} at {p}/{offset}, read {seen.get((p, offset))!r}"
        )
        assert offset > sent_last[p], f"partition {p}: acks out of send order"
        sent_last[p] = offset
    assert sorted(v for _, _, v in consumed) == sorted(v for _, _, v in acked)  # once each


def all_seen(acked: Acked, consumed: Consumed) -> bool:
    return {(p, o) for p, o, _ in acked} <= {(p, o) for p, o, _ in consumed}
