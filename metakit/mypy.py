"""mypy plugin: exact types for ``asdict_zerocopy`` and ``astuple_zerocopy``.

Enable it in the mypy configuration::

    [mypy]
    plugins = metakit.mypy

For every dataclass whose metaclass derives from ``ZeroCopyFields``,
``obj.asdict_zerocopy()`` and ``metakit.asdict_zerocopy(obj)`` are typed as a
``TypedDict`` of exactly the fields the call returns, in order, with their
declared types (inherited fields included, generic parameters substituted;
``ClassVar``, ``InitVar`` and ``OMIT`` fields left out), and
``astuple_zerocopy()`` as the exact tuple.  A literal ``skip_fields`` removes
its names, and a name that is not a field is an error; any other
``skip_fields`` makes every key not-required.

It works in two phases, like mypy's own dataclass support:

1. During semantic analysis, a base-class or metaclass hook tags each class
   that ``ZeroCopyFields`` makes with ``info.metadata["metakit"]``: whether
   each name its body annotates is an ``OMIT`` field, read from its
   ``field(metadata=...)`` call, which only this phase can see.  (The field
   list itself is mypy's.)  A dataclass that names the metaclass
   directly, with no ``ZeroCopy`` base, also gets the two methods declared, as
   ``ZeroCopy`` declares them.
2. While type checking, at each call, the field list comes from what mypy's
   dataclass support stored for the class once it was complete
   (``info.metadata["dataclass"]["attributes"]``), with each field's type read
   from its ``Var`` and mapped to the receiver's type arguments.

Both kinds of metadata travel through mypy's cache, so a warm incremental run
and ``dmypy`` give the same results as a cold run.  A class that mypy could not
fully analyse keeps the declared types (``Mapping[str, Any]``,
``tuple[Any, ...]``).  Supports mypy 1.12 and later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Final

# mypy.types first: mypy.expandtype imports it and is imported back by it.
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    TupleType,
    Type,
    TypedDictType,
    TypeOfAny,
    TypeType,
    TypeVarType,
    UnionType,
    get_proper_type,
)

# isort: split
from mypy.errorcodes import ErrorCode
from mypy.expandtype import expand_type, expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    ARG_NAMED,
    ARG_OPT,
    ARG_POS,
    ARG_STAR2,
    Argument,
    AssignmentStmt,
    Block,
    CallExpr,
    DictExpr,
    Expression,
    IfStmt,
    ListExpr,
    NameExpr,
    RefExpr,
    SetExpr,
    StrExpr,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.plugin import CheckerPluginInterface, ClassDefContext, FunctionContext, MethodContext, Plugin
from mypy.plugins.common import add_attribute_to_class, add_method_to_class
from mypy.server.trigger import make_trigger, make_wildcard_trigger

from metakit import _meta
from metakit._codegen import ASDICT, ASTUPLE
from metakit._functions import asdict_zerocopy, astuple_zerocopy

__version__ = "1"
"""The plugin's own version: bump it when its behaviour changes, so that
mypy's caches made with the old behaviour go stale."""

__all__ = ["plugin"]

METADATA_KEY: Final = "metakit"
_TAG_SYMBOL: Final = "__metakit-tag"

_METACLASS: Final = f"{_meta.ZeroCopyFields.__module__}.{_meta.ZeroCopyFields.__qualname__}"
_BASE: Final = f"{_meta.ZeroCopy.__module__}.{_meta.ZeroCopy.__qualname__}"
_OMIT: Final = f"{_meta.__name__}.OMIT"
_FUNCTIONS: Final = {f"{f.__module__}.{f.__qualname__}": f.__name__ for f in (asdict_zerocopy, astuple_zerocopy)}

METAKIT_ERROR: Final = ErrorCode("metakit", "Check calls of metakit's zero-copy conversions", "metakit")

_OLDEST_MYPY: Final = (1, 12)


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the plugin class for mypy *version*."""
    release = tuple(int(part) for part in version.partition("+")[0].split(".")[:2] if part.isdigit())
    if release < _OLDEST_MYPY:
        raise RuntimeError(f"metakit.mypy needs mypy >= {'.'.join(map(str, _OLDEST_MYPY))}, not {version}")
    return ZeroCopyPlugin


class ZeroCopyPlugin(Plugin):
    """Types the conversions of the classes that ``ZeroCopyFields`` makes."""

    def get_metaclass_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        # Runs only for an explicit ``metaclass=``; subclasses come through
        # ``get_base_class_hook``.
        sym = self.lookup_fully_qualified(fullname)
        if sym is not None and isinstance(sym.node, TypeInfo) and _is_zerocopy_metaclass(sym.node):
            return _tag_class
        return None

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        sym = self.lookup_fully_qualified(fullname)
        if sym is not None and isinstance(sym.node, TypeInfo) and _made_by_zerocopy(sym.node):
            return _tag_class
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        # *fullname* names the receiver's class, not the one that defines the
        # method, so the hook itself checks that the method is metakit's.
        method = fullname.rpartition(".")[2]
        if method == ASDICT:
            return _asdict_method
        if method == ASTUPLE:
            return _astuple_method
        return None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        function = _FUNCTIONS.get(fullname)
        if function == ASDICT:
            return _asdict_function
        if function == ASTUPLE:
            return _astuple_function
        return None


# --- phase 1: semantic analysis ----------------------------------------------


def _is_zerocopy_metaclass(info: TypeInfo) -> bool:
    return any(base.fullname == _METACLASS for base in info.mro)


def _made_by_zerocopy(info: TypeInfo) -> bool:
    return info.metaclass_type is not None and _is_zerocopy_metaclass(info.metaclass_type.type)


def _tag_class(ctx: ClassDefContext) -> None:
    """Record what only semantic analysis sees, and declare missing methods.

    mypy may analyse a class body more than once, so this overwrites
    whatever an earlier pass stored.
    """
    info = ctx.cls.info
    tag = {"declared": _declared_fields(ctx.cls.defs)}
    info.metadata[METADATA_KEY] = tag
    # dmypy sees that a class changed through its symbol table, which
    # metadata is no part of.  This entry, which no code can name, changes
    # whenever the tag does.
    add_attribute_to_class(
        ctx.api,
        ctx.cls,
        _TAG_SYMBOL,
        LiteralType(json.dumps(tag), ctx.api.named_type("builtins.str", [])),
        is_classvar=True,
        overwrite_existing=True,
    )
    if any("dataclass_tag" in base.metadata or "dataclass" in base.metadata for base in info.mro):
        _declare_methods(ctx)
    # For dmypy: the result types depend on every class in the MRO, so a
    # change to any of them makes the calls that use them stale.
    for base in info.mro[:-1]:
        for target in (info.fullname, f"{info.fullname}.{ASDICT}", f"{info.fullname}.{ASTUPLE}"):
            ctx.api.add_plugin_dependency(make_wildcard_trigger(base.fullname), make_trigger(target))


def _declare_methods(ctx: ClassDefContext) -> None:
    """Declare both methods on a dataclass that has no ``ZeroCopy`` base.

    At run time the metaclass gives every dataclass the two methods, unless
    the class defines or inherits a method of that name.  These declarations
    match ``ZeroCopy``'s; the type-checking hooks narrow them at each call.
    """
    info = ctx.cls.info
    api = ctx.api
    for name in (ASDICT, ASTUPLE):
        if info.get(name) is not None:  # a user's method, ZeroCopy's, or ours from an earlier pass
            continue
        any_type = AnyType(TypeOfAny.special_form)
        if name == ASDICT:
            str_type = api.named_type("builtins.str", [])
            skip_type = UnionType([api.named_type("typing.Iterable", [str_type]), NoneType()])
            args = [Argument(Var("skip_fields", skip_type), skip_type, None, ARG_OPT)]
            returns: Type = api.named_type("typing.Mapping", [str_type, any_type])
        else:
            args = []
            returns = api.named_type("builtins.tuple", [any_type])
        add_method_to_class(api, ctx.cls, name, args, returns)


_OMIT_STATUS: Final = {True: "omit", False: "keep", None: "unknown"}


def _declared_fields(body: Block) -> dict[str, str]:
    """Whether each name a class *body* annotates is an ``OMIT`` field.

    ``"omit"``, ``"keep"``, or ``"unknown"`` when its ``metadata`` cannot
    be read without running the code.  A redefined field takes the status
    of its newest declaration, as at run time.
    """
    declared: dict[str, str] = {}
    for stmt in _annotated_assignments(body):
        lvalue, rvalue = stmt.lvalues[0], stmt.rvalue
        if not isinstance(lvalue, NameExpr):
            continue
        omit: bool | None = False
        if isinstance(rvalue, CallExpr) and isinstance(rvalue.callee, RefExpr):
            given = dict(zip(rvalue.arg_names, rvalue.args, strict=True))
            if rvalue.callee.fullname == "dataclasses.field" and "metadata" in given:
                omit = _omits(given["metadata"])
        declared[lvalue.name] = _OMIT_STATUS[omit]
    return declared


def _annotated_assignments(block: Block) -> Iterator[AssignmentStmt]:
    # The statements mypy's dataclass support reads fields from: annotated
    # assignments, also inside ``if`` blocks that are reachable.
    for stmt in block.body:
        if isinstance(stmt, AssignmentStmt) and stmt.new_syntax:
            yield stmt
        elif isinstance(stmt, IfStmt):
            for branch in [*stmt.body, stmt.else_body]:
                if branch is not None and not branch.is_unreachable:
                    yield from _annotated_assignments(branch)


def _omits(metadata: Expression) -> bool | None:
    """Whether a ``field(metadata=...)`` expression marks the field ``OMIT``.

    ``None`` when that cannot be known without running the code.
    """
    if isinstance(metadata, RefExpr):
        if metadata.fullname == _OMIT:
            return True
        if metadata.fullname == "builtins.None":
            return False
        return None
    items: list[tuple[Expression | None, Expression]]
    if isinstance(metadata, DictExpr):
        items = list(metadata.items)
    elif (
        isinstance(metadata, CallExpr)
        and isinstance(metadata.callee, RefExpr)
        and metadata.callee.fullname == "builtins.dict"
        and all(kind in (ARG_NAMED, ARG_STAR2) for kind in metadata.arg_kinds)
    ):
        # dict(**OMIT, doc=...): a keyword cannot be the dotted OMIT key.
        items = [
            (None if kind == ARG_STAR2 else StrExpr(name or ""), arg)
            for arg, kind, name in zip(metadata.args, metadata.arg_kinds, metadata.arg_names, strict=True)
        ]
    else:
        return None
    omit: bool | None = False
    for key, value in items:  # later entries win, as in the dict itself
        if key is None:
            splat = _omits(value)
            if splat is None or splat:
                omit = splat
        elif not isinstance(key, StrExpr):
            return None
        elif key.value == _meta.OMIT_KEY:
            omit = _bool_literal(value)
    return omit


def _bool_literal(expr: Expression) -> bool | None:
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False"):
        return expr.fullname == "builtins.True"
    return None


# --- phase 2: type checking ---------------------------------------------------


def _asdict_method(ctx: MethodContext) -> Type:
    receiver = _instance(ctx.type)
    if receiver is None or not _generated(receiver.type, ASDICT):
        return ctx.default_return_type
    return _asdict_result(ctx.api, [receiver], _argument(ctx, 0), ctx.default_return_type)


def _astuple_method(ctx: MethodContext) -> Type:
    receiver = _instance(ctx.type)
    if receiver is None or not _generated(receiver.type, ASTUPLE):
        return ctx.default_return_type
    return _astuple_result(ctx.api, [receiver], ctx.default_return_type)


# The function forms always return the fields: they never call a user's
# override, so they are typed whatever methods the class defines.


def _asdict_function(ctx: FunctionContext) -> Type:
    return _asdict_result(ctx.api, _function_receivers(ctx, ASDICT), _argument(ctx, 1), ctx.default_return_type)


def _astuple_function(ctx: FunctionContext) -> Type:
    return _astuple_result(ctx.api, _function_receivers(ctx, ASTUPLE), ctx.default_return_type)


def _asdict_result(
    api: CheckerPluginInterface, receivers: list[Instance] | None, skip: _Argument, default: Type
) -> Type:
    if skip is not None:
        _check_not_str(api, *skip)
    return _union(receivers, lambda receiver: _typed_dict(api, receiver, skip), default)


def _astuple_result(api: CheckerPluginInterface, receivers: list[Instance] | None, default: Type) -> Type:
    fallback = api.named_generic_type("builtins.tuple", [AnyType(TypeOfAny.special_form)])

    def exact(receiver: Instance) -> Type | None:
        fields = _fields(receiver)
        return None if fields is None else TupleType(list(fields[0].values()), fallback)

    return _union(receivers, exact, default)


def _union(receivers: list[Instance] | None, result: Callable[[Instance], Type | None], default: Type) -> Type:
    """The union of *result* for each receiver; *default* when one of them, or the receivers, are unknown."""
    if receivers is None:
        return default
    results: list[Type] = []
    for receiver in receivers:
        typ = result(receiver)
        if typ is None:
            return default
        results.append(typ)
    return UnionType.make_union(results)


_Argument = tuple[Expression, Type] | None
"""The expression and type given for one parameter, if given once, by position or name."""


def _argument(ctx: MethodContext | FunctionContext, index: int) -> _Argument:
    if index < len(ctx.args) and len(ctx.args[index]) == 1 and ctx.arg_kinds[index][0] in (ARG_POS, ARG_NAMED):
        return ctx.args[index][0], ctx.arg_types[index][0]
    return None


def _instance(typ: Type) -> Instance | None:
    typ = get_proper_type(typ)
    if isinstance(typ, TypeVarType):  # e.g. ``self: Self``
        typ = get_proper_type(typ.upper_bound)
    return typ if isinstance(typ, Instance) else None


def _generated(info: TypeInfo, method: str) -> bool:
    """Whether *method*, looked up on *info*, is metakit's rather than a user's."""
    owner = info.get_containing_type_info(method)
    if owner is None:
        return False
    return owner.fullname == _BASE or (owner.names[method].plugin_generated and METADATA_KEY in owner.metadata)


def _function_receivers(ctx: FunctionContext, function: str) -> list[Instance] | None:
    """The instances a function form may be given, if ``ZeroCopyFields`` made all their classes.

    A class given where an instance belongs is an error.
    """
    if not ctx.arg_types or len(ctx.arg_types[0]) != 1:
        return None
    given = get_proper_type(ctx.arg_types[0][0])
    receivers: list[Instance] = []
    for item in given.relevant_items() if isinstance(given, UnionType) else [given]:
        typ = get_proper_type(item)
        cls = typ.type_object() if isinstance(typ, CallableType) and typ.is_type_obj() else None
        if isinstance(typ, TypeType) and isinstance(typ.item, Instance):
            cls = typ.item.type
        if cls is not None and _made_by_zerocopy(cls) and _dataclass_owner(cls) is not None:
            ctx.api.fail(
                f"{function}() takes a dataclass instance, but got the class {_qualname(cls)} itself",
                ctx.context,
                code=METAKIT_ERROR,
            )
            return None
        receiver = _instance(typ)
        if cls is not None or receiver is None or not _made_by_zerocopy(receiver.type):
            return None
        receivers.append(receiver)
    return receivers


def _typed_dict(api: CheckerPluginInterface, receiver: Instance, skip: _Argument) -> TypedDictType | None:
    """The ``TypedDict`` that ``asdict_zerocopy`` returns for *receiver*, less the names in *skip*."""
    fields = _fields(receiver)
    if fields is None:
        return None
    items, names = fields
    required = set(items)
    skipped = _literal_names(skip)
    if skipped is None:  # not a literal: any key may be gone
        required = set()
    else:
        for name, expr in skipped:
            if name not in names:
                api.fail(
                    f"skip_fields names {name!r}, which is not a field of {_qualname(receiver.type)}",
                    expr,
                    code=METAKIT_ERROR,
                )
            items.pop(name, None)
            required.discard(name)
    return TypedDictType(items, required, set(), api.named_generic_type("typing._TypedDict", []))


def _literal_names(skip: _Argument) -> list[tuple[str, Expression]] | None:
    """The names in a literal ``skip_fields``: ``[]`` for none, ``None`` if not a literal."""
    if skip is None:
        return []
    expr = skip[0]
    if isinstance(expr, NameExpr) and expr.fullname == "builtins.None":
        return []
    if not isinstance(expr, (SetExpr, ListExpr, TupleExpr)):
        return None
    if not all(isinstance(item, StrExpr) for item in expr.items):
        return None
    return [(item.value, item) for item in expr.items if isinstance(item, StrExpr)]


def _check_not_str(api: CheckerPluginInterface, expr: Expression, typ: Type) -> None:
    # A str would be read as a set of one-letter names: the call raises.
    proper = get_proper_type(typ)
    if isinstance(proper, LiteralType):
        proper = proper.fallback
    if isinstance(proper, Instance) and proper.type.fullname == "builtins.str":
        hint = f"; write skip_fields={{{expr.value!r}}}" if isinstance(expr, StrExpr) else ""
        api.fail(f"skip_fields must be an iterable of field names, not a str{hint}", expr, code=METAKIT_ERROR)


def _fields(receiver: Instance) -> tuple[dict[str, Type], set[str]] | None:
    """The types of the fields the conversions return, in order, and the
    names of all the fields; ``None`` when they are not known."""
    owner = _dataclass_owner(receiver.type)
    if owner is None:
        return None
    attributes = {data["name"]: data for data in owner.metadata["dataclass"]["attributes"]}
    items: dict[str, Type] = {}
    names: set[str] = set()
    for name in _field_order(owner):
        if name not in attributes or attributes[name].get("is_init_var", False):
            continue
        declared = _declared_type(owner, name)
        if declared is None:
            return None
        info, typ = declared
        if _is_kw_only_marker(typ):
            continue
        names.add(name)
        status = _omit_status(owner, name)
        if status == "unknown":
            return None
        if status == "keep":
            items[name] = _field_type(receiver, info, typ)
    return items, names


def _is_kw_only_marker(typ: Type) -> bool:
    # ``_: KW_ONLY`` is in mypy's field list, but not in ``fields()``.
    proper = get_proper_type(typ)
    return isinstance(proper, Instance) and proper.type.fullname == "dataclasses.KW_ONLY"


def _dataclass_owner(info: TypeInfo) -> TypeInfo | None:
    """The class whose dataclass fields *info*'s instances have, if known.

    An undecorated subclass of a dataclass has its parent's fields.  A
    class with a base of type ``Any`` may have any fields, and one that
    mypy's dataclass support could not complete has unknown ones.
    """
    if any(base.fallback_to_any for base in info.mro):
        return None
    for base in info.mro:
        if "dataclass" in base.metadata:
            return base
        if "dataclass_tag" in base.metadata:
            return None
    return None


def _field_order(owner: TypeInfo) -> list[str]:
    """The names of *owner*'s dataclass fields in ``dataclasses.fields()`` order.

    mypy stores each class's fields in ``__init__`` order, which moves
    keyword-only fields last.  At run time, fields come in the order their
    classes introduced them, base classes first, a redefined field keeping
    its first place; within a class, in the order of its body.
    """
    order: dict[str, None] = {}
    for base in reversed(owner.mro):
        data = base.metadata.get("dataclass")
        if data is None:
            continue
        new = [attr for attr in data["attributes"] if attr["name"] not in order]
        for attr in sorted(new, key=lambda attr: (attr.get("line", 0), attr.get("column", 0))):
            order[attr["name"]] = None
    return list(order)


def _omit_status(owner: TypeInfo, name: str) -> str:
    """Whether *owner*'s field *name* is an ``OMIT`` field, as the dataclass
    nearest *owner* in its MRO that declares it says.

    A field declared only by dataclasses that ``ZeroCopyFields`` did not
    make is taken to be kept: they were never tagged.
    """
    for info in owner.mro:
        declared = info.metadata.get(METADATA_KEY, {}).get("declared", {})
        if "dataclass" in info.metadata and name in declared:
            status: str = declared[name]
            return status
    return "keep"


def _declared_type(owner: TypeInfo, name: str) -> tuple[TypeInfo, Type] | None:
    """The type of *owner*'s field *name*, and the class it is declared in.

    That is the dataclass nearest *owner* in its MRO with a variable of that
    name, which may be one that mypy's dataclass support added to it (as it
    does for inherited fields of frozen dataclasses).
    """
    for info in owner.mro:
        if "dataclass" not in info.metadata:
            continue
        sym = info.names.get(name)
        if sym is not None and isinstance(sym.node, Var) and (not sym.node.is_inferred or sym.node.is_final):
            return None if sym.node.type is None else (info, sym.node.type)
    return None


def _field_type(receiver: Instance, info: TypeInfo, typ: Type) -> Type:
    """A field's declared type *typ*, in class *info*, as seen from *receiver*."""
    if info.self_type is not None:
        typ = expand_type(typ, {info.self_type.id: receiver})
    return expand_type_by_instance(typ, map_instance_to_supertype(receiver, info))


def _qualname(info: TypeInfo) -> str:
    # mypy names a class defined in a function ``Name@line``.
    return re.sub(r"@[0-9]+", "", info.fullname[len(info.module_name) + 1 :])
