"""The documentation site (docs/): its examples run, and it builds with warnings as errors.

Each program in ``docs/examples/`` is imported from its file and its ``main`` (or its
tests) called; what it prints is checked, and so is every line of the ``text`` blocks
that the pages show as its output, so a page cannot drift from its example. The site
is built once per pass (a few seconds) with ``sphinx-build -W --keep-going -n``, and
the reference is checked to document every public name with its real signature,
which on the compiled build comes from ``purgatory.core._signature``.

These tests read the repository by path: they are about its docs.
"""

from __future__ import annotations

import html
import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import purgatory
import purgatory.aio
import purgatory.core
import purgatory.testing

from .repo_kit import ROOT, needs

DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"

pytestmark = needs("docs/conf.py")


def load(name: str) -> ModuleType:
    """Import ``docs/examples/<name>.py`` as a fresh module."""
    return load_file(EXAMPLES / f"{name}.py", f"docs_example_{name}")


def load_file(path: Path, name: str) -> ModuleType:
    """Import the file ``path`` as a fresh module named ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shown_output(page: str) -> list[str]:
    """The lines of the ``text`` code blocks of a Markdown page."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [
        line
        for block in re.findall(r"```text\n(.*?)```", text, re.S)
        for line in block.splitlines()
    ]


def assert_page_shows(page: str, printed: str) -> None:
    lines = printed.splitlines()
    shown = shown_output(page)
    assert shown, f"{page} shows no output"
    missing = [line for line in shown if line not in lines]
    assert not missing, f"{page} shows lines its example does not print: {missing}"


def test_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    assert asyncio.run(load("quickstart").main()) == 42
    assert capsys.readouterr().out == "42 Outcome.COMPLETED\n"


def test_tutorial(capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    stats = asyncio.run(load("tutorial").main())
    assert (stats.completed_early, stats.expired, stats.cancelled) == (1, 1, 2)
    assert (stats.watched, stats.num_delayed) == (0, 0)
    printed = capsys.readouterr().out
    assert_page_shows("tutorial.md", printed)
    assert len(printed.splitlines()) == len(shown_output("tutorial.md"))


def test_testing_with_manual_clock(capsys: pytest.CaptureFixture[str]) -> None:
    example = load("testing_manual_clock")
    example.test_poll_expires_at_its_timeout()
    example.test_update_completes_the_poll_early()
    example.main()
    assert capsys.readouterr().out == "2 tests passed\n"


def test_testing_with_trio_mock_clock(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("trio")
    example = load("testing_trio")
    example.test_poll_times_out_in_virtual_time()
    assert 30.0 <= example.main() < 30.1
    assert capsys.readouterr().out.startswith("timed out after 30.0")


def test_testing_with_virtual_time_loop(capsys: pytest.CaptureFixture[str]) -> None:
    example = load("testing_virtual_loop")
    example.test_polls_expire_at_their_virtual_deadlines()
    assert example.main() == [30.001, 10.001]
    assert capsys.readouterr().out == "expired at 30.001, 10.001 virtual seconds\n"


def test_anyio_on_both_backends(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("anyio")
    pytest.importorskip("trio")
    assert load("anyio_backends").run_on_both() == [3, 3]
    assert_page_shows("how-to/trio.md", capsys.readouterr().out)


def test_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("prometheus_client")
    lines = load("metrics").main()
    assert len(lines) == 3
    assert_page_shows("how-to/metrics.md", capsys.readouterr().out)


def test_timing_wheel(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("timing_wheel").main() == [(2, 2), (5, 5), (20, 20)]
    printed = capsys.readouterr().out
    assert_page_shows("explanation/timing-wheel.md", printed)
    assert len(printed.splitlines()) == len(shown_output("explanation/timing-wheel.md"))


def test_purge(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("purge").main() == (1, 1)
    assert_page_shows("explanation/purge.md", capsys.readouterr().out)


def test_timer(capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    assert asyncio.run(load("timer").main()) == 0
    printed = capsys.readouterr().out
    assert_page_shows("how-to/timer.md", printed)
    assert len(printed.splitlines()) == len(shown_output("how-to/timer.md"))


def test_idle(capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    assert asyncio.run(load("idle").main()) == ["conn-1"]
    printed = capsys.readouterr().out
    assert_page_shows("how-to/idle.md", printed)
    assert len(printed.splitlines()) == len(shown_output("how-to/idle.md"))


def test_every_example_is_tested_and_shown() -> None:
    """Each example has a test here and is included by a page."""
    source = Path(__file__).read_text(encoding="utf-8")
    pages = "".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    for example in sorted(EXAMPLES.glob("*.py")):
        assert f'load("{example.stem}")' in source, f"{example.name} is not run by a test"
        assert f"examples/{example.name}" in pages, f"{example.name} is on no page"


# the site


def test_the_broker_page_names_the_readme_where_it_is_absent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The library's sdist has no broker/: the page's include of its README (an error
    there) becomes a sentence naming it; the repository's site includes it."""
    pytest.importorskip("sphinx")
    conf = load_file(DOCS / "conf.py", "docs_conf")
    page = (DOCS / "broker" / "index.md").read_text(encoding="utf-8")
    source = [page]
    conf._include_broker_readme(None, "broker/index", source)
    assert source == [page] or not conf.BROKER_README.is_file()
    monkeypatch.setattr(conf, "BROKER_README", tmp_path / "README.md")
    conf._include_broker_readme(None, "broker/index", source)
    assert "{include}" not in source[0] and "`broker/README.md`" in source[0]
    assert source[0].count("\n") < page.count("\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The site, built from scratch with warnings as errors, nitpicky."""
    pytest.importorskip("sphinx")
    pytest.importorskip("furo")
    pytest.importorskip("myst_parser")
    out = tmp_path_factory.mktemp("site")
    doctrees = tmp_path_factory.mktemp("doctrees")
    command = [sys.executable, "-P", "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html"]
    command += ["-d", str(doctrees), str(DOCS), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    yield out


def signature(page: str, anchor: str) -> str:
    """The text of the signature line that documents ``anchor``."""
    match = re.search(rf'<dt class="sig[^"]*" id="{re.escape(anchor)}">(.*?)</dt>', page, re.S)
    assert match is not None, f"{anchor} is not documented"
    text = re.sub(r"<[^>]+>", "", match.group(1))
    text = html.unescape(text).replace("¶", "").replace("\u2192", "->")
    return " ".join(text.split())


def test_site_builds_with_every_page(site: Path) -> None:
    for page in (
        "index",
        "tutorial",
        "how-to/long-poll",
        "how-to/timer",
        "how-to/idle",
        "how-to/install",
        "how-to/testing",
        "how-to/trio",
        "how-to/metrics",
        "how-to/redis",
        "how-to/release",
        "reference/api",
        "explanation/timing-wheel",
        "explanation/purge",
        "explanation/kafka",
        "explanation/compiled",
        "explanation/layout",
        "broker/index",
        "broker/simulation",
        "broker/wire",
        "broker/pipeline",
        "broker/layout",
        "changelog",
    ):
        assert (site / f"{page}.html").is_file(), page


def public_anchors() -> list[str]:
    """The anchor of every public name: where the reference documents it."""
    contrib = [importlib.import_module(f"purgatory.contrib.{m}") for m in ("prometheus", "redis")]
    top = set(purgatory.__all__)
    anchors = [f"purgatory.{name}" for name in purgatory.__all__]
    anchors += [f"purgatory.testing.{name}" for name in purgatory.testing.__all__]
    for package in (purgatory.core, purgatory.aio):
        anchors += [
            f"{package.__name__}.{name}"
            for name in package.__all__
            if name not in top and name != "COMPILED"
        ]
    anchors.append("purgatory.core.COMPILED")
    for module in contrib:
        anchors += [f"{module.__name__}.{name}" for name in module.__all__]
    return anchors


def test_reference_documents_every_public_name(site: Path) -> None:
    pytest.importorskip("prometheus_client")
    pytest.importorskip("redis")
    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    missing = [anchor for anchor in public_anchors() if f'id="{anchor}"' not in page]
    assert not missing, f"not in the reference: {missing}"


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        ("purgatory.DelayedOperation", "class purgatory.DelayedOperation(delay_ms: int)"),
        ("purgatory.TimerTask", "class purgatory.TimerTask(delay_ms: int)"),
        (
            "purgatory.SystemTimer",
            "class purgatory.SystemTimer(name: str = 'timer', *, tick_ms: int = 1, "
            "wheel_size: int = 20, clock: Clock | None = None, may_expire_early: bool = False)",
        ),
        ("purgatory.core.Operation", "class purgatory.core.Operation(delay_ms: int)"),
        (
            "purgatory.core.WheelTimer",
            "class purgatory.core.WheelTimer(name: str = 'timer', *, tick_ms: int = 1, "
            "wheel_size: int = 20, clock: Clock, may_expire_early: bool = False)",
        ),
        ("purgatory.IdleTracker", "class purgatory.IdleTracker(timeout_ms: int, on_idle:"),
        ("purgatory.core.Purgatory.check_and_complete", "check_and_complete(key: Hashable) -> int"),
        ("purgatory.core.Operation.cancel", "cancel() -> bool"),
        ("purgatory.core.Operation.expired", "property expired: bool"),
    ],
)
def test_reference_shows_real_signatures(site: Path, anchor: str, expected: str) -> None:
    """Both builds: the compiled classes' signatures come from their docstrings."""
    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    shown = signature(page, anchor)
    assert shown.startswith(expected), shown
    assert "*args" not in shown and "**kwargs" not in shown


def test_reference_has_no_c_types(site: Path) -> None:
    page = re.sub(r"<[^>]+>", "", (site / "reference" / "api.html").read_text(encoding="utf-8"))
    for c_type in ("Py_ssize_t", "long long", "(self"):
        assert c_type not in page, c_type
