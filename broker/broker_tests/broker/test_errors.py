"""The one table of Kafka error codes: Kafka's numbers, the names derived from it, and
the one table from exception types to codes (:func:`error_code`)."""

from __future__ import annotations

import pytest
from purgatory_broker.broker.errors import (
    ERROR_NAMES,
    ErrorCode,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderError,
    error_code,
)
from purgatory_broker.broker.storage import CorruptRecordError, OffsetOutOfRangeError

#: Kafka's numbers (clients/src/main/java/org/apache/kafka/common/protocol/Errors.java)
KAFKA = {
    "UNKNOWN_SERVER_ERROR": -1,
    "NONE": 0,
    "OFFSET_OUT_OF_RANGE": 1,
    "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "LEADER_NOT_AVAILABLE": 5,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR": 16,
    "INVALID_TOPIC_EXCEPTION": 17,
    "NOT_ENOUGH_REPLICAS": 19,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20,
    "INVALID_REQUIRED_ACKS": 21,
    "ILLEGAL_GENERATION": 22,
    "INCONSISTENT_GROUP_PROTOCOL": 23,
    "INVALID_GROUP_ID": 24,
    "UNKNOWN_MEMBER_ID": 25,
    "INVALID_SESSION_TIMEOUT": 26,
    "REBALANCE_IN_PROGRESS": 27,
    "UNSUPPORTED_VERSION": 35,
    "INVALID_REQUEST": 42,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45,
    "INVALID_PRODUCER_EPOCH": 47,
    "KAFKA_STORAGE_ERROR": 56,
    "GROUP_ID_NOT_FOUND": 69,
    "MEMBER_ID_REQUIRED": 79,
    "INVALID_RECORD": 87,
    "UNKNOWN_TOPIC_ID": 100,
}


def test_the_codes_are_kafkas() -> None:
    assert {code.name: code.value for code in ErrorCode} == KAFKA


def test_the_names_come_from_the_table() -> None:
    assert {value: name for name, value in KAFKA.items()} == ERROR_NAMES


def test_exceptions_carry_their_code() -> None:
    assert NotLeaderError().code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert NotEnoughReplicasError().code is ErrorCode.NOT_ENOUGH_REPLICAS


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_a_kafka_error_answers_the_code_it_carries(code: ErrorCode) -> None:
    exc = KafkaError(code, "why")
    assert (error_code(exc), exc.code, str(exc)) == (code, code, "why")


def test_a_named_kafka_error_answers_its_class_s_code() -> None:
    assert error_code(NotLeaderError("moved")) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert error_code(NotEnoughReplicasError()) is ErrorCode.NOT_ENOUGH_REPLICAS


def test_the_storage_s_exceptions_have_their_code() -> None:
    assert error_code(CorruptRecordError("CRC mismatch")) is ErrorCode.CORRUPT_MESSAGE
    assert error_code(OffsetOutOfRangeError(9, 0, 5)) is ErrorCode.OFFSET_OUT_OF_RANGE
    assert error_code(OSError(5, "I/O error")) is ErrorCode.KAFKA_STORAGE_ERROR
    assert error_code(FileNotFoundError()) is ErrorCode.KAFKA_STORAGE_ERROR  # a subclass


def test_an_unexpected_exception_is_an_unknown_server_error() -> None:
    """Kafka's default (where a boundary answers it at all: the wire broker's let it
    through, and close the connection)."""
    assert error_code(RuntimeError("a bug")) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert error_code(ValueError("a bug")) is ErrorCode.UNKNOWN_SERVER_ERROR
