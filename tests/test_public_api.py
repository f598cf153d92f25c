"""``__all__`` is the public API: every name in it exists, and every public name the
package defines is in it. ``__init__`` modules only re-export."""

from __future__ import annotations

import ast
import inspect
import pydoc

import pytest

import purgatory
import purgatory.core

from .api_kit import check_all_is_the_public_api, check_init_only_re_exports, loaded_on_import
from .purgatory_kit import MockOp

PACKAGES = [
    "purgatory",
    "purgatory.core",
    "purgatory.aio",
    "purgatory.contrib",
    "purgatory.contrib.redis",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_the_public_api(name: str) -> None:
    check_all_is_the_public_api(name, "purgatory")


@pytest.mark.parametrize("name", PACKAGES)
def test_init_only_re_exports(name: str) -> None:
    check_init_only_re_exports(name)


def test_the_core_imports_no_third_party_package() -> None:
    heavy = ["pyarrow", "pyspark", "pandas", "uvloop", "anyio", "trio", "kafka"]
    assert loaded_on_import(["purgatory", "purgatory.testing"], heavy) == []
    assert purgatory.__all__ == sorted(purgatory.__all__)


SIGNATURES = {
    "DelayedOperation": "(delay_ms: 'int') -> 'None'",
    "TimerTask": "(delay_ms: 'int') -> 'None'",
    "IdleTracker": (
        "(timeout_ms: 'int', on_idle: 'Callable[[Any], object]', *, timer: 'Timer') -> 'None'"
    ),
    # the core's own, with defaults before the keyword-only marker and named constants
    "core.WheelTimer": (
        "(name: 'str' = 'timer', *, tick_ms: 'int' = 1, wheel_size: 'int' = 20, "
        "clock: 'Clock', may_expire_early: 'bool' = False) -> 'None'"
    ),
    "core.Purgatory": (
        "(name: 'str' = 'purgatory', *, timer: 'Timer', purge_interval: 'int' = 1000, "
        "timer_enabled: 'bool' = True) -> 'None'"
    ),
    "core.Histogram": "() -> 'None'",
    "core.ClockReader": "(clock: 'Clock') -> 'None'",
}


def _public(name: str) -> type:
    module, _, attr = name.rpartition(".")
    return getattr(purgatory.core if module == "core" else purgatory, attr)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_constructors_show_their_real_signature_on_either_build(name: str) -> None:
    """The compiled core's extension types hide ``__init__`` behind a slot wrapper;
    ``inspect.signature`` (so ``help()`` and IDEs that ask the runtime) still gives the
    real parameters, the same on both builds."""
    assert str(inspect.signature(_public(name))) == SIGNATURES[name]


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_help_lists_the_real_init_on_either_build(name: str) -> None:
    """``help()`` lists ``__init__`` among the methods, and in the compiled core that
    is a slot wrapper: it showed ``__init__(self, /, *args, **kwargs)`` there. Now
    it shows the constructor's parameters on both builds (without their annotations
    in the compiled core)."""
    cls = _public(name)
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
    lines = [ln.strip(" |") for ln in text.splitlines()]
    [start] = [i for i, ln in enumerate(lines) if ln.startswith("__init__(")]
    line = lines[start]
    while line.count("(") > line.count(")"):  # Python 3.13+: one parameter a line
        start += 1
        line += lines[start]
    shown = ast.parse(f"def {line.rstrip()}: pass").body[0]
    assert isinstance(shown, ast.FunctionDef)
    params = inspect.signature(cls).parameters.values()
    want = [(p.name, p.kind == p.KEYWORD_ONLY, p.default) for p in params]
    args = shown.args
    positional = [a for a in args.args if a.arg != "self"]
    defaults: list[object] = [inspect.Parameter.empty] * (len(positional) - len(args.defaults))
    defaults += [ast.literal_eval(d) for d in args.defaults]
    got = [(a.arg, False, d) for a, d in zip(positional, defaults, strict=True)]
    got += [
        (a.arg, True, inspect.Parameter.empty if d is None else ast.literal_eval(d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    assert got == want, line  # the same names, kinds and defaults (the constants' values)


def test_a_subclass_with_its_own_init_shows_that_init() -> None:
    assert str(inspect.signature(MockOp)) == "(delay_ms: 'int', name: 'str' = 'op') -> 'None'"
    assert MockOp(30_000).delay_ms == 30_000


def test_on_expiration_is_an_optional_hook_that_does_nothing() -> None:
    # optional, so mypy --strict lets a subclass without it be instantiated:
    # test_typing_outside.py's user module has one
    op = MockOp(5)
    purgatory.DelayedOperation.on_expiration(op)
    assert op.expirations == 0 and not op.is_completed
