"""What a library user's type checker sees: mypy --strict and pyright, run on a
user's module outside the source tree, find the installed package (``py.typed``)
and type it as the docs say.

The README's development install is an editable one in setuptools' ``compat``
mode (a path entry, which both checkers follow; the default mode's import hook
they cannot); a library user's ``pip install aio-purgatory`` is a plain install,
found the same way.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

USER_MODULE = """\
from purgatory import DelayedOperation, DelayedOperationPurgatory, Outcome, SystemTimer


class Poll(DelayedOperation[int]):  # no on_expiration: an optional hook
    def __init__(self, key: str, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.key = key

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> int:
        return 1


async def handler(purgatory: DelayedOperationPurgatory[Poll]) -> int:
    poll = Poll("k", timeout_ms=30_000)
    if not purgatory.try_complete_else_watch(poll, ["k"]):
        value = await poll
        reveal_type(value)
        reveal_type(poll.outcome)
        if poll.outcome is Outcome.EXPIRED or poll.expired:
            return 0
        return value
    return poll.result()


async def serve() -> int:  # a return inside the block: __aexit__ swallows nothing
    async with SystemTimer("t") as timer, DelayedOperationPurgatory[Poll]("p", timer=timer) as p:
        return await handler(p)
"""


@pytest.fixture
def user_module(tmp_path: Path) -> Path:
    path = tmp_path / "service.py"
    path.write_text(USER_MODULE)
    return path


def checked(command: list[str], user_module: Path) -> str:
    """What a type checker, run in the user module's folder, says of it (it must pass)."""
    done = subprocess.run(
        [*command, user_module.name],
        cwd=user_module.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


def test_mypy_strict_finds_and_types_the_package(user_module: Path) -> None:
    out = checked([sys.executable, "-m", "mypy", "--strict", "--no-incremental"], user_module)
    assert 'Revealed type is "int"' in out or 'Revealed type is "builtins.int"' in out
    assert 'Revealed type is "purgatory.core.operation.Outcome"' in out


@pytest.mark.system  # pyright runs on Node.js
def test_pyright_finds_and_types_the_package(user_module: Path) -> None:
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert pyright is not None, "pyright is missing: install the dev extra"
    out = checked([pyright, "--pythonpath", sys.executable], user_module)
    assert 'Type of "value" is "int"' in out
    assert 'Type of "poll.outcome" is "Outcome"' in out
