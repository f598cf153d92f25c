"""Kafka record batches, format v2 (magic 2): parse, validate, build, rewrite.

A batch is a 61-byte header followed by its records (big-endian throughout)::

    offset  size  field                 covered by the CRC
      0      8    base_offset           no   (the broker assigns it on append)
      8      4    batch_length          no   (bytes after this field: size - 12)
     12      4    partition_leader_epoch no  (the broker stamps it on append)
     16      1    magic (= 2)           no
     17      4    crc (CRC-32C, unsigned)
     21      2    attributes            yes  (bits 0-2 compression, 3 timestamp
                                              type, 4 transactional, 5 control)
     23      4    last_offset_delta     yes
     27      8    base_timestamp        yes
     35      8    max_timestamp         yes
     43      8    producer_id           yes
     51      2    producer_epoch        yes
     53      4    base_sequence         yes
     57      4    records_count         yes
     61      ...  records (compressed as one block if attributes say so)

The CRC covers byte 21 to the end, so a broker can give a batch its offsets and
leader epoch (:func:`with_base_offset`) without recomputing it: the producer's
CRC stays valid end to end. A batch covers the offsets ``base_offset`` to
``base_offset + last_offset_delta``.

Each record inside is length-prefixed, with zig-zag varints (the protobuf
encoding of signed integers)::

    length varint | attributes i8 | timestamp_delta varlong | offset_delta varint
    | key_length varint (-1 = null) | key | value_length varint | value
    | header_count varint | (key_length varint | key utf-8
                             | value_length varint | value) * header_count

Worked example: ``build_batch([Record(b"v", key=b"k")], base_timestamp_ms=1000)``
gives a 61 + 9 = 70-byte batch. Its one record is ``10 00 00 00 02 6b 02 76 00``:
length 8 (``10``, zig-zag), attributes 0, timestamp delta 0, offset delta 0, key
length 1 (``02``), ``k``, value length 1, ``v``, no headers. ``batch_length`` is
58, ``last_offset_delta`` 0, ``records_count`` 1.

Compression: gzip batches (codec 1) are built and decoded with :mod:`zlib`;
other codecs (snappy, lz4, zstd) can be stored and forwarded as opaque bytes,
but :func:`iter_records` refuses them with :class:`UnsupportedCompressionError`.

CRC-32C (:func:`crc32c`) is computed in C in the compiled build (``cbatch.pxd``), by
the ``crc32c`` package (hardware accelerated) in the pure one: one name, two paths,
which the tests check against each other.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "CRC32C_IMPLEMENTATION",
    "CRC_START",
    "HEADER_BYTES",
    "LOG_OVERHEAD_BYTES",
    "MAGIC",
    "CompressionType",
    "CorruptRecordError",
    "DecodedRecord",
    "Record",
    "RecordBatchHeader",
    "UnsupportedCompressionError",
    "build_batch",
    "check_batch",
    "crc32c",
    "iter_batches",
    "iter_records",
    "next_offset",
    "records_of",
    "span_crc32c",
    "validate_batch",
    "with_base_offset",
]

BytesLike = bytes | bytearray | memoryview

#: The size of the v2 batch header, and so of the smallest batch (no records).
HEADER_BYTES = 61
#: The record batch format this module handles.
MAGIC = 2
#: ``batch_length`` counts the bytes after base_offset (8) and itself (4).
LOG_OVERHEAD_BYTES = 12
#: The CRC covers the batch from this byte (attributes) to its end.
CRC_START = 21

_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header
_BASE_OFFSET = struct.Struct(">q")
_MAGIC_AND_DELTA = struct.Struct(">bxxxxxxi")  # magic (16), last offset delta (23)
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
assert _HEADER.size == HEADER_BYTES

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20


class CompressionType:
    """The codec numbers of the attributes' low three bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4
    NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


class CorruptRecordError(ValueError):
    """A batch is malformed: truncated, wrong magic, length or CRC mismatch.

    The wire broker answers it with CORRUPT_MESSAGE (2).
    """


class UnsupportedCompressionError(ValueError):
    """The batch is compressed with a codec this module cannot decode."""


# --------------------------------------------------------------------------- CRC-32C

#: Up to this many bytes, the pure build's :func:`crc32c_span` copies the span
#: (cheaper than a memoryview for a typical batch); a longer one is viewed.
_COPY_FOR_CRC_BYTES = 4096

try:
    import cython
except ImportError:  # the pure-Python build, with Cython not installed
    from .. import _cython_shim as cython

#: Where :func:`crc32c` computes: ``"compiled"`` (C, ``cbatch.pxd``) or ``"crc32c"`` (the
#: package, in the pure build).
CRC32C_IMPLEMENTATION = "compiled" if cython.compiled else "crc32c"

if not cython.compiled:  # the compiled build cimports these, in C (cbatch.pxd)
    from crc32c import crc32c as _package_crc32c

    #: A v2 header's (base offset, batch length, magic, crc, last offset delta, records
    #: count) at ``data[p:]`` (``data`` holds at least the header there).
    batch_fields = struct.Struct(">qi4xbIxxi30xi").unpack_from

    def crc32c_span(data: bytes | bytearray, start: int, end: int, hardware: bool = True) -> int:
        """The CRC-32C of ``data[start:end]``, -1 if that is not inside ``data`` (as in
        C; ``hardware`` matters only there). O(end - start)."""
        if not 0 <= start <= end <= len(data):
            return -1
        if end - start <= _COPY_FOR_CRC_BYTES:
            return _package_crc32c(data[start:end])  # a small copy costs less than a view
        with memoryview(data) as view:
            return _package_crc32c(view[start:end])

    #: the same for a bytearray (C has one function for each type)
    crc32c_span_of_bytearray = crc32c_span

    def stamped(buf: bytes, base_offset: int, leader_epoch: int, set_epoch: bool) -> bytes:
        """A copy of the batch with base offset ``base_offset`` and, if ``set_epoch``,
        leader epoch ``leader_epoch``; the caller checked the values. O(len(buf))."""
        out = bytearray(buf)
        _BASE_OFFSET.pack_into(out, 0, base_offset)
        if set_epoch:
            _LEADER_EPOCH.pack_into(out, 12, leader_epoch)
        return bytes(out)


def crc32c(data: BytesLike) -> int:
    """The CRC-32C (Castagnoli) of ``data`` as an unsigned 32-bit int: in C in the
    compiled build (``cbatch.pxd``: the CPU's crc32 instruction where it has it, else
    a table), through the ``crc32c`` package in the pure one. Every CRC of this
    package is this one or its span form. O(len(data)) (plus a copy of a buffer that
    is not ``bytes``)."""
    whole = data if type(data) is bytes else bytes(data)
    return crc32c_span(whole, 0, len(whole))


def span_crc32c(data: bytes, start: int, end: int, hardware: bool = True) -> int:
    """The CRC-32C of ``data[start:end]`` exactly as the read path computes it (in C in
    the compiled build; there ``hardware`` False forces the table even where the CPU
    has the instruction), -1 if that span is not inside ``data``. For tests and tools;
    see ``cbatch.pxd``. O(end - start)."""
    return crc32c_span(data, start, end, hardware)


# --------------------------------------------------------------------------- header


class RecordBatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch, as parsed (not validated).

    A named tuple: immutable, and made in one step (it is parsed for every batch
    appended, replicated and read back).
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: BytesLike, position: int = 0) -> RecordBatchHeader:
        """Parse the header at ``position``. O(1).

        Raises :class:`CorruptRecordError` if fewer than 61 bytes are left. Only
        the layout is read: use :func:`validate_batch` for magic, length and CRC.
        """
        if position < 0 or len(buf) - position < HEADER_BYTES:
            raise CorruptRecordError(
                f"truncated batch header: {max(0, len(buf) - position)} bytes at position "
                f"{position}, need {HEADER_BYTES}"
            )
        # tuple's own constructor: ``_make`` is a Python function, this a C call
        return tuple.__new__(cls, _HEADER.unpack_from(buf, position))

    @property
    def size_bytes(self) -> int:
        """The whole batch's size: ``batch_length + 12``."""
        return self.batch_length + LOG_OVERHEAD_BYTES

    @property
    def last_offset(self) -> int:
        """The last offset the batch covers: ``base_offset + last_offset_delta``."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after the batch: ``last_offset + 1``."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """The codec number (see :class:`CompressionType`)."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def timestamp_type(self) -> int:
        """0 = create time, 1 = log append time."""
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0


def next_offset(records: BytesLike) -> int | None:
    """The offset after the last of the concatenated batches in ``records`` (a fetch
    answer), None if there is none: where a reader fetches next. Reads only the
    headers (not validated). O(batches).
    """
    data = records if type(records) is bytes else bytes(records)
    header_bytes, overhead = HEADER_BYTES, LOG_OVERHEAD_BYTES
    position = 0
    result = None
    end = len(data)
    while position < end:
        if end - position < header_bytes:
            RecordBatchHeader.parse(data, position)  # raises, saying how short it is
        base_offset, batch_length, _, _, last_offset_delta, _ = batch_fields(data, position)
        result = base_offset + last_offset_delta + 1
        position += batch_length + overhead
    return result


def check_batch(data: bytes, check_crc: bool = True) -> tuple[int, int, int]:
    """Check that ``data`` is exactly one well-formed v2 batch; return its (base offset,
    size in bytes, last offset delta).

    :func:`validate_batch`'s checks, in its order, with its errors, reading only the
    fields they need (in C in the compiled build): what a log's append calls. O(len(data))
    with the CRC, O(1) without.
    """
    if len(data) < HEADER_BYTES:
        RecordBatchHeader.parse(data)  # raises, saying how short it is
    base_offset, batch_length, magic, crc, last_offset_delta, records_count = batch_fields(data, 0)
    if magic != MAGIC:
        raise CorruptRecordError(f"unsupported magic {magic}, expected {MAGIC}")
    size = batch_length + LOG_OVERHEAD_BYTES
    if size < HEADER_BYTES:
        raise CorruptRecordError(f"batch_length {batch_length} is shorter than the header")
    if size != len(data):
        problem = "truncated batch" if size > len(data) else "length mismatch"
        raise CorruptRecordError(
            f"{problem}: batch_length says {size} bytes, buffer holds {len(data)}"
        )
    if last_offset_delta < 0 or records_count < 0:
        raise CorruptRecordError(
            f"negative last_offset_delta ({last_offset_delta}) or records_count ({records_count})"
        )
    if check_crc:
        actual = crc32c_span(data, CRC_START, size)
        if actual != crc:
            raise CorruptRecordError(
                f"CRC mismatch: header says {crc:#010x}, data gives {actual:#010x}"
            )
    return base_offset, size, last_offset_delta


def validate_batch(buf: BytesLike, *, check_crc: bool = True) -> RecordBatchHeader:
    """Check that ``buf`` is exactly one well-formed v2 batch; return its header.

    Checks, in order: at least 61 bytes, magic 2, ``batch_length + 12 == len(buf)``,
    a non-negative ``last_offset_delta`` and ``records_count``, and (unless
    ``check_crc`` is false) the CRC-32C of bytes 21 to the end. Raises
    :class:`CorruptRecordError` naming the first failure (:func:`check_batch`).
    O(len(buf)) with the CRC, O(1) without.
    """
    data = buf if type(buf) is bytes else bytes(buf)
    check_batch(data, check_crc)
    return RecordBatchHeader.parse(data)


def with_base_offset(buf: BytesLike, base_offset: int, leader_epoch: int | None = None) -> bytes:
    """A copy of the batch with a new base offset (and leader epoch), CRC untouched.

    Both fields lie before the CRC's range, so the batch stays valid. Raises
    :class:`CorruptRecordError` if ``buf`` is no v2 header, and ``ValueError`` if
    the offsets would not fit an int64. O(len(buf)) (one copy).
    """
    if len(buf) < HEADER_BYTES:
        RecordBatchHeader.parse(buf)  # raises, saying how short it is
    magic, delta = _MAGIC_AND_DELTA.unpack_from(buf, 16)
    if magic != MAGIC:
        raise CorruptRecordError(f"unsupported magic {magic}, expected {MAGIC}")
    if not 0 <= base_offset <= _INT64_MAX - max(0, delta):
        raise ValueError(f"base offset {base_offset} out of range for this batch")
    if leader_epoch is not None and not -(2**31) <= leader_epoch <= _INT32_MAX:
        raise ValueError(f"leader epoch {leader_epoch} does not fit an int32")
    data = buf if type(buf) is bytes else bytes(buf)
    if leader_epoch is None:
        return stamped(data, base_offset, 0, False)
    return stamped(data, base_offset, leader_epoch, True)  # in C when compiled


def iter_batches(buf: BytesLike, *, check_crc: bool = True) -> Iterator[bytes]:
    """Split concatenated batches, validating each (see :func:`validate_batch`).

    A truncated last batch raises :class:`CorruptRecordError` (the log never
    returns partial batches). O(len(buf)).
    """
    view = memoryview(buf)
    position = 0
    end = len(view)
    while position < end:
        if end - position < LOG_OVERHEAD_BYTES:
            raise CorruptRecordError(
                f"truncated batch at position {position}: {end - position} bytes left"
            )
        (batch_length,) = _LEADER_EPOCH.unpack_from(view, position + 8)
        size = batch_length + LOG_OVERHEAD_BYTES
        if size < HEADER_BYTES:
            raise CorruptRecordError(
                f"batch at position {position} has batch_length {batch_length}, "
                "shorter than the header"
            )
        if position + size > end:
            raise CorruptRecordError(
                f"truncated batch at position {position}: needs {size} bytes, {end - position} left"
            )
        chunk = view[position : position + size]
        try:
            validate_batch(chunk, check_crc=check_crc)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"batch at position {position}: {exc}") from None
        yield bytes(chunk)
        position += size


# --------------------------------------------------------------------------- varints


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _write_varint(out: bytearray, value: int) -> None:
    """Append a zig-zag varint (up to 64-bit signed)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong")
    encoded = _zigzag(value) & 0xFFFFFFFFFFFFFFFF
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)


def _read_varint(buf: BytesLike, position: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``position``; return (value, next position)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if position >= end:
            raise CorruptRecordError("truncated varint in record")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in record")
    return (result >> 1) ^ -(result & 1), position


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _read_bytes(buf: BytesLike, position: int) -> tuple[bytes | None, int]:
    length, position = _read_varint(buf, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(buf):
        raise CorruptRecordError("record field runs past the end of its record")
    return bytes(buf[position:end]), end


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class Record:
    """A record to put into a batch. ``timestamp_ms=None`` means the batch's base."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    """A record read back from a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


#: The varint bytes of 0 .. _SMALL_VARINTS - 1 (zig-zag: value v is 2v), one lookup
#: instead of a loop for the lengths and deltas of ordinary records.
_SMALL_VARINTS_LIMIT = 1 << 13
_SMALL_VARINTS: tuple[bytes, ...] = tuple(
    bytes([(v << 1) & 0x7F | 0x80, v >> 6]) if v >= 64 else bytes([v << 1])
    for v in range(_SMALL_VARINTS_LIMIT)
)
_NULL_KEY = b"\x01"  # varint -1: a null key
_NO_HEADERS = b"\x00"  # varint 0: no headers


#: A plain record's bytes before its value (its length, attributes, timestamp delta 0,
#: offset delta, null key, value length), by ``offset_delta << 16 | value length``:
#: made once per shape, a batch of equal-sized values then costs a lookup per record.
#: At most :data:`_PLAIN_PREFIXES_MAX` shapes are kept.
_PLAIN_PREFIXES: dict[int, bytes] = {}
_PLAIN_PREFIXES_MAX = 4096


def _encode_plain_records(values: Sequence[Record | bytes]) -> bytes | None:
    """The records section of plain values (``bytes``: no key, no headers, base
    timestamp), exactly as :func:`_encode_record` writes it, or None if an item is
    a :class:`Record` or too large for the one-lookup varints. O(total size)."""
    limit = _SMALL_VARINTS_LIMIT - 8  # room for the record's own fields
    if len(values) >= limit:
        return None
    prefixes = _PLAIN_PREFIXES
    parts: list[bytes] = []
    append = parts.append
    for delta, value in enumerate(values):
        if type(value) is not bytes:
            return None
        size = len(value)
        if size >= limit:
            return None
        shape = delta << 16 | size
        prefix = prefixes.get(shape)
        if prefix is None:
            small = _SMALL_VARINTS
            offset_delta = small[delta]
            size_bytes = small[size]
            # attributes, timestamp delta 0, null key and header count: 4 bytes
            length = 4 + len(offset_delta) + len(size_bytes) + size
            prefix = small[length] + b"\x00\x00" + offset_delta + _NULL_KEY + size_bytes
            if len(prefixes) < _PLAIN_PREFIXES_MAX:
                prefixes[shape] = prefix
        append(prefix)
        append(value)
        append(_NO_HEADERS)
    return b"".join(parts)


def _encode_record(
    out: bytearray, record: Record, offset_delta: int, timestamp_delta_ms: int
) -> None:
    body = bytearray(b"\x00")  # attributes: unused, always 0
    _write_varint(body, timestamp_delta_ms)
    _write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for name, value in record.headers:
        _write_bytes(body, name.encode("utf-8"))
        _write_bytes(body, value)
    _write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[Record | bytes],
    base_offset: int = 0,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    base_timestamp_ms: int | None = None,
    compression: int = CompressionType.NONE,
    is_transactional: bool = False,
) -> bytes:
    """Encode ``records`` as one v2 batch with a correct CRC. O(total record size).

    A plain ``bytes`` item is a record with that value, no key and no headers.
    Records get offset deltas 0, 1, ...; a record without a timestamp takes
    ``base_timestamp_ms`` (default: the first record's timestamp, else now).
    ``compression`` may be NONE or GZIP.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    if compression not in (CompressionType.NONE, CompressionType.GZIP):
        raise UnsupportedCompressionError(
            f"cannot build a batch with codec {compression}: only none and gzip"
        )
    payload, base_timestamp_ms, max_timestamp_ms = _encode_records(records, base_timestamp_ms)
    if compression == CompressionType.GZIP:
        compressor = zlib.compressobj(wbits=31)
        payload = compressor.compress(payload) + compressor.flush()
    count = len(records)
    out = bytearray(HEADER_BYTES)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        HEADER_BYTES - LOG_OVERHEAD_BYTES + len(payload),  # batch_length
        partition_leader_epoch,
        MAGIC,
        0,  # crc, filled in below
        compression | (_TRANSACTIONAL_BIT if is_transactional else 0),  # attributes
        count - 1,  # last_offset_delta
        base_timestamp_ms,
        max_timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    out += payload
    _CRC.pack_into(out, 17, crc32c_span_of_bytearray(out, CRC_START, len(out)))  # C if compiled
    return bytes(out)


def _encode_records(
    records: Sequence[Record | bytes], base_timestamp_ms: int | None
) -> tuple[bytes, int, int]:
    """The records section (uncompressed), the batch's base timestamp and its max one;
    see :func:`build_batch`. O(total record size)."""
    plain = _encode_plain_records(records)  # the common case: values only
    if plain is not None:
        if base_timestamp_ms is None:
            base_timestamp_ms = time.time_ns() // 1_000_000
        return plain, base_timestamp_ms, base_timestamp_ms
    items = [r if isinstance(r, Record) else Record(bytes(r)) for r in records]
    if base_timestamp_ms is None:
        first = items[0].timestamp_ms
        base_timestamp_ms = first if first is not None else time.time_ns() // 1_000_000
    timestamps_ms = [base_timestamp_ms if r.timestamp_ms is None else r.timestamp_ms for r in items]
    body = bytearray()
    for delta, (record, ts_ms) in enumerate(zip(items, timestamps_ms, strict=True)):
        _encode_record(body, record, delta, ts_ms - base_timestamp_ms)
    return bytes(body), base_timestamp_ms, max(timestamps_ms)


def _decompress(header: RecordBatchHeader, payload: memoryview) -> BytesLike:
    codec = header.compression
    if codec == CompressionType.NONE:
        return payload
    if codec == CompressionType.GZIP:
        try:
            return zlib.decompress(payload, wbits=31)
        except zlib.error as exc:
            raise CorruptRecordError(f"bad gzip data in batch: {exc}") from None
    name = CompressionType.NAMES[codec] if codec < len(CompressionType.NAMES) else str(codec)
    raise UnsupportedCompressionError(
        f"cannot decode a {name}-compressed batch (store and forward it as bytes)"
    )


def iter_records(buf: BytesLike, *, check_crc: bool = True) -> Iterator[DecodedRecord]:
    """Decode the records of one batch (uncompressed or gzip). O(len(buf)).

    The batch is validated first (:func:`validate_batch`); records that do not
    exactly fill the records section, or whose count differs from
    ``records_count``, raise :class:`CorruptRecordError`.
    """
    header = validate_batch(buf, check_crc=check_crc)
    data = _decompress(header, memoryview(buf)[HEADER_BYTES:])
    return _decode_records(header, data)


def _decode_records(header: RecordBatchHeader, data: BytesLike) -> Iterator[DecodedRecord]:
    position = 0
    end = len(data)
    for index in range(header.records_count):
        if position >= end:
            raise CorruptRecordError(
                f"record {index} is missing: the batch says {header.records_count} records"
            )
        length, position = _read_varint(data, position)
        record_end = position + length
        if length < 1 or record_end > end:
            raise CorruptRecordError(f"record {index} runs past the end of the batch")
        record = memoryview(data)[position:record_end]
        pos = 1  # skip the attributes byte
        timestamp_delta_ms, pos = _read_varint(record, pos)
        offset_delta, pos = _read_varint(record, pos)
        key, pos = _read_bytes(record, pos)
        value, pos = _read_bytes(record, pos)
        header_count, pos = _read_varint(record, pos)
        if header_count < 0:
            raise CorruptRecordError(f"record {index} has {header_count} headers")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            name, pos = _read_bytes(record, pos)
            if name is None:
                raise CorruptRecordError(f"record {index} has a null header key")
            header_value, pos = _read_bytes(record, pos)
            try:
                headers.append((name.decode("utf-8"), header_value))
            except UnicodeDecodeError:
                raise CorruptRecordError(
                    f"record {index} has a header key that is not UTF-8"
                ) from None
        if pos != length:
            raise CorruptRecordError(
                f"record {index}: length says {length} bytes, fields use {pos}"
            )
        yield DecodedRecord(
            offset=header.base_offset + offset_delta,
            timestamp_ms=header.base_timestamp_ms + timestamp_delta_ms,
            key=key,
            value=value,
            headers=tuple(headers),
        )
        position = record_end
    if position != end:
        raise CorruptRecordError(
            f"{end - position} bytes after the last of {header.records_count} records"
        )


def records_of(batches: Iterable[BytesLike]) -> Iterator[DecodedRecord]:
    """The records of several batches in order (for tests and tools). O(total size)."""
    for batch in batches:
        yield from iter_records(batch)
