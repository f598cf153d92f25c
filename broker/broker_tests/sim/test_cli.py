"""The simulation's command line is generated from SimulationConfig: one name per setting."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from purgatory_broker.sim import SimulationConfig, build_parser, config_from_args
from purgatory_broker.sim.cli import CLI_DEFAULTS, HIDDEN_ALIASES, HIDDEN_SWITCHES

from broker_tests.cli_kit import assert_named_as_started


def parse(*argv: str) -> SimulationConfig:
    return config_from_args(build_parser().parse_args(list(argv)))


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def test_every_field_is_an_option_with_its_help_and_default() -> None:
    help_text = " ".join(build_parser().format_help().split())  # unwrapped
    for field in dataclasses.fields(SimulationConfig):
        assert option(field.name) in help_text, field.name
        assert " ".join(field.metadata["help"].split()) in help_text, field.name
    assert "(default: 20.0)" in help_text and "(default: out/trace.parquet)" in help_text
    for old in [*HIDDEN_ALIASES, *HIDDEN_SWITCHES]:
        assert f"{old} " not in help_text.replace("--no-trace-path", ""), old


def test_defaults_are_the_configs_but_the_progress_bar() -> None:
    assert parse() == dataclasses.replace(SimulationConfig(), **CLI_DEFAULTS)
    assert CLI_DEFAULTS == {"progress": True}


def test_generated_names_set_their_fields() -> None:
    config = parse(
        "--duration-s", "2.5",
        "--min-insync-replicas", "1",
        "--produce-rate", "10",
        "--flush-ms", "100",
        "--no-uvloop",
        "--no-trace-path",
        "--no-progress",
        "--data-dir", "d",
    )  # fmt: skip
    expected = {
        "duration_s": 2.5,
        "min_insync_replicas": 1,
        "produce_rate": 10.0,
        "flush_ms": 100,
        "uvloop": False,
        "trace_path": None,
        "progress": False,
        "data_dir": "d",
    }
    assert {name: getattr(config, name) for name in expected} == expected


def test_older_spellings_still_work() -> None:
    old = parse("--duration", "2.5", "--min-isr", "1", "--trace", "t.parquet", "--quiet")
    new = parse(
        "--duration-s", "2.5", "--min-insync-replicas", "1", "--trace-path", "t.parquet",
        "--no-progress",
    )  # fmt: skip
    assert old == new
    assert parse("--no-trace").trace_path is None


def test_bad_values_are_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--partitions", "two"])


@pytest.mark.parametrize("form", ["script", "module"])
def test_usage_and_errors_name_the_program_as_started(form: str, tmp_path: Path) -> None:
    """``purgatory-broker-simulate`` (the console script) or ``python -m ...``, as it was started;
    here the one-line error is that of a bad setting."""
    assert_named_as_started(form, "purgatory-broker-simulate", tmp_path, ["--stall-at", "1.5"])
