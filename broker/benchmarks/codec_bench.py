"""The wire codec: kafka-python's ``kafka.protocol`` against kio, on Produce and Fetch.

    python broker/benchmarks/codec_bench.py                     # a few seconds
    python broker/benchmarks/codec_bench.py --record-bytes 1048576 --partitions 1

Encodes and decodes (header included) a Produce v9 request and response and a
Fetch v12 request and response, ``--partitions`` partitions of one topic with
``--record-bytes`` of records each, with the example broker's codec
(kafka-python, ``broker/purgatory_broker/wire/_codec.py``) and with kio (the classes
generated from Apache Kafka's message schemas, ``pip install kio``; skipped if
it is not installed). Both libraries' frames are checked to be the same bytes
first, so the two sides do the same work. Prints the best of ``--repeat`` runs,
in microseconds per message.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import io
import platform
import time
import warnings
from collections.abc import Callable
from typing import Any

from _machine import cpu_model

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's schema loader
    from purgatory_broker.wire import _codec as codec

TOPIC = "bench"
Op = Callable[[], object]

# The messages' fields that both libraries name and type alike (Kafka's schema names);
# the rest differ by library: durations (ints of ms or timedeltas), lists or tuples,
# error codes (ints or an enum)
PRODUCE_REQUEST: dict[str, Any] = {"transactional_id": None, "acks": -1}
PRODUCE_PARTITION_RESPONSE: dict[str, Any] = {"log_start_offset": 0, "error_message": None}
FETCH_REQUEST: dict[str, Any] = {
    "replica_id": -1,
    "min_bytes": 1,
    "max_bytes": 1 << 24,
    "isolation_level": 0,
    "session_id": 0,
    "session_epoch": -1,
    "rack_id": "",
}
FETCH_PARTITION: dict[str, Any] = {
    "current_leader_epoch": -1,
    "fetch_offset": 1000,
    "last_fetched_epoch": -1,
    "log_start_offset": -1,
    "partition_max_bytes": 1 << 20,
}
FETCH_PARTITION_RESPONSE: dict[str, Any] = {
    "high_watermark": 2000,
    "last_stable_offset": 2000,
    "log_start_offset": 0,
    "aborted_transactions": None,
    "preferred_read_replica": -1,
}


def _kafka_python_produce(partitions: int, records: bytes) -> dict[str, tuple[Any, int, bool]]:
    """The Produce v9 request and response: name -> (message, version, is a request)."""
    pr, presp = codec.SUPPORTED_APIS[codec.PRODUCE].request, codec.ProduceResponse
    request = pr(
        version=9,
        **PRODUCE_REQUEST,
        timeout_ms=5000,
        topic_data=[
            pr.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    pr.TopicProduceData.PartitionProduceData(index=p, records=records)
                    for p in range(partitions)
                ],
            )
        ],
    )
    response = presp(
        version=9,
        throttle_time_ms=0,
        responses=[
            presp.TopicProduceResponse(
                name=TOPIC,
                partition_responses=[
                    presp.TopicProduceResponse.PartitionProduceResponse(
                        index=p,
                        error_code=0,
                        base_offset=1000 + p,
                        log_append_time_ms=-1,
                        record_errors=[],
                        **PRODUCE_PARTITION_RESPONSE,
                    )
                    for p in range(partitions)
                ],
            )
        ],
    )
    return {"Produce v9 request": (request, 9, True), "Produce v9 response": (response, 9, False)}


def _kafka_python_fetch(partitions: int, records: bytes) -> dict[str, tuple[Any, int, bool]]:
    """The Fetch v12 request and response: name -> (message, version, is a request)."""
    fr, fresp = codec.SUPPORTED_APIS[codec.FETCH].request, codec.FetchResponse
    request = fr(
        version=12,
        **FETCH_REQUEST,
        max_wait_ms=500,
        topics=[
            fr.FetchTopic(
                topic=TOPIC,
                partitions=[
                    fr.FetchTopic.FetchPartition(partition=p, **FETCH_PARTITION)
                    for p in range(partitions)
                ],
            )
        ],
        forgotten_topics_data=[],
    )
    response = fresp(
        version=12,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            fresp.FetchableTopicResponse(
                topic=TOPIC,
                partitions=[
                    fresp.FetchableTopicResponse.PartitionData(
                        partition_index=p, error_code=0, records=records, **FETCH_PARTITION_RESPONSE
                    )
                    for p in range(partitions)
                ],
            )
        ],
    )
    return {"Fetch v12 request": (request, 12, True), "Fetch v12 response": (response, 12, False)}


def kafka_python_cases(partitions: int, records: bytes) -> dict[str, tuple[Op, Op, bytes]]:
    """name -> (encode, decode, frame) with kafka-python."""
    messages = _kafka_python_produce(partitions, records) | _kafka_python_fetch(partitions, records)
    cases: dict[str, tuple[Op, Op, bytes]] = {}
    for name, (message, version, is_request) in messages.items():
        cls = type(message)

        def encode(message: Any = message, is_request: bool = is_request) -> bytes:
            if is_request:
                message.with_header(correlation_id=7, client_id="bench")
            else:
                message.with_header(correlation_id=7)
            return bytes(message.encode(header=True, framed=True))

        frame = encode()

        def decode(cls: Any = cls, frame: bytes = frame, version: int = version) -> object:
            return cls.decode(memoryview(frame)[4:], version=version, header=True)

        cases[name] = (encode, decode, frame)
    return cases


def _kio(path: str) -> Any:
    """A module of kio's generated schema classes."""
    return importlib.import_module(f"kio.schema.{path}")


_MS = datetime.timedelta(milliseconds=1)  # kio's durations are timedeltas


def _kio_produce(partitions: int, records: bytes) -> dict[str, tuple[Any, Any]]:
    """The Produce v9 request and response with kio: name -> (body, header)."""
    preq, presp = _kio("produce.v9.request"), _kio("produce.v9.response")
    none = _kio("errors").ErrorCode.none
    request = preq.ProduceRequest(
        **PRODUCE_REQUEST,
        timeout=5000 * _MS,
        topic_data=(
            preq.TopicProduceData(
                name=TOPIC,
                partition_data=tuple(
                    preq.PartitionProduceData(index=p, records=records) for p in range(partitions)
                ),
            ),
        ),
    )
    response = presp.ProduceResponse(
        throttle_time=0 * _MS,
        responses=(
            presp.TopicProduceResponse(
                name=TOPIC,
                partition_responses=tuple(
                    presp.PartitionProduceResponse(
                        index=p,
                        error_code=none,
                        base_offset=1000 + p,
                        log_append_time=None,
                        record_errors=(),
                        **PRODUCE_PARTITION_RESPONSE,
                    )
                    for p in range(partitions)
                ),
            ),
        ),
    )
    return {
        "Produce v9 request": (request, _kio_request_header(0, 9)),
        "Produce v9 response": (response, _kio_response_header()),
    }


def _kio_fetch(partitions: int, records: bytes) -> dict[str, tuple[Any, Any]]:
    """The Fetch v12 request and response with kio: name -> (body, header)."""
    freq, fresp = _kio("fetch.v12.request"), _kio("fetch.v12.response")
    none = _kio("errors").ErrorCode.none
    request = freq.FetchRequest(
        **FETCH_REQUEST,
        max_wait=500 * _MS,
        topics=(
            freq.FetchTopic(
                topic=TOPIC,
                partitions=tuple(
                    freq.FetchPartition(partition=p, **FETCH_PARTITION) for p in range(partitions)
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    response = fresp.FetchResponse(
        throttle_time=0 * _MS,
        error_code=none,
        session_id=0,
        responses=(
            fresp.FetchableTopicResponse(
                topic=TOPIC,
                partitions=tuple(
                    fresp.PartitionData(
                        partition_index=p,
                        error_code=none,
                        records=records,
                        **FETCH_PARTITION_RESPONSE,
                    )
                    for p in range(partitions)
                ),
            ),
        ),
    )
    return {
        "Fetch v12 request": (request, _kio_request_header(1, 12)),
        "Fetch v12 response": (response, _kio_response_header()),
    }


def _kio_request_header(api_key: int, version: int) -> Any:
    header = _kio("request_header.v2.header").RequestHeader
    return header(
        request_api_key=api_key, request_api_version=version, correlation_id=7, client_id="bench"
    )


def _kio_response_header() -> Any:
    return _kio("response_header.v1.header").ResponseHeader(correlation_id=7)


def kio_cases(partitions: int, records: bytes) -> dict[str, tuple[Op, Op, bytes]] | None:
    """The same messages with kio (None if it is not installed)."""
    try:
        serial = importlib.import_module("kio.serial")
    except ImportError:
        return None
    messages = _kio_produce(partitions, records) | _kio_fetch(partitions, records)
    cases: dict[str, tuple[Op, Op, bytes]] = {}
    for name, (body, header) in messages.items():
        write_header = serial.entity_writer(type(header))
        write_body = serial.entity_writer(type(body))
        read_header = serial.entity_reader(type(header))
        read_body = serial.entity_reader(type(body))

        def encode(
            body: Any = body, header: Any = header, wh: Any = write_header, wb: Any = write_body
        ) -> bytes:
            out = io.BytesIO()
            out.write(b"\0\0\0\0")
            wh(out, header)
            wb(out, body)
            frame = out.getbuffer()
            frame[:4] = (len(frame) - 4).to_bytes(4, "big")
            data = bytes(frame)
            frame.release()
            return data

        frame = encode()

        def decode(frame: bytes = frame, rh: Any = read_header, rb: Any = read_body) -> object:
            view = memoryview(frame)
            header, size = rh(view, 4)
            return header, rb(view, 4 + size)[0]

        cases[name] = (encode, decode, frame)
    return cases


def best_us(op: Op, number: int, repeat: int) -> float:
    """The best of ``repeat`` runs of ``number`` calls, in microseconds per call."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            op()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--record-bytes", type=int, default=16 * 1024)
    parser.add_argument("--number", type=int, default=0, help="calls per run (0: about 0.2 s)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    records = bytes(range(256)) * (args.record_bytes // 256) + b"\0" * (args.record_bytes % 256)
    libraries = {"kafka-python": kafka_python_cases(args.partitions, records)}
    kio = kio_cases(args.partitions, records)
    if kio is not None:
        libraries["kio"] = kio
        for name, (_, _, frame) in kio.items():
            # the same bytes, so the same work (kafka-python's answer to a request version)
            assert frame == libraries["kafka-python"][name][2], f"{name}: frames differ"
    versions = {}
    for dist in ("kafka-python", "kio"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    print(
        f"{cpu_model()}, Python {platform.python_version()}, "
        + ", ".join(f"{d} {v}" for d, v in versions.items())
    )
    print(f"{args.partitions} partitions x {args.record_bytes} record bytes; us per message\n")
    columns = [f"{lib} {op}" for lib in libraries for op in ("enc", "dec")]
    print(f"{'message':<22}{'bytes':>9}" + "".join(f"{c:>22}" for c in columns))
    for name in libraries["kafka-python"]:
        row = f"{name:<22}{len(libraries['kafka-python'][name][2]):>9}"
        for cases in libraries.values():
            encode, decode, _ = cases[name]
            for op in (encode, decode):
                number = args.number or max(1, int(0.2 / max(best_us(op, 3, 1) * 1e-6, 1e-7)))
                row += f"{best_us(op, number, args.repeat):>22.1f}"
        print(row)


if __name__ == "__main__":
    main()
