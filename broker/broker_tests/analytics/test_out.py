"""Where output goes: a local folder (a path or a file: URL) or another filesystem's URL."""

from __future__ import annotations

from pathlib import Path

import pytest
from purgatory_broker.analytics._out import Output


def test_a_file_url_is_the_local_folder(tmp_path: Path) -> None:
    out = Output(f"file://{tmp_path}/x")
    assert out.local == tmp_path / "x"
    assert out.url("tables/by_kind") == str(tmp_path / "x" / "tables" / "by_kind")
    out.create()
    assert out.write_bytes(None, "report.html", b"<p>") == str(tmp_path / "x" / "report.html")
    assert (tmp_path / "x" / "report.html").read_bytes() == b"<p>"


def test_other_urls_are_left_to_hadoop() -> None:
    out = Output("hdfs://nn:8020/reports/")
    assert out.local is None
    assert out.url("tables/windows") == "hdfs://nn:8020/reports/tables/windows"
    out.check()  # nothing to check on the driver: the filesystem answers when written
    with pytest.raises(ValueError, match="needs a running Spark session"):
        out.write_bytes(None, "report.html", b"")


def test_a_failed_run_removes_only_what_it_created(tmp_path: Path) -> None:
    new = Output(tmp_path / "new" / "deeper")
    new.check()
    new.create()
    (tmp_path / "new" / "deeper" / "half.parquet").write_bytes(b"")
    new.discard()
    assert not (tmp_path / "new").exists()  # the parent it created too
    old = tmp_path / "old"
    old.mkdir()
    (old / "keep").write_text("x")
    existing = Output(old)
    existing.create()
    existing.discard()
    assert (old / "keep").read_text() == "x"
    with pytest.raises(ValueError, match="is not empty"):
        existing.check(must_be_empty=True)
