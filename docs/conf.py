"""Sphinx configuration of the aio-purgatory documentation.

Built by ``sphinx-build -W --keep-going -n docs <out>`` (tests/test_docs.py does it).
Nothing here reaches the network: intersphinx is left out, so the standard library's
names in signatures are not links (``nitpick_ignore_regex`` lists them).
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path
from types import GetSetDescriptorType, ModuleType
from typing import Any

from sphinx.application import Sphinx
from sphinx.ext.autodoc import AttributeDocumenter, ClassDocumenter, Documenter
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.inspect import stringify_signature

import purgatory
import purgatory.contrib.prometheus
import purgatory.contrib.redis
import purgatory.testing
from purgatory.core._signature import parameters

project = "aio-purgatory"
author = "The purgatory developers"
project_copyright = "The purgatory developers"
release = purgatory.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples"]

html_theme = "furo"
html_title = f"aio-purgatory {release}"

myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# Sphinx 9's autodoc takes no custom documenter (CompiledPropertyDocumenter, below) but in
# its former, class-based implementation, which this asks for (Sphinx 8 has only that one)
autodoc_use_legacy_class_based = True
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}

nitpicky = True
nitpick_ignore_regex = [
    # the standard library and third-party packages: no intersphinx (offline build)
    (r"py:.*", r"(collections|concurrent|enum|types|typing|_?asyncio|inspect)\..*"),
    (r"py:.*", r"(redis|prometheus_client)\..*"),
    (r"py:class", r"(Callable|Hashable|Iterable|Iterator|Awaitable|Metric)"),
    # type variables and private helpers named in signatures and bases
    (r"py:.*", r"(.*\.)?(T|Ts|R|K|Op)"),
    (r"py:.*", r"purgatory\..*\._\w+"),
    (r"py:.*", r"random\.Random|(.*\.)?T_contra"),
    # the library's docstrings name the modules of its source tree, which the reference
    # does not document one by one, and a few names relative to their own module
    # (Sphinx 9 leaves the relative `.report` of a `#:` comment unqualified)
    (r"py:mod", r"purgatory\.(core|aio)\..*|report"),
    (r"py:class", r"purgatory\.core\.(operation\.CompletionListener|timer_list\.TaskSink)"),
    (r"py:(meth|attr|data)", r"now_ms|Operation\.outcome|Purgatory\.statistics|C_CLOCKS"),
    (r"py:data", r"RECHECK_CHUNK|MAX_BATCH"),
]

#: the broker's README, whose install section docs/broker/index.md includes; the
#: library's sdist does not carry broker/ (the broker is its own distribution), so a site
#: built from it says where that section is instead
BROKER_README = Path(__file__).resolve().parent.parent / "broker" / "README.md"
_BROKER_INCLUDE = re.compile(r"```\{include\} \.\./\.\./broker/README\.md\n.*?```\n", re.S)
_NO_BROKER_README = (
    "How to install it is in the broker's README (`broker/README.md` in the repository);\n"
    "this copy of the site was built without it (from the library's sdist).\n"
)


def _include_broker_readme(app: Sphinx, docname: str, source: list[str]) -> None:
    """Where ``broker/README.md`` is absent, the broker page's ``include`` of it becomes
    a sentence naming it (an include of a missing file is an error). O(page)."""
    if docname == "broker/index" and not BROKER_README.is_file():
        source[0] = _BROKER_INCLUDE.sub(_NO_BROKER_README, source[0])


#: C types that Cython writes into the compiled core's signatures, as Python sees them
_C_TYPES = {"Py_ssize_t": "int", "long long": "int"}


_CYTHON_PROPERTY = re.compile(r"^\w+\.\w+: \S.*$")


def _drop_module_docstring(  # noqa: PLR0917 - Sphinx passes them by position
    app: Sphinx, what: str, name: str, obj: object, options: Any, lines: list[str]
) -> None:
    """The reference pages write their own introductions: a module's docstring speaks
    to the source's reader (relative module links, the application packages). A
    compiled property's docstring starts with the line Cython writes for it
    (``Operation.expired: bool``): dropped, as the pure build has none."""
    if what == "module":
        lines.clear()
    elif what in {"attribute", "compiledproperty"} and lines and _CYTHON_PROPERTY.match(lines[0]):
        del lines[: 2 if len(lines) > 1 and not lines[1] else 1]


def _signature(  # noqa: PLR0917 - Sphinx passes them by position
    app: Sphinx,
    what: str,
    name: str,
    obj: object,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    """No ``(*args, **kwargs)`` for a Protocol (it is never instantiated); in the
    compiled core's method signatures, which Cython writes, no ``self`` and Python's
    ``int`` for a C integer type, so both builds show the same signatures."""
    if what == "class" and getattr(obj, "_is_protocol", False):
        return "", return_annotation
    from_source = _source_signature(what, obj)
    if from_source is not None:
        return from_source
    if signature is None:
        return None
    if signature.startswith("(self"):
        signature = "(" + signature[len("(self") :].removeprefix(", ")
    for c_type, py_type in _C_TYPES.items():
        signature = signature.replace(c_type, py_type)
        if return_annotation is not None:
            return_annotation = return_annotation.replace(c_type, py_type)
    return signature, return_annotation


def _compiled_source(obj: object) -> tuple[Path, ModuleType] | None:
    """The ``.py`` source beside the compiled module that defines ``obj``, if any."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    file = getattr(module, "__file__", None)
    if module is None or file is None or file.endswith(".py"):
        return None
    source = Path(file).with_name(module.__name__.rpartition(".")[2] + ".py")
    return (source, module) if source.is_file() else None


def _find_def(tree: ast.Module, qualname: str) -> ast.FunctionDef | None:
    """The ``def`` of ``Class.method`` (a class: its ``__init__``) in a module's tree."""
    body: list[ast.stmt] = tree.body
    found: ast.stmt | None = None
    for part in qualname.split("."):
        found = next(
            (s for s in body if isinstance(s, ast.ClassDef | ast.FunctionDef) and s.name == part),
            None,
        )
        if found is None:
            return None
        body = found.body
    if isinstance(found, ast.ClassDef):
        return _find_def(ast.Module(body=found.body, type_ignores=[]), "__init__")
    return found if isinstance(found, ast.FunctionDef) else None


def _source_signature(what: str, obj: object) -> tuple[str, str | None] | None:
    """A compiled class's or method's signature as its ``.py`` source writes it.

    Cython records signatures in docstrings, with C types, no return annotation for
    some methods, and a bare ``*`` one place too far for some constructors; the
    source has the real one. Defaults that name a constant are shown by value, as the
    pure build shows them. None for anything not compiled (autodoc reads it itself).
    """
    if what not in {"class", "method", "function"}:
        return None
    found = _compiled_source(obj)
    qualname = getattr(obj, "__qualname__", None)
    if found is None or qualname is None:
        return None
    source, module = found
    func = _find_def(ast.parse(source.read_text(encoding="utf-8")), qualname)
    if func is None:
        return None
    decorators = {ast.unparse(d) for d in func.decorator_list}
    # self, cls: all but a static method's first parameter
    params = parameters(func.args, vars(module), skip_first="staticmethod" not in decorators)
    text = stringify_signature(inspect.Signature(params), show_return_annotation=False)
    if what == "class" or func.returns is None:
        return text, None
    return text, ast.unparse(func.returns)


def _analyse_compiled_modules() -> None:
    """Give autodoc the ``.py`` source of each compiled module (the ``.so`` has none), so
    that the ``#:`` comments documenting fields and enum members show in both builds."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not name.startswith("purgatory.") or file is None or file.endswith(".py"):
            continue
        source = Path(file).with_name(name.rpartition(".")[2] + ".py")
        if source.is_file():
            ModuleAnalyzer.cache["module", name] = ModuleAnalyzer.for_file(source, name)


def _cython_property(cls: object, name: str) -> str | None:
    """The head line Cython writes in the docstring of the compiled property ``name``
    defined by ``cls`` or a base, or None if that is not one."""
    for base in getattr(cls, "__mro__", ()):
        member = vars(base).get(name)
        if member is not None:
            doc = member.__doc__ or "" if isinstance(member, GetSetDescriptorType) else ""
            head = doc.partition("\n")[0]
            return head if _CYTHON_PROPERTY.match(head) else None
    return None


class CompiledPropertyDocumenter(AttributeDocumenter):
    """A compiled class's property (a C getset descriptor, which autodoc takes for a
    plain attribute) documented as the property it is in the pure build, with the type
    from the line Cython writes at the head of its docstring."""

    objtype = "compiledproperty"
    directivetype = "property"
    priority = AttributeDocumenter.priority + 2

    @classmethod
    def can_document_member(cls, member: Any, membername: str, isattr: bool, parent: Any) -> bool:
        if not isinstance(parent, ClassDocumenter):
            return False
        return _cython_property(parent.object, membername) is not None

    def add_directive_header(self, sig: str) -> None:
        Documenter.add_directive_header(self, sig)
        first = _cython_property(self.parent, self.objpath[-1]) or ""
        self.add_line("   :type: " + first.partition(": ")[2], self.get_sourcename())


def _skip_undocumented(  # noqa: PLR0917 - Sphinx passes them by position
    app: Sphinx, what: str, name: str, obj: object, skip: bool, options: Any
) -> bool | None:
    """Skip a compiled member whose docstring is only the line Cython writes (its
    signature, or a property's type): the pure build has none and autodoc skips it."""
    if isinstance(obj, type) or not (
        callable(obj) or isinstance(obj, GetSetDescriptorType | property)
    ):
        return None
    lines = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    short = name.rpartition(".")[2]
    if len(lines) == 1 and (
        re.match(rf"^(\w+\.)?{re.escape(short)}\(", lines[0]) or _CYTHON_PROPERTY.match(lines[0])
    ):
        return True
    return None


def setup(app: Sphinx) -> None:
    _analyse_compiled_modules()
    app.add_autodocumenter(CompiledPropertyDocumenter)
    app.connect("autodoc-process-docstring", _drop_module_docstring)
    app.connect("autodoc-process-signature", _signature)
    app.connect("autodoc-skip-member", _skip_undocumented)
    app.connect("source-read", _include_broker_readme)
