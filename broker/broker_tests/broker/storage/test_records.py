"""Record batch v2: CRC-32C, header layout, validation, offset rewriting, codec."""

from __future__ import annotations

import struct
import warnings
import zlib
from typing import Any

import pytest
from crc32c import crc32c as package_crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from purgatory_broker.broker.storage import records
from purgatory_broker.broker.storage.records import (
    HEADER_BYTES,
    CompressionType,
    CorruptRecordError,
    DecodedRecord,
    Record,
    RecordBatchHeader,
    UnsupportedCompressionError,
    build_batch,
    check_batch,
    crc32c,
    iter_batches,
    iter_records,
    records_of,
    validate_batch,
    with_base_offset,
)

from purgatory.core.build import COMPILED

CHECK = b"123456789"
CHECK_CRC32C = 0xE3069283

deterministic = settings(derandomize=True, max_examples=60, deadline=None)


def _recrc(buf: bytes | bytearray) -> bytes:
    """Recompute the CRC of a (deliberately altered) batch."""
    out = bytearray(buf)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def _sample(n: int = 3, **kwargs: Any) -> bytes:
    return build_batch(
        [Record(f"value-{i}".encode(), key=f"k{i}".encode()) for i in range(n)],
        base_timestamp_ms=1_000,
        **kwargs,
    )


# ------------------------------------------------------------------ CRC-32C


def test_crc32c_check_value() -> None:
    assert crc32c(CHECK) == CHECK_CRC32C == package_crc32c(CHECK)


def test_crc32c_is_computed_in_c_exactly_when_compiled() -> None:
    assert ("compiled" if COMPILED else "crc32c") == records.CRC32C_IMPLEMENTATION


def test_crc32c_empty_and_other_buffers() -> None:
    assert crc32c(b"") == 0 == package_crc32c(b"")
    assert crc32c(memoryview(CHECK)) == crc32c(bytearray(CHECK)) == CHECK_CRC32C


@deterministic
@given(st.binary(max_size=2000))
def test_crc32c_is_the_package_s(data: bytes) -> None:
    """The compiled build's C against the crc32c package (the pure build's path)."""
    assert crc32c(data) == package_crc32c(data)


# ------------------------------------------------------------------ layout


def test_worked_example_bytes() -> None:
    batch = build_batch([Record(b"v", key=b"k")], base_timestamp_ms=1000)
    assert len(batch) == 70
    assert batch[HEADER_BYTES:] == bytes.fromhex("10 00 00 00 02 6b 02 76 00")
    header = validate_batch(batch)
    assert header.batch_length == 58
    assert header.size_bytes == 70
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 0, 1)


def test_header_fields_at_their_offsets() -> None:
    batch = build_batch(
        [Record(b"a", timestamp_ms=5_000), Record(b"b", timestamp_ms=4_000), b"c"],
        base_offset=42,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        partition_leader_epoch=9,
        is_transactional=True,
    )
    h = RecordBatchHeader.parse(batch)
    assert struct.unpack_from(">q", batch, 0)[0] == h.base_offset == 42
    assert struct.unpack_from(">i", batch, 8)[0] == h.batch_length == len(batch) - 12
    assert struct.unpack_from(">i", batch, 12)[0] == h.partition_leader_epoch == 9
    assert batch[16] == h.magic == 2
    assert struct.unpack_from(">I", batch, 17)[0] == h.crc == crc32c(batch[21:])
    assert struct.unpack_from(">h", batch, 21)[0] == h.attributes
    assert struct.unpack_from(">i", batch, 23)[0] == h.last_offset_delta == 2
    assert struct.unpack_from(">q", batch, 27)[0] == h.base_timestamp_ms == 5_000
    assert struct.unpack_from(">q", batch, 35)[0] == h.max_timestamp_ms == 5_000
    assert struct.unpack_from(">q", batch, 43)[0] == h.producer_id == 7
    assert struct.unpack_from(">h", batch, 51)[0] == h.producer_epoch == 3
    assert struct.unpack_from(">i", batch, 53)[0] == h.base_sequence == 11
    assert struct.unpack_from(">i", batch, 57)[0] == h.records_count == 3
    assert h.is_transactional and not h.is_control
    assert h.compression == CompressionType.NONE and h.timestamp_type == 0
    assert (h.last_offset, h.next_offset) == (44, 45)
    # the third record has no timestamp: it takes the base timestamp
    assert [r.timestamp_ms for r in iter_records(batch)] == [5_000, 4_000, 5_000]


def test_parse_refuses_short_buffer() -> None:
    with pytest.raises(CorruptRecordError, match="truncated batch header"):
        RecordBatchHeader.parse(b"\x00" * 60)


# ------------------------------------------------------------------ validation


def test_validate_accepts_a_good_batch() -> None:
    batch = _sample()
    assert validate_batch(batch).records_count == 3
    assert validate_batch(memoryview(batch)).records_count == 3


def test_validate_truncated() -> None:
    batch = _sample()
    with pytest.raises(CorruptRecordError, match="truncated batch header"):
        validate_batch(batch[:40])
    with pytest.raises(CorruptRecordError, match="truncated batch: batch_length"):
        validate_batch(batch[:-1])


def test_validate_length_mismatch() -> None:
    with pytest.raises(CorruptRecordError, match="length mismatch"):
        validate_batch(_sample() + b"\x00")
    short = bytearray(_sample())
    struct.pack_into(">i", short, 8, 10)
    with pytest.raises(CorruptRecordError, match="shorter than the header"):
        validate_batch(bytes(short))


def test_validate_bad_magic() -> None:
    bad = bytearray(_sample())
    bad[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        validate_batch(bytes(bad))


def test_validate_crc_mismatch_anywhere_in_crc_range() -> None:
    batch = _sample()
    for position in (21, 30, 60, len(batch) - 1):
        bad = bytearray(batch)
        bad[position] ^= 0x01
        with pytest.raises(CorruptRecordError, match="CRC mismatch"):
            validate_batch(bytes(bad))
        assert validate_batch(bytes(bad), check_crc=False).crc == RecordBatchHeader.parse(batch).crc


def test_validate_negative_fields() -> None:
    bad = bytearray(_sample())
    struct.pack_into(">i", bad, 23, -1)
    with pytest.raises(CorruptRecordError, match="negative"):
        validate_batch(_recrc(bad))


def _first_problem(data: bytes, check_crc: bool) -> str | None:
    """The model: the first of the checks validate_batch documents that ``data`` fails."""
    if len(data) < HEADER_BYTES:
        return "truncated batch header"
    h = RecordBatchHeader.parse(data)
    if h.magic != 2:
        return f"unsupported magic {h.magic}"
    if h.batch_length + 12 < HEADER_BYTES:
        return "shorter than the header"
    if h.batch_length + 12 != len(data):
        return "truncated batch:" if h.batch_length + 12 > len(data) else "length mismatch"
    if h.last_offset_delta < 0 or h.records_count < 0:
        return "negative last_offset_delta"
    if check_crc and crc32c(data[21:]) != h.crc:
        return "CRC mismatch"
    return None


#: header fields a corruption may overwrite: (offset, struct format)
_FIELDS = [(0, ">q"), (8, ">i"), (16, ">b"), (17, ">I"), (23, ">i"), (57, ">i")]


@deterministic
@given(
    n=st.integers(1, 4),
    changes=st.lists(
        st.tuples(st.sampled_from(_FIELDS), st.integers(-(2**31), 2**31 - 1)), max_size=3
    ),
    cut=st.integers(-70, 3),
    recrc=st.booleans(),
    check_crc=st.booleans(),
)
def test_check_batch_is_validate_batch_without_the_header(
    n: int,
    changes: list[tuple[tuple[int, str], int]],
    cut: int,
    recrc: bool,
    check_crc: bool,
) -> None:
    data = bytearray(_sample(n))
    for (offset, fmt), value in changes:  # the value's bits, as the field's width holds them
        struct.pack_into(fmt.upper(), data, offset, value % (1 << 8 * struct.calcsize(fmt)))
    batch = bytes(_recrc(data) if recrc else data)
    if cut < 0:
        batch = batch[:cut]
    else:
        batch += b"\x00" * cut
    problem = _first_problem(batch, check_crc)
    if problem is None:
        header = validate_batch(batch, check_crc=check_crc)
        assert check_batch(batch, check_crc) == (
            header.base_offset,
            header.size_bytes,
            header.last_offset_delta,
        )
        return
    with pytest.raises(CorruptRecordError, match=problem) as validated:
        validate_batch(bytearray(batch), check_crc=check_crc)
    with pytest.raises(CorruptRecordError) as checked:
        check_batch(batch, check_crc)
    assert str(checked.value) == str(validated.value)


# ------------------------------------------------------------------ rewriting


def test_with_base_offset_touches_only_fields_outside_the_crc() -> None:
    batch = _sample()
    moved = with_base_offset(batch, 1_000_000, leader_epoch=5)
    assert len(moved) == len(batch)
    assert moved[21:] == batch[21:]  # CRC range untouched
    assert moved[8:12] == batch[8:12] and moved[16:21] == batch[16:21]
    header = validate_batch(moved)  # CRC still valid
    assert (header.base_offset, header.partition_leader_epoch) == (1_000_000, 5)
    assert [r.offset for r in iter_records(moved)] == [1_000_000, 1_000_001, 1_000_002]
    kept = with_base_offset(batch, 3)
    assert RecordBatchHeader.parse(kept).partition_leader_epoch == -1


def test_with_base_offset_bad_input() -> None:
    with pytest.raises(ValueError, match="out of range"):
        with_base_offset(_sample(), -1)
    with pytest.raises(ValueError, match="out of range"):
        with_base_offset(_sample(), 2**63 - 2)  # last offset would overflow
    with pytest.raises(ValueError, match="int32"):
        with_base_offset(_sample(), 0, leader_epoch=2**31)
    bad = bytearray(_sample())
    bad[16] = 0
    with pytest.raises(CorruptRecordError, match="magic"):
        with_base_offset(bytes(bad), 0)


# ------------------------------------------------------------------ batches


def test_iter_batches_splits_and_validates() -> None:
    batches = [_sample(n, base_offset=10 * n) for n in (1, 2, 3)]
    joined = b"".join(batches)
    assert list(iter_batches(joined)) == batches
    assert list(iter_batches(b"")) == []
    with pytest.raises(CorruptRecordError, match="truncated batch at position"):
        list(iter_batches(joined[:-5]))
    with pytest.raises(CorruptRecordError, match="5 bytes left"):
        list(iter_batches(joined + b"\x00" * 5))
    bad = bytearray(joined)
    bad[len(batches[0]) + 30] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=f"position {len(batches[0])}: CRC"):
        list(iter_batches(bytes(bad)))
    assert [r.offset for r in records_of(iter_batches(joined))] == [10, 20, 21, 30, 31, 32]


# ------------------------------------------------------------------ records

_headers = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)
_records = st.lists(
    st.builds(
        Record,
        value=st.none() | st.binary(max_size=300),
        key=st.none() | st.binary(max_size=20),
        headers=_headers,
        timestamp_ms=st.none() | st.integers(0, 2**41),
    ),
    min_size=1,
    max_size=20,
)


@deterministic
@given(
    _records,
    st.integers(0, 2**40),
    st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
)
def test_build_then_iter_round_trip(
    items: list[Record], base_offset: int, compression: int
) -> None:
    batch = build_batch(items, base_offset, base_timestamp_ms=10**12, compression=compression)
    header = validate_batch(batch)
    assert header.compression == compression
    assert header.records_count == len(items)
    assert header.last_offset == base_offset + len(items) - 1
    stamps = [10**12 if r.timestamp_ms is None else r.timestamp_ms for r in items]
    assert header.max_timestamp_ms == max(stamps)
    assert list(iter_records(batch)) == [
        DecodedRecord(base_offset + i, ts, r.key, r.value, r.headers)
        for i, (r, ts) in enumerate(zip(items, stamps, strict=True))
    ]


def test_gzip_payload_is_really_gzip() -> None:
    batch = build_batch([b"x" * 1000] * 10, base_timestamp_ms=0, compression=CompressionType.GZIP)
    assert len(batch) < 200
    body = zlib.decompress(batch[HEADER_BYTES:], wbits=31)
    plain = build_batch([b"x" * 1000] * 10, base_timestamp_ms=0)
    assert body == plain[HEADER_BYTES:]


def test_unsupported_codecs() -> None:
    with pytest.raises(UnsupportedCompressionError):
        build_batch([b"a"], compression=CompressionType.SNAPPY)
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])
    for codec, name in ((2, "snappy"), (3, "lz4"), (4, "zstd")):
        snappy = bytearray(_sample())
        struct.pack_into(">h", snappy, 21, codec)
        stored = _recrc(snappy)
        validate_batch(stored)  # storing and forwarding it is fine
        with pytest.raises(UnsupportedCompressionError, match=name):
            list(iter_records(stored))


def test_bad_gzip_data() -> None:
    bad = bytearray(_sample())
    struct.pack_into(">h", bad, 21, CompressionType.GZIP)
    with pytest.raises(CorruptRecordError, match="gzip"):
        list(iter_records(_recrc(bad)))


def test_records_that_do_not_fill_the_batch() -> None:
    batch = _sample(2)
    too_many = bytearray(batch)
    struct.pack_into(">i", too_many, 57, 3)
    with pytest.raises(CorruptRecordError, match="record 2"):
        list(iter_records(_recrc(too_many)))
    too_few = bytearray(batch)
    struct.pack_into(">i", too_few, 57, 1)
    with pytest.raises(CorruptRecordError, match="bytes after the last of 1 records"):
        list(iter_records(_recrc(too_few)))
    wrong_length = bytearray(batch)
    wrong_length[HEADER_BYTES] += 2  # first record claims one byte more
    with pytest.raises(CorruptRecordError):
        list(iter_records(_recrc(wrong_length)))


def test_varint_limits() -> None:
    out = bytearray()
    records._write_varint(out, -(2**63))
    records._write_varint(out, 2**63 - 1)
    value, position = records._read_varint(out, 0)
    assert value == -(2**63)
    assert records._read_varint(out, position)[0] == 2**63 - 1
    with pytest.raises(ValueError, match="varlong"):
        records._write_varint(out, 2**63)
    with pytest.raises(CorruptRecordError, match="10 bytes"):
        records._read_varint(b"\xff" * 11, 0)
    with pytest.raises(CorruptRecordError, match="truncated varint"):
        records._read_varint(b"\x80", 0)


# ------------------------------------------------------------------ interop


def _kafka_python() -> Any:
    pytest.importorskip("kafka")
    with warnings.catch_warnings():
        # kafka-python 3.0.12 calls importlib.resources.read_text (deprecated) on import
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record import default_records
    return default_records


def test_interop_with_kafka_python() -> None:
    default_records = _kafka_python()
    builder = default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=1000, key=b"k", value=b"v", headers=[("h", b"x")])
    builder.append(1, timestamp=1005, key=None, value=b"v2", headers=[])
    theirs = bytes(builder.build())
    ours = build_batch(
        [
            Record(b"v", key=b"k", headers=(("h", b"x"),), timestamp_ms=1000),
            Record(b"v2", timestamp_ms=1005),
        ],
        partition_leader_epoch=0,  # kafka-python writes 0 where Java clients write -1
    )
    assert ours == theirs
    assert [(r.offset, r.key, r.value, r.headers) for r in iter_records(theirs)] == [
        (0, b"k", b"v", (("h", b"x"),)),
        (1, None, b"v2", ()),
    ]
    decoded = default_records.DefaultRecordBatch(with_base_offset(ours, 77))
    assert decoded.validate_crc()
    assert [(r.offset, r.value) for r in decoded] == [(77, b"v"), (78, b"v2")]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.binary(max_size=200), st.integers(8180, 8300).map(lambda n: b"v" * n)),
        min_size=1,
        max_size=80,
    )
)
def test_plain_values_encode_exactly_as_records_do(values: list[bytes]) -> None:
    """The values-only fast path writes the same bytes as the general encoder."""
    fast = build_batch(values, base_timestamp_ms=1_700_000_000_000)
    general = build_batch([Record(v) for v in values], base_timestamp_ms=1_700_000_000_000)
    assert fast == general
    assert [r.value for r in iter_records(fast)] == values


def test_the_plain_record_prefixes_kept_are_bounded() -> None:
    """The values-only path keeps one prefix per record shape (offset delta, size) it
    met, up to a bound; shapes past it are encoded all the same."""
    shapes = records._PLAIN_PREFIXES_MAX + 500
    for size in range(shapes):  # one new shape each: offset delta 0, this size
        value = b"s" * size
        [record] = iter_records(build_batch([value], base_timestamp_ms=0))
        assert record.value == value
    assert len(records._PLAIN_PREFIXES) == records._PLAIN_PREFIXES_MAX
