"""A broker process out of file descriptors: it keeps serving the connections it has,
says so once, and accepts again once descriptors free up.

The broker runs in a child process whose open-file limit a small wrapper lowers
(``resource.setrlimit``) before starting ``python -m purgatory_broker.wire``;
this test opens connections one at a time until one is not accepted.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .rawclient import RawClient, metadata_request

ROOT = Path(__file__).resolve().parents[2]
DESCRIPTOR_LIMIT = 48
DEADLINE_S = 60.0  # a hang guard of every wait, not a measure of speed
SHORT = "cannot accept connections"
AGAIN = "accepting connections again"

# Lowers the limit, logs at DEBUG (so each retry shows), then runs the command line.
WRAPPER = """
import logging, resource, runpy, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s %(message)s")
sys.argv = ["purgatory_broker.wire", *sys.argv[2:]]
runpy.run_module("purgatory_broker.wire", run_name="__main__", alter_sys=True)
"""


class Child:
    """The broker process: its bootstrap address and what it logged."""

    def __init__(self, proc: subprocess.Popen[str], bootstrap: str, stderr: Path) -> None:
        self.proc = proc
        self.bootstrap = bootstrap
        self._stderr = stderr

    def log(self) -> str:
        return self._stderr.read_text(errors="replace")


@pytest.fixture(params=["asyncio", "uvloop"])
def child(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Child]:
    stderr = tmp_path / "stderr.txt"
    args = ["--port", "0", "--partitions", "1", "--followers", "1", "--max-partitions", "4"]
    if request.param == "uvloop":
        args.append("--uvloop")
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-c", WRAPPER, str(DESCRIPTOR_LIMIT), *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"listening on (\S+)", line)
        assert match is not None, f"the broker did not start: {line!r} {stderr.read_text()}"
        yield Child(proc, match.group(1), stderr)
    finally:
        proc.terminate()
        try:
            proc.wait(DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def until(condition: Callable[[], bool], what: str, child: Child) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {DEADLINE_S} s; the broker logged:\n{child.log()}")
        await asyncio.sleep(0.005)


async def served(client: RawClient) -> None:
    response = await asyncio.wait_for(client.request(metadata_request("fd")), DEADLINE_S)
    assert response.topics[0].error_code == 0


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_out_of_descriptors_the_broker_serves_its_connections_and_recovers(
    child: Child,
) -> None:
    first = await RawClient.connect(child.bootstrap)
    await served(first)  # creates the topic
    clients: list[RawClient] = []  # accepted, then the one that is not
    replies: list[asyncio.Future[Any]] = []
    try:
        for _ in range(DESCRIPTOR_LIMIT):
            clients.append(await RawClient.connect(child.bootstrap))  # into the backlog
            reply = asyncio.ensure_future(clients[-1].request(metadata_request("fd")))
            replies.append(reply)
            await until(lambda: replies[-1].done() or SHORT in child.log(), "an answer or", child)
            if not reply.done():
                break
            reply.result()
        assert not replies[-1].done(), "the connections never exhausted the descriptors"
        accepted, waiting = clients[:-1], clients[-1]
        # the connections it has are served, while it retries accepting
        await served(first)
        await served(accepted[-1])
        await until(lambda: child.log().count("still short") >= 2, "two more attempts", child)
        # descriptors free up: the waiting connection is accepted and answered
        for client in accepted:
            await client.close()
        response = await asyncio.wait_for(replies[-1], DEADLINE_S)
        assert response.topics[0].error_code == 0
        await served(waiting)
        fresh = await RawClient.connect(child.bootstrap)
        clients.append(fresh)
        await served(fresh)
    finally:
        for pending in replies:
            pending.cancel()
        for client in [first, *clients]:
            await client.close()
    log = child.log()
    warnings = [line for line in log.splitlines() if not line.startswith("DEBUG")]
    assert sum(SHORT in line for line in warnings) == 1, log  # once, not per attempt
    assert sum(AGAIN in line for line in warnings) == 1, log
    assert "Traceback" not in log, log
    assert child.proc.poll() is None  # still running
