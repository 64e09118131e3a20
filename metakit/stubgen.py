"""``python -m metakit stubgen MODULE [-o DIR]``: stubs with exact types, for pyright.

Checkers without plugins, such as pyright, read the types of
``asdict_zerocopy`` and ``astuple_zerocopy`` from stubs.  This writes the
stub of a whole module, ``DIR/<package path>.pyi``.  mypy's own stub
generator (``mypy.stubgen``) writes the module's text; metakit adds, for
every dataclass that ``ZeroCopyFields`` made:

- a ``TypedDict`` named ``<Class>Dict`` of the fields ``asdict_zerocopy()``
  returns, in order, which inherits its parent class's one where the keys
  allow it;
- ``asdict_zerocopy`` overloads: without ``skip_fields`` it returns that
  ``TypedDict``; with literal field names, ``dict[str, Any]``; a ``str`` is
  deprecated (it would be read as one-letter names);
- ``astuple_zerocopy`` with the exact tuple type, and ``__replace__`` with
  the fields ``__init__`` takes, each by keyword;
- the attributes its methods set on ``self`` (in ``__post_init__``, say) as
  properties, which a dataclass does not take for fields.

The module is imported to learn its classes' fields, so it must be
importable.  Field types are read with ``inspect.get_annotations``
(``annotationlib`` on 3.14), never evaluated.  Point pyright at ``DIR`` with
``stubPath``.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import dataclasses
import enum
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from mypy.nodes import (
    ARG_NAMED,
    AssignmentStmt,
    BytesExpr,
    CallExpr,
    ClassDef,
    EllipsisExpr,
    Expression,
    FloatExpr,
    IfStmt,
    IntExpr,
    MemberExpr,
    NameExpr,
    Statement,
    StrExpr,
    TempNode,
    TryStmt,
    UnaryExpr,
)
from mypy.options import Options
from mypy.stubgen import ASTStubGenerator, StubSource, parse_source_file
from mypy.types import AnyType, TypeOfAny

from metakit._fields import ASDICT, ASTUPLE, REPLACE, included_names
from metakit._functions import is_generated
from metakit._meta import ZeroCopy, ZeroCopyFields

__all__ = ["main", "module_stub", "stub_path"]

_INDENT: Final = "    "
# The names the stub adds are imported under private aliases, so that they
# clash with nothing the module defines.
_OWN_IMPORTS: Final = {
    "collections.abc": ("Iterable",),
    "typing": ("Any", "Generic", "Literal", "TypedDict", "overload"),
    "typing_extensions": ("deprecated",),
    "_typeshed": ("Incomplete",),
}
_INCOMPLETE: Final = "_Incomplete"
_CLASSVAR: Final = getattr(dataclasses, "_FIELD_CLASSVAR", None)
_INITVAR: Final = getattr(dataclasses, "_FIELD_INITVAR", None)
_STR_SKIP: Final = "skip_fields is a str, which would be read as one-letter names: write skip_fields={'name'}"


def main(argv: Sequence[str], prog: str = "python -m metakit stubgen") -> int:
    """Run ``stubgen`` as the program *prog*; return the process's exit status."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Write a .pyi stub for MODULE with an exact TypedDict per zero-copy dataclass.",
    )
    parser.add_argument("module", metavar="MODULE", help="e.g. metakit.examples.engine")
    parser.add_argument("-o", "--output", metavar="DIR", default="stubs", help="where to write (default: stubs)")
    args = parser.parse_args(argv)
    try:
        module = importlib.import_module(args.module)
    except ImportError as error:
        parser.error(f"cannot import {args.module!r}: {error}")
    try:
        stub = module_stub(module)
    except (OSError, TypeError, SyntaxError) as error:
        parser.error(f"cannot read the source of {args.module!r}: {error}")
    path = stub_path(Path(args.output), module)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(stub)
    print(f"wrote {path}")
    return 0


def stub_path(directory: Path, module: types.ModuleType) -> Path:
    """Where the stub of *module* goes under *directory*."""
    parts = module.__name__.split(".")
    if hasattr(module, "__path__"):  # a package
        parts.append("__init__")
    return directory.joinpath(*parts).with_suffix(".pyi")


def module_stub(module: types.ModuleType) -> str:
    """The text of the stub of *module*: mypy's, with metakit's additions."""
    return _Additions(module, ast.parse(inspect.getsource(module))).apply(mypy_stub(module))


def mypy_stub(module: types.ModuleType) -> str:
    """The stub that ``mypy.stubgen`` writes for *module* from its source file, unanalysed."""
    path = inspect.getsourcefile(module)
    if path is None:
        raise TypeError(f"{module.__name__} has no source file")
    runtime_all = getattr(module, "__all__", None)  # after any ``__all__ +=``
    source = StubSource(module.__name__, path, list(runtime_all) if runtime_all is not None else None)
    options = Options()
    options.python_version = sys.version_info[:2]
    try:
        parse_source_file(source, options)
    except SystemExit as error:  # how mypy.stubgen reports a syntax error, printed to stderr
        raise SyntaxError(f"mypy cannot parse {path}") from error
    assert source.ast is not None
    _simplify_fields(source.ast.defs)
    generator = ASTStubGenerator(source.runtime_all, include_private=True)
    source.ast.accept(generator)
    output: str = generator.output()
    return output


def _simplify_fields(body: list[Statement]) -> None:
    """Reduce each ``field(...)`` in the class bodies of *body* to what shapes ``__init__``.

    mypy's stub generator copies the call as it is, and it cannot print
    every argument (``metadata={**OMIT, ...}`` fails in some versions): a
    stub needs only ``init``, ``kw_only`` and the default.  A field with
    neither ``init`` nor ``kw_only`` becomes ``= ...``.
    """
    for stmt in body:
        if isinstance(stmt, (IfStmt, TryStmt)):
            blocks = [*stmt.body, stmt.else_body] if isinstance(stmt, IfStmt) else [stmt.body, *stmt.handlers]
            _simplify_fields([inner for block in blocks if block is not None for inner in block.body])
        if not isinstance(stmt, ClassDef):
            continue
        _simplify_fields(stmt.defs.body)
        for assignment in stmt.defs.body:
            if isinstance(assignment, AssignmentStmt) and _is_field_call(assignment.rvalue):
                assignment.rvalue = _field_for_stub(typing.cast(CallExpr, assignment.rvalue))


def _is_field_call(expr: Expression) -> bool:
    return (
        isinstance(expr, CallExpr) and isinstance(expr.callee, (NameExpr, MemberExpr)) and expr.callee.name == "field"
    )


def _field_for_stub(call: CallExpr) -> Expression:
    given = {name: arg for name, arg in zip(call.arg_names, call.args, strict=True) if name is not None}
    kept: dict[str, Expression] = {name: given[name] for name in ("init", "kw_only") if name in given}
    has_default = "default" in given or "default_factory" in given
    if not kept:
        return EllipsisExpr() if has_default else TempNode(AnyType(TypeOfAny.special_form), no_rhs=True)
    init = given.get("init")
    if has_default and not (isinstance(init, NameExpr) and init.name == "False"):
        factory = given.get("default_factory")
        default = given.get("default")
        if isinstance(factory, (NameExpr, MemberExpr)):
            kept["default_factory"] = factory
        elif isinstance(default, (NameExpr, MemberExpr, IntExpr, FloatExpr, StrExpr, BytesExpr, UnaryExpr)):
            kept["default"] = default  # pyright takes no ``default=...`` in a field()
        else:
            kept["default"] = EllipsisExpr()
    return CallExpr(call.callee, list(kept.values()), [ARG_NAMED] * len(kept), list(kept))


class _Additions:
    """metakit's lines for the stub of one module, placed into mypy's stub text."""

    def __init__(self, module: types.ModuleType, source: ast.Module) -> None:
        self.module = module
        self.source_classes = dict(_classes(source.body, ""))
        self.imports: dict[str, None] = {}  # ``import X`` lines that qualified names need
        self.post_init: dict[type, set[str]] = {}  # the properties each class got

    def apply(self, stub: str) -> str:
        lines = stub.splitlines()
        tree = ast.parse(stub)
        self.bound = _bound_names(tree)
        edits: list[tuple[int, int, list[str]]] = []  # (first line, line after, replacement), 0-based
        for qualname, node in _classes(tree.body, ""):
            cls = self._runtime_class(qualname)
            if cls is not None:
                edits += self._class_edits(cls, node, lines)
        edits += _absolute_imports(tree, self.module, lines)
        for first, after, replacement in sorted(edits, key=lambda edit: edit[0], reverse=True):
            lines[first:after] = replacement
        text = "\n".join(lines)
        header = [
            f'# Generated by "python -m metakit stubgen {self.module.__name__}"; do not edit.',
            "# A subclass's exact astuple_zerocopy() type is no subtype of its parent's.",
            "# pyright: reportIncompatibleMethodOverride=false",
            "# A dataclass may redefine an inherited field with another type.",
            "# pyright: reportIncompatibleVariableOverride=false",
        ]
        identifiers = _identifiers(text)
        for module, names in _OWN_IMPORTS.items():
            used = [f"{name} as _{name}" for name in names if f"_{name}" in identifiers]
            if used:
                header.append(f"from {module} import {', '.join(used)}")
        header += [f"import {name}" for name in self.imports if f"import {name}" not in lines]
        return "\n".join([*header, *text.splitlines()]).rstrip("\n") + "\n"

    def _runtime_class(self, qualname: str) -> type | None:
        obj: object = self.module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, type) and obj.__module__ == self.module.__name__ and obj.__qualname__ == qualname:
            return obj
        return None

    def _class_edits(self, cls: type, node: ast.ClassDef, lines: list[str]) -> list[tuple[int, int, list[str]]]:
        indent = " " * node.col_offset
        inner = indent + _INDENT
        edits: list[tuple[int, int, list[str]]] = []
        if issubclass(cls, enum.Enum):
            edits += _enum_members(cls, node)
        zerocopy = _is_zerocopy_dataclass(cls)
        fields = self._field_types(cls) if zerocopy else {}
        if zerocopy:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            edits.append((first, first, self._typed_dict(cls, fields, indent)))
        properties = self._post_init_attributes(cls, inner)
        body = [line for _, text in properties for line in text]
        if zerocopy:
            body += self._methods(cls, fields, inner)
        # mypy writes the attributes set on self as ``name = ...``: they become properties.
        for stmt in node.body:
            if _assigned_name(stmt) in dict(properties):
                edits.append((stmt.lineno - 1, stmt.end_lineno or stmt.lineno, []))
        if not body:
            return edits
        last = (node.end_lineno or node.lineno) - 1
        if last == node.lineno - 1 and lines[last].rstrip().endswith(": ..."):  # ``class X: ...``
            edits.append((last, last + 1, [lines[last].rstrip()[: -len(" ...")], *body]))
        else:
            edits.append((last + 1, last + 1, body))
        return edits

    # --- what metakit adds --------------------------------------------------

    def _typed_dict(self, cls: type, fields: dict[str, str], indent: str) -> list[str]:
        parent, parent_keys = self._dict_parent(cls)
        keys = list(fields)[len(parent_keys) :]
        bases = [parent or "_TypedDict"]
        params = _parameters(cls)
        if params:
            bases.append(f"_Generic[{', '.join(params)}]")
        lines = [f"{indent}class {cls.__name__}Dict({', '.join(bases)}):"]
        lines += [f"{indent}{_INDENT}{key}: {fields[key]}" for key in keys] or [f"{indent}{_INDENT}..."]
        return [*lines, ""]

    def _dict_parent(self, cls: type) -> tuple[str | None, list[str]]:
        """The ``TypedDict`` of *cls*'s parent for its own to inherit, and its keys.

        Only where *cls*'s keys start with the parent's keys, declared by the
        same classes: a ``TypedDict`` cannot redefine or drop a key.
        """
        keys = included_names(cls)
        for written, base in zip(vars(cls).get("__orig_bases__", cls.__bases__), cls.__bases__, strict=False):
            if not _is_zerocopy_dataclass(base):
                continue
            if base.__module__ != self.module.__name__ or self._runtime_class(base.__qualname__) is not base:
                break
            base_keys = included_names(base)
            same = keys[: len(base_keys)] == base_keys and all(
                _declaring_class(cls, key) is _declaring_class(base, key) for key in base_keys
            )
            if not same:
                break
            args = typing.get_args(written)
            if args:
                renderer = _Renderer(self, cls, {})
                texts = [renderer.value(arg) for arg in args]
                if None in texts:
                    break
                return f"{_dict_name(base)}[{', '.join(typing.cast(list[str], texts))}]", list(base_keys)
            return _dict_name(base), list(base_keys)
        return None, []

    def _methods(self, cls: type, fields: dict[str, str], indent: str) -> list[str]:
        lines: list[str] = []
        params = _parameters(cls)
        suffix = f"[{', '.join(params)}]" if params else ""
        if _generated(cls, ASDICT):
            names = [f.name for f in dataclasses.fields(cls)]
            lines += [
                f"{indent}@_overload",
                f"{indent}def {ASDICT}(self, skip_fields: None = None) -> {_dict_name(cls)}{suffix}: ...",
                f"{indent}@_overload",
                f"{indent}@_deprecated({_STR_SKIP!r})",
                f"{indent}def {ASDICT}(self, skip_fields: str) -> dict[str, _Any]: ...",
            ]
            if names:
                literal = ", ".join(map(repr, names))
                lines += [
                    f"{indent}@_overload",
                    f"{indent}def {ASDICT}(self, skip_fields: _Iterable[_Literal[{literal}]]) -> dict[str, _Any]: ...",
                ]
        if _generated(cls, ASTUPLE):
            items = ", ".join(fields[name] for name in fields) or "()"
            lines.append(f"{indent}def {ASTUPLE}(self) -> tuple[{items}]: ...")
        if _generated(cls, REPLACE):
            changes = "".join(f", {name}: {typ} = ..." for name, typ in self._init_types(cls).items())
            changes = f", *{changes}" if changes else ""
            lines.append(f"{indent}def {REPLACE}(self{changes}) -> {cls.__qualname__}{suffix}: ...")
        return lines

    def _post_init_attributes(self, cls: type, indent: str) -> list[tuple[str, list[str]]]:
        """Declarations of the attributes that *cls*'s methods set on ``self``.

        In a dataclass they are properties, which ``@dataclass`` does not
        take for fields; elsewhere plain annotations.
        """
        node = self.source_classes.get(cls.__qualname__)
        if node is None:
            return []
        known = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        for klass in cls.__mro__:
            known |= set(vars(klass)) | set(_annotations(klass)) | self.post_init.get(klass, set())
        renderer = _Renderer(self, cls, {})
        own: list[tuple[str, list[str]]] = []
        for name, annotation in _self_assignments(node).items():
            if name in known:
                continue
            text = _INCOMPLETE if annotation is None else renderer.source(annotation, self.module.__name__)
            if dataclasses.is_dataclass(cls):
                own.append((name, [
                    f"{indent}@property",
                    f"{indent}def {name}(self) -> {text}: ...",
                    f"{indent}@{name}.setter",
                    f"{indent}def {name}(self, value: {text}) -> None: ...",
                ]))  # fmt: skip
            else:
                own.append((name, [f"{indent}{name}: {text}"]))
        self.post_init[cls] = {name for name, _ in own}
        return own

    # --- field types ---------------------------------------------------------

    def _field_types(self, cls: type) -> dict[str, str]:
        """The text of the type of each field ``asdict_zerocopy`` returns, as seen from *cls*."""
        return {name: self._field_type(cls, name) for name in included_names(cls)}

    def _init_types(self, cls: type) -> dict[str, str]:
        """The text of the type of each field that ``__init__`` (and so ``__replace__``) takes."""
        types_: dict[str, str] = {}
        for f in getattr(cls, "__dataclass_fields__").values():  # noqa: B009  # a dataclass's own attribute
            kind = getattr(f, "_field_type", None)
            if not f.init or kind is _CLASSVAR:
                continue
            text = self._field_type(cls, f.name)
            if kind is _INITVAR:  # ``InitVar[int]``: the parameter takes an int
                expr = ast.parse(text, mode="eval").body
                text = ast.unparse(expr.slice) if isinstance(expr, ast.Subscript) else _INCOMPLETE
            types_[f.name] = text
        return types_

    def _field_type(self, cls: type, name: str) -> str:
        declaring = _declaring_class(cls, name)
        if declaring is None:
            return _INCOMPLETE
        renderer = _Renderer(self, cls, _type_map(cls, declaring) or {})
        raw = _annotations(declaring)[name]
        if isinstance(raw, str):
            return renderer.source(raw, declaring.__module__)
        if isinstance(raw, dataclasses.InitVar):
            inner = renderer.value(raw.type)
            return _INCOMPLETE if inner is None else f"{renderer.value(dataclasses.InitVar)}[{inner}]"
        return renderer.value(raw) or _INCOMPLETE


class _Renderer:
    """Writes a type as source text that means the same in the stub.

    Names are looked up in the module where the type was written.  A name
    that the stub binds to the same thing is written as it is; any other is
    written qualified, with an ``import`` of its module.  Type variables of
    the declaring class are replaced by what *cls* binds them to; ``Self``
    becomes *cls*.  Whatever cannot be written becomes ``Incomplete``.
    """

    def __init__(self, additions: _Additions, cls: type, bound: dict[object, object]) -> None:
        self.additions = additions
        self.module = additions.module
        self.cls = cls
        self.bound = bound

    def source(self, annotation: str, module_name: str) -> str:
        """The text for *annotation*, source text written in the module *module_name*."""
        renderer = self
        namespace = vars(sys.modules[module_name])

        class Rewrite(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.expr:
                text = renderer.name(node.id, namespace, module_name)
                if text is None:
                    raise LookupError(node.id)
                return ast.parse(text, mode="eval").body

            def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
                dotted = ast.unparse(node)
                head = dotted.partition(".")[0]
                value = namespace.get(head)
                if isinstance(value, types.ModuleType):  # ``torch.Tensor``: import the module it names
                    if value is renderer.module:  # ``stub_module.Name``, from another module
                        return ast.parse(dotted[len(head) + 1 :], mode="eval").body
                    renderer.imports(value.__name__)
                    return ast.parse(value.__name__ + dotted[len(head) :], mode="eval").body
                return typing.cast(ast.expr, self.generic_visit(node))

            def visit_Constant(self, node: ast.Constant) -> ast.expr:  # a quoted forward reference
                if isinstance(node.value, str):
                    try:
                        return typing.cast(ast.expr, self.visit(ast.parse(node.value, mode="eval").body))
                    except SyntaxError:
                        return node
                return node

        try:
            return ast.unparse(Rewrite().visit(ast.parse(annotation, mode="eval").body))
        except (LookupError, SyntaxError):
            return _INCOMPLETE

    def name(self, name: str, namespace: dict[str, Any], module_name: str) -> str | None:  # noqa: PLR0911  # one case each
        """The text for *name*, a name in the module *module_name*."""
        own = module_name == self.module.__name__
        if name not in namespace:
            if hasattr(builtins, name):
                return name
            # Bound only for type checkers (under ``if TYPE_CHECKING:``).
            target = _type_checking_imports(sys.modules[module_name]).get(name)
            if target is None:
                return name if own and name in self.additions.bound else None
            return self._qualified(*target)
        value = namespace[name]
        if value is typing.Any or isinstance(value, typing.TypeVar) or _is_self(value):
            return self.value(value)
        if own and name in self.additions.bound and not isinstance(value, types.ModuleType):
            return name
        if isinstance(value, types.ModuleType):
            return self._qualified(value.__name__, "")
        module = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", name)
        if isinstance(module, str) and _lookup(module, qualname) is value:
            return qualname if module == self.module.__name__ else self._qualified(module, qualname)
        return self.value(value)

    def value(self, value: object) -> str | None:  # noqa: PLR0911  # one case each
        """The text for a type given as an object, not as source."""
        if _is_self(value) or isinstance(value, typing.TypeVar):
            return self._variable(value)
        if value is None or value is type(None) or value is typing.Any:
            return "_Any" if value is typing.Any else "None"
        if isinstance(value, typing.ForwardRef):
            return self.source(
                value.__forward_arg__, getattr(value, "__forward_module__", None) or self.module.__name__
            )
        if isinstance(value, str):
            return self.source(value, self.module.__name__)
        if isinstance(value, type) and typing.get_origin(value) is None:
            if value.__module__ == self.module.__name__:
                return value.__qualname__
            return self._qualified(value.__module__, value.__qualname__)
        return self._generic(value)

    def _variable(self, value: object) -> str | None:
        """The text for ``Self`` or a type variable, as *cls* binds it."""
        if _is_self(value):
            return self.cls.__qualname__
        if self.bound.get(value, value) is not value:
            return self.value(self.bound[value])
        return getattr(value, "__name__", None) if value in _parameters_of(self.cls) else None

    def _generic(self, value: object) -> str | None:
        """The text for a union, a ``Literal`` or a generic alias such as ``list[int]``."""
        origin, args = typing.get_origin(value), typing.get_args(value)
        if origin is None:
            return None
        if origin is typing.Literal:
            return f"{self._qualified('typing', 'Literal')}[{', '.join(map(repr, args))}]"
        parts = [self._argument(arg) for arg in args]
        if None in parts:
            return None
        texts = typing.cast(list[str], parts)
        if origin is typing.Union or isinstance(value, types.UnionType):
            return " | ".join(texts)
        head = self.value(origin)
        if head is None or not texts:  # a bare ``typing.Callable``, ``typing.List``
            return head
        return f"{head}[{', '.join(texts)}]"

    def _argument(self, arg: object) -> str | None:
        if isinstance(arg, list):  # Callable[[...], ...]
            parts = [self.value(item) for item in arg]
            return None if None in parts else f"[{', '.join(typing.cast(list[str], parts))}]"
        return "..." if arg is Ellipsis else self.value(arg)

    def _qualified(self, module: str, qualname: str) -> str:
        """*qualname* in *module* (or the module itself), importing the module."""
        if module == "builtins":
            return qualname
        self.imports(module)
        return f"{module}.{qualname}" if qualname else module

    def imports(self, module: str) -> None:
        if module != self.module.__name__:
            self.additions.imports[module] = None


# --- helpers ------------------------------------------------------------------


def _enum_members(cls: type[enum.Enum], node: ast.ClassDef) -> list[tuple[int, int, list[str]]]:
    """Edits that declare *cls*'s members as members.

    Without analysis, mypy writes ``RED = 1`` as ``RED: int``, which a stub
    reads as an attribute that is no member.
    """
    edits = []
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is None:
            member = cls.__members__.get(stmt.target.id)
            if member is not None:
                value = member.value
                literal = repr(value) if type(value) in (int, str, bool, float, bytes) else "..."
                indent = " " * stmt.col_offset
                edits.append(
                    (stmt.lineno - 1, stmt.end_lineno or stmt.lineno, [f"{indent}{stmt.target.id} = {literal}"])
                )
    return edits


def _annotations(cls: type) -> dict[str, object]:
    """The annotations *cls*'s own body declares, never evaluated.

    Strings, or objects where the module did not defer them; on 3.14
    (PEP 649) always the source strings.
    """
    if sys.version_info >= (3, 14):
        import annotationlib  # 3.14 and later only

        return dict(annotationlib.get_annotations(cls, format=annotationlib.Format.STRING))
    return dict(inspect.get_annotations(cls))


def _classes(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.ClassDef]]:
    """The classes *body* defines, nested ones too, with their qualified names."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield prefix + node.name, node
            yield from _classes(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, ast.If):
            yield from _classes([*node.body, *node.orelse], prefix)
        elif isinstance(node, ast.Try):
            yield from _classes([*node.body, *node.orelse, *node.finalbody], prefix)
            for handler in node.handlers:
                yield from _classes(handler.body, prefix)


def _bound_names(tree: ast.Module) -> set[str]:
    """The names the stub's module level binds."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).partition(".")[0] for alias in node.names}
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif (name := _assigned_name(node)) is not None:
            names.add(name)
    return names


def _assigned_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _identifiers(text: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Name)}


def _absolute_imports(tree: ast.Module, module: types.ModuleType, lines: list[str]) -> list[tuple[int, int, list[str]]]:
    """Edits that make the stub's relative imports absolute: it may sit apart from its package's other stubs."""
    edits = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            absolute = ast.ImportFrom(module=_absolute(module, node.level, node.module), names=node.names, level=0)
            edits.append((node.lineno - 1, node.end_lineno or node.lineno, [ast.unparse(absolute)]))
    return edits


def _absolute(module: types.ModuleType, level: int, name: str | None) -> str:
    package = (module.__package__ or "").split(".")
    base = ".".join(package[: len(package) - level + 1])
    return f"{base}.{name}" if name else base


def _type_checking_imports(module: types.ModuleType) -> dict[str, tuple[str, str]]:
    """The names *module*'s ``import`` statements bind, whether or not they ran: name -> (module, qualname)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return {}
    found: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, node.level, node.module) if node.level else node.module or ""
            for alias in node.names:
                found[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = (alias.name, "")
    return found


def _lookup(module: str, qualname: str) -> object:
    obj: object = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _literal_type(value: ast.expr) -> str | None:
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    if isinstance(value, ast.Constant):
        return "None" if value.value is None else type(value.value).__name__
    return None


def _self_assignments(node: ast.ClassDef) -> dict[str, str | None]:
    """The attributes that the methods in a class body set on ``self``, with their types.

    The annotation's source text where one is given, the type of a literal
    value (``bool | None``) where every value is one, else ``None``.
    """
    annotations: dict[str, str] = {}
    inferred: dict[str, set[str | None]] = {}
    for method in node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.args.args:
            continue
        self_name = method.args.args[0].arg
        for stmt in ast.walk(method):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign):
                targets, value = [stmt.target], stmt.value
            for target in targets:
                if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
                    continue
                if target.value.id != self_name:
                    continue
                if isinstance(stmt, ast.AnnAssign):
                    annotations.setdefault(target.attr, ast.unparse(stmt.annotation))
                inferred.setdefault(target.attr, set()).add(_literal_type(value) if value is not None else None)
    return {
        name: annotations.get(name) or (None if None in kinds else " | ".join(sorted(typing.cast(set[str], kinds))))
        for name, kinds in inferred.items()
    }


def _declaring_class(cls: type, name: str) -> type | None:
    """The dataclass in *cls*'s MRO whose body declares the field *name* that counts."""
    for klass in cls.__mro__:
        if dataclasses.is_dataclass(klass) and name in _annotations(klass):
            return klass
    return None


def _dict_name(cls: type) -> str:
    return f"{cls.__qualname__}Dict"


def _parameters(cls: type) -> list[str]:
    return [param.__name__ for param in _parameters_of(cls)]


def _parameters_of(cls: type) -> tuple[Any, ...]:
    params: tuple[Any, ...] = getattr(cls, "__parameters__", ())
    return params


def _type_map(cls: type, target: type) -> dict[object, object] | None:
    """What *cls* binds each type variable of its base class *target* to."""
    if cls is target:
        return {param: param for param in _parameters_of(cls)}
    for base in vars(cls).get("__orig_bases__", cls.__bases__):
        origin = typing.get_origin(base) or base
        if not isinstance(origin, type) or target not in origin.__mro__:
            continue
        inner = _type_map(origin, target)
        if inner is None:
            continue
        local = dict(zip(_parameters_of(origin), typing.get_args(base), strict=False))
        return {param: _substitute(value, local) for param, value in inner.items()}
    return None


def _substitute(value: object, local: dict[object, object]) -> object:
    if isinstance(value, typing.TypeVar):
        return local.get(value, value)
    params: tuple[Any, ...] = getattr(value, "__parameters__", ())
    if params and not isinstance(value, type):
        return value[tuple(local.get(param, param) for param in params)]  # type: ignore[index]
    return value


def _is_self(value: object) -> bool:
    return value is getattr(typing, "Self", None) or repr(value) == "typing_extensions.Self"


def _is_zerocopy_dataclass(cls: type) -> bool:
    return isinstance(cls, ZeroCopyFields) and dataclasses.is_dataclass(cls)


def _generated(cls: type, name: str) -> bool:
    """Whether *cls*'s method *name* is metakit's (generated, or ``ZeroCopy``'s), not one a user wrote."""
    for klass in cls.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            return is_generated(value) or value is vars(ZeroCopy).get(name)
    return False
