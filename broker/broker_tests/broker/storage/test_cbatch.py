"""The batch primitives the read path runs on (``cbatch.pxd`` in the compiled build,
their pure-Python reference in ``records.py``): a span's CRC-32C, and the header
walk of :func:`next_offset`. Both builds run these; in the compiled one the CRC is
checked on both C paths (the CPU's instruction, where it has it, and the table)
against the ``crc32c`` package, the pure build's path.
"""

from __future__ import annotations

import random
import struct

import pytest
from crc32c import crc32c as package_crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from purgatory_broker.broker.storage.records import (
    HEADER_BYTES,
    CorruptRecordError,
    build_batch,
    next_offset,
    span_crc32c,
    with_base_offset,
)


def test_every_span_of_random_data_has_the_packages_crc() -> None:
    data = random.Random(7).randbytes(80)
    for start in range(len(data) + 1):
        for end in range(start, len(data) + 1):
            want = package_crc32c(data[start:end])
            assert span_crc32c(data, start, end) == want, (start, end)
            assert span_crc32c(data, start, end, hardware=False) == want, (start, end)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(min_size=0, max_size=5000), st.data())
def test_long_spans_agree_on_both_paths(data: bytes, draw: st.DataObject) -> None:
    start = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(start, len(data)))
    want = package_crc32c(data[start:end])
    assert span_crc32c(data, start, end) == want == span_crc32c(data, start, end, False)


@pytest.mark.parametrize("start, end", [(-1, 3), (5, 4), (0, 11), (11, 11)])
def test_a_span_outside_the_data_is_minus_one(start: int, end: int) -> None:
    assert span_crc32c(b"0123456789", start, end) == -1


def _header_at(base_offset: int, batch_length: int, delta: int) -> bytes:
    """A batch-sized buffer whose header carries these fields (nothing else valid)."""
    out = bytearray(batch_length + 12)
    struct.pack_into(">qi", out, 0, base_offset, batch_length)
    struct.pack_into(">i", out, 23, delta)
    return bytes(out)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.integers(-(2**63), 2**63 - 1),  # any int64, the extremes included
            st.integers(HEADER_BYTES - 12, 200),
            st.integers(-(2**31), 2**31 - 1),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_next_offset_reads_the_headers_as_signed_big_endian(
    headers: list[tuple[int, int, int]],
) -> None:
    """next_offset trusts the headers (the broker checked them): whatever they hold,
    it is the last one's base offset + last offset delta + 1, as a Python int (no
    64-bit wrap-around), in both builds."""
    data = b"".join(_header_at(*h) for h in headers)
    base_offset, _, delta = headers[-1]
    assert next_offset(data) == base_offset + delta + 1
    assert next_offset(memoryview(data)) == next_offset(bytearray(data)) == next_offset(data)


def test_next_offset_of_real_batches_and_of_a_torn_one() -> None:
    batches = [with_base_offset(build_batch([b"a"] * n), base) for base, n in ((0, 3), (3, 4))]
    assert next_offset(b"".join(batches)) == 7
    assert next_offset(b"") is None
    with pytest.raises(CorruptRecordError, match="truncated batch header"):
        next_offset(batches[0] + batches[1][:40])


def test_a_span_longer_than_a_batch() -> None:
    """The pure build views a long span instead of copying it; same value."""
    data = random.Random(8).randbytes(100_000)
    for start, end in ((0, 100_000), (3, 99_001), (4_000, 8_200)):
        want = package_crc32c(data[start:end])
        assert span_crc32c(data, start, end) == want == span_crc32c(data, start, end, False)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=8))
def test_a_built_batch_carries_the_packages_crc(values: list[bytes]) -> None:
    """build_batch computes its CRC over the bytearray it builds (in C when compiled)."""
    batch = build_batch(values)
    assert struct.unpack_from(">I", batch, 17)[0] == package_crc32c(batch[21:])


@pytest.mark.parametrize(
    "base_offset, leader_epoch",
    [(0, None), (7, 3), (2**63 - 1 - 4, -(2**31)), (2**40, 2**31 - 1)],
)
def test_with_base_offset_stamps_any_input_the_same(
    base_offset: int, leader_epoch: int | None
) -> None:
    """The stamped copy (in C when compiled, for bytes) equals the struct-built one,
    whatever buffer it is given, and leaves the input alone."""
    batch = build_batch([b"a", b"b", b"c", b"d", b"e"])  # last offset delta 4
    want = bytearray(batch)
    struct.pack_into(">q", want, 0, base_offset)
    if leader_epoch is not None:
        struct.pack_into(">i", want, 12, leader_epoch)
    for given_buf in (batch, bytearray(batch), memoryview(batch)):
        out = with_base_offset(given_buf, base_offset, leader_epoch)
        assert type(out) is bytes and out == bytes(want)
    assert batch == build_batch([b"a", b"b", b"c", b"d", b"e"], base_timestamp_ms=_ts(batch))


def _ts(batch: bytes) -> int:
    """The base timestamp of ``batch`` (to build it again byte for byte)."""
    timestamp_ms: int = struct.unpack_from(">q", batch, 27)[0]
    return timestamp_ms
