"""The command line: every option reaches the config and --help shows its default; what
cannot start (port in use, bad host, unusable --data-dir) is one line on stderr."""

from __future__ import annotations

import re
import signal
import socket
from pathlib import Path

import pytest
from purgatory_broker.wire.__main__ import parse_args

from broker_tests.childproc import Child
from broker_tests.cli_kit import (
    assert_named_as_started,
    assert_one_line_error,
    read_only_dir,
    run_cli,
)

LIMITS = {
    "--max-partitions": ("max_partitions", 40),
    "--connections-max-idle-ms": ("connections_max_idle_ms", 1234),
    "--max-frame-wait-ms": ("max_frame_wait_ms", 567),
    "--max-pending-response-bytes": ("max_pending_response_bytes", 8910),
    "--max-pending-responses": ("max_pending_responses", 11),
    "--producer-id-expiration-ms": ("producer_id_expiration_ms", 1213),
}


GROUPS = {
    "--group-initial-rebalance-delay-ms": ("group_initial_rebalance_delay_ms", 250),
    "--group-min-session-timeout-ms": ("group_min_session_timeout_ms", 1000),
    "--group-max-session-timeout-ms": ("group_max_session_timeout_ms", 60_000),
    "--offsets-retention-minutes": ("offsets_retention_minutes", 5),
}


@pytest.mark.parametrize("options", [LIMITS, GROUPS], ids=["limits", "groups"])
def test_options_reach_the_config(options: dict[str, tuple[str, int]]) -> None:
    argv = [arg for option, (_, v) in options.items() for arg in (option, str(v))]
    config = parse_args(argv).config
    for field, value in options.values():
        assert getattr(config, field) == value, field


def test_help_shows_every_limit_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in LIMITS:
        own_help = text.rsplit(option + " ", 1)[1].split(" --", 1)[0]
        assert "default" in own_help, option


def test_a_bad_limit_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--connections-max-idle-ms", "0"])
    assert "connections_max_idle_ms must be >= 1" in capsys.readouterr().err


def test_help_shows_every_option_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    out = capsys.readouterr().out
    text = " ".join(out.split())
    options = sorted(set(re.findall(r"(--[a-z][a-z-]+)", out)) - {"--help"})
    assert "--min-insync-replicas" in options and "--offsets-retention-minutes" in options
    for option in options:
        own_help = text.rsplit(option + " ", 1)[1].split(" --", 1)[0]
        if option in ("--no-advertise-followers", "--uvloop", "--verbose"):
            continue  # switches: off unless given
        assert "default" in own_help, option


def test_port_in_use_is_one_line_before_listening(tmp_path: Path) -> None:
    data_dir = tmp_path / "new"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            ["-m", "purgatory_broker.wire", "--port", str(port), "--data-dir", str(data_dir)],
            timeout_s=30,
        )
    assert "listening" not in result.stdout
    assert_one_line_error(result, status=2, mentions=f"cannot listen on 127.0.0.1:{port}")
    assert not data_dir.exists()  # nothing made before the port was known to work


def test_a_host_that_does_not_resolve_is_one_line() -> None:
    result = run_cli(
        ["-m", "purgatory_broker.wire", "--port", "0", "--host", "no-such-host.invalid"],
        timeout_s=30,
    )
    assert "listening" not in result.stdout
    assert_one_line_error(result, status=2, mentions="cannot listen on no-such-host.invalid")


@pytest.mark.parametrize("kind", ["file", "under-a-file"])
def test_an_unusable_data_dir_is_one_line_and_leaves_nothing(tmp_path: Path, kind: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    data_dir = a_file if kind == "file" else a_file / "data"
    result = run_cli(
        ["-m", "purgatory_broker.wire", "--port", "0", "--data-dir", str(data_dir)],
        timeout_s=30,
    )
    assert "listening" not in result.stdout
    assert_one_line_error(result, status=2, mentions="--data-dir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_read_only_data_dir_is_one_line(tmp_path: Path) -> None:
    data_dir = read_only_dir(tmp_path)
    result = run_cli(
        ["-m", "purgatory_broker.wire", "--port", "0", "--data-dir", str(data_dir)],
        timeout_s=30,
    )
    assert_one_line_error(result, status=2, mentions="not writable")


def test_a_data_dir_with_data_is_reopened_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "orders-0").mkdir()
    args = ["-m", "purgatory_broker.wire", "--port", "0", "--data-dir", str(tmp_path)]
    with Child(args) as child:
        line = child.read_line(30)
        assert line is not None and "listening on" in line
        child.proc.send_signal(signal.SIGTERM)
        assert child.proc.wait(timeout=30) == 0
        err = child.stderr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "reopening its existing logs (1 topic(s))" in lines[0], err


@pytest.mark.parametrize("form", ["script", "module"])
def test_usage_and_errors_name_the_program_as_started(form: str, tmp_path: Path) -> None:
    """``purgatory-broker-wire`` (the console script) or ``python -m ...``, as it was started;
    here the one-line error is that of a --data-dir that is a file."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert_named_as_started(form, "purgatory-broker-wire", tmp_path, ["--data-dir", str(a_file)])
