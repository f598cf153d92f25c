"""tests/dev_requirements.py: what install_wheels.sh installs while the wheels build, and
what other_pythons.sh installs on the other CPythons."""

from __future__ import annotations

import re
from pathlib import Path

from .dev_requirements import requirements
from .repo_kit import ROOT, needs


def _project(folder: Path, name: str, body: str) -> Path:
    folder.mkdir()
    (folder / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n{body}')
    return folder


def test_the_own_distributions_give_way_to_their_extras_requirements(tmp_path: Path) -> None:
    lib = _project(
        tmp_path / "lib",
        "Lib_One",
        '[project.optional-dependencies]\nfast = ["uvloop>=0.21"]\n'
        'dev = ["lib-one[fast]", "pytest>=9"]\n',
    )
    app = _project(
        tmp_path / "app",
        "app",
        'dependencies = ["lib.one~=1.0", "crc32c>=2.7"]\n'
        '[project.optional-dependencies]\nsim = ["pyarrow>=18", "uvloop>=0.21"]\n'
        'dev = ["app[sim]", "lib_one[dev]", "pytest>=9", "numpy; python_version < \'4\'"]\n',
    )
    assert requirements([lib, app]) == [
        "uvloop>=0.21",
        "pytest>=9",
        "crc32c>=2.7",
        "pyarrow>=18",
        "numpy; python_version < '4'",
    ]


@needs("pyproject.toml", "broker/pyproject.toml")
def test_the_repository_s_lists_hold_no_own_distribution() -> None:
    listed = requirements([ROOT, ROOT / "broker"])
    names = {re.split(r"[\s;\[<>=!~]", r, maxsplit=1)[0] for r in listed}
    assert {"pytest-xdist", "pytest-timeout", "redis", "pyspark", "crc32c"} <= names
    assert not names & {"aio-purgatory", "purgatory-broker"}
