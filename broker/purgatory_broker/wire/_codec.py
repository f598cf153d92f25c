"""The wire codec: kafka-python's ``kafka.protocol`` classes, and the frame rules around them.

A Kafka request on the wire is a frame: a 4-byte big-endian size, then the
request header (api_key i16, api_version i16, correlation_id i32, client_id, and
tagged fields in flexible versions), then the body. The broker reads the first
8 bytes itself (:func:`peek_header`) to pick the request class and to answer
even a request it cannot decode; everything else (headers included, flexible
versions, compact strings, tagged fields) is kafka-python's code
(:func:`decode_request`, :func:`encode_response`).

What the broker serves is the table :data:`SUPPORTED_APIS`; what ApiVersions
advertises is :data:`ADVERTISED_VERSIONS` (both the answer to a supported
ApiVersions version and the UNSUPPORTED_VERSION one use it): the same ranges,
except Produce, listed from v0 though v0-v2 are refused, as Kafka 4 does (see
:data:`ADVERTISED_PRODUCE_MIN_VERSION`). The version ranges are capped where newer versions
need something the broker does not have: Produce v13+ names topics by id only,
Fetch v17+ carries replica directory ids, Metadata v13 adds nothing needed,
OffsetCommit v9+ and OffsetFetch v9+ belong to the new consumer protocol
(KIP-848) and name topics by id from v10, ListGroups v5 filters by group type.
Fetch v13-16 name topics by id: the broker maps them to names (see
:mod:`._handlers`). The group APIs' answers come from
:class:`purgatory_broker.broker.GroupCoordinator` (see :mod:`._groups`).

Only kafka-python's public API is used (the ``kafka`` extra allows 3.x from 3.0.12):
the message classes, their ``encode``/``decode``/``with_header``, the schema's
``fields`` (name -> field, with ``for_version_q``, ``nullable_for_version_q``, ...;
:func:`_check_nulls` walks them) and ``EncodeBufferPool.acquire()`` with its
buffer's ``buf`` (:func:`_drop_encode_buffer`). Importing kafka-python on Python
3.11 emits ``DeprecationWarning: read_text is deprecated`` (and ``open_text is
deprecated``) from its schema loader; the import below ignores exactly those,
so this module can be imported first under ``filterwarnings = error`` (every
schema is loaded at import time, so no later import of ``kafka`` warns again).
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from purgatory_broker.broker import ErrorCode

with warnings.catch_warnings():
    # read_text warns, and so does the open_text it calls
    warnings.filterwarnings(
        "ignore", message="(read|open)_text is deprecated", category=DeprecationWarning
    )
    from kafka.protocol.admin.groups import (
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )
    from kafka.protocol.consumer import (
        FetchRequest,
        FetchResponse,
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        MetadataRequest,
        MetadataResponse,
    )
    from kafka.protocol.producer import (
        InitProducerIdRequest,
        InitProducerIdResponse,
        ProduceRequest,
        ProduceResponse,
    )

    try:
        from kafka.protocol.schemas.fields.codecs import EncodeBufferPool
    except ImportError:  # a kafka-python 3.x without the pool keeps no buffer to shrink
        EncodeBufferPool = None

__all__ = [
    "ADVERTISED_PRODUCE_MIN_VERSION",
    "ADVERTISED_VERSIONS",
    "API_VERSIONS",
    "DESCRIBE_GROUPS",
    "ENCODE_BUFFER_KEEP_BYTES",
    "FETCH",
    "FIND_COORDINATOR",
    "HEARTBEAT",
    "INIT_PRODUCER_ID",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "LIST_GROUPS",
    "LIST_OFFSETS",
    "METADATA",
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "PRODUCE",
    "SUPPORTED_APIS",
    "SYNC_GROUP",
    "ApiSpec",
    "ApiVersionsResponse",
    "DecodedRequest",
    "DescribeGroupsResponse",
    "FetchResponse",
    "FindCoordinatorResponse",
    "HeartbeatResponse",
    "InitProducerIdResponse",
    "JoinGroupResponse",
    "LeaveGroupResponse",
    "ListGroupsResponse",
    "ListOffsetsResponse",
    "MetadataResponse",
    "OffsetCommitResponse",
    "OffsetFetchResponse",
    "ProduceResponse",
    "RequestHeaderPeek",
    "SyncGroupResponse",
    "api_versions_response",
    "decode_request",
    "encode_response",
    "peek_header",
    "unsupported_api_versions_response",
]

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
API_VERSIONS = 18
INIT_PRODUCER_ID = 22

#: The size of the fixed part of every request header: api key, version, correlation id.
HEADER_PEEK_BYTES = 8
_PEEK = struct.Struct(">hhi")


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API the broker answers: its kafka-python classes and the versions served."""

    api_key: int
    name: str
    request: Any  # a kafka.protocol ApiMessage class (untyped library)
    response: Any
    min_version: int
    max_version: int


#: api key -> what is served. ApiVersions answers with exactly these ranges.
SUPPORTED_APIS: dict[int, ApiSpec] = {
    spec.api_key: spec
    for spec in (
        ApiSpec(PRODUCE, "Produce", ProduceRequest, ProduceResponse, 3, 9),
        ApiSpec(FETCH, "Fetch", FetchRequest, FetchResponse, 4, 16),
        ApiSpec(LIST_OFFSETS, "ListOffsets", ListOffsetsRequest, ListOffsetsResponse, 1, 7),
        ApiSpec(METADATA, "Metadata", MetadataRequest, MetadataResponse, 0, 12),
        ApiSpec(OFFSET_COMMIT, "OffsetCommit", OffsetCommitRequest, OffsetCommitResponse, 2, 8),
        ApiSpec(OFFSET_FETCH, "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse, 1, 8),
        ApiSpec(
            FIND_COORDINATOR,
            "FindCoordinator",
            FindCoordinatorRequest,
            FindCoordinatorResponse,
            0,
            5,
        ),
        ApiSpec(JOIN_GROUP, "JoinGroup", JoinGroupRequest, JoinGroupResponse, 0, 9),
        ApiSpec(HEARTBEAT, "Heartbeat", HeartbeatRequest, HeartbeatResponse, 0, 4),
        ApiSpec(LEAVE_GROUP, "LeaveGroup", LeaveGroupRequest, LeaveGroupResponse, 0, 5),
        ApiSpec(SYNC_GROUP, "SyncGroup", SyncGroupRequest, SyncGroupResponse, 0, 5),
        ApiSpec(
            DESCRIBE_GROUPS, "DescribeGroups", DescribeGroupsRequest, DescribeGroupsResponse, 0, 5
        ),
        ApiSpec(LIST_GROUPS, "ListGroups", ListGroupsRequest, ListGroupsResponse, 0, 4),
        ApiSpec(API_VERSIONS, "ApiVersions", ApiVersionsRequest, ApiVersionsResponse, 0, 3),
        ApiSpec(
            INIT_PRODUCER_ID, "InitProducerId", InitProducerIdRequest, InitProducerIdResponse, 0, 4
        ),
    )
}


#: ApiVersions lists Produce from this version, though a Produce below the lowest in
#: SUPPORTED_APIS (v3) closes the connection unanswered: Kafka 4 does the same (KAFKA-18659:
#: it lists Produce v0-v2 and closes the connection of a request at those versions),
#: since librdkafka before its fix of issue 4956 (kcat 1.7's 2.0.2, say) compresses with
#: gzip, snappy or lz4 only if the broker lists Produce v0, and otherwise silently sends
#: those batches uncompressed. Clients pick the highest version both sides list, so none
#: sends v0-v2 to a broker that lists v9.
ADVERTISED_PRODUCE_MIN_VERSION = 0

#: api key -> (min, max) version that ApiVersions lists: :data:`SUPPORTED_APIS`' ranges,
#: Produce from :data:`ADVERTISED_PRODUCE_MIN_VERSION`. The one place that says it.
ADVERTISED_VERSIONS: dict[int, tuple[int, int]] = {
    s.api_key: (
        ADVERTISED_PRODUCE_MIN_VERSION if s.api_key == PRODUCE else s.min_version,
        s.max_version,
    )
    for s in SUPPORTED_APIS.values()
}


@dataclass(frozen=True, slots=True)
class RequestHeaderPeek:
    """The fixed first 8 bytes of a request header."""

    api_key: int
    api_version: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    """A decoded request: its header fields and kafka-python's body object."""

    spec: ApiSpec
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


def peek_header(frame: bytes) -> RequestHeaderPeek:
    """Read api key, version and correlation id; ValueError if the frame is too short. O(1)."""
    if len(frame) < HEADER_PEEK_BYTES:
        raise ValueError(f"a {len(frame)}-byte frame cannot hold a request header")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame)
    return RequestHeaderPeek(api_key, api_version, correlation_id)


def decode_request(spec: ApiSpec, peek: RequestHeaderPeek, frame: bytes) -> DecodedRequest:
    """Decode header and body with kafka-python. O(len(frame)).

    Raises ``ValueError`` for anything that does not decode (kafka-python raises
    an assortment of exceptions on bad input, all are wrapped) and for a null
    where the schema allows none.
    """
    try:
        body = spec.request.decode(frame, version=peek.api_version, header=True)
    except Exception as exc:  # the library raises struct.error, IndexError, ...
        raise ValueError(
            f"{spec.name} v{peek.api_version} does not decode: {type(exc).__name__}: {exc}"
        ) from exc
    _check_nulls(spec.request.fields, body, peek.api_version, spec.name)
    client_id = getattr(body.header, "client_id", None)
    return DecodedRequest(spec, peek.api_version, peek.correlation_id, client_id, body)


def _check_nulls(fields: Mapping[str, Any], value: Any, version: int, path: str) -> None:
    """Refuse null where the schema does not allow it (kafka-python decodes a -1 length
    as None for any string or array). ``fields``: the schema's fields by name (a message
    class's, or a struct field's, ``fields``). O(fields in the request)."""
    for field in fields.values():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        item = getattr(value, field.name)
        if item is None:
            if field.nullable_for_version_q(version) or field.type_str == "uuid":
                # kafka-python decodes the all-zero uuid as None
                continue
            raise ValueError(f"{path}.{field.name} is null, which v{version} does not allow")
        if field.is_struct_array():
            for element in item:
                _check_nulls(field.fields, element, version, f"{path}.{field.name}[]")
        elif field.is_struct():
            _check_nulls(field.fields, item, version, f"{path}.{field.name}")


def encode_response(response: Any, correlation_id: int) -> bytes:
    """Frame ``response`` (built with its version set) with a response header. O(size)."""
    response.with_header(correlation_id=correlation_id)
    frame = bytes(response.encode(header=True, framed=True))
    if len(frame) > ENCODE_BUFFER_KEEP_BYTES:
        _drop_encode_buffer()
    return frame


#: kafka-python encodes into a per-thread buffer that keeps the size of the largest
#: message it ever encoded (a 34 MiB fetch answer leaves 55 MiB behind for the life of
#: the process); past this size the buffer is shrunk after use.
ENCODE_BUFFER_KEEP_BYTES = 1 << 20
#: what the shrunk buffer starts from again (kafka-python's own initial size)
ENCODE_BUFFER_FRESH_BYTES = 1 << 16


def _drop_encode_buffer() -> None:
    """Swap this thread's (grown) encode buffer for a small one, through the pool's
    public ``acquire()``: it hands out the thread's buffer, whose ``buf`` the encoders
    re-read on every use (they grow it by rebinding it). O(1)."""
    if EncodeBufferPool is None:
        return
    with EncodeBufferPool.acquire() as out:
        out.buf = bytearray(ENCODE_BUFFER_FRESH_BYTES)


def api_versions_response(version: int) -> Any:
    """The ApiVersions answer listing :data:`ADVERTISED_VERSIONS`. O(APIs)."""
    return ApiVersionsResponse(
        version=version,
        error_code=0,
        api_keys=_api_keys(),
        throttle_time_ms=0,
    )


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """UNSUPPORTED_VERSION (35) in a v0 body with a v0 header, listing
    :data:`ADVERTISED_VERSIONS` (as every ApiVersions answer does).

    Kafka's rule: a client that asked with a version the broker does not know
    gets this, and retries with the highest version both sides support. O(APIs).
    """
    response = ApiVersionsResponse(
        version=0, error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys()
    )
    return encode_response(response, correlation_id)


def _api_keys() -> list[Any]:
    return [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in ADVERTISED_VERSIONS.items()
    ]
