"""Errors collected during a pass come out as one exception, or a group."""

from __future__ import annotations

import pytest

from purgatory.core.report import raise_collected


def test_nothing_collected_raises_nothing() -> None:
    raise_collected("none", [])


def test_one_error_comes_out_as_itself() -> None:
    error = ValueError("one")
    with pytest.raises(ValueError) as info:
        raise_collected("1 failed", [error])
    assert info.value is error


def test_several_errors_come_out_as_a_group_of_the_right_kind() -> None:
    with pytest.raises(ExceptionGroup) as info:
        raise_collected("2 failed", [ValueError("a"), KeyError("b")])
    assert info.value.message == "2 failed" and len(info.value.exceptions) == 2
    with pytest.raises(BaseExceptionGroup) as base:
        raise_collected("2 failed", [ValueError("a"), GeneratorExit()])
    assert not isinstance(base.value, ExceptionGroup)
    assert [type(e) for e in base.value.exceptions] == [ValueError, GeneratorExit]
