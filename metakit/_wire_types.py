"""Field annotations as checks of the plain values that ``metakit.wire`` carries.

A record's annotations are resolved once per class, the first time a
record of it travels (never while the class is created), each field on its
own: a name that cannot be resolved (imported only under ``TYPE_CHECKING``)
takes any value where it stands, and text the parser cannot read checks
nothing in its field.  What a check knows: ``None``, ``bool``,
``int``, ``float``, ``str``, ``bytes``, unions, ``Literal``, ``NewType``,
``Annotated``, ``Final``, ``Never``, ``list``/``tuple``/``dict`` and their
``typing`` and ``collections.abc`` spellings, ``Iterable``, ``Collection``,
``Reversible``, ``TypedDict`` (a dict with ``str`` keys),
``torch.Tensor``, ``torch.dtype``, ``torch.device``, record classes,
``Self`` (a record of the class checked) and recursive aliases
(``Json = int | list["Json"]``).  Any
other class takes its instances (which travel only pickled).  ``Any``,
``object``, a ``Protocol``, a ``TypeVar`` and a ``Callable`` accept any value
that can travel.

As in typing, a ``bool`` is an ``int``, an ``int`` is a ``float``, a ``float`` is a ``complex``, and a
subclass's value is its base's (an ``IntEnum`` is an ``int``, a
``defaultdict`` a ``dict``): a check says whether a value matches its
annotation, and the sender then refuses, or pickles with the opt-in, one
that is not plain data.  A field whose default is ``None`` accepts ``None``
(``x: torch.Tensor = None``, an implicit ``Optional`` as engines write it).

A check is a predicate, ``check(value) -> bool``, so that a value that
matches costs one call; only when it fails does ``mismatch`` walk the value
again to say where and what, in msgspec's words: ``Expected `int`, got
`str` - at `$.num_prefills```.
"""

from __future__ import annotations

import builtins
import codecs
import collections.abc
import keyword
import re
import sys
import threading
import types
import typing
import unicodedata  # identifiers in NFKC form; and what a ``\N{...}`` escape looks names up in
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import Field, fields
from typing import Any, Final, NamedTuple, TypeVar, cast

import torch

from metakit._fields import CLASS_DICT, MODULE_DICT, declared_in
from metakit._meta import ZeroCopyFields

Check = Callable[[object], bool]


def _anything(value: object) -> bool:
    return True


ANYTHING: Final[Check] = _anything
"""The check of a field whose annotation says nothing a check can use."""


class _Spec(NamedTuple):
    """A resolved annotation: its check and how it reads in a message."""

    check: Check
    name: str
    explain: Callable[[object, str], _Mismatch | None]
    """``explain(value, path)``: the first mismatch in *value*, or ``None``."""
    kinds: frozenset[type] = frozenset()
    """For a check of plain types alone: the exact types it accepts, so that a list is checked in C."""
    passing: frozenset[type] = frozenset()
    """Types whose values always pass, by their type alone: what generated code tests inline (may be empty)."""
    lists: frozenset[type] = frozenset()
    """Item types such that a ``list`` whose items all have one of them passes (empty: no such rule)."""
    exact: object = Any
    """The type for msgspec's typed decoding that takes exactly the msgpack values the check passes, or ``Any``."""


class _Mismatch(NamedTuple):
    expected: str
    path: str
    got: object
    key: bool = False
    """Whether *got* is a key of the dict at *path*: msgspec says ``at `key` in `$.name```."""
    shown: str | None = None
    """How the message shows *got*, where its type's name alone does not say what is wrong (``tuple of 3``)."""


def _key_mismatch(key: _Spec, keys: Iterable[object], path: str) -> _Mismatch | None:
    """The first of a dict's *keys* that *key* refuses, as a key of the dict at *path*; or ``None``."""
    for one in keys:
        found = key.explain(one, path)
        if found is not None:
            return found._replace(path=path, key=True)
    return None


def type_name(value: object) -> str:
    """The name of *value*'s type, as msgspec writes it: ``int``, ``torch.Tensor``."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


_MOST_KEY: Final = 60
"""The most characters of a dict key's ``repr`` that a path shows: a key that arrived may be as long as its header."""


def key_step(key: object) -> str:
    """The step ``[key]`` of a path to a dict's value, a long key cut short."""
    text = repr(key)
    return f"[{text[:_MOST_KEY]}...]" if len(text) > _MOST_KEY else f"[{text}]"


def _leaf(
    name: str, check: Check, kinds: frozenset[type] = frozenset(), passing: frozenset[type] = frozenset()
) -> _Spec:
    def explain(value: object, path: str) -> _Mismatch | None:
        return None if check(value) else _Mismatch(name, path, value)

    return _Spec(check, name, explain, kinds, passing or kinds)


_MSGPACK: Final = {type(None), bool, int, float, str, bytes}
"""The types that msgpack has values of (a msgspec union of them keeps each value's type: ``int | float``)."""


def _exact(name: str, *kinds: type) -> _Spec:
    """A scalar annotation: what msgpack carries exactly is *kinds*; a subclass's value matches too (see above)."""
    check = (lambda value: value is None) if kinds == (type(None),) else (lambda value: isinstance(value, kinds))
    leaf = _leaf(name, check, frozenset(kinds))
    if not _MSGPACK.issuperset(kinds):
        return leaf
    return leaf._replace(exact=typing.Union[tuple(None if kind is type(None) else kind for kind in kinds)])  # noqa: UP007


_SCALARS: Final = {
    bool: _exact("bool", bool),
    int: _exact("int", int, bool),
    float: _exact("float", float, int, bool),
    complex: _exact("complex", complex, float, int, bool),
    str: _exact("str", str),
    bytes: _exact("bytes", bytes),
    type(None): _exact("None", type(None)),
    torch.dtype: _exact("torch.dtype", torch.dtype),
    torch.device: _exact("torch.device", torch.device),
    torch.Tensor: _leaf(
        "torch.Tensor", lambda value: isinstance(value, torch.Tensor), passing=frozenset({torch.Tensor})
    ),
}

_ANY_SPEC: Final = _Spec(ANYTHING, "any", lambda value, path: None)

_SAY_NOTHING: Final[tuple[object, ...]] = (collections.abc.Callable, object)
"""Classes whose values a check cannot tell apart from others (any value is an ``object``; a callable never travels)."""

_LISTS: Final = {list, collections.abc.MutableSequence}
_SEQUENCES: Final = {collections.abc.Sequence}
_ITERABLES: Final = {
    collections.abc.Iterable,
    collections.abc.Collection,
    collections.abc.Reversible,
    collections.abc.Set,
    collections.abc.MutableSet,
}
_NOTHING: Final = {typing.NoReturn, getattr(typing, "Never", typing.NoReturn)}
_LITERAL_STRING: Final = getattr(typing, "LiteralString", str)
"""A ``LiteralString`` (3.11+) is a ``str`` to a check: which literal it came from, no value tells."""
_DICTS: Final = {dict, collections.abc.Mapping, collections.abc.MutableMapping}
_SETS: Final = {set, frozenset}


def _union(options: list[_Spec]) -> _Spec:
    if any(option is _ANY_SPEC for option in options):
        return _ANY_SPEC
    checks = tuple(option.check for option in options)
    name = " | ".join(dict.fromkeys(part for option in options for part in option.name.split(" | ")))  # each once
    others = tuple(option.check for option in options if option is not _SCALARS[type(None)])

    def any_of(value: object) -> bool:
        return any(one(value) for one in checks)

    check = any_of
    if len(others) == 1 and len(checks) == 2:  # Optional[X], the usual union
        (other,) = others

        def optional(value: object) -> bool:
            return value is None or other(value)

        check = optional

    def explain(value: object, path: str) -> _Mismatch | None:
        if check(value):
            return None
        # The option of the value's own kind says more than the union does.
        for option in options:
            found = option.explain(value, path)
            if found is not None and (found.path != path or found.key):
                return found
        return _Mismatch(name, path, value)

    kinds: frozenset[type] = frozenset().union(*(option.kinds for option in options))
    passing: frozenset[type] = frozenset().union(*(option.passing for option in options))
    lists = [option.lists for option in options if option.lists]
    exact = [option.exact for option in options]
    return _Spec(
        check,
        name,
        explain,
        kinds if all(option.kinds for option in options) else frozenset(),
        passing,
        lists[0] if len(lists) == 1 else frozenset(),  # two list options would each take only their own items
        Any if Any in exact or len(lists) > 1 else typing.Union[tuple(exact)],  # noqa: UP007
    )


def _checked_items(value: Iterable[object]) -> Iterable[object]:
    """The items of *value* that a check of each must see: a str's distinct characters, a bytes' distinct
    values, else all of them.

    A str's items are strs of one character, and a bytes' ints under 256, which every check judges by their
    value alone: a str of a million characters costs the checks of the few it holds, not a million (a peer
    chooses its length). An empty str or bytes is still a sequence of its kind of item, as its type says: it
    is judged by one (``""``, ``0``), so that ``""`` is no ``Sequence[int]`` where ``"a"`` is none.
    """
    if isinstance(value, str):
        return set(value) or _A_STR
    if isinstance(value, bytes):
        return set(value) or _A_BYTE
    return value


_A_STR: Final = ("",)
_A_BYTE: Final = (0,)


def _items(container: tuple[type, ...], item: _Spec, name: str) -> _Spec:
    item_check, kinds = item.check, item.kinds

    def each(value: object) -> bool:
        return isinstance(value, container) and all(map(item_check, _checked_items(value)))  # type: ignore[arg-type]

    def of_kinds(value: object) -> bool:  # list[int], the usual list: the items' types gathered in C
        if not isinstance(value, container):
            return False
        items = _checked_items(value)  # type: ignore[arg-type]
        return kinds.issuperset(map(type, items)) or all(map(item_check, items))

    check = of_kinds if kinds else each

    def explain(value: object, path: str) -> _Mismatch | None:
        if not isinstance(value, container):
            return _Mismatch(name, path, value)
        return _first_mismatch(item, value, path)  # type: ignore[arg-type]  # a list or a tuple: checked above

    exact = list[item.exact] if container == (list,) and item.exact is not Any else Any  # type: ignore[name-defined]
    return _Spec(check, name, explain, lists=kinds if list in container else frozenset(), exact=exact)


def _first_mismatch(item: _Spec, values: Iterable[object], path: str) -> _Mismatch | None:
    """The first of *values* that *item* refuses, named by its index after *path*; or ``None``."""
    if isinstance(values, (str, bytes)) and not values:  # judged by one item of its kind, as _checked_items does
        found = next(item.explain(one, path) for one in _checked_items(values))
        return None if found is None else _Mismatch(found.expected, path, values)
    if isinstance(values, (str, bytes)):  # each distinct item checked once, as _checked_items does
        refused = {one for one in set(values) if not item.check(one)}
        index = next((index for index, one in enumerate(values) if one in refused), None)
        return None if index is None else item.explain(values[index], f"{path}[{index}]")
    for index, one in enumerate(values):
        found = item.explain(one, f"{path}[{index}]")
        if found is not None:
            return found
    return None


_ITERATED: Final = (list, tuple, dict, str, bytes, set, frozenset)
"""The plain values, and their subclasses as ``list[X]`` takes a list's, whose items an ``Iterable[...]`` check
reads (a dict's are its keys): iterating them consumes nothing."""


def _iterable(abc: type, item: _Spec, name: str) -> _Spec:
    """``Iterable[X]`` and its kind: an instance of *abc*; a plain one's items checked, any other's not."""
    item_check = item.check

    def check(value: object) -> bool:
        if not isinstance(value, abc):
            return False
        return not isinstance(value, _ITERATED) or all(map(item_check, _checked_items(value)))

    def explain(value: object, path: str) -> _Mismatch | None:
        if not isinstance(value, abc):
            return _Mismatch(name, path, value)
        if isinstance(value, dict):  # its items are its keys
            return _key_mismatch(item, value, path)
        return _first_mismatch(item, value, path) if isinstance(value, _ITERATED) else None

    return _Spec(check, name, explain)


def _fixed_tuple(items: list[_Spec]) -> _Spec:
    checks = tuple(item.check for item in items)
    name = f"tuple of {len(checks)}"

    def check(value: object) -> bool:
        return (
            isinstance(value, tuple)
            and len(value) == len(checks)
            and all(one(part) for one, part in zip(checks, value, strict=True))
        )

    def explain(value: object, path: str) -> _Mismatch | None:
        if not isinstance(value, tuple):
            return _Mismatch(name, path, value)
        if len(value) != len(checks):
            return _Mismatch(name, path, value, shown=f"tuple of {len(value)}")
        for index, (item, part) in enumerate(zip(items, value, strict=True)):
            found = item.explain(part, f"{path}[{index}]")
            if found is not None:
                return found
        return None

    return _Spec(check, name, explain)


def _mapping(key: _Spec, value_spec: _Spec, name: str) -> _Spec:
    key_check, value_check = key.check, value_spec.check

    def check(value: object) -> bool:
        return isinstance(value, dict) and all(key_check(k) and value_check(v) for k, v in value.items())

    def explain(value: object, path: str) -> _Mismatch | None:
        if not isinstance(value, dict):
            return _Mismatch(name, path, value)
        for k, v in value.items():
            found = _key_mismatch(key, (k,), path) or value_spec.explain(v, path + key_step(k))
            if found is not None:
                return found
        return None

    return _Spec(check, name, explain)


def _record(cls: type) -> _Spec:
    # Weak: a class's checks are cached beside the class, and a field may
    # hold a record of its own class.
    ref = weakref.ref(cls)

    def check(value: object) -> bool:
        expected = ref()
        return expected is None or isinstance(value, expected)

    return _leaf(f"{cls.__module__}.{cls.__qualname__}", check)  # as the value's class is named: two may share a name


def _literal(values: tuple[object, ...]) -> _Spec:
    """``Literal[...]``: one of *values*, of its very type (``True`` is no ``Literal[1]``)."""
    options = tuple((type(value), value) for value in values)

    def check(value: object) -> bool:
        return any(type(value) is kind and value == option for kind, option in options)

    name = f"Literal[{', '.join(map(repr, values))}]"
    shown_kinds = {kind for kind, _ in options} & _MSGPACK

    def explain(value: object, path: str) -> _Mismatch | None:
        if check(value):
            return None
        # A value of a type the Literal has values of is shown itself: which one came (cut short, as a key is).
        return _Mismatch(name, path, value, shown=key_step(value)[1:-1] if type(value) in shown_kinds else None)

    return _Spec(check, name, explain)


def _instance(cls: type) -> _Spec:
    """Any other class: an instance of it (which arrives only pickled, with ``allow_pickle``)."""
    try:
        isinstance(None, cls)
    except TypeError:  # a TypedDict, a Protocol that is not runtime-checkable: says nothing a check can use
        return _ANY_SPEC
    ref = weakref.ref(cls)  # weak, as for a record class: the checks are cached beside the record's class

    def check(value: object) -> bool:
        expected = ref()
        return expected is None or isinstance(value, expected)

    return _leaf(f"{cls.__module__}.{cls.__qualname__}", check)


def _recursive(text: str, slot: list[_Spec]) -> _Spec:
    """A text met again inside a container in its own reading (``Tree = int | list["Tree"]``).

    Its spec is the one made the first time, once it is made: a value is
    checked as deep as it goes, which the wire bounds (``MAX_DEPTH``).  Each
    part of the value is checked against it once per check of the whole: a
    union of two lists of such aliases would otherwise try both at every
    level, twice as long for each level deeper.  A str met again in its own
    check passes: its one item is itself (``X = int | Sequence["X"]``), and
    typing takes it so.  Any other value met so holds itself, and its check
    recurs until the stack runs out (the wire's "holds itself").
    """

    def check(value: object) -> bool:
        meanwhile = True if type(value) is str else _RECUR
        return _once(("check", id(slot)), value, lambda: slot[0].check(value), meanwhile)

    def explain(value: object, path: str) -> _Mismatch | None:
        meanwhile = None if type(value) is str else _RECUR
        return _once(("explain", id(slot), path), value, lambda: slot[0].explain(value, path), meanwhile)

    return _Spec(check, text, explain)


_T = TypeVar("_T")
_results: Final = threading.local()
"""``_once``'s results during one check of a whole value, in this thread."""
_RECUR: Final[Any] = object()


def _once(key: tuple[object, ...], value: object, work: Callable[[], _T], meanwhile: _T = _RECUR) -> _T:
    """``work()`` on *value*, done once per *key* and *value* while the outermost call here runs (which keeps
    each *value* alive).  A str is told by its text, not its identity: its characters are made anew each
    time it is read.  Met again while its work runs, it is *meanwhile*, if given; else its work runs again."""
    results: dict[tuple[object, ...], Any] | None = getattr(_results, "made", None)
    outermost = results is None
    if results is None:
        results = _results.made = {}
    key = (*key, value if type(value) is str else id(value))
    try:
        if key not in results:
            if meanwhile is not _RECUR:
                results[key] = (value, meanwhile)
            results[key] = (value, work())
        return results[key][1]  # type: ignore[no-any-return]
    finally:
        if outermost:
            _results.made = None


Reader = Callable[[str, Mapping[str, Any]], object]
"""What reads an annotation's text, given the names of the closure it was written in (perhaps none)."""


def _type_aliases() -> tuple[type, ...]:
    """The classes of the aliases that ``type X = ...`` makes (3.12+), and of ``typing_extensions``' backport of
    them where a module imported it."""
    backport = getattr(sys.modules.get("typing_extensions"), "TypeAliasType", None)
    return tuple(kind for kind in (getattr(typing, "TypeAliasType", None), backport) if isinstance(kind, type))


def _alias_reader(alias: object) -> Reader:
    """What reads the text in the value of *alias* (``type Pair = tuple["Item", "Item"]``): where it was
    written, as a type checker reads it: its own type parameters (``type G[T] = list["T"]``), its module."""
    module = getattr(alias, "__module__", None)
    home = _attributes(sys.modules.get(module)) if type(module) is str else None
    parameters = getattr(alias, "__type_params__", None)
    own: dict[str, Any] = {}
    if type(parameters) is tuple:
        own = {parameter.__name__: parameter for parameter in parameters if type(parameter) in _PARAMETERS}
    return _Parser.reader((own, home if home is not None else {}, builtins.__dict__))


def _selves() -> tuple[object, ...]:
    """``typing.Self`` (3.11+), and ``typing_extensions``' where a module imported it."""
    backport = getattr(sys.modules.get("typing_extensions"), "Self", None)
    return tuple(self for self in (getattr(typing, "Self", None), backport) if self is not None)


def _closure_names(annotation: object) -> Mapping[str, Any]:
    """The names of the function a deferred annotation (3.14+) was written in, as they are now.

    A class made in a function may name a class made after it there, which
    ``dataclasses`` saw as a ``ForwardRef``; the ref keeps the closure's cells.
    """
    cells = getattr(annotation, "__cell__", None)
    if cells is None:
        return {}
    if type(cells) is not dict:
        cells = {annotation.__forward_arg__: cells}  # type: ignore[attr-defined]  # a ForwardRef's one name
    names = {}
    for name, cell in cells.items():
        if name != "__classdict__" and type(cell) is types.CellType:
            try:
                names[name] = cell.cell_contents
            except ValueError:  # a local never set (imported under TYPE_CHECKING): it names nothing
                names[name] = _UNSET
    return names


_UNSET: Final = object()
"""A function's local that was never set, which hides a module's name as Python's lookup would."""


def spec_of(annotation: object, read: Reader | None = None, own: type | None = None) -> _Spec:
    """The check of a resolved annotation.

    *read* resolves text met inside it (``Optional["Inner"]``, ``list["int"]``): a
    name there is looked up where the annotation was written.  A recursive alias
    (``Tree = Union[int, list["Tree"]]``) is checked as deep as a value goes.
    ``Self`` is a record of the class *own*, where the field's record is one
    (as a type checker binds it: a subclass's record holds the subclass's).
    """
    return _Reading(read, own).spec(annotation)


class _Reading:
    """One annotation being turned into its spec, and the texts read on the way to it."""

    def __init__(self, read: Reader | None, own: type | None) -> None:
        self.read = read
        self.own = own
        self.texts: dict[object, tuple[list[_Spec], int]] = {}
        """Each text (or alias) being read: the slot its spec goes in once made, and ``containers`` when it was met."""
        self.containers = 0
        """How many containers' items are being read (``list[...]`` is one)."""
        self.aliases = _type_aliases()
        self.selves = _selves()

    def spec(self, annotation: object) -> _Spec:
        """The spec of *annotation*; text, and a ``type`` statement's alias, are read here (see ``_recursive``)."""
        key: object
        alias = isinstance(annotation, self.aliases)
        if alias:
            key, name = annotation, cast("str", getattr(annotation, "__name__"))  # noqa: B009  # an alias's
        elif isinstance(annotation, (str, typing.ForwardRef)):
            key = name = annotation if isinstance(annotation, str) else annotation.__forward_arg__
        else:
            return self.of(annotation)
        if key in self.texts:
            slot, containers = self.texts[key]
            # Met again outside any container (``X = int | "X"``), it adds no value to what it is part of.
            return _recursive(name, slot) if containers < self.containers else _leaf(name, lambda value: False)
        read = self.read
        try:
            if alias:  # evaluated only now: ``type Json = int | list[Json]`` names itself
                read = _alias_reader(annotation)
                annotation = annotation.__value__  # type: ignore[attr-defined]
                if isinstance(annotation, (str, typing.ForwardRef)):  # ``type S = "list[X]"``: all of it text
                    text = annotation if isinstance(annotation, str) else annotation.__forward_arg__
                    annotation = read(text, {})
            else:
                annotation = self.read(name, _closure_names(annotation)) if self.read is not None else Any
        except Exception:  # a name imported only under TYPE_CHECKING, text the parser cannot read
            annotation = Any
        slot = []
        self.texts[key] = (slot, self.containers)
        outer, self.read = self.read, read  # the text in an alias's value names what its module has
        try:
            spec = self.of(annotation)
        finally:
            del self.texts[key]
            self.read = outer
        slot.append(spec)
        return spec

    def literal_values(self, arguments: tuple[object, ...]) -> tuple[object, ...] | None:
        """The values of ``Literal[*arguments]``: ``typing`` puts a nested ``Literal``'s in its place, but not
        those of an alias of one that a ``type`` statement or ``TypeAliasType`` made.  ``None`` where such an
        alias's value does not resolve (it names what is imported only under ``TYPE_CHECKING``)."""
        values: list[object] = []
        for argument in arguments:
            if isinstance(argument, self.aliases) and argument not in self.texts:
                self.texts[argument] = ([], self.containers)  # an alias that names itself adds nothing
                try:
                    value = argument.__value__  # type: ignore[attr-defined]
                except Exception:
                    return None
                finally:
                    del self.texts[argument]
                if typing.get_origin(value) is typing.Literal or isinstance(value, self.aliases):
                    inner = self.literal_values((value,) if isinstance(value, self.aliases) else value.__args__)
                    if inner is None:
                        return None
                    values += inner
                    continue
            values.append(argument)
        return tuple(values)

    def item(self, annotation: object) -> _Spec:
        """The spec of what a container holds."""
        self.containers += 1
        try:
            return self.spec(annotation)
        finally:
            self.containers -= 1

    def of(self, annotation: object) -> _Spec:  # noqa: PLR0911, PLR0912
        """The spec of an annotation that is not text (one branch per kind of annotation)."""
        spec_of, item_of = self.spec, self.item
        if annotation is None or annotation is type(None):
            return _SCALARS[type(None)]
        if isinstance(annotation, type) and annotation in _SCALARS:
            return _SCALARS[annotation]
        if annotation is _LITERAL_STRING:
            return _SCALARS[str]
        if annotation in self.selves:
            return _ANY_SPEC if self.own is None else _record(self.own)
        origin = typing.get_origin(annotation)
        arguments = typing.get_args(annotation)
        if origin is typing.Annotated or origin is typing.Final or origin is typing.ClassVar:
            # A ClassVar is a field where dataclasses does not see it as one: ``"te.ClassVar[int]"`` (before 3.15).
            return spec_of(arguments[0])
        if isinstance(annotation, self.aliases):  # read from text
            return spec_of(annotation)
        if isinstance(origin, self.aliases):  # ``Pair[int]``: as ``Pair``, each T any
            return spec_of(origin)
        if annotation in _NOTHING:
            return _leaf("Never", lambda value: False)
        if origin is typing.Union or origin is types.UnionType:
            return _union([spec_of(argument) for argument in arguments])
        if origin is typing.Literal:
            values = self.literal_values(arguments)
            return _ANY_SPEC if values is None else _literal(values)
        if isinstance(annotation, typing.NewType):
            return spec_of(annotation.__supertype__)
        if origin in _LISTS or annotation in _LISTS or annotation is typing.List:  # noqa: UP006
            return _items((list,), item_of(arguments[0]) if arguments else _ANY_SPEC, "list")
        if origin in _SEQUENCES or annotation in _SEQUENCES:
            # A str is a sequence of str, and bytes one of int, as in typing.
            return _items((list, tuple, str, bytes), item_of(arguments[0]) if arguments else _ANY_SPEC, "Sequence")
        if origin in _ITERABLES or annotation in _ITERABLES:
            abc = cast("type", origin or annotation)
            return _iterable(abc, item_of(arguments[0]) if arguments else _ANY_SPEC, abc.__name__)
        if origin in _SETS or annotation in _SETS:  # which travel only pickled, each item checked all the same
            kind = cast("type", origin or annotation)
            return _items((kind,), item_of(arguments[0]) if arguments else _ANY_SPEC, kind.__name__)
        if origin is tuple or annotation is tuple:
            if annotation is typing.Tuple or (origin is None and not arguments):  # noqa: UP006
                return _items((tuple,), _ANY_SPEC, "tuple")
            if not arguments or arguments == ((),):  # tuple[()]: 3.11 on, and 3.10
                return _fixed_tuple([])
            if len(arguments) == 2 and arguments[1] is Ellipsis:
                return _items((tuple,), item_of(arguments[0]), "tuple")
            if any(map(_unpacked, arguments)):  # tuple[int, *Ts]: a tuple, of any length and items
                return _items((tuple,), _ANY_SPEC, "tuple")
            return _fixed_tuple([item_of(argument) for argument in arguments])
        if origin in _DICTS or annotation in _DICTS or annotation is typing.Dict:  # noqa: UP006
            key, value = (
                (item_of(arguments[0]), item_of(arguments[1])) if len(arguments) == 2 else (_ANY_SPEC, _ANY_SPEC)
            )
            return _mapping(key, value, "dict")
        target = annotation if origin is None else origin  # ``Box[int]`` is checked as ``Box``
        if not isinstance(target, type) or target in _SAY_NOTHING or getattr(target, "_is_protocol", False):
            return _ANY_SPEC  # Any, a TypeVar, a Callable, a Protocol
        if isinstance(target, ZeroCopyFields) and "__dataclass_fields__" in dir(target):
            return _record(target)
        if issubclass(target, torch.Tensor):
            return _SCALARS[torch.Tensor]
        if typing.is_typeddict(target):
            return _mapping(_SCALARS[str], _ANY_SPEC, "dict")
        return _instance(target)


def _unpacked(argument: object) -> bool:
    """Whether *argument* of a ``tuple[...]`` is unpacked (PEP 646): ``*Ts``, ``*tuple[int, ...]``, ``Unpack[Ts]``
    (``typing``'s or ``typing_extensions``')."""
    return getattr(argument, "__unpacked__", False) is True or (
        getattr(typing.get_origin(argument), "_name", None) == "Unpack"
    )


# --- resolving a class's annotations ------------------------------------------
#
# Annotations written as text (``from __future__ import annotations``, or a
# name 3.14 could not resolve) are read by the small parser below, which
# looks names up in the namespaces' dicts: it never calls ``eval``,
# ``compile`` or ``getattr``, so resolving them on a receiver runs no code of
# the text's and triggers no lazy import.

_TOKEN: Final = re.compile(
    r"""(?:[\ \t\f\r\n]|\\\n)*(?:
        (\#[^\r\n]*)
      | (\.\.\.)
      | ((?:[rRuU]|[bB][rR]?|[rR][bB])?
         (?:'''(?:[^\\]|\\[\s\S])*?'''|\"\"\"(?:[^\\]|\\[\s\S])*?\"\"\"
         |'(?!'')(?:[^'\\\r\n]|\\[\s\S])*'|"(?!"")(?:[^"\\\r\n]|\\[\s\S])*"))
      | ((?:[rRuU]|[bB][rR]?|[rR][bB])?['"])
      | ([^\W\d][\w.]*)
      | ([-+~]?[0-9]\w*)
      | ([\[\](),|])
      | (\S)
    )""",
    re.VERBOSE,
)
"""The parser's tokens, by kind (``_KINDS``), as Python's tokenizer reads them.  An ``other`` token may
appear only in ``Annotated``'s metadata; comments and line continuations are dropped; a quote that starts no
string that ends is ``unterminated``: text Python cannot read, given up at once.  A string token is any
string or bytes literal: in ``from __future__ import annotations``, as ``ast.unparse`` writes it; in an
annotation written as text, as written there.  A number token is all the word characters after its first
digit, whose text ``_number`` reads or refuses; no token backtracks, so a long one costs its length once."""
_KINDS: Final = ("comment", "ellipsis", "string", "unterminated", "name", "number", "punctuation", "other")


_LITERAL_NAMES: Final[dict[str, object]] = {"True": True, "False": False, "None": None}
_BRACKETS: Final = {"[": "]", "(": ")", "{": "}"}
_CLOSING: Final = frozenset(_BRACKETS.values())
_MAX_NESTING: Final = 200
"""How many brackets Python's tokenizer lets stand open at once."""


class _Unresolved(Exception):
    """Text that the parser cannot read (nor Python, as far as it tells): the whole annotation takes any value."""


class _NotFound(_Unresolved):
    """A name that names nothing here (imported only under ``TYPE_CHECKING``): any value where it stands."""


_WHITESPACE: Final = " \t\f\r\n"
"""What Python's tokenizer takes for whitespace (no other Unicode space)."""
_NEVER_OUTSIDE_STRINGS: Final = frozenset("$?`")
_NEWLINE: Final = re.compile(r"\r\n?")


def _quoted(text: str) -> str | bytes:
    """The value of the string or bytes token *text*, read as Python's parser reads it, with the
    decoders it uses (``ast.literal_eval`` would compile it: an audit event, on a receiver)."""
    opening = min(text.index(quote) for quote in "'\"" if quote in text)
    prefix = text[:opening].lower()
    quotes = 3 if text[opening : opening + 3] in ("'''", '"""') else 1
    body = text[opening + quotes : -quotes]
    try:
        if "b" in prefix:
            if not body.isascii():  # a bytes literal holds ASCII characters only
                raise ValueError(body)
            return body.encode() if "r" in prefix else codecs.escape_decode(body.encode())[0]
        if "r" in prefix:
            return body
        # The parser's own step before the decoder: each character beyond ASCII becomes its escape, and a
        # backslash before one escapes itself (the character is no escape).
        return codecs.unicode_escape_decode(_BEYOND_ASCII.sub(_escaped, body))[0]
    except (UnicodeDecodeError, ValueError, Warning):  # an escape Python refuses (``'\\x1'``), or warns of
        raise _Unresolved(text) from None  # where warnings are errors (``'\\q'``), as its parser does


_BEYOND_ASCII: Final = re.compile(r"\\([\s\S])|([^\x00-\x7f])")


def _escaped(match: re.Match[str]) -> str:
    after_backslash, character = match.groups()
    if character is not None:
        return f"\\U{ord(character):08x}"
    return match[0] if after_backslash.isascii() else f"\\u005c\\U{ord(after_backslash):08x}"


def _is_utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _number(text: str) -> int:
    """The value of the number token *text*: an int literal, as Python reads it, after one ``-``, ``+`` or ``~``."""
    sign, digits = (text[0], text[1:]) if text[0] in "-+~" else ("", text)
    try:
        if not digits.isascii():  # ``int()`` reads other scripts' digits; Python's tokenizer does not
            raise ValueError(digits)
        value = int(digits, 0)
    except ValueError:  # a literal Python refuses (``012``, ``1__0``)
        raise _Unresolved(text) from None
    return -value if sign == "-" else ~value if sign == "~" else value


class _Parser:
    """``expr := term ('|' term)*``, ``term := atom ('[' expr (',' expr)* ']')?``."""

    def __init__(self, text: str, namespaces: tuple[Mapping[str, Any], ...]) -> None:
        self.tokens: list[tuple[str, str]] = []
        # Python refuses an indented expression, a NUL and a lone surrogate (not UTF-8) in source text.
        if text[:1].isspace() or "\x00" in text or not _is_utf8(text):
            raise _Unresolved(text)
        text = _NEWLINE.sub("\n", text)  # as Python reads source text: ``\`` then CR LF continues a line
        position = 0
        end = len(text.rstrip(_WHITESPACE))
        depth = 0
        while position < end:
            match = _TOKEN.match(text, position)
            if match is None:
                raise _Unresolved(text)
            kind = next(kind for kind, group in zip(_KINDS, match.groups(), strict=True) if group is not None)
            if kind == "unterminated":
                raise _Unresolved("a string that does not end")
            if kind != "comment":
                token = match.group(_KINDS.index(kind) + 1)
                self.tokens.append((kind, token))
                depth += (token in _BRACKETS) - (token in _CLOSING)
                if depth > _MAX_NESTING:  # Python's tokenizer: "too many nested parentheses"
                    raise _Unresolved(text)
            position = match.end()
        self.namespaces = namespaces
        self.next = 0

    @classmethod
    def reader(cls, namespaces: tuple[Mapping[str, Any], ...]) -> Reader:
        """What reads an annotation's text, its names looked up in *namespaces*, after the class's own in a
        closure's."""
        return lambda text, closure: cls(text, _with_closure(namespaces, closure)).parse()

    def parse(self) -> object:
        value = self.expr()
        if self.next != len(self.tokens):
            raise _Unresolved("trailing text")
        return value

    def peek(self) -> str:
        return self.tokens[self.next][1] if self.next < len(self.tokens) else ""

    def string(self, text: str) -> str | bytes:
        """The value of the string token *text* and of those that follow it, joined as Python joins them."""
        value = _quoted(text)
        while self.next < len(self.tokens) and self.tokens[self.next][0] == "string":
            more = _quoted(self.take()[1])
            if type(more) is not type(value):
                raise _Unresolved("a str joined to bytes")
            value += more  # type: ignore[operator]
        return value

    def expect(self, closing: str) -> None:
        """Take the token *closing*, which ends the brackets open here."""
        if self.take()[1] != closing:
            raise _Unresolved("unbalanced brackets")

    def take(self) -> tuple[str, str]:
        if self.next >= len(self.tokens):
            raise _Unresolved("cut short")
        self.next += 1
        return self.tokens[self.next - 1]

    def expr(self) -> object:
        value = self.term()
        while self.peek() == "|":
            self.take()
            value = value | self.term()  # type: ignore[operator]
        return value

    def term(self) -> object:
        value = self.atom()
        if self.peek() == "[" and value is typing.Literal:
            self.take()
            return typing.Literal[tuple(self.listed(self.literal))]
        if self.peek() == "[" and value is typing.Annotated:
            self.take()
            annotated = self.expr()
            if self.take()[1] != ",":  # text the parser stopped short in (``int if x else str``)
                raise _Unresolved("Annotated without metadata")
            self.skip_to_bracket()  # the metadata: any text the tokens read, never looked up
            return annotated
        if self.peek() == "[":
            self.take()
            arguments = [self.expr()]
            while self.peek() == ",":
                self.take()
                if self.peek() != "]":
                    arguments.append(self.expr())
            self.expect("]")
            if value is not Any:  # a name not found here, subscripted: still any value
                value = value[arguments[0] if len(arguments) == 1 else tuple(arguments)]  # type: ignore[index]
        return value

    def listed(self, item: Callable[[], object]) -> list[object]:
        """Items separated by commas, up to and past the closing ``]`` (after a comma, if one ends them)."""
        items = [item()]
        while self.peek() == ",":
            self.take()
            if self.peek() == "]":
                break
            items.append(item())
        self.expect("]")
        return items

    def literal(self) -> object:
        """A value in ``Literal[...]``: a str, bytes, an int, ``True``, ``False``, ``None``, a dotted name (an
        enum's, or a ``Literal`` alias), or a ``Literal[...]`` of them, whose values ``typing`` takes in its place."""
        kind, text = self.take()
        if kind == "string":
            return self.string(text)
        if kind == "number":
            return _number(text)
        if text == "(":
            value = self.literal()
            self.expect(")")
            return value
        if kind != "name":
            raise _Unresolved(text)
        if text in _LITERAL_NAMES:
            return _LITERAL_NAMES[text]
        value = self.name(text)
        if value is typing.Literal and self.peek() == "[":
            self.take()
            return typing.Literal[tuple(self.listed(self.literal))]
        return value

    def skip_to_bracket(self) -> None:
        """Pass the tokens up to and past the ``]`` that closes the brackets open here (an ``Annotated``'s
        metadata: read no further than that its brackets match and it holds no character Python never takes)."""
        closing = ["]"]
        while closing:
            text = self.take()[1]
            if text in _NEVER_OUTSIDE_STRINGS:
                raise _Unresolved(text)
            if text in _BRACKETS:
                closing.append(_BRACKETS[text])
            elif text in _BRACKETS.values() and text != closing.pop():
                raise _Unresolved("unbalanced brackets")

    def atom(self) -> object:  # noqa: PLR0911  # one return per kind of token
        kind, text = self.take()
        if kind == "ellipsis":
            return Ellipsis
        if kind == "number":
            return _number(text)
        if kind == "string":
            forward = self.string(text)
            if type(forward) is not str:
                raise _Unresolved(text)
            return _Parser(forward, self.namespaces).parse()
        if text == "[":  # Callable[[int], str]
            items = [] if self.peek() == "]" else [self.expr()]
            while self.peek() == ",":
                self.take()
                items.append(self.expr())
            self.take()
            return items
        if text == "(":
            if self.peek() == ")":  # tuple[()]
                self.take()
                return ()
            value = self.expr()
            self.expect(")")
            return value
        if kind != "name":
            raise _Unresolved(text)
        try:
            return self.name(text)
        except _NotFound:  # imported only under TYPE_CHECKING: any value there, the rest still checked
            return Any

    def name(self, dotted: str) -> object:
        first, *rest = dotted.split(".")
        if not all(part.isidentifier() and not keyword.iskeyword(part) for part in rest) or not (
            first.isidentifier() and (first in _LITERAL_NAMES or not keyword.iskeyword(first))
        ):
            raise _Unresolved(dotted)  # ``a..b``, ``x²``, ``lambda``
        if first == "None":
            if rest:  # ``None.real``: no type, as Python's AttributeError says
                raise _NotFound(dotted)
            return None
        if not dotted.isascii():  # Python reads identifiers in NFKC form: full-width letters are ASCII ones
            first, *rest = (unicodedata.normalize("NFKC", part) for part in (first, *rest))
        for namespace in self.namespaces:
            if first in namespace:
                value = namespace[first]
                break
        else:
            raise _NotFound(first)
        if value is _UNSET:
            raise _NotFound(first)
        for part in rest:
            attributes = _attributes(value)
            if attributes is None or part not in attributes:
                raise _NotFound(dotted)
            value = attributes[part]
        return value


def _attributes(value: object) -> Mapping[str, Any] | None:
    """The dict of a module or a class, read with no code of theirs (a ``__getattribute__``, a property) run."""
    kind = type(value)  # not isinstance, which may ask the object for its __class__
    if issubclass(kind, types.ModuleType):
        return MODULE_DICT(value)  # type: ignore[no-any-return]
    if issubclass(kind, type):
        return CLASS_DICT(value)  # type: ignore[no-any-return]
    return None


def _namespaces(cls: type, f: Field[Any]) -> tuple[Mapping[str, Any], ...]:
    """Where the names in the annotation of the field *f* of *cls* are looked up: where it was written.

    The dicts are read as ``_attributes`` reads them: an object in ``sys.modules`` that is no module,
    or one whose ``__dict__`` is a property, runs no code of its own here.
    """
    owner = declared_in(cls, f)
    namespace = CLASS_DICT(owner)
    module = namespace.get("__module__")
    home = _attributes(sys.modules.get(module)) if type(module) is str else None
    # The type parameters of ``class Box[T]`` (3.12+), which the class's own names hide, as in ``get_type_hints``;
    # less the descriptors of the class's ``__slots__``, which ``type`` adds once the body has run: a
    # ``slots=True`` field named ``bytes`` does not hide the builtin from the annotations the body wrote.
    parameters = namespace.get("__type_params__")
    body: dict[str, Any] = {}
    if type(parameters) is tuple:
        body = {parameter.__name__: parameter for parameter in parameters if type(parameter) in _PARAMETERS}
    body.update((name, value) for name, value in namespace.items() if type(value) is not types.MemberDescriptorType)
    return (body, home if home is not None else {}, builtins.__dict__)


_PARAMETERS: Final = frozenset(
    kind
    for kind in (typing.TypeVar, getattr(typing, "ParamSpec", None), getattr(typing, "TypeVarTuple", None))
    if isinstance(kind, type)
)
"""The types of a ``class Box[T]``'s type parameters (3.12+)."""


def _with_closure(
    namespaces: tuple[Mapping[str, Any], ...], closure: Mapping[str, Any]
) -> tuple[Mapping[str, Any], ...]:
    """*namespaces* (the class's, its module's, the builtins), with *closure*'s names after the class's."""
    return (namespaces[0], closure, *namespaces[1:]) if closure else namespaces


def _resolve(f: Field[Any], namespaces: tuple[Mapping[str, Any], ...]) -> object:
    """The annotation of the field *f*, its text read in *namespaces*; ``Any`` if it cannot be."""
    annotation: object = f.type
    closure = _closure_names(annotation)
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if not isinstance(annotation, str):
        return annotation
    try:
        return _Parser(annotation, _with_closure(namespaces, closure)).parse()
    except Exception:  # a name imported only under TYPE_CHECKING, text the parser cannot read: checks nothing
        return Any


class FieldChecks(NamedTuple):
    """The checks of a record class's fields, by field name."""

    checks: dict[str, Check]
    specs: dict[str, _Spec]

    def passing(self, name: str) -> frozenset[type]:
        """The types whose values pass the field *name*'s check by their type alone (perhaps none)."""
        return self.specs[name].passing

    def lists(self, name: str) -> frozenset[type]:
        """The item types that make a ``list`` pass the field *name*'s check (perhaps none)."""
        return self.specs[name].lists

    def exact(self, name: str) -> object:
        """The msgspec type that takes exactly what the field *name*'s check passes, or ``Any``."""
        return self.specs[name].exact


def field_checks(cls: type, of: Iterable[Field[Any]] | None = None) -> FieldChecks:
    """Resolve *cls*'s field annotations into checks (call it once per class): of the fields *of*, as
    ``fields(cls)`` gave them to the caller, or ``fields(cls)`` now."""
    specs: dict[str, _Spec] = {}
    for f in fields(cls) if of is None else of:
        try:
            namespaces = _namespaces(cls, f)
            spec = spec_of(_resolve(f, namespaces), _Parser.reader(namespaces), cls)
        except Exception:  # an annotation that typing itself cannot take apart checks nothing
            spec = _ANY_SPEC
        if f.default is None and not spec.check(None):
            # ``x: torch.Tensor = None``, as engines write it: the default is allowed
            # too, as PEP 484 first had it (an implicit Optional).
            spec = _union([spec, _SCALARS[type(None)]])
        specs[f.name] = spec
    return FieldChecks({name: spec.check for name, spec in specs.items()}, specs)


def mismatch(checks: FieldChecks, name: str, value: object) -> str:
    """Why *value* does not match the field *name*, in msgspec's words."""
    return mismatch_at(checks, name, value)[0]


def mismatch_at(checks: FieldChecks, name: str, value: object) -> tuple[str, str]:
    """``mismatch``, and the path it names (``$.name``, or deeper: ``$.name[2]``), written in it once."""
    spec = checks.specs[name]
    try:
        found = spec.explain(value, f"$.{name}")
    except Exception:  # an object that claims a type it is not: its own type is named
        found = None
    found = found or _Mismatch(spec.name, f"$.{name}", value)
    at = f"`key` in `{found.path}`" if found.key else f"`{found.path}`"
    message = f"Expected `{found.expected}`, got `{found.shown or type_name(found.got)}` - at {at}"
    if type(found.got).__module__ == "numpy" and getattr(found.got, "ndim", None) == 0:
        message += " (a numpy scalar: send value.item(), its Python value)"
    return message, found.path
