"""The README's Python snippets run as shown and print what their comments say.

Each ```python block (the README, a landing page, has one) is a whole program: it
runs in a fresh interpreter, and its standard output must be, line for line, the
``# prints: ...`` comments of the block in their order.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .repo_kit import need

README = need("README.md") / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README.read_text(encoding="utf-8"), re.M | re.S)


def test_the_readme_has_its_snippets() -> None:
    assert len(BLOCKS) >= 1


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i + 1}" for i in range(len(BLOCKS))])
def test_a_snippet_runs_and_prints_what_it_says(code: str) -> None:
    expected = re.findall(r"# prints: (.*)$", code, re.M)
    assert expected, "a snippet says what it prints"
    done = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [line.strip() for line in expected]
