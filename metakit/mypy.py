"""mypy plugin: exact types for ``asdict_zerocopy``, ``astuple_zerocopy`` and ``replace``.

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
``skip_fields`` makes every key not-required.  The ``TypedDict`` falls back to
a class that also derives from ``dict[str, object]`` (the result is a new
dict), so it may be passed where a ``dict[str, Any]`` is expected while its
keys stay checked; where the call has an expected ``dict`` type that every
value fits, it is typed as that.  ``metakit.replace(obj, **changes)`` gets the
signature mypy gives ``dataclasses.replace``.

It works in two phases, like mypy's own dataclass support:

1. During semantic analysis, a base-class or metaclass hook tags each class
   that ``ZeroCopyFields`` makes with ``info.metadata["metakit"]``: whether
   each name its body annotates is an ``OMIT`` field, read from its
   ``field(metadata=...)`` call, which only this phase can see, and its
   run-time ``__qualname__`` for messages.  (The field list itself is
   mypy's.)  Plain dataclasses are tagged with their ``OMIT`` fields too,
   for the metakit classes that derive from them.  Each metakit class also
   gets the fallback class of its ``TypedDict``s.  A dataclass that names the
   metaclass directly, with no ``ZeroCopy`` base, also gets the two methods
   declared, as ``ZeroCopy`` declares them.
2. While type checking, at each call, the field list comes from what mypy's
   dataclass support stored for the class once it was complete
   (``info.metadata["dataclass"]["attributes"]``), with each field's type read
   from its ``Var`` and mapped to the receiver's type arguments.

Both kinds of metadata, and the fallback classes, travel through mypy's
cache, so a warm incremental run and ``dmypy`` give the same results as a
cold run.  A class that mypy could not fully analyse keeps the declared
types (``dict[str, Any]``, ``tuple[Any, ...]``); so does one whose fields at
run time are not mypy's (see ``_RUN_TIME_FIELD``).  Supports mypy 1.12 and later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

# mypy.types first: mypy.expandtype imports it and is imported back by it.
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypedDictType,
    TypeOfAny,
    TypeType,
    TypeVarType,
    UnboundType,
    UnionType,
    get_proper_type,
)

# isort: split
from mypy.errorcodes import ErrorCode
from mypy.expandtype import expand_type, expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.messages import format_type
from mypy.mro import MroError, calculate_mro
from mypy.nodes import (
    ARG_NAMED,
    ARG_OPT,
    ARG_POS,
    ARG_STAR2,
    MDEF,
    Argument,
    AssignmentStmt,
    Block,
    BytesExpr,
    CallExpr,
    ClassDef,
    ConditionalExpr,
    DictExpr,
    Expression,
    FloatExpr,
    IfStmt,
    Import,
    ImportFrom,
    IntExpr,
    ListExpr,
    NameExpr,
    OpExpr,
    RefExpr,
    SetExpr,
    StarExpr,
    StrExpr,
    SymbolTable,
    SymbolTableNode,
    TupleExpr,
    TypeInfo,
    Var,
)
from mypy.plugin import (
    CheckerPluginInterface,
    ClassDefContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    MethodSigContext,
    Plugin,
    SemanticAnalyzerPluginInterface,
)
from mypy.plugins.common import add_attribute_to_class, add_method_to_class
from mypy.plugins.dataclasses import dataclass_makers, dataclass_tag_callback, replace_function_sig_callback
from mypy.plugins.default import (
    typed_dict_get_callback,
    typed_dict_get_signature_callback,
    typed_dict_update_signature_callback,
)
from mypy.server.trigger import make_trigger, make_wildcard_trigger
from mypy.subtypes import is_subtype
from mypy.typeops import make_simplified_union

from metakit import _functions, _meta
from metakit._fields import ASDICT, ASTUPLE, OMIT_KEY, is_omitted

__version__ = "3"
"""The plugin's own version: bump it when its behaviour changes, so that
mypy's caches made with the old behaviour go stale."""

__all__ = ["plugin"]

METADATA_KEY: Final = "metakit"
_TAG_SYMBOL: Final = "__metakit-tag"

_METACLASS: Final = f"{_meta.ZeroCopyFields.__module__}.{_meta.ZeroCopyFields.__qualname__}"
_BASE: Final = f"{_meta.ZeroCopy.__module__}.{_meta.ZeroCopy.__qualname__}"
_OMIT: Final = f"{is_omitted.__module__}.OMIT"  # where OMIT is defined
_FUNCTIONS: Final = {f"{_functions.__name__}.{name}": name for name in (ASDICT, ASTUPLE)}
_REPLACE: Final = f"{_functions.__name__}.replace"
# The class that each tagged class's TypedDicts fall back to (see
# ``_add_fallback``): a name that no code can spell.
_FALLBACK: Final = "__metakit-dict"

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

    def get_class_decorator_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        # mypy asks the plugins in turn and takes the first hook it gets, so
        # this one also runs the tagging that mypy's dataclass support does.
        if fullname in dataclass_makers:
            return _tag_dataclass
        return None

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

    def get_method_signature_hook(self, fullname: str) -> Callable[[MethodSigContext], FunctionLike] | None:
        owner, _, method = fullname.rpartition(".")
        if owner.endswith(f".{_FALLBACK}"):
            return _FALLBACK_SIGNATURES.get(method)
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        # *fullname* names the receiver's class, not the one that defines the
        # method, so the hook itself checks that the method is metakit's.  A
        # receiver typed by a TypeVar has no class for mypy to name: it passes
        # the callee's own name instead, "asdict_zerocopy of ZeroCopy".
        method = fullname.rpartition(".")[2].partition(" of ")[0]
        if method == ASDICT:
            return _asdict_method
        if method == ASTUPLE:
            return _astuple_method
        if fullname.endswith(f".{_FALLBACK}.get"):
            return typed_dict_get_callback
        if method in ("items", "values") and fullname.endswith(f".{_FALLBACK}.{method}"):
            return _any_values
        return None

    def get_function_signature_hook(self, fullname: str) -> Callable[[FunctionSigContext], FunctionLike] | None:
        if fullname == _REPLACE:
            # The same signature mypy gives ``dataclasses.replace``: the
            # fields' names and types, every one optional and by keyword.
            return replace_function_sig_callback
        return None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        function = _FUNCTIONS.get(fullname)
        if function == ASDICT:
            return _asdict_function
        if function == ASTUPLE:
            return _astuple_function
        if fullname == "builtins.dict":
            return _dict_of_ours
        return None


def _dict_of_ours(ctx: FunctionContext) -> Type:
    """``dict(meta.asdict_zerocopy(), ...)``: a ``dict[str, Any]``, as without the plugin.

    mypy reads a TypedDict as a mapping of ``object`` values, so a copy made of one would be a
    ``dict[str, object]``, which no ``**`` call and no attribute of a value takes; engines copy the
    result to add keys, and a copy is theirs to fill.
    """
    for typ in (typ for types in ctx.arg_types for typ in types):
        proper = get_proper_type(typ)
        if isinstance(proper, TypedDictType) and proper.fallback.type.fullname.endswith(f".{_FALLBACK}"):
            str_type = ctx.api.named_generic_type("builtins.str", [])
            return ctx.api.named_generic_type("builtins.dict", [str_type, AnyType(TypeOfAny.special_form)])
    return ctx.default_return_type


def _any_values(ctx: MethodContext) -> Type:
    """``meta.asdict_zerocopy().items()`` and ``.values()``: views whose values are ``Any``, as without the plugin.

    mypy gives a TypedDict's views ``object`` values, so a copy made through them (``dict(d.items())``,
    ``{k: v for k, v in d.items()}``) would be a ``dict[str, object]``, as ``dict(d)`` would (see
    ``_dict_of_ours``); a key read by its name keeps its exact type.
    """
    view = get_proper_type(ctx.default_return_type)
    if isinstance(view, Instance) and view.args:
        return view.copy_modified(args=[*view.args[:-1], AnyType(TypeOfAny.special_form)])
    return ctx.default_return_type


# What a TypedDict gets from mypy for the methods of its fallback that
# mypy types key by key: the fallback class declares them itself (see
# ``_add_fallback``), and the plugin hands them on.  ``get`` would otherwise
# be ``dict.get``, which comes before ``Mapping.get`` in the MRO.  It declares
# ``items`` and ``values`` too, so that the plugin's hook sees them (``_any_values``).
_FALLBACK_METHODS: Final = {
    "get": "typing.Mapping",
    "items": "typing._TypedDict",
    "values": "typing._TypedDict",
    "update": "typing._TypedDict",
    "__or__": "typing._TypedDict",
    "__ror__": "typing._TypedDict",
    "__ior__": "typing._TypedDict",
}


def _anonymous_signature(
    callback: Callable[[MethodSigContext], FunctionLike],
) -> Callable[[MethodSigContext], FunctionLike]:
    """*callback*, given the TypedDicts with mypy's own fallback, as some mypy versions need."""

    def hook(ctx: MethodSigContext) -> FunctionLike:
        signature = ctx.default_signature
        arg_types = [_anonymous(ctx.api, typ) for typ in signature.arg_types]
        receiver = get_proper_type(_anonymous(ctx.api, ctx.type))
        return callback(ctx._replace(type=receiver, default_signature=signature.copy_modified(arg_types=arg_types)))

    return hook


def _anonymous(api: CheckerPluginInterface, typ: Type) -> Type:
    """*typ*, with mypy's own fallback if it is one of the plugin's TypedDicts."""
    proper = get_proper_type(typ)
    if isinstance(proper, TypedDictType) and proper.fallback.type.fullname.endswith(f".{_FALLBACK}"):
        return proper.copy_modified(fallback=api.named_generic_type("typing._TypedDict", []))
    return typ


_UPDATE_SIGNATURE: Final = _anonymous_signature(typed_dict_update_signature_callback)
_FALLBACK_SIGNATURES: Final = {
    "get": _anonymous_signature(typed_dict_get_signature_callback),
    "update": _UPDATE_SIGNATURE,
    "__or__": _UPDATE_SIGNATURE,
    "__ror__": _UPDATE_SIGNATURE,
    "__ior__": _UPDATE_SIGNATURE,
}


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
    qualname = _runtime_qualname(ctx.api, info)
    _record_tag(ctx, {"declared": _declared_fields(ctx), "qualname": qualname})
    _add_fallback(ctx.api, info, qualname)
    if any("dataclass_tag" in base.metadata or "dataclass" in base.metadata for base in info.mro):
        _declare_methods(ctx)
    # For dmypy: the result types depend on every class in the MRO, so a
    # change to any of them makes the calls that use them stale.
    for base in info.mro[:-1]:
        for target in (info.fullname, f"{info.fullname}.{ASDICT}", f"{info.fullname}.{ASTUPLE}"):
            ctx.api.add_plugin_dependency(make_wildcard_trigger(base.fullname), make_trigger(target))


def _tag_dataclass(ctx: ClassDefContext) -> None:
    """Tag every dataclass with its ``OMIT`` fields, as mypy's own hook would tag it.

    A plain dataclass may be the base of one that ``ZeroCopyFields``
    makes, and the fields it declares ``OMIT`` are left out of that one's
    dict too.
    """
    dataclass_tag_callback(ctx)
    if METADATA_KEY not in ctx.cls.info.metadata:  # a metakit class's own tag says more
        _record_tag(ctx, {"declared": _declared_fields(ctx)})


def _record_tag(ctx: ClassDefContext, tag: dict[str, object]) -> None:
    ctx.cls.info.metadata[METADATA_KEY] = tag
    # dmypy sees that a class changed through its symbol table, which
    # metadata is no part of.  This entry, which no code can name, changes
    # whenever the tag does.
    add_attribute_to_class(
        ctx.api,
        ctx.cls,
        _TAG_SYMBOL,
        LiteralType(json.dumps(tag, sort_keys=True), ctx.api.named_type("builtins.str", [])),
        is_classvar=True,
        overwrite_existing=True,
    )


def _runtime_qualname(api: SemanticAnalyzerPluginInterface, info: TypeInfo) -> str:
    """The ``__qualname__`` the class *info* will have at run time.

    mypy names a class defined in a function ``Name@line`` and leaves the
    function out; at run time it is ``function.<locals>.Name``.
    """
    functions = getattr(api, "function_stack", [])  # the semantic analyser's, innermost last
    if not functions:
        return info.fullname[len(info.module_name) + 1 :]
    outer = functions[0].fullname
    names = [outer[len(info.module_name) + 1 :] if outer.startswith(f"{info.module_name}.") else functions[0].name]
    names += [function.name for function in functions[1:]]
    return "".join(f"{name}.<locals>." for name in names) + info.name


def _add_fallback(api: SemanticAnalyzerPluginInterface, info: TypeInfo, qualname: str) -> None:
    """Give *info* the class that the TypedDicts of its conversions fall back to.

    It derives from ``typing._TypedDict``, as every TypedDict's fallback
    does, and from ``dict[str, object]``: what ``asdict_zerocopy`` returns
    is a new ``dict``.  So the result may be passed where a
    ``dict[str, Any]`` (or ``dict[str, object]``) is expected, while reads,
    writes and ``**`` splats are still checked key by key.  mypy names a
    TypedDict by its fallback in messages: this one reads
    ``Class.asdict_zerocopy()``.  It is stored in *info*'s own symbol
    table, so it travels through mypy's cache with the class.
    """
    fullname = f"{info.fullname}.{_FALLBACK}"
    existing = info.names.get(_FALLBACK)
    if existing is not None and isinstance(existing.node, TypeInfo):
        return
    typed_dict = api.named_type("typing._TypedDict", [])
    str_type = api.named_type("builtins.str", [])
    defn = ClassDef(f"{qualname}.{ASDICT}()", Block([]))
    defn.fullname = fullname
    fallback = TypeInfo(SymbolTable(), defn, info.module_name)
    defn.info = fallback
    fallback.bases = [typed_dict, api.named_type("builtins.dict", [str_type, api.named_type("builtins.object", [])])]
    try:
        calculate_mro(fallback)
    except MroError:  # not with this typeshed: keep mypy's own fallback
        return
    # The methods that mypy types key by key, under this class's name, so
    # that the plugin's hooks see them (see ``_FALLBACK_METHODS``).
    for name, owner in _FALLBACK_METHODS.items():
        sym = api.lookup_fully_qualified_or_none(owner)
        if sym is not None and isinstance(sym.node, TypeInfo) and name in sym.node.names:
            fallback.names[name] = SymbolTableNode(MDEF, sym.node.names[name].node)
    # mypy makes a TypedDict anonymous again (in joins, say) through this.
    # (Through ``update_typeddict_type``, which also gives it the alias that
    # mypy reads when it looks the class up as a member, as PEP 695 classes'
    # variance inference does.)
    fallback.update_typeddict_type(TypedDictType({}, set(), set(), typed_dict))
    info.names[_FALLBACK] = SymbolTableNode(MDEF, fallback, plugin_generated=True)


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
            args = [Argument(Var("skip_fields", any_type), any_type, None, ARG_OPT)]
            returns: Type = api.named_type("builtins.dict", [str_type, any_type])
        else:
            args = []
            returns = api.named_type("builtins.tuple", [any_type])
        add_method_to_class(api, ctx.cls, name, args, returns)


_ABSENT: Final = "absent"
_OMIT_STATUS: Final[dict[bool | str | None, str]] = {True: "omit", False: "keep", _ABSENT: "keep", None: "unknown"}
_RUN_TIME_FIELD: Final = "run-time field"
"""The status of a name that mypy takes for a ``ClassVar`` or an ``InitVar`` but that is a field at run time.

Under ``from __future__ import annotations`` an annotation written in
quotes, ``x: "ClassVar[int]"``, is quoted again at run time
(``"'ClassVar[int]'"``), and ``dataclasses`` reads neither kind in quotes;
nor inside ``Annotated[InitVar[int], ...]``, which mypy reads as an ``InitVar``;
nor one whose ``ClassVar`` or ``InitVar`` is imported only under
``TYPE_CHECKING``, where annotations are text or (from 3.14) evaluated only
when asked: not defined at run time, it cannot be told from a type.
A class with such a name, and every class below it, keeps the declared types.
"""
NOT_FIELDS: Final = frozenset({"typing.ClassVar", "typing_extensions.ClassVar", "dataclasses.InitVar"})
"""Annotations of what ``dataclasses`` takes for no field, where it can read them as such."""
_ANNOTATED: Final = frozenset({"typing.Annotated", "typing_extensions.Annotated"})


def _declared_fields(ctx: ClassDefContext) -> dict[str, str]:
    """Whether each name the class body annotates is an ``OMIT`` field.

    ``"omit"``, ``"keep"``, or ``"unknown"`` when its ``metadata`` cannot
    be read without running the code; ``_RUN_TIME_FIELD`` for a name that
    mypy takes for no field.  A redefined field takes the status of its
    newest declaration, as at run time.
    """
    quoted_again = ctx.api.modules[ctx.api.cur_mod_id].is_future_flag_set("annotations")
    # A name bound only for type checkers is not defined where ``dataclasses`` reads the annotation: as
    # text (``from __future__ import annotations``), or evaluated only when asked (3.14+, PEP 649).
    deferred = quoted_again or ctx.api.options.python_version >= (3, 14)
    typing_only = _typing_only_names(ctx) if deferred else set()
    declared: dict[str, str] = {}
    for stmt in _annotated_assignments(ctx.cls.defs):
        lvalue, rvalue = stmt.lvalues[0], stmt.rvalue
        if not isinstance(lvalue, NameExpr):
            continue
        annotation = stmt.unanalyzed_type
        if (
            (quoted_again and _quoted_not_field(ctx.api, annotation))
            or _annotated_not_field(ctx.api, annotation)
            or (typing_only and _undefined_not_field(ctx.api, annotation, typing_only))
        ):
            declared[lvalue.name] = _RUN_TIME_FIELD
        else:
            declared[lvalue.name] = _field_status(rvalue)
    return declared


def _quoted_not_field(api: SemanticAnalyzerPluginInterface, annotation: Type | None) -> bool:
    """Whether *annotation*, as written, is a ``ClassVar[...]`` or ``InitVar[...]`` in quotes."""
    if not isinstance(annotation, UnboundType) or annotation.original_str_expr is None:
        return False
    return _full_name(api, annotation) in NOT_FIELDS


def _undefined_not_field(api: SemanticAnalyzerPluginInterface, annotation: Type | None, typing_only: set[str]) -> bool:
    """Whether *annotation*, as written, is a ``ClassVar[...]`` or ``InitVar[...]`` whose name (or the module it
    is read through) is among *typing_only*, bound only under ``TYPE_CHECKING``."""
    if not isinstance(annotation, UnboundType) or annotation.original_str_expr is not None:
        return False
    return annotation.name.partition(".")[0] in typing_only and _full_name(api, annotation) in NOT_FIELDS


def _typing_only_names(ctx: ClassDefContext) -> set[str]:
    """The names that the module of *ctx*'s class binds by imports under ``TYPE_CHECKING`` alone."""
    only: set[str] = set()
    bound: set[str] = set()
    for node in ctx.api.modules[ctx.api.cur_mod_id].imports:
        names = only if node.is_mypy_only else bound
        if isinstance(node, ImportFrom):
            names.update(alias or name for name, alias in node.names)
        elif isinstance(node, Import):
            names.update(alias or module.partition(".")[0] for module, alias in node.ids)
    return only - bound


def _annotated_not_field(api: SemanticAnalyzerPluginInterface, annotation: Type | None) -> bool:
    """Whether *annotation*, as written, is an ``Annotated[...]`` of a ``ClassVar[...]`` or ``InitVar[...]``."""
    if not isinstance(annotation, UnboundType) or not annotation.args:
        return False
    inner = annotation.args[0]
    return (
        _full_name(api, annotation) in _ANNOTATED
        and isinstance(inner, UnboundType)
        and _full_name(api, inner) in NOT_FIELDS
    )


def _full_name(api: SemanticAnalyzerPluginInterface, annotation: UnboundType) -> str | None:
    """The full name of what *annotation*'s name refers to, if it refers to something."""
    sym = api.lookup_qualified(annotation.name, annotation, suppress_errors=True)
    return None if sym is None or sym.node is None else sym.node.fullname


def _field_status(rvalue: Expression) -> str:
    """Whether the field whose annotated assignment's value is *rvalue* is an ``OMIT`` field, as
    ``_declared_fields`` says it: a ``field(...)`` call, or a choice of two (``field(...) if c else
    field(...)``), which is known only where both say the same."""
    if isinstance(rvalue, ConditionalExpr):
        chosen = _field_status(rvalue.if_expr)
        return chosen if chosen == _field_status(rvalue.else_expr) else _OMIT_STATUS[None]
    mark: bool | str | None = _ABSENT
    if isinstance(rvalue, CallExpr) and isinstance(rvalue.callee, RefExpr):
        given = dict(zip(rvalue.arg_names, rvalue.args, strict=True))
        if rvalue.callee.fullname == "dataclasses.field" and "metadata" in given:
            mark = _omit_mark(given["metadata"])
    return _OMIT_STATUS[mark]


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


def _omit_mark(metadata: Expression) -> bool | str | None:
    """What the mapping *metadata* holds under ``OMIT``'s key.

    ``True`` or ``False``, ``_ABSENT`` where it holds no such key, and
    ``None`` when that cannot be known without running the code.  A
    mapping is ``OMIT``, ``None``, a dict display, ``dict(m, **m, key=...)``
    or ``a | b`` of those; later entries win, as in the mapping itself.
    """
    if isinstance(metadata, RefExpr):
        if metadata.fullname == _OMIT:
            return True
        return _ABSENT if metadata.fullname == "builtins.None" else None
    if isinstance(metadata, OpExpr) and metadata.op == "|":
        left, right = _omit_mark(metadata.left), _omit_mark(metadata.right)
        return left if right == _ABSENT else right
    items: list[tuple[Expression | None, Expression]]
    if isinstance(metadata, DictExpr):
        items = list(metadata.items)
    elif _is_dict_call(metadata):
        assert isinstance(metadata, CallExpr)
        # dict(OMIT, doc=...), dict(**OMIT, doc=...): a keyword cannot be the dotted OMIT key.
        items = [
            (None if kind in (ARG_POS, ARG_STAR2) else StrExpr(name or ""), arg)
            for arg, kind, name in zip(metadata.args, metadata.arg_kinds, metadata.arg_names, strict=True)
        ]
    else:
        return None
    mark: bool | str | None = _ABSENT
    for key, value in items:
        if key is None:
            splat = _omit_mark(value)
            if splat != _ABSENT:
                mark = splat
            continue
        text = _key_text(key)
        if text is None:
            return None
        if text == OMIT_KEY:
            mark = _bool_literal(value)
    return mark


def _key_text(key: Expression) -> str | None:
    """The text of the dict key *key*: a string, or a name declared ``Final`` with a string (``DOC: Final = "doc"``,
    which nothing can rebind); ``None`` for any other key, which only a run can tell."""
    if isinstance(key, StrExpr):
        return key.value
    if isinstance(key, RefExpr) and isinstance(key.node, Var) and key.node.is_final:
        value = key.node.final_value
        return value if isinstance(value, str) else None
    return None


def _is_dict_call(expr: Expression) -> bool:
    """Whether *expr* is ``dict(...)`` with at most one mapping by position, then keywords and ``**`` splats."""
    if not (
        isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr) and expr.callee.fullname == "builtins.dict"
    ):
        return False
    kinds = expr.arg_kinds[1:] if expr.arg_kinds[:1] == [ARG_POS] else expr.arg_kinds
    return all(kind in (ARG_NAMED, ARG_STAR2) for kind in kinds)


def _bool_literal(expr: Expression) -> bool | None:
    """The truth of *expr* where it is a literal (``True``, ``None``, ``0``, ``"yes"``), as ``is_omitted`` reads a
    mark; ``None`` for any other expression, which only a run can tell."""
    if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False", "builtins.None"):
        return expr.fullname == "builtins.True"
    if isinstance(expr, (IntExpr, StrExpr, BytesExpr, FloatExpr)):
        return bool(expr.value)
    return None


# --- phase 2: type checking ---------------------------------------------------


def _asdict_method(ctx: MethodContext) -> Type:
    receivers = _method_receivers(ctx.type, ASDICT)
    if receivers is None:
        return ctx.default_return_type
    skip = _argument(ctx, 0)
    if skip is not None and skip.expr is not None and skip.type is not None:
        for receiver in receivers:
            _check_iterable_of_str(ctx.api, receiver.type, skip.expr, skip.type)
    return _asdict_result(ctx.api, receivers, skip, ctx.default_return_type)


def _check_iterable_of_str(api: CheckerPluginInterface, info: TypeInfo, expr: Expression, typ: Type) -> None:
    """Check ``skip_fields`` where the method declares it ``Any``.

    ``ZeroCopy`` declares it so that overrides may narrow it (vLLM's takes
    ``Optional[Set[str]]``); the plugin checks what the generated code accepts.
    """
    sym = info.get(ASDICT)
    declared = get_proper_type(sym.type) if sym is not None and sym.type is not None else None
    if not isinstance(declared, CallableType) or len(declared.arg_types) < 2:
        return
    if not isinstance(get_proper_type(declared.arg_types[1]), AnyType):
        return  # mypy checks the argument against the declared type itself
    str_type = api.named_generic_type("builtins.str", [])
    iterable = api.named_generic_type("typing.Iterable", [str_type])
    if isinstance(expr, (ListExpr, SetExpr, TupleExpr)):
        # A display's type comes from the declared Any (``list[Any]``): its items tell.
        for item in expr.items:
            if isinstance(item, StarExpr):  # ``*others``: an iterable of names
                held = get_proper_type(api.get_expression_type(item.expr))
                if not isinstance(held, AnyType) and not is_subtype(held, iterable):
                    api.fail(
                        f"skip_fields must hold field names, not the items of {format_type(held, api.options)}",
                        item,
                        code=METAKIT_ERROR,
                    )
                continue
            held = get_proper_type(api.get_expression_type(item))
            if not isinstance(held, AnyType) and not is_subtype(held, str_type):
                api.fail(
                    f"skip_fields must hold field names, not {format_type(held, api.options)}",
                    item,
                    code=METAKIT_ERROR,
                )
        return
    expected = UnionType([iterable, NoneType()])
    if is_subtype(typ, expected):
        # Inferred against the declared Any, a comprehension or a generic call holds Any
        # (``[x for x in range(2)]`` is ``list[Any]``): inferred on its own, it says what it holds.
        typ = api.get_expression_type(expr)
    if not is_subtype(typ, expected):
        api.fail(
            f"skip_fields must be an iterable of field names, not {format_type(typ, api.options)}",
            expr,
            code=METAKIT_ERROR,
        )


def _astuple_method(ctx: MethodContext) -> Type:
    receivers = _method_receivers(ctx.type, ASTUPLE)
    if receivers is None:
        return ctx.default_return_type
    return _astuple_result(ctx.api, receivers, ctx.default_return_type)


# The function forms always return the fields: they never call a user's
# override, so they are typed whatever methods the class defines.


def _asdict_function(ctx: FunctionContext) -> Type:
    return _asdict_result(ctx.api, _function_receivers(ctx, ASDICT), _argument(ctx, 1), ctx.default_return_type)


def _astuple_function(ctx: FunctionContext) -> Type:
    return _astuple_result(ctx.api, _function_receivers(ctx, ASTUPLE), ctx.default_return_type)


def _asdict_result(
    api: CheckerPluginInterface, receivers: list[Instance] | None, skip: _Given | None, default: Type
) -> Type:
    if skip is not None and skip.expr is not None and skip.type is not None:
        _check_not_str(api, skip.expr, skip.type)
    result = _union(receivers, lambda receiver: _typed_dict(api, receiver, skip), default)
    return result if result is default else _in_context(api, result)


def _in_context(api: CheckerPluginInterface, result: Type) -> Type:
    """*result*, or a ``dict`` type that the call's context expects and the dict fits.

    The dict is new, and nothing else refers to it, so it may be typed as
    a ``dict[str, V]`` for any ``V`` that every value fits, as a dict
    display is: ``x: dict[str, Tensor | int] = meta.asdict_zerocopy()``.
    Where the context is a ``dict`` type, it is typed so even though the
    ``TypedDict`` would fit: mypy narrows a binding declared before to what
    it is assigned, and ``x: Dict[str, Any]`` then ``x = meta.asdict_zerocopy()``
    would be a ``TypedDict`` that takes no new key.  Without such a context
    it stays a ``TypedDict``.
    """
    context = get_proper_type(api.type_context[-1]) if api.type_context else None
    if context is None or isinstance(context, AnyType):
        return result
    expected_items = [
        get_proper_type(item) for item in (context.relevant_items() if isinstance(context, UnionType) else [context])
    ]
    if is_subtype(result, context) and not any(_is_dict(item) for item in expected_items):
        return result
    proper = get_proper_type(result)
    dicts = proper.relevant_items() if isinstance(proper, UnionType) else [proper]
    values: list[Type] = []
    for typed_dict in map(get_proper_type, dicts):
        if not isinstance(typed_dict, TypedDictType):
            return result
        values += typed_dict.items.values()
    value = make_simplified_union(values)
    str_type = api.named_generic_type("builtins.str", [])
    candidates = []  # the context's own dict types first: a binding keeps the type it was declared with
    for item in expected_items:
        expected = _dict_value_type(api, item)
        if expected is not None and is_subtype(value, expected):
            candidates.append(api.named_generic_type("builtins.dict", [str_type, expected]))
    candidates.append(api.named_generic_type("builtins.dict", [str_type, value]))
    return next((candidate for candidate in candidates if is_subtype(candidate, context)), result)


def _is_dict(expected: ProperType) -> bool:
    """Whether *expected* is a ``dict`` type (not a ``TypedDict``, nor a ``Mapping``)."""
    return isinstance(expected, Instance) and expected.type.fullname == "builtins.dict"


def _dict_value_type(api: CheckerPluginInterface, expected: Type) -> Type | None:
    """The value type of *expected* as ``dict`` sees it, if ``dict`` derives from *expected*'s class."""
    if not isinstance(expected, Instance):
        return None
    dict_type = api.named_generic_type("builtins.dict", [AnyType(TypeOfAny.special_form)] * 2)
    template = Instance(dict_type.type, list(dict_type.type.defn.type_vars))
    if expected.type not in dict_type.type.mro:
        return None
    mapped = map_instance_to_supertype(template, expected.type)
    value_var = dict_type.type.defn.type_vars[1]
    for arg, given in zip(mapped.args, expected.args, strict=False):
        if isinstance(arg, TypeVarType) and isinstance(value_var, TypeVarType) and arg.id == value_var.id:
            return given
    return None


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


class _Given(NamedTuple):
    """What a call gives for one parameter.

    ``expr`` and ``type`` when it is given once, by position or by name;
    both ``None`` when it may come through ``*args`` or ``**kwargs``.
    """

    expr: Expression | None
    type: Type | None


def _argument(ctx: MethodContext | FunctionContext, index: int) -> _Given | None:
    """What the call gives for parameter *index*; ``None`` when it gives nothing."""
    if index >= len(ctx.args) or not ctx.args[index]:
        return None
    if len(ctx.args[index]) == 1 and ctx.arg_kinds[index][0] in (ARG_POS, ARG_NAMED):
        return _Given(ctx.args[index][0], ctx.arg_types[index][0])
    return _Given(None, None)


def _method_receivers(typ: Type, method: str) -> list[Instance] | None:
    """The instances a call of *method* on *typ* is made on, if metakit generated *method* for each of them.

    mypy checks a call on a union once per item; one on a ``TypeVar`` bound
    to a union comes here once, for every item of its bound.
    """
    items = [_instance(item) for item in _alternatives(typ)]
    receivers = [item for item in items if item is not None]
    if len(receivers) != len(items) or not all(_generated(receiver.type, method) for receiver in receivers):
        return None
    return receivers


def _instance(typ: Type) -> Instance | None:
    bound = _bound(typ)  # ``self: Self`` too
    return bound if isinstance(bound, Instance) else None


def _bound(typ: Type) -> ProperType:
    """*typ*, or the bound of the ``TypeVar`` it is."""
    proper = get_proper_type(typ)
    return get_proper_type(proper.upper_bound) if isinstance(proper, TypeVarType) else proper


def _alternatives(typ: Type) -> list[ProperType]:
    """What a value of *typ* may be: the items of a union, or of the union a ``TypeVar`` is bound to; else
    *typ*, or its bound."""
    bound = _bound(typ)
    return [get_proper_type(item) for item in bound.relevant_items()] if isinstance(bound, UnionType) else [bound]


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
    obj = _argument(ctx, 0)
    if obj is None or obj.type is None:  # given through ``*args``: its type is the sequence's, not the object's
        return None
    receivers: list[Instance] = []
    for typ in _alternatives(obj.type):  # a TypeVar bound to a union: each of its items (an outside tester)
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
        if isinstance(typ, NoneType):
            never: str | None = "None"
        elif cls is None and receiver is not None and _never_a_dataclass(receiver.type):
            never = _qualname(receiver.type)
        else:
            never = None
        if never is not None:
            ctx.api.fail(
                f"{function}() takes a dataclass instance, but {never} is not a dataclass",
                ctx.context,
                code=METAKIT_ERROR,
            )
            return None
        if cls is not None or receiver is None or not _made_by_zerocopy(receiver.type):
            return None
        receivers.append(receiver)
    return receivers


def _never_a_dataclass(info: TypeInfo) -> bool:
    """Whether no instance of *info* can be a dataclass: no class of its MRO is one, nor can a subclass be
    (``object``, a protocol and a class with an unknown base may stand for one; an enum with members takes no
    subclass)."""
    return (
        _dataclass_owner(info) is None
        and info.fullname != "builtins.object"
        and not info.is_protocol
        and not info.fallback_to_any
        and (info.is_final or info.fullname.startswith("builtins.") or _has_enum_members(info))
    )


def _has_enum_members(info: TypeInfo) -> bool:
    """Whether *info* is an enum with a member (one whose name takes no ``_``, to be sure; mypy 1.12 has no
    ``TypeInfo.enum_members``)."""
    return info.is_enum and any(
        isinstance(sym.node, Var) and sym.node.has_explicit_value and not name.startswith("_")
        for name, sym in info.names.items()
    )


def _typed_dict(api: CheckerPluginInterface, receiver: Instance, skip: _Given | None) -> TypedDictType | None:
    """The ``TypedDict`` that ``asdict_zerocopy`` returns for *receiver*, less the names in *skip*."""
    fields = _fields(receiver)
    if fields is None:
        return None
    items, names = fields
    required = set(items)
    skipped, complete = _literal_names(skip)
    if not complete:  # not a literal, or one with ``*names``: any key may be gone
        required = set()
    for name, expr in skipped:
        if name not in names:
            api.fail(
                f"skip_fields names {name!r}, which is not a field of {_qualname(receiver.type)}",
                expr,
                code=METAKIT_ERROR,
            )
        items.pop(name, None)
        required.discard(name)
    return TypedDictType(items, required, set(), _fallback(api, receiver.type))


def _fallback(api: CheckerPluginInterface, info: TypeInfo) -> Instance:
    """The fallback of *info*'s TypedDicts: its own (see ``_add_fallback``), or mypy's."""
    sym = info.names.get(_FALLBACK)
    if sym is not None and isinstance(sym.node, TypeInfo):
        return Instance(sym.node, [])
    return api.named_generic_type("typing._TypedDict", [])


_LITERAL_MAKERS: Final = frozenset({"builtins.frozenset", "builtins.set", "builtins.list", "builtins.tuple"})
"""The calls that make a literal ``skip_fields`` of a display (Python has no frozenset display)."""


def _literal_names(skip: _Given | None) -> tuple[list[tuple[str, Expression]], bool]:
    """The names written as strings in a ``skip_fields`` display, and whether they are all of its
    names: a display may also hold ``*others`` or a variable, and a value that is no display has
    names that are not known."""
    if skip is None:
        return [], True
    expr = skip.expr
    if expr is None:
        return [], False
    if isinstance(expr, NameExpr) and expr.fullname == "builtins.None":
        return [], True
    if (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, NameExpr)
        and expr.callee.fullname in _LITERAL_MAKERS
        and expr.arg_kinds == [ARG_POS]
    ):
        expr = expr.args[0]  # ``frozenset({"a", "b"})``: the names of the display it is made of
    return _display_names(expr)


def _display_names(expr: Expression) -> tuple[list[tuple[str, Expression]], bool]:
    """``_literal_names`` of the expression *expr*: of a display, those written as strings in it or in a
    display it unpacks (``*{"a"}``), and whether they are all."""
    if isinstance(expr, DictExpr):  # a dict's names are its keys
        items: list[Expression | None] = [key for key, _ in expr.items]
    elif isinstance(expr, (SetExpr, ListExpr, TupleExpr)):
        items = list(expr.items)
    else:
        return [], False
    names: list[tuple[str, Expression]] = []
    complete = True
    for item in items:
        if isinstance(item, StrExpr):
            names.append((item.value, item))
            continue
        inner, whole = _display_names(item.expr) if isinstance(item, StarExpr) else ([], False)
        names += inner
        complete = complete and whole
    return names, complete


def _check_not_str(api: CheckerPluginInterface, expr: Expression, typ: Type) -> None:
    """A ``skip_fields`` that may be a ``str`` (a literal, a subclass, an ``Optional[str]``, a ``TypeVar``
    bound to one): the call raises ``SkipFieldsError``."""
    str_type = api.named_generic_type("builtins.str", [])
    items = _alternatives(typ)
    # (Any and Never are subtypes of everything: they say nothing.)
    if any(isinstance(item, (Instance, LiteralType)) and is_subtype(item, str_type) for item in items):
        hint = f"; write skip_fields={{{expr.value!r}}}" if isinstance(expr, StrExpr) else ""
        api.fail(f"skip_fields must be an iterable of field names, not a str{hint}", expr, code=METAKIT_ERROR)


def _fields(receiver: Instance) -> tuple[dict[str, Type], set[str]] | None:
    """The types of the fields the conversions return, in order, and the
    names of all the fields; ``None`` when they are not known."""
    owner = _dataclass_owner(receiver.type)
    if owner is None or any(_RUN_TIME_FIELD in _declared(info).values() for info in owner.mro):
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
        if _is_kw_only_marker(typ) or _made_class_var(owner, name):
            continue
        key = _mangled(info, name)
        names.add(key)
        status = _omit_status(owner, name)
        if status == "unknown":
            return None
        if status == "keep":
            items[key] = _field_type(receiver, info, typ)
    return items, names


def _mangled(info: TypeInfo, name: str) -> str:
    """The name of field *name* of class *info* at run time: Python mangles ``__name`` in a class body.

    mypy keeps the name as written; ``fields()``, and so the dict's keys, have ``_Class__name``.
    """
    stripped = info.name.lstrip("_")
    if name.startswith("__") and not name.endswith("__") and stripped:
        return f"_{stripped}{name}"
    return name


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
        declared = _declared(info)
        if name in declared:
            return declared[name]
    return "keep"


def _declared(info: TypeInfo) -> dict[str, str]:
    """The statuses that the tag of *info* gives the names its body annotates, if it is a dataclass."""
    if "dataclass" not in info.metadata:
        return {}
    declared: dict[str, str] = info.metadata.get(METADATA_KEY, {}).get("declared", {})
    return declared


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


def _made_class_var(owner: TypeInfo, name: str) -> bool:
    """Whether the dataclass nearest *owner* that declares *name* declares it a ``ClassVar`` (bare or not):
    then a field inherited under that name is none at run time, though mypy's dataclass support keeps it.
    (``dataclasses`` reads the annotations of dataclasses only.)"""
    for info in owner.mro:
        if "dataclass" not in info.metadata:
            continue
        sym = info.names.get(name)
        if sym is not None and isinstance(sym.node, Var):
            return sym.node.is_classvar
    return False


def _field_type(receiver: Instance, info: TypeInfo, typ: Type) -> Type:
    """A field's declared type *typ*, in class *info*, as seen from *receiver*."""
    if info.self_type is not None:
        typ = expand_type(typ, {info.self_type.id: receiver})
    return expand_type_by_instance(typ, map_instance_to_supertype(receiver, info))


def _qualname(info: TypeInfo) -> str:
    """The class's name as it is at run time (recorded when it was tagged)."""
    qualname = info.metadata.get(METADATA_KEY, {}).get("qualname")
    if isinstance(qualname, str):
        return qualname
    # mypy names a class defined in a function ``Name@line``.
    return re.sub(r"@[0-9]+", "", info.fullname[len(info.module_name) + 1 :])
