"""Assertions for a project's own tests of its metadata classes.

One test per class, with no instance to build::

    import pytest
    from metakit.testing import assert_zerocopy_class, class_id, zerocopy_classes_in

    @pytest.mark.parametrize("cls", zerocopy_classes_in("myengine.metadata"), ids=class_id)
    def test_metadata_converts_without_copying(cls):
        assert_zerocopy_class(cls)

``assert_zerocopy(obj)`` runs the same checks on an instance you made.

Both check two things.  metakit's generated code (the function forms, and
the methods, or what a user's override reaches through ``super()``) must
return exactly ``{f.name: getattr(obj, f.name) for f in fields(obj)}``,
less ``OMIT`` fields.  A user's own ``asdict_zerocopy`` may leave out
fields with a default, but must keep what every override keeps: a new dict on every call,
keys that are fields in field order, the very objects, ``skip_fields``
honoured and left unchanged.  A failure says which of the two broke.

This module imports neither pytest nor torch (it uses torch where the
classes checked have imported it).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import importlib
import inspect
import itertools
import operator
import pkgutil
import sys
import types
import typing
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, Final, NamedTuple, NoReturn, cast

import metakit
from metakit import _functions
from metakit._codegen import holds_generated
from metakit._errors import describe
from metakit._fields import ASDICT, ASTUPLE, REPLACE, declared_in, is_omitted, required_init_vars, stranded
from metakit._overrides import reaches_metakit, users_methods

__all__ = ["assert_zerocopy", "assert_zerocopy_class", "class_id", "zerocopy_classes_in"]

__unittest = True  # unittest leaves this module's frames out of a failure's traceback, as pytest does


def assert_zerocopy(obj: object) -> None:
    """Check one instance's conversions against the ``fields()`` reference.

    The reference is ``{f.name: getattr(obj, f.name) for f in fields(obj)}``
    less ``OMIT`` fields.  metakit's generated code, that is the function
    forms ``metakit.asdict_zerocopy(obj)`` and ``metakit.astuple_zerocopy(obj)``,
    the generated methods, and whatever generated code a user's override
    reaches through ``super()``, must return a new dict with exactly those
    keys, in that order, holding the very same objects, and a tuple of them;
    ``skip_fields`` must remove exactly the names given (``OMIT`` fields
    too), leave its argument unchanged and reject a name that is not a
    field.  ``metakit.replace(obj)`` with no changes, where it exists, must
    keep the very objects, as ``dataclasses.replace`` does, and where
    ``__init__`` makes a new one, an equal one (if it makes the same value
    each time); a change that ``dataclasses.replace`` itself makes to the
    instance is blamed on ``__init__`` or ``__post_init__``.

    A user's own ``asdict_zerocopy`` (vLLM's FlashInfer metadata has one,
    to leave out its kernel wrapper) may leave out fields that ``__init__``
    can do without (so that ``Cls(**d)`` still rebuilds the record: not an
    ``init=False`` field with no default where no ``__post_init__`` can set
    it), and must leave out ``OMIT`` fields; an override written in a base
    must keep the fields that classes below it declare, which it cannot
    know.  It must return a new dict on every call, whose keys are fields in
    field order and whose values are the very objects.  Each call with
    ``skip_fields`` of each kind that the overrides it runs take (unannotated,
    or annotated ``Any`` or ``Collection[str]``: a set, a frozenset, a list, a
    tuple and a keys view; ``Iterable[str]``: an iterator too;
    ``List[str]``: a list; vLLM's ``Optional[Set[str]]``: a set) must return
    what a call without it returns, less the names given, and must leave a
    set or list it is given unchanged.
    An override of ``astuple_zerocopy`` must return a tuple of the values
    that the instance's ``asdict_zerocopy()`` holds, in the same order.
    No call may change the instance: set a field to another object, or
    change what a list, a dict or a tensor in a field holds.

    Raises ``AssertionError`` that names the class, which of the two broke
    (the generated code or the override), the call and the difference.
    Raises ``TypeError`` when *obj* is not a dataclass instance.
    """
    __tracebackhide__ = True
    if isinstance(obj, type):
        raise TypeError(
            f"assert_zerocopy() takes a dataclass instance, but got the class {_name(obj)} itself;"
            f" use assert_zerocopy_class({_name(obj)})"
        )
    if not dataclasses.is_dataclass(obj):
        raise TypeError(f"assert_zerocopy() takes a dataclass instance, but {_name(type(obj))} is not a dataclass")
    _Checker(obj, notes=(), bare=False).run()


def assert_zerocopy_class(cls: type) -> None:
    """Run every check of ``assert_zerocopy`` with no instance to make.

    The instance is made with ``cls.__new__(cls)`` (a class whose ``__new__``
    needs arguments fails: check an instance with ``assert_zerocopy``), without ``__init__`` or
    ``__post_init__``, and each field, ``init=False`` ones included, is set
    with ``object.__setattr__`` to a sentinel of its own, so frozen and
    slots classes work too: for a field annotated as a tensor, a small
    strided ``int16`` tensor of its own, which a copy or a conversion
    always changes; for one annotated as a list or a dict, a list or a
    dict of its own; an object of its own for any other.  Annotations are
    read as ``dataclasses`` left them, never evaluated: text by its outer
    names (``Optional[Dict[str, Tensor]]`` is a dict), each looked up in the
    module of the class that declares the field (an alias ``TensorT = torch.Tensor`` is a tensor; a name
    imported only under ``TYPE_CHECKING`` is one only if it is ``Tensor``).
    ``ClassVar`` and ``InitVar`` pseudo-fields are not fields and get none.
    An abstract class has no instance: check its concrete subclasses.  A generic alias
    such as ``Box[int]`` checks ``Box``.  The replace check runs
    ``__init__`` and ``__post_init__`` as ``dataclasses.replace`` does, so
    they see the sentinels; where that makes an instance whose fields can
    all be read, every check runs on it too (an override that returns what
    ``__post_init__`` sets besides the fields shows there).  Each instance
    is checked as made, then with every field set anew (a conversion that
    returns values it kept from an earlier call shows); each set of sentinels
    goes through ``__init__`` and ``__post_init__`` once before it is checked,
    as the values of an instance they made have, so a ``__post_init__`` that
    changes a tensor in place the first time only (``clamp_(min=0)``) passes.  A call that raises
    on the bare instance, which never ran ``__post_init__``, is no failure
    when the instance ``__init__`` made passes.  An attribute that is not a
    field, set on the bare instance, stands for those that ``__post_init__``
    or a caching property sets (but in slots classes, which take none).

    A field that cannot be set that way (its descriptor refuses the
    sentinel) fails the check with a message that says so: test that class
    with ``assert_zerocopy`` on an instance you make.

    Raises ``AssertionError`` as ``assert_zerocopy`` does, and ``TypeError``
    when *cls* is not a dataclass (an instance included).
    """
    __tracebackhide__ = True
    target = _dataclass_of(cls)
    obj, notes = _bare_instance(target)
    made = _made_by_init(obj)
    _stand_in(obj)
    try:
        _check_twice(obj, target, notes)
    except _RaisedOnSentinels as error:
        if made is None:
            raise AssertionError(*error.args) from error.__cause__  # the user's error: no private class in it
        # Code that needs what __post_init__ sets (an override reading an attribute it makes):
        # the instance that __init__ made answers for the class.
    if made is not None:
        note = "on the instance that dataclasses.replace made of the bare one: __init__ and __post_init__ ran"
        try:
            _check_twice(made, target, (*notes, note))
        except _RaisedOnSentinels as error:
            raise AssertionError(*error.args) from error.__cause__


def _check_twice(obj: object, cls: type, notes: tuple[str, ...]) -> None:
    """Every check on *obj*, whose fields hold sentinels; then again with every field set anew.

    The second round shows a conversion that returns the values it saw in
    an earlier call (a dict cached, then copied).
    """
    __tracebackhide__ = True
    _Checker(obj, notes, bare=True).run()
    notes = _fill(obj, cls, notes)
    # The new sentinels go through __init__ and __post_init__ once before they are checked, as the first ones
    # did (_made_by_init) and as an instance's values have: a first change in place (clamp_()) is no fault.
    with contextlib.suppress(Exception):
        _replaced(obj)
    _Checker(obj, (*notes, "after every field was set anew"), bare=True).run()


def zerocopy_classes_in(module: str | ModuleType) -> list[type]:
    """The dataclasses made by ``ZeroCopyFields`` that *module* defines, for ``parametrize``.

    *module* is a module or its dotted name.  A package's submodules are
    imported and searched too, all the way down, as ``pkgutil`` lists them:
    modules and regular packages (directories with an ``__init__.py``).  A
    directory without one, which Python would import as a namespace
    package, is not imported: it may hold scripts that were never meant to
    be imported, as ``__main__`` modules are not.  The modules under the
    package's name that are imported already and that the walk does not
    list (such a directory's) are searched too, after the walk's, in the
    order of their names.
    Classes nested in classes count, and so do live classes made in a
    function (a factory's, that the module keeps only in a dict or a list;
    or that code elsewhere made and holds); classes a module only imports
    from elsewhere, and abstract classes (they have no instances), do not.  A
    class is the module's if its ``__module__`` says so: on 3.10 and 3.11,
    give ``make_dataclass`` ``namespace={"__module__": __name__}``, since it
    names the ``types`` module there.  The order is that of the modules,
    then of definition.

    Pass ``ids=class_id`` to ``parametrize`` for test ids that are the
    classes' qualified names.

    Raises ``LookupError`` when there is no such class, so that a wrong name
    fails instead of giving pytest an empty parameter set, which it skips.
    """
    if not isinstance(module, (str, ModuleType)):
        raise TypeError(f"zerocopy_classes_in() takes a module or its dotted name, not {module!r}")
    root = importlib.import_module(module) if isinstance(module, str) else module
    classes: list[type] = []
    modules = _modules_under(root)
    package = "__path__" in vars(root)  # read from its dict: a module __getattr__ (PEP 562) is asked nothing
    if package:
        walked = {found.__name__ for found in modules}
        imported = sorted(name for name in sys.modules.copy() if name.startswith(f"{root.__name__}."))
        modules += [
            found for name in imported if name not in walked and isinstance(found := sys.modules.get(name), ModuleType)
        ]
    # A class made and dropped lives on in its own reference cycles until they are collected: so that
    # two runs (pytest-xdist's workers) find the same classes, none of those is found.
    gc.collect()
    live = metakit.zerocopy_classes()
    for found in modules:
        for value in vars(found).values():
            _collect(value, found.__name__, classes)
        for cls in live:  # then the live ones that name it as their module but that it does not name (a factory's)
            _collect(cls, found.__name__, classes)
    chosen = [cls for cls in classes if _is_checkable(cls)]
    if not chosen:
        where = f"the package {root.__name__} and its submodules" if package else root.__name__
        abstract = [_name(cls) for cls in classes if _is_checkable(cls, abstract=True)]
        but = f" (only abstract ones, which have no instances: {', '.join(abstract)})"
        raise LookupError(f"no dataclass made by ZeroCopyFields is defined in {where}{but if abstract else ''}")
    return chosen


def class_id(cls: object) -> str:
    """A test id for *cls*: its qualified name (``ids=class_id`` in ``parametrize``)."""
    return str(getattr(cls, "__qualname__", cls))


# --- finding classes --------------------------------------------------------------


def _modules_under(root: ModuleType) -> list[ModuleType]:
    found = [root]
    for info in pkgutil.iter_modules(vars(root).get("__path__", ())):
        if info.name != "__main__":
            found.extend(_modules_under(importlib.import_module(f"{root.__name__}.{info.name}")))
    return found


def _collect(value: object, module: str, classes: list[type]) -> None:
    if isinstance(value, type) and value.__module__ == module and value not in classes:
        classes.append(value)
        for inner in vars(value).values():
            if isinstance(inner, type) and inner.__qualname__.startswith(f"{value.__qualname__}."):
                _collect(inner, module, classes)


def _is_checkable(cls: type, *, abstract: bool = False) -> bool:
    """Whether *cls* is a dataclass made by ``ZeroCopyFields`` that is abstract (if *abstract*) or not."""
    made_by_metakit = isinstance(cls, metakit.ZeroCopyFields)
    return made_by_metakit and dataclasses.is_dataclass(cls) and inspect.isabstract(cls) == abstract


# --- the bare instance ------------------------------------------------------------


class _Sentinel:
    """The value of one field of a bare instance: an object no other field holds."""

    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<sentinel {self.label}>"

    # A copy (``copy.copy`` in an ``__init__``) equals it, and no other field's: the replace check compares
    # by value what ``__init__`` makes anew.
    def __eq__(self, other: object) -> bool:
        return type(other) is _Sentinel and other.label == self.label

    def __hash__(self) -> int:
        return hash(self.label)


def _dataclass_of(cls: object) -> type:
    origin = typing.get_origin(cls)
    target = origin if isinstance(origin, type) else cls
    if not isinstance(target, type):
        if dataclasses.is_dataclass(cls):
            raise TypeError(
                f"assert_zerocopy_class() takes a dataclass, but got an instance of {_name(type(cls))};"
                " use assert_zerocopy(obj) for an instance"
            )
        raise TypeError(
            f"assert_zerocopy_class() takes a dataclass, but got an instance of {_name(type(cls))},"
            " which is not a dataclass"
        )
    if not dataclasses.is_dataclass(target):
        raise TypeError(f"assert_zerocopy_class() takes a dataclass, but {_name(target)} is not a dataclass")
    return target


def _bare_instance(cls: type) -> tuple[object, tuple[str, ...]]:
    """An instance of *cls* made without ``__init__``, each field set to its own sentinel.

    Also returns a note for each field that does not read back the sentinel
    set on it (a descriptor that stores something else), for the messages.
    """
    __tracebackhide__ = True
    name = _name(cls)
    if inspect.isabstract(cls):
        abstract = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise AssertionError(
            f"{name}: assert_zerocopy_class cannot make a bare instance of {name}, an abstract class (abstract:"
            f" {abstract}): check its concrete subclasses instead"
        )
    try:
        obj: object = cast(Any, cls).__new__(cls)
    except Exception as error:
        raise AssertionError(
            f"{name}: assert_zerocopy_class cannot make a bare instance:"
            f" {name}.__new__({name}) raised {describe(error)}. Check an instance with assert_zerocopy(obj) instead."
        ) from error
    return obj, _fill(obj, cls, ())


def _stand_in(bare: object) -> None:
    """Set an attribute that is not a field on *bare*, as ``__post_init__`` or a caching property sets some,
    unless it takes none.

    An override that returns such attributes (``vars(self)``) then shows on
    the bare instance, even where ``__post_init__`` sets none or ``__init__``
    refuses the sentinels.
    """
    if _STAND_IN not in type(bare).__dataclass_fields__:  # type: ignore[attr-defined]  # a dataclass here
        with contextlib.suppress(AttributeError):  # slots: nothing but the fields can be set
            object.__setattr__(bare, _STAND_IN, _Sentinel(f"{_name(type(bare))}.{_STAND_IN}"))


_UNSET: Final = _Sentinel("an OMIT field that is not set")
"""What ``_Check`` holds for an ``OMIT`` field that cannot be read."""

_STAND_IN: Final = "_metakit_set_in_post_init"


def _fill(obj: object, cls: type, notes: tuple[str, ...]) -> tuple[str, ...]:
    """Set each field of *obj* to a new sentinel; return *notes* and one for each field that reads another value."""
    name = _name(cls)
    found: list[str] = []
    kinds: dict[int, _Kinds] = {}  # by the class that declared a field (by identity: a metaclass may define __eq__)
    for f in dataclasses.fields(cls):
        owner = declared_in(cls, f)  # whose module the names in its annotation are looked up in
        if id(owner) not in kinds:
            kinds[id(owner)] = _Kinds(owner)
        sentinel = _sentinel(kinds[id(owner)].of(f.type), f"{name}.{f.name}")
        try:
            object.__setattr__(obj, f.name, sentinel)
            value = getattr(obj, f.name)
        except Exception as error:
            raise AssertionError(
                f"{name}: field {f.name!r} cannot be set on a bare instance, so assert_zerocopy_class"
                f" cannot check {name}: setting it to a sentinel with object.__setattr__ and reading it back"
                f" raised {describe(error)}. Check an instance with assert_zerocopy(obj) instead."
            ) from error
        if value is not sentinel:
            found.append(
                f"field {f.name!r} does not read back the sentinel set on it (it reads {_name(type(value))}),"
                " so its value may not be distinct"
            )
    return (*notes, *(note for note in found if note not in notes))


def _sentinel(kind: type | None, label: str) -> Any:
    """A value of its own for a field whose annotation names *kind*: one that a copy always changes.

    A tensor is strided (``contiguous()`` copies it), of a dtype that the
    usual conversions (``float()``, ``long()``, ``to(torch.int32)``) copy, and
    holds values far below and above zero and -1 (a padding value), which the usual changes in place
    (``zero_()``, ``mul_(2)``, ``abs_()``, ``relu_()``, ``clamp_()``, ``masked_fill_(t == -1, 0)``) change; a
    list or a dict holds one sentinel, so that code that copies only lists
    or dicts (``list(value)``, ``dict(value)``) runs on it; any other field
    gets an object of its own.
    """
    if kind is None:
        return _Sentinel(label)
    if kind is list:
        return [_Sentinel(f"{label}[0]")]
    if kind is dict:
        return {"key": _Sentinel(f"{label}['key']")}
    torch = sys.modules["torch"]
    apart = next(_TENSORS_MADE) % 700  # values of its own, so that two fields' tensors never compare equal
    return torch.tensor([-30001 - apart, 0, -1, 0, 30001 + apart, 0], dtype=torch.int16)[::2]


_TENSORS_MADE: Final = itertools.count()


class _Kinds:
    """What a field's annotation takes, read as ``dataclasses`` left it, never evaluated: a tensor, a list,
    a dict, or none of them (``None``).

    A tensor is ``torch.Tensor``, a subclass of it (``torch.nn.Parameter``)
    or one of torch's typed tensor classes (``torch.LongTensor``); a list is
    ``list[int]`` or ``List[int]``, a dict ``dict[str, X]``; a union takes
    a tensor first, else its first list or dict; ``Annotated`` and ``Final``
    take what they wrap.  Text (``from __future__ import annotations``, a
    forward reference) is taken apart by its brackets, and each name in it
    looked up in the module of the class that declared the field, and in the modules it names, as a
    dict is read: a name defined only under ``TYPE_CHECKING`` names a
    tensor if it is ``Tensor``, a list if ``list`` or ``List``, a dict if
    ``dict`` or ``Dict``.  Where torch was not imported, nothing is a tensor.
    """

    def __init__(self, cls: type) -> None:
        torch = sys.modules.get("torch")
        self.tensor: type | None = getattr(torch, "Tensor", None)
        self.typed: tuple[type, ...] = (type(torch.LongTensor),) if torch is not None else ()
        """The class of torch's typed tensor classes (``torch.LongTensor``), which are no subclasses of ``Tensor``."""
        module = sys.modules.get(cls.__module__)
        self.namespace: dict[str, Any] = vars(module) if module is not None else {}
        self.resolving: set[str] = set()
        """The names being looked up: a recursive alias (``Tree = int | list["Tree"]``) is read once."""

    def of(self, hint: object) -> type | None:
        if isinstance(hint, typing.ForwardRef):
            hint = hint.__forward_arg__
        if isinstance(hint, str):
            return self.of_text(hint)
        origin = typing.get_origin(hint)  # first: ``list[int]`` passes for a type on 3.10
        if origin in (typing.Union, types.UnionType):
            return self.first([self.of(option) for option in typing.get_args(hint)])
        if origin in (typing.Annotated, typing.Final):
            return self.of(typing.get_args(hint)[0])
        if origin is not None:
            return origin if origin in (list, dict) else None
        if hint is list or hint is dict:
            return hint
        tensor = self.tensor
        is_tensor = (
            tensor is not None and isinstance(hint, type) and (issubclass(hint, tensor) or isinstance(hint, self.typed))
        )
        return tensor if is_tensor else None

    def first(self, kinds: list[type | None]) -> type | None:
        """What a union of options of *kinds* takes."""
        return self.tensor if self.tensor is not None and self.tensor in kinds else next(filter(None, kinds), None)

    def of_text(self, text: str) -> type | None:
        """What the annotation written as *text* takes: by its outermost name, or each option of a union."""
        options = _options(text)
        if len(options) > 1:
            return self.first([self.of_text(option) for option in options])
        dotted, arguments = _subscript(options[0])
        name = dotted.rpartition(".")[2]
        if name in ("Annotated", "Final") and arguments:
            return self.of_text(arguments[0])
        if name == "Tensor":
            return self.tensor
        named = {"list": list, "List": list, "dict": dict, "Dict": dict}.get(name)
        if named is None and arguments is None and dotted not in self.resolving:
            found = self.lookup(dotted)
            if found is not None:  # a class, or an alias: ``TensorT = torch.Tensor``
                self.resolving.add(dotted)
                try:
                    return self.of(found)
                finally:
                    self.resolving.discard(dotted)
        return named

    def lookup(self, dotted: str) -> object:
        """The object that the dotted name *dotted* names in the module of the class, or ``None``."""
        first, *rest = dotted.split(".")
        found = self.namespace.get(first)
        for part in rest:
            found = vars(found).get(part) if isinstance(found, ModuleType) else None
        return found


def _options(text: str) -> list[str]:
    """The options of the union that the annotation written as *text* is (``X | Y``, ``Optional[X]``,
    ``Union[X, Y]``), each taken apart in turn; or *text* alone, unquoted."""
    text = text.strip().strip("'\"").strip()
    options = _split_top(text, "|")
    if len(options) > 1:
        return [found for option in options for found in _options(option)]
    dotted, arguments = _subscript(text)
    if dotted.rpartition(".")[2] in ("Optional", "Union") and arguments:
        return [found for argument in arguments for found in _options(argument)]
    return [text]


def _subscript(text: str) -> tuple[str, list[str] | None]:
    """The dotted name that the annotation written as *text* starts with, and its arguments (``None`` if it
    has no brackets)."""
    head, bracket, rest = text.partition("[")
    return head.strip(), _split_top(rest[: rest.rfind("]")], ",") if bracket else None


def _split_top(text: str, separator: str) -> list[str]:
    """*text* split at each *separator* outside brackets."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    return [*parts, text[start:]]


def _made_by_init(bare: object) -> object | None:
    """``dataclasses.replace(bare)``, each ``InitVar`` it must be given a sentinel: an instance made by
    ``__init__``, if that works and all its fields can be read.

    ``None`` otherwise: the replace check has compared that error with
    metakit's, and an ``init=False`` field that ``__post_init__`` leaves
    unset is no fault of the class.
    """
    try:
        made = _replaced(bare)
        for f in dataclasses.fields(cast(Any, made)):
            getattr(made, f.name)
    except Exception:
        return None
    return made


def _replaced(bare: object) -> object:
    """``dataclasses.replace(bare)``, each ``InitVar`` it must be given a sentinel."""
    cls = type(bare)
    init_vars = {name: _Sentinel(f"{_name(cls)}.{name}") for name in required_init_vars(cls)}
    made: object = dataclasses.replace(cast(Any, bare), **init_vars)
    return made


# --- the checks -------------------------------------------------------------------


class _Form(NamedTuple):
    """One way of calling ``asdict_zerocopy`` or ``astuple_zerocopy`` on the instance."""

    role: str
    """Whose code it is, for the message: the generated code or an override."""
    call: str
    """The call as the message shows it, without its arguments: ``obj.asdict_zerocopy``."""
    function: Callable[..., Any]
    """Calls it: the instance is bound or passed already."""
    generated: bool
    """Whether metakit generated it: then it must return exactly the reference."""
    takes_obj: bool = False
    """Whether the call shows ``obj`` as its first argument (the function forms)."""
    owners: tuple[type, ...] = ()
    """For an override, the classes that define one, the first where ``obj.method`` finds it."""

    def text(self, arguments: str = "") -> str:
        shown = ", ".join(part for part in ("obj" if self.takes_obj else "", arguments) if part)
        return f"{self.call}({shown})"


_GENERATED = "the generated code"
_INIT = "its __init__ or __post_init__"
_MISSING = _Sentinel("for an attribute an instance lacks")
_BARE_HINT = (
    " (on an instance whose fields hold sentinels; for code that needs real values,"
    " check an instance you make with assert_zerocopy(obj))"
)


class _Checker:
    """Checks the conversions of one dataclass instance, *obj*."""

    def __init__(self, obj: object, notes: Iterable[str], bare: bool) -> None:
        self.obj = obj
        self.bare = bare
        """Whether *obj* is a bare instance whose fields hold sentinels."""
        self.cls: type = type(obj)
        self.notes = tuple(notes)
        try:
            self.fields = dataclasses.fields(cast(Any, obj))
        except Exception as error:  # a field named __dataclass_fields__ hides the class's on the instance
            raise AssertionError(
                f"{_name(self.cls)}: dataclasses.fields() cannot read the fields of its instance, so the reference"
                f" cannot be made (nor does dataclasses.replace or asdict work on it): it raised {describe(error)}"
            ) from error
        self.every = [f.name for f in self.fields]
        self.included = [f.name for f in self.fields if not is_omitted(f)]
        self.omitted = [f.name for f in self.fields if is_omitted(f)]
        self.values = {name: self._read(name) for name in self.every}
        # A field whose descriptor gives a new object on every read cannot be
        # compared by identity: its value is checked by type instead.
        self.unstable = {name for name in self.every if self._read(name) is not self.values[name]}
        self.contents = {name: _contents(value) for name, value in self.values.items() if name not in self.unstable}
        """What each field's list, dict or tensor holds, to see a call change it in place."""

    def _read(self, name: str) -> Any:
        """The value of the field *name*; ``_UNSET`` for an ``OMIT`` field that is not set (no conversion reads
        it, and the reference leaves it out), which a call must leave unset."""
        __tracebackhide__ = True
        try:
            return getattr(self.obj, name)
        except Exception as error:
            if isinstance(error, AttributeError) and name in self.omitted:
                return _UNSET
            raise AssertionError(
                f"{_name(self.cls)}: reading the field {name!r} raised {describe(error)},"
                " so the reference fields() gives cannot be built"
            ) from error

    def run(self) -> None:
        __tracebackhide__ = True
        fields = self.cls.__dataclass_fields__  # type: ignore[attr-defined]  # a dataclass here
        for method in (ASDICT, ASTUPLE):
            if method in fields:
                raise AssertionError(
                    f"{_name(self.cls)}: its field {method!r} hides the method {method}() on every instance:"
                    f" rename the field (metakit.{method}(obj) still runs the generated code)"
                )
        # A field named __replace__ is harmless to copy.replace, which looks the method up on the class, unless
        # its default stands there in the method's place.
        replace_field = fields.get(REPLACE)
        namespace = vars(self.cls)
        if replace_field is not None and REPLACE in namespace and namespace[REPLACE] is replace_field.default:
            raise AssertionError(
                f"{_name(self.cls)}: the default of its field {REPLACE!r} stands on the class in place of the method"
                f" {REPLACE}(), which copy.replace calls: rename the field (metakit.replace(obj, ...) still runs"
                " the generated code)"
            )
        for form in self._forms(ASDICT, "asdict"):
            self._check_asdict(form)
        for form in self._forms(ASTUPLE, "astuple"):
            self._check_astuple(form)
        self._check_replace()

    def fail(self, role: str, call: str, problem: str, cause: BaseException | None = None) -> NoReturn:
        """Raise the ``AssertionError``: the class, whose code broke, the call and the difference."""
        __tracebackhide__ = True
        notes = "".join(f" (note: {note})" for note in self.notes)
        raise AssertionError(f"{_name(self.cls)}: {role}: {call} {problem}{notes}") from cause

    def same(self, name: str, value: object) -> bool:
        if name in self.unstable:
            return type(value) is type(self.values[name])
        return value is self.values[name]

    # --- which code to check ------------------------------------------------------

    def _forms(self, method: str, generated: str) -> list[_Form]:
        """The code to check: the generated code first, then the class's own override.

        So when generated code is wrong, the message blames it, not the
        override built on it.  The generated code is the function form, the
        class's generated methods (``methods_of(cls).asdict`` for *method*
        ``asdict_zerocopy``) and, on the instance, the generated method or
        what an override reaches through ``super()``.  Of the overrides in
        the MRO, only the one that ``obj.method`` finds serves the instance;
        the others are checked with the classes that define them.
        """
        obj, cls = self.obj, self.cls
        # Looked up at each call, as a user's code looks them up.
        forms = [
            _Form(_GENERATED, f"metakit.{method}", lambda *a, **k: getattr(metakit, method)(obj, *a, **k), True, True),
            _Form(
                _GENERATED,
                f"methods_of({_name(cls)}).{generated}",
                lambda *a, **k: getattr(_functions.methods_of(cls), generated)(obj, *a, **k),
                True,
                True,
            ),
        ]
        overrides = users_methods(cls, method)
        if reaches_metakit(
            cls, overrides, method
        ):  # generated code serves the instance, or the last override reaches it
            if not overrides:
                forms.append(_Form(_GENERATED, f"obj.{method}", getattr(obj, method), True))
            else:
                last = overrides[-1]
                role = f"the generated code that super().{method}() in {_name(last)}.{method} reaches"
                forms.append(
                    _Form(role, f"super({_name(last)}, obj).{method}", getattr(super(last, obj), method), True)
                )
        if overrides:
            role = f"the override {_name(overrides[0])}.{method}"
            if len(overrides) > 1:
                role += " (over " + ", ".join(f"{_name(owner)}.{method}" for owner in overrides[1:]) + ")"
            forms.append(_Form(role, f"obj.{method}", getattr(obj, method), False, owners=tuple(overrides)))
        return forms

    # --- asdict -------------------------------------------------------------------

    def _check_asdict(self, form: _Form) -> None:
        __tracebackhide__ = True
        kinds = list(_SKIP_KINDS) if form.generated else _kinds_taken(vars(owner)[ASDICT] for owner in form.owners)
        kind = "set" if "set" in kinds else kinds[0]  # the kind callers pass, where the code takes it
        first = self._call_dict(form, None, self.included if form.generated else None)
        keys = list(first)
        if self._call_dict(form, None, keys) is first:
            self.fail(form.role, form.text(), "returned the same dict twice; it must return a new one each call")
        self._call_dict(form, [], keys, kind=kind)
        for name in self.every:
            self._call_dict(form, [name], [key for key in keys if key != name], kind=kind)
        self._call_dict(form, self.every, [], kind=kind)
        if self.every:  # by position too, as the generated method takes it and the wire passes it
            rest = [key for key in keys if key != self.every[0]]
            self._call_dict(form, [self.every[0]], rest, by_position=True, kind=kind)
        if keys:
            # The first key and the last, in both orders: an iterator read twice, or read by ``in`` for
            # either name, loses what comes before it.
            names = list(dict.fromkeys([keys[0], keys[-1]]))
            rest = [key for key in keys if key not in names]
            for each in kinds:
                self._call_dict(form, names, rest, kind=each)
                self._call_dict(form, names[::-1], rest, kind=each)
                # One name: the keys left are more than one wherever the record has three fields.
                self._call_dict(form, names[:1], keys[1:], kind=each)
            if self._call_dict(form, names, rest, kind=kind) is self._call_dict(form, names, rest, kind=kind):
                call = form.text(f"skip_fields={_SKIP_KINDS[kind][1](names)}")
                self.fail(form.role, call, "returned the same dict twice; it must return a new one each call")
        self._check_unknown_name(form, keys, kind)

    def _call_dict(
        self,
        form: _Form,
        skip: list[str] | None,
        expected: list[str] | None,
        *,
        by_position: bool = False,
        kind: str = "set",
    ) -> dict[Any, Any]:
        """Call *form* with *skip* (a fresh iterable of *kind*, by keyword or *by_position*) and check the dict
        it returns.

        *expected* is the list of keys it must have, or None for an
        override's first call: any fields, in field order.
        """
        __tracebackhide__ = True
        if skip is None:
            call = form.text()
            got = self._call(form, call)
        else:
            make, show = _SKIP_KINDS[kind]
            given = make(skip)
            text = show(skip)
            call = form.text(text if by_position else f"skip_fields={text}")
            got = self._call(form, call, given) if by_position else self._call(form, call, skip_fields=given)
            if isinstance(given, (set, list, dict)) and given != make(skip):
                now, before = collections.Counter(list(given)), collections.Counter(skip)  # a dict's keys, not counts
                added, removed = sorted((now - before).elements()), sorted((before - now).elements())
                changes = [f"it added {added}"] if added else []
                changes += [f"it removed {removed}"] if removed else []
                unchanged_names = "it changed its values" if isinstance(given, dict) else "it reordered it"
                change = "; ".join(changes) or unchanged_names
                self.fail(
                    form.role,
                    call,
                    f"changed the skip_fields it was given: {change}; it must leave the caller's {kind} unchanged"
                    " and change a copy",
                )
        if type(got) is not dict:
            self.fail(form.role, call, f"returned {_name(type(got))}, not dict")
        keys = list(got)
        if expected is None:
            self._check_override_keys(form, call, got)
        elif keys != expected:
            self.fail(
                form.role,
                call,
                f"has keys {keys}, expected {expected}: {self._key_difference(form, keys, expected, skip)}",
            )
        for name in keys:
            if not self.same(name, got[name]):
                self.fail(
                    form.role, f"{call}[{name!r}]", "is not the object the instance holds: it was copied or replaced"
                )
        return got

    def _check_override_keys(self, form: _Form, call: str, got: dict[Any, Any]) -> None:
        """An override's dict, called with no ``skip_fields``: fields only, in field order, none ``OMIT``, and
        none left out that the record cannot be rebuilt without."""
        __tracebackhide__ = True
        keys = list(got)
        strangers = [key for key in keys if key not in self.values]
        if strangers:
            stand_in = (
                f" ({_STAND_IN!r} is no name of yours: assert_zerocopy_class set it on its instance, which"
                " __init__ did not make, in place of the attributes that __post_init__ or a caching property"
                " sets; the override returns such attributes, as vars(self) does)"
                if _STAND_IN in strangers
                else ""
            )
            self.fail(form.role, call, f"has keys {keys}: unexpected {strangers}, which are not fields{stand_in}")
        in_order = [name for name in self.every if name in got]
        if keys != in_order:
            self.fail(form.role, call, f"has keys {keys}, not in field order {in_order}: the order differs")
        omitted = [name for name in keys if name in self.omitted]
        if omitted:
            self.fail(
                form.role,
                call,
                f"has keys {keys}: {omitted} are OMIT fields, which never appear in the dict (nor travel);"
                " leave them out",
            )
        self._check_below(form, call, got)
        # The receiver rebuilds the record with ``Cls(**d)``: an override
        # may leave out a field only if ``__init__`` can do without it.
        needed = [f.name for f in self.fields if f.name not in got and not is_omitted(f) and _required(f)]
        if needed:
            self.fail(
                form.role,
                call,
                f"has keys {keys}: it leaves out {needed}, which __init__ requires, so"
                f" {_name(self.cls)}(**d) cannot rebuild the record; leave out only fields with a default",
            )
        unset = [name for name in stranded(self.cls) if name not in got and name not in self.omitted]
        if unset:
            self.fail(
                form.role,
                call,
                f"has keys {keys}: it leaves out {unset}, init=False fields with no default and no"
                f" __post_init__ to set them, so {_name(self.cls)}(**d) rebuilds a record without them"
                " (and metakit.wire refuses to send it); leave out only fields with a default",
            )

    def _check_below(self, form: _Form, call: str, got: dict[Any, Any]) -> None:
        """Overrides written in bases must not leave out the fields that only classes below them declare.

        They cannot know them: such a field would silently never travel, and
        ``Cls(**d)`` would rebuild the record with its default.  (An override
        in a class that is no dataclass, a mixin, may know any field.)
        """
        __tracebackhide__ = True
        owners = form.owners
        if not owners or self.cls in owners or not all(map(dataclasses.is_dataclass, owners)):
            return
        known = {f.name for owner in owners for f in dataclasses.fields(owner)}
        below = [f.name for f in self.fields if f.name not in got and f.name not in known and not is_omitted(f)]
        if below:
            where = " and ".join(_name(owner) for owner in owners)
            self.fail(
                form.role,
                call,
                f"leaves out {below}, which {_name(self.cls)} declares below {where}, where the override is"
                f" written: it cannot know them, so they would never travel; mark them OMIT if they must not,"
                f" or override asdict_zerocopy in {_name(self.cls)}",
            )

    def _key_difference(self, form: _Form, keys: list[Any], expected: list[str], skip: list[str] | None) -> str:
        missing = [name for name in expected if name not in keys]
        extra = [key for key in keys if key not in expected]
        if not missing and not extra:
            return "the order differs"
        parts = []
        if missing:
            parts.append(
                f"missing {missing}" + ("" if form.generated else ", which it returns when called with no arguments")
            )
        if extra:
            skipped = [key for key in extra if key in (skip or ())]
            parts.append(f"unexpected {extra}" + (", which skip_fields names" if skipped else ""))
        return ", ".join(parts)

    def _check_unknown_name(self, form: _Form, keys: list[str], kind: str) -> None:
        """A name in skip_fields that is no field: the generated code raises ``ValueError`` naming it.

        An override may refuse it as it likes (any exception), or leave it
        out as it leaves out those it skips (as a ``fields()`` comprehension
        does): then it must return what a call without it returns, *keys*.
        """
        __tracebackhide__ = True
        unknown = "not_a_field"
        while unknown in self.values:
            unknown += "_"
        make, show = _SKIP_KINDS[kind]
        call = form.text(f"skip_fields={show([unknown])}")
        try:
            form.function(skip_fields=make([unknown]))
        except ValueError as error:
            if form.generated and repr(unknown) not in str(error):
                self.fail(form.role, call, f"raised ValueError without naming {unknown!r}: {error}", error)
        except Exception as error:
            if form.generated:
                self.fail(form.role, call, f"raised {type(error).__name__}, not ValueError: {error}", error)
        else:
            if form.generated:
                self.fail(form.role, call, "returned, but it must raise ValueError: the name is not a field")
            self._call_dict(form, [unknown], keys, kind=kind)

    # --- astuple ------------------------------------------------------------------

    def _check_astuple(self, form: _Form) -> None:
        __tracebackhide__ = True
        call = form.text()
        got = self._call(form, call)
        if type(got) is not tuple:
            self.fail(form.role, call, f"returned {_name(type(got))}, not tuple")
        held = self._names_held(got)
        if form.generated:
            if len(got) != len(self.included) or not all(map(self.same, self.included, got)):
                self.fail(
                    form.role, call, f"holds the values of {held}, expected {self.included}, in order, by identity"
                )
        elif not self._in_field_order(got):
            self.fail(
                form.role, call, f"holds the values of {held}, which are not field values in field order {self.every}"
            )
        else:
            # The values of the instance's own asdict_zerocopy(), checked before: a tuple that
            # leaves out another field would bind the values after it to the wrong parameters.
            # (A dataclass not made by ZeroCopyFields may define astuple_zerocopy alone: its fields then.)
            own = getattr(self.obj, ASDICT, None)
            called = "asdict_zerocopy()" if own is not None else "the fields' dict"
            held_by_dict = list((own() if own is not None else metakit.asdict_zerocopy(self.obj)).values())
            if len(got) != len(held_by_dict) or not all(map(operator.is_, got, held_by_dict)):
                self.fail(
                    form.role,
                    call,
                    f"holds the values of {held}, but {called} holds those of"
                    f" {self._names_held(tuple(held_by_dict))}: the two must hold the same values, in the same order",
                )

    def _names_held(self, values: tuple[Any, ...]) -> list[str]:
        """The field each value is, by identity, or ``'?'`` for an object no field holds.

        Fields that hold the same object (``None``) are told apart by order:
        each value is the first field after the last one named that holds it.
        """
        names: list[str] = []
        start = 0
        for value in values:
            holders = [index for index, name in enumerate(self.every) if self.same(name, value)]
            index = next((index for index in holders if index >= start), holders[0] if holders else None)
            names.append("?" if index is None else self.every[index])
            start = start if index is None else index + 1
        return names

    def _in_field_order(self, values: tuple[Any, ...]) -> bool:
        # Matching each value with the first field left that holds it decides
        # whether the values are field values in field order.
        remaining = iter(self.every)
        return all(any(self.same(name, value) for name in remaining) for value in values)

    # --- replace ------------------------------------------------------------------

    def _check_replace(self) -> None:
        """``metakit.replace(obj)`` and a generated ``__replace__`` agree with ``dataclasses.replace(obj)``.

        Both run ``__init__`` and ``__post_init__``, so a field they set
        anew may differ; every field that ``dataclasses.replace`` carries
        over as the very object, the generated code must carry over too.
        """
        __tracebackhide__ = True
        obj = self.obj
        forms: list[_Form] = []
        # ``metakit.replace`` and the generated ``__replace__`` come with the
        # core's rewrite: before it, there is nothing to check.
        replace = getattr(metakit, "replace", None)
        if callable(replace):
            forms.append(_Form(_GENERATED, "metakit.replace", lambda: replace(obj), True, True))
        owner = next((owner for owner in self.cls.__mro__ if REPLACE in owner.__dict__), None)
        generated: Any = None if owner is None else owner.__dict__[REPLACE]
        if owner is not None and holds_generated(owner.__dict__, generated):
            # Bound from the class, as ``copy.replace`` finds it: a field may be named __replace__.
            forms.append(_Form(_GENERATED, f"obj.{REPLACE}", generated.__get__(obj, self.cls), True))
        if not forms:
            return
        try:
            reference: object = dataclasses.replace(obj)  # type: ignore[type-var]
        except Exception as error:
            for form in forms:
                self._check_replace_raises(form, error)
            return
        self._check_unchanged(_INIT, "dataclasses.replace(obj)")
        # A value that ``__init__`` makes anew is compared by value, where it makes the same one each time.
        try:
            again: object = dataclasses.replace(obj)  # type: ignore[type-var]
        except Exception:  # raises the second time: no value it makes can be told the right one
            again = None
        for form in forms:
            got = self._call(form, form.text())
            if type(got) is not self.cls:
                self.fail(form.role, form.text(), f"returned {_name(type(got))}, not {_name(self.cls)}")
            if got is obj:
                self.fail(form.role, form.text(), "returned the instance itself, not a new one")
            self._check_replaced_fields(form, got, reference, again)

    def _check_replaced_fields(self, form: _Form, got: object, reference: object, again: object) -> None:
        """Each field of *got* holds what *reference* (``dataclasses.replace(obj)``) does: the very object
        where it keeps one, else an equal one where *again*, made the same way, holds an equal one too."""
        __tracebackhide__ = True
        for name in self.every:
            wanted, value = getattr(reference, name, _MISSING), getattr(got, name, _MISSING)
            if self.same(name, wanted):
                if not self.same(name, value):
                    self.fail(
                        form.role,
                        form.text(),
                        f"holds a new object in field {name!r}, where dataclasses.replace(obj) keeps the very object",
                    )
            elif (
                name not in self.unstable
                and _equal(wanted, getattr(again, name, _MISSING))
                and not _equal(value, wanted)
            ):
                self.fail(
                    form.role,
                    form.text(),
                    f"holds {_shown(value)} in field {name!r}, where dataclasses.replace(obj) gives {_shown(wanted)}",
                )

    def _check_replace_raises(self, form: _Form, expected: Exception) -> None:
        __tracebackhide__ = True
        try:
            form.function()
        except Exception as error:
            if type(error) is type(expected):
                return
            problem = f"raised {describe(error)}"
        else:
            problem = "returned"
        self.fail(
            form.role,
            form.text(),
            f"{problem}, but dataclasses.replace(obj) raises {describe(expected)}",
        )

    # --- calling ------------------------------------------------------------------

    def _call(self, form: _Form, call: str, *positional: Any, **arguments: Any) -> Any:
        """What *form* returns, called so; it fails on what it raises, and on a change to the instance's fields
        (which would be blamed on the code checked after it)."""
        __tracebackhide__ = True
        try:
            result = form.function(*positional, **arguments)
        except Exception as error:
            # A TypeError with no frame below this one was raised by the call itself (its signature refuses
            # the arguments), whatever the fields hold: no sentinel is to blame.
            below = error.__traceback__.tb_next if error.__traceback__ is not None else None
            refused = isinstance(error, TypeError) and below is None
            if not self.bare or refused:
                self.fail(form.role, call, f"raised {describe(error)}", error)
            notes = "".join(f" (note: {note})" for note in self.notes)
            raise _RaisedOnSentinels(
                f"{_name(self.cls)}: {form.role}: {call} raised {describe(error)}{_BARE_HINT}{notes}"
            ) from error
        self._check_unchanged(form.role, call)
        return result

    def _check_unchanged(self, role: str, call: str) -> None:
        """Fail, blaming *role*, if *call*, just made, changed the instance's fields or what they hold."""
        __tracebackhide__ = True
        changed = [name for name in self.every if not self.same(name, self._read(name))]
        if changed:
            self.fail(
                role,
                call,
                f"changed the instance's field {changed[0]!r}: a conversion must leave the record as it was",
            )
        written = [
            name
            for name, held in self.contents.items()
            if held is not None and not _holds_still(self.values[name], held)
        ]
        if written:
            self.fail(
                role,
                call,
                f"changed what the instance's field {written[0]!r} holds: a conversion must leave the record as it was",
            )


class _Held(NamedTuple):
    """What a field's list, dict or tensor held when a check began (``_contents``)."""

    items: tuple[object, ...]
    """A list's items; a dict's keys and values; a tensor's layout: shape, strides, offset and address."""
    data: Any
    """A tensor's bytes, in the order of its elements: a ``uint8`` copy on its device; ``None`` for the others."""


def _contents(value: object) -> _Held | None:
    """What *value* holds, if it is a list, a dict or a tensor, so that a call that changes it in place shows;
    ``None`` for anything else."""
    if type(value) is list:
        return _Held(tuple(value), None)
    if type(value) is dict:
        return _Held(tuple(item for pair in value.items() for item in pair), None)
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return None
    try:
        data = _data(value).clone()
        _same_bytes(data, data)  # a tensor whose bytes cannot be read (a FakeTensor's) raises here
    except Exception:  # sparse, nested, quantized, meta or fake: by identity alone
        return None
    return _Held(_layout(value), data)


def _layout(tensor: Any) -> tuple[object, ...]:
    return (tuple(tensor.shape), tensor.stride(), tensor.storage_offset(), tensor.data_ptr())


def _data(tensor: Any) -> Any:
    """The bytes of *tensor*'s elements, in order, as a flat ``uint8`` tensor on its device: a view where it is
    contiguous, so that a check reads a large tensor without copying it."""
    if tensor.is_meta or tensor.is_quantized:  # torch crashes viewing a quantized tensor's bytes
        raise ValueError("a meta or quantized tensor: its bytes are not read")
    flat = tensor.detach().reshape(-1).resolve_conj().resolve_neg()  # in the order of its elements
    return flat.contiguous().view(sys.modules["torch"].uint8)


def _equal(value: object, other: object) -> bool:
    """Whether *value* and *other* are surely equal: of one type, and ``==`` answers ``True`` (tensors: same dtype,
    shape and values); ``False`` where that cannot be told (``==`` raises or answers no ``bool``)."""
    if type(value) is not type(other):
        return False
    if value is other:
        return True
    torch = sys.modules.get("torch")
    try:
        if torch is not None and isinstance(value, torch.Tensor):
            return value.dtype == other.dtype and value.shape == other.shape and bool(torch.equal(value, other))  # type: ignore[attr-defined]
        return (value == other) is True
    except Exception:  # a tensor inside a list, a device of another kind...
        return False


def _shown(value: object) -> str:
    """*value* as a failure shows it: its ``repr``, cut short, or its type where that raises."""
    try:
        text = repr(value)
    except Exception:
        return f"a {_name(type(value))}"
    return text if len(text) <= 60 else text[:57] + "..."


def _holds_still(value: object, held: _Held) -> bool:
    """Whether *value* holds what ``_contents`` found in it before: the very items, the same bytes."""
    if held.data is None:
        now = _contents(value)
        return now is not None and len(now.items) == len(held.items) and all(map(operator.is_, now.items, held.items))
    try:
        return _layout(value) == held.items and _same_bytes(_data(value), held.data)
    except Exception:  # it can no longer be read as before
        return False


def _same_bytes(now: Any, before: Any) -> bool:
    """Whether the flat ``uint8`` tensors *now* and *before*, on one device, hold the same bytes: through numpy
    on the CPU, where ``torch.equal`` reads them several times slower (a check reads a tensor after each call)."""
    if now.device.type == "cpu":
        try:
            import numpy  # torch's optional companion: only where it is installed

            return bool(numpy.array_equal(now.numpy(), before.numpy()))
        except (ImportError, RuntimeError):  # no numpy, or a torch built without it
            pass
    return bool(sys.modules["torch"].equal(now, before))


class _RaisedOnSentinels(AssertionError):
    """A call raised on an instance whose fields hold sentinels, not a wrong result."""


def _required(f: dataclasses.Field[Any]) -> bool:
    """Whether ``__init__`` must be given the field *f*."""
    return f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _name(cls: type) -> str:
    """*cls*'s qualified name, less the function it was made in, for messages."""
    return cls.__qualname__.rpartition("<locals>.")[2]


def _set_text(names: list[str]) -> str:
    return "{" + ", ".join(map(repr, names)) + "}" if names else "set()"


_SKIP_KINDS: Final[dict[str, tuple[Callable[[list[str]], Iterable[str]], Callable[[list[str]], str]]]] = {
    "set": (set, _set_text),
    "frozenset": (frozenset, lambda names: f"frozenset({_set_text(names)})"),
    "list": (list, repr),
    "tuple": (tuple, lambda names: repr(tuple(names))),
    "keys view": (lambda names: dict.fromkeys(names).keys(), lambda names: f"dict.fromkeys({names!r}).keys()"),
    "iterator": (lambda names: iter(list(names)), lambda names: f"iter({names!r})"),
    "dict": (dict.fromkeys, lambda names: f"dict.fromkeys({names!r})"),
}
"""Each kind of iterable of names that ``skip_fields`` may be: how to make one, and how a message shows it.
The generated code takes each; an override, those its annotation takes (``_kinds_taken``)."""
_OVERRIDE_KINDS: Final = frozenset(_SKIP_KINDS) - {"iterator", "dict"}
"""DESIGN's kinds of ``skip_fields``: what an override that says nothing else takes."""

_TAKEN: Final[dict[str, frozenset[str]]] = {
    "Any": _OVERRIDE_KINDS,
    "object": _OVERRIDE_KINDS,
    "Collection": _OVERRIDE_KINDS,
    "Iterable": frozenset(_SKIP_KINDS),
    "Sequence": frozenset(["list", "tuple"]),
    "List": frozenset(["list"]),
    "list": frozenset(["list"]),
    "Tuple": frozenset(["tuple"]),
    "tuple": frozenset(["tuple"]),
    "AbstractSet": frozenset(["set", "frozenset", "keys view"]),
    "FrozenSet": frozenset(["frozenset"]),
    "frozenset": frozenset(["frozenset"]),
    "KeysView": frozenset(["keys view"]),
    "Mapping": frozenset(["dict"]),
    "MutableMapping": frozenset(["dict"]),
    "Dict": frozenset(["dict"]),
    "dict": frozenset(["dict"]),
}
"""The kinds of ``skip_fields`` that each annotation's outer name takes; any other name, a set (``Set``,
``MutableSet``...)."""


def _kinds_taken(methods: Iterable[object]) -> list[str]:
    """The kinds of ``skip_fields`` that a chain of overrides (their values in the class dicts) takes.

    Each takes the kinds its annotation's options name (``Optional[List[str]]``
    a list, ``Iterable[str]`` an iterator too), and an unannotated one, or one
    annotated ``Any`` or ``Collection[str]``, DESIGN's kinds; a chain, those
    that all of them take.  A name that says no other kind takes a set, the
    kind callers pass: vLLM's FlashInfer override declares
    ``Optional[Set[str]]``, and a list there breaks its contract, not the
    override's.
    """
    kinds = frozenset(_SKIP_KINDS)
    for method in methods:
        try:
            function: Any = getattr(method, "__func__", method)  # a staticmethod's or classmethod's function
            parameters = list(_signature(function).parameters.values())
        except (TypeError, ValueError):
            continue
        taken = parameters[0 if isinstance(method, staticmethod) else 1 :][:1]
        annotation = taken[0].annotation if taken else inspect.Parameter.empty
        if annotation is inspect.Parameter.empty:
            kinds &= _OVERRIDE_KINDS
            continue
        names = _outer_names(_annotation_text(annotation)) or ["Any"]
        kinds &= frozenset().union(*(_TAKEN.get(name, {"set"}) for name in _aliases_read(names, function.__globals__)))
    return [kind for kind in _SKIP_KINDS if kind in kinds] or ["set"]


if sys.version_info >= (3, 14):
    import annotationlib

    def _signature(function: Callable[..., Any]) -> inspect.Signature:
        # Annotations as their text, never evaluated: a name may exist only for type checkers.
        return inspect.signature(function, annotation_format=annotationlib.Format.STRING)

else:

    def _signature(function: Callable[..., Any]) -> inspect.Signature:
        return inspect.signature(function)


def _annotation_text(annotation: object) -> str:
    if isinstance(annotation, str):
        return annotation
    plain = isinstance(annotation, type) and not typing.get_args(annotation)  # a class: its name; else its text
    return annotation.__name__ if plain else str(annotation)  # type: ignore[attr-defined]


def _aliases_read(names: list[str], namespace: dict[str, Any], depth: int = 8) -> list[str]:
    """*names*, each that names an alias in *namespace* (``SkipMap: TypeAlias = "Optional[Mapping[str, Any]]"``,
    ``type SkipMap = ...``) as the outer names of what it stands for, looked up in the namespace's dict."""
    read = []
    for name in names:
        alias = namespace.get(name) if name not in _TAKEN and depth else None
        if type(alias).__name__ == "TypeAliasType":  # ``type SkipMap = ...`` (3.12+): its value, as Python reads it
            try:
                alias = alias.__value__  # type: ignore[union-attr]
            except Exception:  # a value that names what is not defined: nothing to read
                alias = None
        if isinstance(alias, str) or (alias is not None and typing.get_origin(alias) is not None):
            read += _aliases_read(_outer_names(_annotation_text(alias)) or ["Any"], namespace, depth - 1)
        else:
            read.append(name)
    return read


def _outer_names(text: str) -> list[str]:
    """The outer names of the options of the annotation written as *text*: ``Optional[Set[str]]`` has ``Set``."""
    names = [_subscript(option)[0].rpartition(".")[2] for option in _options(text)]
    return [name for name in names if name not in ("None", "NoneType")]
