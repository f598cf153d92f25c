"""Print the third-party requirements of the distributions' ``dev`` extras, one a line.

Usage: ``python tests/dev_requirements.py [--only NAME]... [--extra EXTRA]... FOLDER...``,
each FOLDER holding a ``pyproject.toml`` (the repository's root, ``broker/``). A
requirement naming one of those distributions (``aio-purgatory[uvloop,trio]``,
``purgatory-broker[sim]``) is replaced by the requirements of the extras it names,
recursively; what is left is what pip must fetch. ``--only`` (repeated) keeps the
requirements of the named projects (their ranges as the extras give them); ``--extra``
(repeated) reads those extras instead of ``dev``. The scripts of the README's test command
use it: install_wheels.sh installs these while the wheels build, other_pythons.sh the test
tools and the extras it needs. Standard library only (any Python 3.11+ runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(folders: list[Path], extras: tuple[str, ...] = ("dev",)) -> list[str]:
    """The third-party requirements of each folder's project and its ``extras``, in
    order, each once."""
    projects = {}
    for folder in folders:
        project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
        projects[_normal(project["name"])] = project
    found: dict[str, None] = {}
    expanded: set[tuple[str, str]] = set()

    def expand(name: str, extras: list[str]) -> None:
        project = projects[name]
        extra_lists = project.get("optional-dependencies", {})
        for requirement in project.get("dependencies", []) + [
            r for extra in extras for r in extra_lists[extra]
        ]:
            match = _NAME.match(requirement)
            if match is None:
                raise ValueError(f"unreadable requirement {requirement!r} of {name}")
            dependency = _normal(match.group(1))
            if dependency not in projects:
                found.setdefault(requirement.strip())
                continue
            for extra in [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]:
                if (dependency, extra) not in expanded:
                    expanded.add((dependency, extra))
                    expand(dependency, [extra])

    for name in projects:
        expanded.update((name, extra) for extra in extras)
        expand(name, list(extras))
    return list(found)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--extra", action="append", default=[], metavar="EXTRA")
    parser.add_argument("folders", nargs="+", type=Path, metavar="FOLDER")
    args = parser.parse_args(argv)
    wanted = {_normal(name) for name in args.only}
    for requirement in requirements(args.folders, tuple(args.extra) or ("dev",)):
        match = _NAME.match(requirement)
        assert match is not None  # checked by requirements()
        if not wanted or _normal(match.group(1)) in wanted:
            print(requirement)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
