"""Real signatures for the classes the compiled core makes extension types.

An extension type's ``__init__`` is a slot wrapper: ``inspect.signature`` finds
no signature for the class (and ``help()`` shows ``(self, /, *args, **kwargs)``
for it). Cython does write the constructor's signature as the first line of the
class docstring (``embedsignature``: ``TimerTask(delay_ms: int) -> None``), so
:class:`InitSignature`, set as a class's ``__signature__``, reads it from there:
``inspect.signature`` asks a class for ``__signature__`` before anything else,
and a ``None`` answer lets it carry on as usual. So it answers only for a class
whose ``__init__`` is such a slot wrapper (the compiled core's classes and the
Python subclasses that add no ``__init__``); for a class with an ``__init__`` of
Python code (every class of the pure core, a user's subclass with its own
``__init__``) it answers None and inspect reads that ``__init__`` itself.

``help()`` also lists ``__init__`` itself, under the methods: in the compiled core
that is the slot wrapper, shown as ``__init__(self, /, *args, **kwargs)`` unless
``__init__`` has a docstring, which Cython gives the wrapper; a docstring that
starts with a text signature (``__init__(self, delay_ms)``, a line ``--`` and a
blank line, CPython's own format for builtins) gives the wrapper that signature
(without annotations: a text signature cannot carry them). :func:`init_doc`
takes that header off again in the pure core, where ``__init__`` is a function
whose real signature help() shows anyway.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Mapping
from types import FunctionType
from typing import Any

__all__ = ["InitSignature", "init_doc", "parameters"]

_TEXT_SIGNATURE_END = ")\n--\n\n"

_POSITIONAL = inspect.Parameter.POSITIONAL_ONLY
_EITHER = inspect.Parameter.POSITIONAL_OR_KEYWORD


class InitSignature:
    """``__signature__`` of a class: its constructor's signature from the compiled
    class's docstring, or None where ``__init__`` is Python code. O(signature)."""

    __slots__ = ()

    def __get__(self, obj: object, owner: type) -> inspect.Signature | None:
        if obj is not None or isinstance(vars_init(owner), FunctionType):
            return None
        for cls in owner.__mro__:
            if "__init__" in vars(cls):
                return _from_docstring(cls)
        return None  # pragma: no cover - object defines __init__


def init_doc(cls: type) -> None:
    """Take the text signature off ``cls.__init__``'s docstring where ``__init__`` is
    a Python function (the pure core); the compiled core's slot wrapper reads it
    (see the module doc). O(docstring)."""
    init = vars(cls)["__init__"]
    if isinstance(init, FunctionType) and init.__doc__:
        head, end, rest = init.__doc__.partition(_TEXT_SIGNATURE_END)
        if end and head.startswith("__init__("):
            init.__doc__ = rest


def vars_init(owner: type) -> object:
    """The ``__init__`` that ``owner`` uses: the first in its MRO. O(MRO)."""
    for cls in owner.__mro__:
        init = vars(cls).get("__init__")
        if init is not None:
            return init
    return None  # pragma: no cover - object defines __init__


def _from_docstring(cls: type) -> inspect.Signature | None:
    """The signature Cython wrote as ``Name(params) -> ret``, the docstring's first line.

    Cython places a bare ``*`` (keyword-only parameters follow) one place too far
    to the right in a constructor's line (it counts the hidden ``self``):
    ``_Tracker(timeout_ms, on_idle, timer, *)`` stands for
    ``(timeout_ms, on_idle, *, timer)``, and ``Purgatory(name='purgatory', timer, *,
    purge_interval=1000)`` for ``(name='purgatory', *, timer, purge_interval=1000)``;
    this moves it back. A default that names a constant of the class's module
    (``DEFAULT_TICK_MS``) is that constant's value.
    """
    first = (cls.__doc__ or "").partition("\n")[0]
    if not first.startswith(cls.__name__ + "("):
        return None
    params_text, returns_text = _split_line(first[len(cls.__name__) :])
    if params_text is None:
        return None
    items = _top_level_items(params_text)
    if "*" in items:
        at = items.index("*")
        if at == 0:
            return None  # not the shape Cython writes
        items[at - 1], items[at] = items[at], items[at - 1]
    try:
        func = ast.parse(f"def f({', '.join(items)}){returns_text}: pass").body[0]
    except SyntaxError:
        return None
    assert isinstance(func, ast.FunctionDef)
    namespace = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
    leading = [*func.args.posonlyargs, *func.args.args][:1]
    # the class's signature leaves self out
    params = parameters(func.args, namespace, skip_first=[a.arg for a in leading] == ["self"])
    returns = inspect.Signature.empty if func.returns is None else ast.unparse(func.returns)
    return inspect.Signature(params, return_annotation=returns)


def parameters(
    args: ast.arguments, names: Mapping[str, Any], *, skip_first: bool
) -> list[inspect.Parameter]:
    """A ``def``'s parameters as :mod:`inspect` has them, read from its syntax tree:
    annotations as their source text, defaults by value (one that names an entry of
    ``names``, a module's constant, by that entry's value; any other expression shown
    as its source). ``skip_first``: without the first (``self`` or ``cls``). The
    documentation's build reads the compiled modules' sources with it too. O(parameters).
    """
    params: list[inspect.Parameter] = []
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += args.defaults
    for index, arg in enumerate(positional):
        if index == 0 and skip_first:
            continue
        kind = _POSITIONAL if arg in args.posonlyargs else _EITHER
        params.append(_parameter(arg, kind, defaults[index], names))
    if args.vararg is not None:
        params.append(_parameter(args.vararg, inspect.Parameter.VAR_POSITIONAL, None, names))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(_parameter(arg, inspect.Parameter.KEYWORD_ONLY, default, names))
    if args.kwarg is not None:
        params.append(_parameter(args.kwarg, inspect.Parameter.VAR_KEYWORD, None, names))
    return params


def _split_line(text: str) -> tuple[str | None, str]:
    """``(params) -> ret`` as the text between the parentheses and what follows."""
    depth = 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return text[1:index], text[index + 1 :]
    return None, ""


def _top_level_items(text: str) -> list[str]:
    """The comma-separated items of a parameter list, commas inside brackets or
    quotes left alone."""
    items: list[str] = []
    depth = 0
    quote = ""
    start = 0
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index].strip())
            start = index + 1
    last = text[start:].strip()
    if last:
        items.append(last)
    return items


def _parameter(
    arg: ast.arg, kind: inspect._ParameterKind, default: ast.expr | None, names: Mapping[str, Any]
) -> inspect.Parameter:
    annotation = inspect.Parameter.empty if arg.annotation is None else ast.unparse(arg.annotation)
    value: object = inspect.Parameter.empty
    if default is not None:
        try:
            value = ast.literal_eval(default)
        except ValueError:
            text = ast.unparse(default)
            value = names.get(text, _Verbatim(text))
    return inspect.Parameter(arg.arg, kind, default=value, annotation=annotation)


class _Verbatim:
    """A default shown as its source text (an expression, not a string)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text
