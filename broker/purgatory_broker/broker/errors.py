"""Kafka's error codes, once: the codes the broker, the wire example and the data
pipeline answer with or name.

:class:`ErrorCode` is the one table (Kafka's ``Errors``; the numbers are Kafka's
wire protocol, so a client reads them as Kafka's). Everything else derives from
it: :data:`ERROR_NAMES` (code -> name, what the trace report prints) and the
exceptions below, each carrying its code. Only the codes this project uses are
listed; a trace holding any other code is reported as ``other``.

============================  ====  ============================================
name                          code  who answers it here
============================  ====  ============================================
UNKNOWN_SERVER_ERROR          -1    (named in reports only)
NONE                          0     every successful partition
OFFSET_OUT_OF_RANGE           1     fetch below the log start or past its end
CORRUPT_MESSAGE               2     a damaged batch on disk; a bad CRC produced
UNKNOWN_TOPIC_OR_PARTITION    3     a partition the broker does not lead
LEADER_NOT_AVAILABLE          5     wire: a topic still being created
NOT_LEADER_OR_FOLLOWER        6     leadership lost (produce, fetch)
REQUEST_TIMED_OUT             7     acks=-1 not replicated within the timeout
COORDINATOR_NOT_AVAILABLE     15    wire: no transaction coordinator; a dead group
NOT_COORDINATOR               16    (named for clients: this broker coordinates all)
INVALID_TOPIC_EXCEPTION       17    wire: an illegal topic name
NOT_ENOUGH_REPLICAS           19    acks=-1 refused before the append (ISR small)
NOT_ENOUGH_REPLICAS_AFTER...  20    acks=-1 replicated, but the ISR shrank below
INVALID_REQUIRED_ACKS         21    wire: acks not -1, 0 or 1
ILLEGAL_GENERATION            22    groups: a request from an older generation
INCONSISTENT_GROUP_PROTOCOL   23    groups: no protocol (or type) shared with the group
INVALID_GROUP_ID              24    groups: an empty group id
UNKNOWN_MEMBER_ID             25    groups: a member the group does not know
INVALID_SESSION_TIMEOUT       26    groups: outside group.min/max.session.timeout.ms
REBALANCE_IN_PROGRESS         27    groups: rejoin (heartbeat, sync, commit)
UNSUPPORTED_VERSION           35    wire: ApiVersions at an unknown version
INVALID_REQUEST               42    wire: a partition twice, ListOffsets by time
OUT_OF_ORDER_SEQUENCE_NUMBER  45    wire: an idempotent producer's gap
INVALID_PRODUCER_EPOCH        47    wire: a fenced idempotent producer
KAFKA_STORAGE_ERROR           56    an I/O error reading or writing a log
GROUP_ID_NOT_FOUND            69    groups: DescribeGroups of an unknown group
MEMBER_ID_REQUIRED            79    groups: JoinGroup v4+ first join: rejoin with this id
INVALID_RECORD                87    wire: not exactly one valid magic-2 batch
UNKNOWN_TOPIC_ID              100   wire: Fetch v13+ naming a topic id not known
============================  ====  ============================================

Errors are raised where they happen and become codes at one boundary per answer
(Kafka's ``Errors.forException``): a check raises a :class:`KafkaError`, which carries
its code, or one of the storage's exceptions; the code that builds a partition's
answer catches it and asks :func:`error_code`, the one table from exception types to
codes:

=======================================  ==========================================
exception                                code
=======================================  ==========================================
a :class:`KafkaError`                    its own ``code``
:class:`~.storage.CorruptRecordError`    CORRUPT_MESSAGE (2)
:class:`~.storage.OffsetOutOfRangeError` OFFSET_OUT_OF_RANGE (1)
``OSError``                              KAFKA_STORAGE_ERROR (56)
anything else                            UNKNOWN_SERVER_ERROR (-1)
=======================================  ==========================================

Each boundary catches only what its answer may carry; anything else goes on up (the
wire broker then closes the connection, its answer to a request it cannot answer).
"""

from __future__ import annotations

from enum import IntEnum

from .storage.log import OffsetOutOfRangeError
from .storage.records import CorruptRecordError

__all__ = [
    "CODE_NONE",
    "CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "CODE_NOT_LEADER_OR_FOLLOWER",
    "CODE_REQUEST_TIMED_OUT",
    "CODE_UNKNOWN_TOPIC_OR_PARTITION",
    "ERROR_NAMES",
    "ErrorCode",
    "KafkaError",
    "NotEnoughReplicasError",
    "NotLeaderError",
    "error_code",
]


class ErrorCode(IntEnum):
    """Kafka's error codes used in this project (see the module doc)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    KAFKA_STORAGE_ERROR = 56
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    INVALID_RECORD = 87
    UNKNOWN_TOPIC_ID = 100


#: code -> name, for every :class:`ErrorCode` (what reports print)
ERROR_NAMES: dict[int, str] = {int(code): code.name for code in ErrorCode}

# The codes the per-request paths store and compare, as plain ints: reading an
# IntEnum member costs CPython 3.11 a metaclass lookup (79 ns, a module global 9 ns).
CODE_NONE = int(ErrorCode.NONE)
CODE_UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
CODE_NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
CODE_REQUEST_TIMED_OUT = int(ErrorCode.REQUEST_TIMED_OUT)
CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND = int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


class KafkaError(Exception):
    """An error answered with a Kafka error code: ``KafkaError(code, message)``.

    A subclass names its code and is raised as ``Subclass(message)``: for the errors
    a caller catches by type."""

    code: ErrorCode

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message)
        self.code = code


class _NamedKafkaError(KafkaError):
    """A :class:`KafkaError` whose class names its code."""

    def __init__(self, message: str = "") -> None:
        super().__init__(type(self).code, message)


class NotLeaderError(_NamedKafkaError):
    """This broker does not lead the partition (NOT_LEADER_OR_FOLLOWER, 6)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class NotEnoughReplicasError(_NamedKafkaError):
    """acks=-1 append refused: ISR smaller than ``min_insync_replicas`` (19)."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS


#: the exceptions raised outside this module whose code is known, in the order they are
#: tried (a subclass before its base)
_CODES_BY_TYPE: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (OSError, ErrorCode.KAFKA_STORAGE_ERROR),
)


def error_code(exc: BaseException) -> ErrorCode:
    """The code an answer carries for ``exc`` (the table in the module doc; Kafka's
    ``Errors.forException``): a :class:`KafkaError`'s own, else that of its type,
    else UNKNOWN_SERVER_ERROR. O(1)."""
    if isinstance(exc, KafkaError):
        return exc.code
    for kind, code in _CODES_BY_TYPE:
        if isinstance(exc, kind):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR
