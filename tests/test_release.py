"""The release workflow (``.github/workflows/release.yml``), checked without running it.

It is validated against GitHub's workflow schema (check-jsonschema, in the dev extra,
carries it: no network), audited by zizmor (in the dev extra, offline), and read for what a
release needs: both distributions built as sdist and compiled wheels on Linux, macOS and
Windows (not the broker's: POSIX only), no pure wheel, published only from a tag, by
trusted publishing (an OIDC token, no stored secret), the library before the
application that requires it.
The Python versions the classifiers name are the ones cibuildwheel builds, and
cibuildwheel (in the dev extra) lists what it would build on each platform. These tests
read the repository (the sdists carry no ``.github/``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from .install_kit import EXPECT_INSTALLED
from .repo_kit import ROOT, needs

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
pytestmark = needs(".github/workflows/release.yml")


def _tool(name: str) -> str | None:
    """The program ``name`` installed beside this interpreter, or on PATH."""
    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)


def _dev_tool(name: str) -> str:
    """The dev extra's program ``name``; skips without it, but in the installed-wheel run."""
    found = _tool(name)
    if found is None:
        # the README's test command installs the dev extra afresh: there it must be
        assert not EXPECT_INSTALLED, f"{name} is missing: install the dev extra"
        pytest.skip(f"{name} is not installed (the dev extra has it)")
    return found


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    yaml = pytest.importorskip("ruamel.yaml")  # check-jsonschema's YAML reader
    return yaml.YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_workflow_is_valid_for_github() -> None:
    checker = _dev_tool("check-jsonschema")
    done = _run(checker, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW))
    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_finds_nothing() -> None:
    """Its configuration is .github/zizmor.yml; offline: no GitHub API."""
    zizmor = _dev_tool("zizmor")
    done = _run(zizmor, "--offline", "--no-progress", str(WORKFLOW))
    assert done.returncode == 0, done.stdout + done.stderr


def _uses(job: dict[str, Any]) -> list[str]:
    return [step["uses"].partition("@")[0] for step in job["steps"] if "uses" in step]


def test_wheels_for_both_distributions_on_three_systems(workflow: dict[str, Any]) -> None:
    wheels = workflow["jobs"]["wheels"]
    assert "pypa/cibuildwheel" in _uses(wheels)
    matrix = wheels["strategy"]["matrix"]
    assert set(matrix["dist"]) == {"aio-purgatory", "purgatory-broker"}
    systems = {re.match(r"[a-z]+", os)[0] for os in matrix["os"]}  # type: ignore[index]
    assert systems == {"ubuntu", "macos", "windows"}
    assert matrix["exclude"] == [{"dist": "purgatory-broker", "os": "windows-latest"}]
    sdists = workflow["jobs"]["sdists"]
    assert {entry["dist"] for entry in sdists["strategy"]["matrix"]["include"]} == set(
        matrix["dist"]
    )
    # no pure wheel is published: a pure build only when asked for (the sdist's build)
    builds = [step["run"] for step in sdists["steps"] if "-m build" in step.get("run", "")]
    assert builds == ['python -m build --sdist --outdir dist "$DIR"']


def _architecture(label: str) -> str:
    """The architecture of a GitHub-hosted runner's label: Linux and Windows runners are
    x86_64 but the ``-arm`` ones; macOS runners are Apple silicon but the ``-intel`` (and
    paid ``-large``) ones, since macos-13, the last Intel image without a suffix, was
    retired (an older label fails here)."""
    system = label.partition("-")[0]
    if system == "macos":
        version = re.match(r"macos-(\d+)", label)
        assert version is None or int(version[1]) >= 14, f"{label}: a retired image"
        return "x86_64" if label.endswith(("-intel", "-large")) else "arm64"
    if system == "ubuntu":
        return "aarch64" if label.endswith("-arm") else "x86_64"
    assert system == "windows", f"{label}: not a GitHub-hosted runner's label"
    return "ARM64" if label.endswith("-arm") else "AMD64"


def test_each_architecture_on_its_own_runner(workflow: dict[str, Any]) -> None:
    """cibuildwheel builds the runner's own architecture (``native``), so the labels
    decide which wheels exist: a label of the wrong kind (``macos-15`` is arm64) would
    drop the x86_64 macOS wheels without a failure."""
    wheels = workflow["jobs"]["wheels"]
    [build] = [step for step in wheels["steps"] if "cibuildwheel" in step.get("uses", "")]
    assert build["env"]["CIBW_ARCHS"] == "native"
    by_system: dict[str, list[str]] = {}
    for label in wheels["strategy"]["matrix"]["os"]:
        by_system.setdefault(label.partition("-")[0], []).append(_architecture(label))
    assert by_system == {
        "ubuntu": ["x86_64", "aarch64"],
        "macos": ["arm64", "x86_64"],
        "windows": ["AMD64"],
    }


def test_only_a_tag_publishes_by_trusted_publishing(workflow: dict[str, Any]) -> None:
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    publishers = {n for n, job in jobs.items() if "pypa/gh-action-pypi-publish" in _uses(job)}
    assert publishers == {"publish-library", "publish-broker"}
    for name in publishers:
        assert jobs[name]["if"] == "github.ref_type == 'tag'", name
        assert jobs[name]["permissions"] == {"id-token": "write"}, name
        assert jobs[name]["environment"]["name"] == "pypi", name
    assert jobs["publish-library"]["needs"] == "wheels"
    assert jobs["publish-broker"]["needs"] == "publish-library"  # it requires the library
    others = set(jobs) - publishers
    assert not any("id-token" in jobs[name].get("permissions", {}) for name in others)


@pytest.mark.parametrize("project", [".", "broker"])
def test_cibuildwheel_builds_the_versions_the_classifiers_name(project: str) -> None:
    pyproject = tomllib.loads((ROOT / project / "pyproject.toml").read_text(encoding="utf-8"))
    classified = {
        c.rpartition(" :: ")[2]
        for c in pyproject["project"]["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    built = {f"3.{b[3:-2]}" for b in pyproject["tool"]["cibuildwheel"]["build"]}
    assert built == classified == {"3.11", "3.12", "3.13"}
    cibuildwheel = _dev_tool("cibuildwheel")
    for platform in ("linux", "macos") + (("windows",) if project == "." else ()):
        done = _run(cibuildwheel, "--print-build-identifiers", "--platform", platform, project)
        assert done.returncode == 0, done.stderr
        versions = {f"3.{i[3:5]}" for i in done.stdout.split()}
        assert versions == classified, (platform, done.stdout)


def test_the_project_urls_agree() -> None:
    """PyPI's links: the five, over https, the same repository for both distributions."""
    tables = [
        tomllib.loads((ROOT / p / "pyproject.toml").read_text(encoding="utf-8"))["project"].get(
            "urls"
        )
        for p in (".", "broker")
    ]
    if tables == [None, None]:
        pytest.skip("no [project.urls] yet: no public address (docs/how-to/release.md)")
    keys = {"Homepage", "Documentation", "Changelog", "Issues", "Source"}
    assert all(table is not None and set(table) == keys for table in tables), tables
    assert all(url.startswith("https://") for table in tables for url in table.values())
    for key in ("Documentation", "Issues", "Source"):
        assert tables[0][key] == tables[1][key], key
