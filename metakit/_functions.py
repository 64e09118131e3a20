"""Call-time lookups and the function forms: ``asdict_zerocopy``,
``astuple_zerocopy``, ``replace`` and ``generated_source``.

A class that ``ZeroCopyFields`` made holds its generated methods itself (as
``STATE``); any other dataclass gets them on first use, kept in a cache
keyed by the class's identity, for as long as it lives.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Iterable
from dataclasses import is_dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from metakit._codegen import STATE, GeneratedMethods, generate
from metakit._fields import ASDICT, ASTUPLE, layout_of

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "asdict_zerocopy",
    "astuple_zerocopy",
    "generated_source",
    "instance_methods",
    "methods_of",
    "replace",
]

_DataclassT = TypeVar("_DataclassT", bound="DataclassInstance")
"""``replace``'s instance, bound as ``dataclasses.replace``'s is: a checker refuses what it refuses."""


def _held(value: object) -> object:
    """A weak reference to *value* where it takes one, else *value* itself (a builtin, which holds no class)."""
    try:
        return weakref.ref(value)
    except TypeError:
        return value


def _is_held(held: object, value: object) -> bool:
    """Whether *held*, made by ``_held``, is *value*."""
    return held is value or (type(held) is weakref.ref and held() is value)


def _calls(cls: type) -> tuple[object, ...]:
    """What calling *cls* runs, which decides how ``replace`` passes arguments (see ``Layout.by_position``)."""
    return getattr(cls, "__init__", None), cls.__new__, type(cls).__call__


class _PlainEntry(NamedTuple):
    """The generated methods of a dataclass that ``ZeroCopyFields`` did not make, and what they were made for.

    It holds nothing that may hold the class: the cache that keeps it is
    keyed weakly by the class, and a value that held its own key would keep
    it alive for good.  Anything a class holds may hold the class (from 3.14
    on, the ``__init__`` that ``dataclasses`` writes holds it through its
    ``__annotate__``; a method that calls ``super()`` holds it in a cell):
    so what the entry was made for is held by identity only, and weakly.
    """

    methods: GeneratedMethods
    fields: int
    """The ``id`` of the class's ``__dataclass_fields__``, which the class holds while it is compared."""
    calls: tuple[object, ...]
    """What calling the class ran (see ``_calls``), each held weakly where it can be."""

    def serves(self, cls: type) -> bool:
        """Whether these methods still serve *cls*: the same fields, and ``replace`` still calls it rightly.

        No metaclass watches such a class, so each call compares, by
        identity, what the methods were made for with what is there now: a
        class decorated again (an undecorated subclass of a dataclass that
        becomes one itself), or given an ``__init__`` or ``__new__`` later,
        is seen.  (The fields dict replacing another is made while the old
        one lives, so it cannot take its ``id``.)
        """
        if self.fields != id(getattr(cls, "__dataclass_fields__")):  # noqa: B009  # a dataclass's own attribute
            return False
        return not self.methods.layout.by_position or all(map(_is_held, self.calls, _calls(cls)))


_plain: Final[dict[int, tuple[weakref.ref[type], _PlainEntry]]] = {}
"""Generated methods of dataclasses that ``ZeroCopyFields`` did not make, made on first use: by the ``id`` of
the class, with a weak reference to it, whose callback removes the entry as the class is collected (before
its ``id`` can be taken again).  By identity: a metaclass may define ``__eq__``, and then ``__hash__`` or none.

No lock: two threads may each make an entry for a class, and either serves it.
"""


def _forget_plain(ref: weakref.ref[type], key: int) -> None:
    """Remove the entry of a class that is collected, if it is still that class's (each change is one dict
    operation: a thread may have put another in meanwhile)."""
    held = _plain.get(key)
    if held is not None and held[0] is ref:
        _plain.pop(key, None)


def _plain_methods(cls: type) -> GeneratedMethods:
    """The generated methods of the dataclass *cls*, which ``ZeroCopyFields`` did not make."""
    held = _plain.get(id(cls))
    entry = held[1] if held is not None and held[0]() is cls else None
    if entry is None or not entry.serves(cls):
        fields = getattr(cls, "__dataclass_fields__")  # noqa: B009  # a dataclass's own attribute
        methods = generate(cls.__dict__.get("__module__"), cls.__qualname__, layout_of(cls))
        entry = _PlainEntry(methods, id(fields), tuple([_held(call) for call in _calls(cls)]))
        _plain[id(cls)] = (weakref.ref(cls, functools.partial(_forget_plain, key=id(cls))), entry)
    return entry.methods


def methods_of(cls: object) -> GeneratedMethods:
    """The generated methods that serve instances of the dataclass *cls*.

    They are what ``super().asdict_zerocopy()`` reaches from an override,
    and what the function forms run.
    """
    if not isinstance(cls, type):
        kind = type(cls).__qualname__
        if is_dataclass(cls):
            raise TypeError(f"expected a dataclass, but got an instance of {kind}; pass its class, {kind}")
        raise TypeError(f"expected a dataclass, but got {cls!r:.80}, an instance of {kind}, which is not a dataclass")
    methods = getattr(cls, STATE, None)
    if type(methods) is GeneratedMethods:
        return methods
    if not is_dataclass(cls):
        raise TypeError(f"{cls.__qualname__} is not a dataclass")
    return _plain_methods(cls)


def instance_methods(obj: object, caller: str) -> GeneratedMethods:
    """The generated methods for the dataclass instance *obj*.

    Anything else raises ``TypeError`` naming *caller*.
    """
    methods = getattr(type(obj), STATE, None)
    if type(methods) is GeneratedMethods:
        return methods
    if isinstance(obj, type):
        raise TypeError(f"{caller}() takes a dataclass instance, but got the class {obj.__qualname__} itself")
    if not is_dataclass(obj):
        raise TypeError(f"{caller}() takes a dataclass instance, but {type(obj).__qualname__} is not a dataclass")
    return _plain_methods(type(obj))


def asdict_zerocopy(obj: object, skip_fields: Iterable[str] | None = None) -> dict[str, Any]:
    """A new dict of the dataclass instance *obj*'s fields, holding the very same objects.

    Works on any dataclass instance, with or without ``ZeroCopy``, and
    always returns the fields: a class's own ``asdict_zerocopy`` override is
    not called.  The keys are those of ``dataclasses.fields(obj)``, in
    order, less ``OMIT`` fields and the names in *skip_fields*.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Point:
    ...     x: int
    ...     y: int
    >>> asdict_zerocopy(Point(1, 2), skip_fields={"y"})
    {'x': 1}
    """
    # ``instance_methods``, with its first step written out: this is a hot path.
    methods = getattr(type(obj), STATE, None)
    if type(methods) is not GeneratedMethods:
        methods = instance_methods(obj, ASDICT)
    try:
        return methods.asdict(obj, skip_fields)
    except AttributeError:
        _refuse_if_hiding_fields(obj, ASDICT)
        raise


def astuple_zerocopy(obj: object) -> tuple[Any, ...]:
    """A tuple of the dataclass instance *obj*'s field values, in the order of ``asdict_zerocopy``."""
    methods = getattr(type(obj), STATE, None)
    if type(methods) is not GeneratedMethods:
        methods = instance_methods(obj, ASTUPLE)
    try:
        return methods.astuple(obj)
    except AttributeError:
        _refuse_if_hiding_fields(obj, ASTUPLE)
        raise


def _hides_fields(obj: object) -> bool:
    """Whether the instance *obj* of a dataclass hides ``__dataclass_fields__``, so that ``dataclasses`` refuses it.

    An instance that forwards attribute lookups elsewhere does, as a
    dataclass that subclasses ``types.GenericAlias`` does: ``is_dataclass``
    looks at its class and says yes, but ``dataclasses.fields`` looks at the
    instance, and refuses it with a ``TypeError``.  The generated methods,
    which read the instance's attributes, then meet an ``AttributeError``:
    only then is this asked.
    """
    try:
        getattr(obj, "__dataclass_fields__")  # noqa: B009  # as dataclasses.fields reads it
    except AttributeError:
        return True
    return False


def _refuse_if_hiding_fields(obj: object, caller: str) -> None:
    """Raise ``dataclasses.fields``'s ``TypeError`` if *obj* hides its fields (see ``_hides_fields``)."""
    if _hides_fields(obj):
        raise TypeError(
            f"{caller}() takes a dataclass instance, but this {type(obj).__qualname__} hides its fields "
            "(dataclasses.fields() refuses it: must be called with a dataclass type or instance)"
        ) from None


def replace(obj: _DataclassT, /, **changes: Any) -> _DataclassT:
    """A new instance of *obj*'s class with the fields in *changes* changed: ``dataclasses.replace``, faster.

    The semantics are ``dataclasses.replace``'s, errors included: the new
    instance is made by the class's ``__init__`` (so ``__post_init__`` runs
    and ``init=False`` fields are made again), from *changes* and the
    instance's other ``__init__`` fields.  Values are never copied.  The
    code is generated for the class; a class's own ``__replace__`` is not
    called.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Point:
    ...     x: int
    ...     y: int
    >>> replace(Point(1, 2), y=3)
    Point(x=1, y=3)
    """
    methods = getattr(type(obj), STATE, None)
    if type(methods) is not GeneratedMethods:
        if not hasattr(type(obj), "__dataclass_fields__"):  # dataclasses.replace's test, and its words
            raise TypeError("replace() should be called on dataclass instances")
        methods = _plain_methods(type(obj))
    try:
        result: _DataclassT = methods.replace(obj, **changes)
    except AttributeError:
        if _hides_fields(obj):
            # ``dataclasses.replace`` fails before it makes anything: its own error.
            return dataclasses.replace(obj, **changes)
        raise
    return result


def generated_source(cls: object) -> str:
    """The source text of the methods generated for the dataclass *cls*.

    It is also what ``inspect.getsource`` and tracebacks show for them.  For
    a dataclass that ``ZeroCopyFields`` did not make, it is the code that
    the function forms run.
    """
    return methods_of(cls).source
