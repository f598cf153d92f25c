"""The command line: every limit option reaches the config, and --help shows its default."""

from __future__ import annotations

import pytest
from kafka_broker.__main__ import parse_args

LIMITS = {
    "--max-partitions": ("max_partitions", 40),
    "--connections-max-idle-ms": ("connections_max_idle_ms", 1234),
    "--max-frame-wait-ms": ("max_frame_wait_ms", 567),
    "--max-pending-response-bytes": ("max_pending_response_bytes", 8910),
    "--max-pending-responses": ("max_pending_responses", 11),
    "--producer-id-expiration-ms": ("producer_id_expiration_ms", 1213),
}


def test_limit_options_reach_the_config() -> None:
    argv = [arg for option, (_, v) in LIMITS.items() for arg in (option, str(v))]
    config, _ = parse_args(argv)
    for field, value in LIMITS.values():
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
