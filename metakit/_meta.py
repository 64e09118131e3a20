"""``ZeroCopyFields``, ``ZeroCopy``, the rules that install generated methods,
and the registry of the classes they made.

A class's generated methods live in a ``GeneratedMethods`` object stored on
the class itself as ``__metakit__``, next to the methods installed under
their public names.  Storing per-class state on the class, not in a weak
cache keyed by the class, is what lets classes be garbage-collected: the
state would otherwise keep its own key alive.
"""

from __future__ import annotations

import inspect
import sys
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import fields, is_dataclass
from types import MappingProxyType
from typing import Any, Final, TypeVar

from metakit._codegen import ASDICT, ASTUPLE, GeneratedMethods, generate, is_generated

STATE: Final = "__metakit__"

from metakit._fields import OMIT, OMIT_KEY, included_names  # noqa: F401  # moving to their users


# Every class ZeroCopyFields made, oldest first, held weakly.  Dead
# references are dropped whenever the list has doubled: cheaper per class
# than a WeakValueDictionary.
_registry_lock = threading.Lock()
_registry: list[weakref.ref[type]] = []
_pruned_at = 64


def _register(cls: type) -> None:
    global _pruned_at  # noqa: PLW0603  # this module's own state, under _registry_lock
    with _registry_lock:
        _registry.append(weakref.ref(cls))
        if len(_registry) > _pruned_at:
            _registry[:] = [ref for ref in _registry if ref() is not None]
            _pruned_at = max(64, 2 * len(_registry))


def zerocopy_classes() -> list[type]:
    """The live classes created by ``ZeroCopyFields``, oldest first.

    They are held weakly: a class that is no longer used drops out.
    """
    with _registry_lock:
        refs = list(_registry)
    return [cls for cls in (ref() for ref in refs) if cls is not None]


_M = TypeVar("_M", bound="ZeroCopyFields")


class ZeroCopyFields(type):
    """Metaclass that gives each dataclass it creates generated conversions.

    Any class it creates that is, or later becomes, a dataclass gets an
    ``asdict_zerocopy`` and an ``astuple_zerocopy`` written for its own
    fields, unless the class defines or inherits a method of that name that
    a user wrote.  Nothing else about the class changes.

    Most code inherits ``ZeroCopy`` rather than naming the metaclass.  To
    combine it with another metaclass, derive from both::

        class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta): ...
    """

    def __new__(mcls: type[_M], name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **kwargs: Any) -> _M:
        if "__module__" not in namespace:
            # ``type.__new__`` would take the module of the innermost Python
            # frame, which is this one: take our caller's, as it would have.
            namespace = {"__module__": sys._getframe(1).f_globals.get("__name__"), **namespace}
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        _register(cls)
        if "__dataclass_fields__" in namespace:
            # ``@dataclass(slots=True)`` rebuilds the class from the old one's
            # namespace, fields included.
            _install(cls)
        else:
            # An undecorated subclass shares its fields with the dataclass it
            # inherits them from, and the methods with them, unless that
            # dataclass came from outside metakit.
            owner = next((c for c in cls.__mro__ if "__dataclass_fields__" in c.__dict__), None)
            if owner is not None and STATE not in owner.__dict__:
                _install(cls)
        return cls

    def __setattr__(cls, name: str, value: Any) -> None:
        # ``dataclasses`` sets attributes through here a dozen times per
        # class, so this calls ``type`` directly rather than ``super()``.
        # A metaclass that derives from this one and from another with a
        # ``__setattr__`` of its own gets ``_setattr_via_super`` instead
        # (see ``__init_subclass__``).
        _set_attribute(cls, name, value)
        # ``dataclasses`` sets this once every field is known, before it
        # writes ``__init__``: the moment a class becomes a dataclass.
        if name == "__dataclass_fields__":
            _install(cls)

    def __init_subclass__(mcls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        mro = inspect.getmro(mcls)
        after = mro[mro.index(ZeroCopyFields) + 1 :]
        if any("__setattr__" in base.__dict__ for base in after if base not in (type, object)):
            mcls.__setattr__ = _setattr_via_super  # type: ignore[method-assign]


def _setattr_via_super(cls: ZeroCopyFields, name: str, value: Any) -> None:
    super(ZeroCopyFields, cls).__setattr__(name, value)
    if name == "__dataclass_fields__":
        _install(cls)


_set_attribute: Final = type.__setattr__


def _install(cls: type) -> None:
    if STATE in cls.__dict__:
        # Installed before for other fields: ``__new__`` served the fields a
        # subclass inherits, then its decorator added its own.  Let the old
        # methods go first, so that the new ones can take their file name.
        type.__delattr__(cls, STATE)
    methods = generate(cls.__module__, cls.__qualname__, included_names(cls))
    # metakit's own writes go straight to ``type``: nothing need watch them.
    _set_attribute(cls, STATE, methods)
    for name, generated in ((ASDICT, methods.asdict), (ASTUPLE, methods.astuple)):
        owner, current = resolve(cls, name)
        if owner is None or is_ours(current):
            _set_attribute(cls, name, generated)
        else:
            _guard_bases(cls, owner, name, methods.names)


def resolve(cls: type, name: str) -> tuple[type | None, object]:
    """The class in *cls*'s MRO whose namespace holds *name*, and the value there."""
    for base in cls.__mro__:
        if name in base.__dict__:
            return base, base.__dict__[name]
    return None, None


def is_ours(value: object) -> bool:
    """Whether *value* is a method metakit wrote: generated, or ``ZeroCopy``'s dispatcher."""
    return is_generated(value) or value is _DISPATCHERS[ASDICT] or value is _DISPATCHERS[ASTUPLE]


def _guard_bases(cls: type, override: type, name: str, names: tuple[str, ...]) -> None:
    """Make generated methods above a user's *override* serve *cls*'s fields.

    A user's method may call ``super().asdict_zerocopy()``.  The generated
    method it reaches was written for a base class, whose fields differ; so
    that one is replaced by a dispatcher that serves the instance's own
    class.  Only classes above an override pay for the dispatch.
    """
    for base in cls.__mro__[cls.__mro__.index(override) + 1 :]:
        if is_generated(base.__dict__.get(name)) and base.__dict__[STATE].names != names:
            _set_attribute(base, name, _DISPATCHERS[name])


def methods_of(cls: type) -> GeneratedMethods:
    """The generated methods that serve instances of the dataclass *cls*."""
    if not isinstance(cls, type):
        raise TypeError(f"expected a dataclass, but got an instance of {type(cls).__qualname__}; pass its class")
    methods = getattr(cls, STATE, None)
    if isinstance(methods, GeneratedMethods):
        return methods
    if not is_dataclass(cls):
        raise TypeError(f"{cls.__qualname__} is not a dataclass")
    return _plain_methods(cls)


_plain: dict[weakref.ref[type], GeneratedMethods] = {}


def _plain_methods(cls: type) -> GeneratedMethods:
    """Methods for a dataclass that ``ZeroCopyFields`` did not create.

    They are kept in a dict keyed weakly by the class.  Its values refer to
    no class, so the class can still be collected, and its entry with it.
    """
    try:
        return _plain[weakref.ref(cls)]
    except KeyError:
        pass
    methods = generate(cls.__module__, cls.__qualname__, included_names(cls))
    _plain[weakref.ref(cls, _plain.pop)] = methods
    return methods


class ZeroCopy(metaclass=ZeroCopyFields):
    """Base class for dataclasses that convert to a dict without copying.

    ::

        @dataclass
        class InputMetadata(ZeroCopy):
            is_prompt: bool
            slot_mapping: torch.Tensor

        meta.asdict_zerocopy()  # {'is_prompt': ..., 'slot_mapping': <the same tensor>}

    The methods below are what a dataclass gets.  On a class that is not a
    dataclass they raise ``TypeError``.
    """

    __slots__ = ()

    def asdict_zerocopy(self, skip_fields: Iterable[str] | None = None) -> Mapping[str, Any]:
        """A new dict of this instance's fields, holding the very same objects.

        Its keys are the names in ``dataclasses.fields(self)``, in that order,
        without ``OMIT`` fields and without the names in *skip_fields*.  Its
        values are never copied.  A name in *skip_fields* that is not a field
        raises ``ValueError``.
        """
        return instance_methods(self, ASDICT).asdict(self, skip_fields)

    def astuple_zerocopy(self) -> tuple[Any, ...]:
        """A tuple of this instance's field values, in the order of ``asdict_zerocopy``."""
        return instance_methods(self, ASTUPLE).astuple(self)


def instance_methods(obj: object, caller: str) -> GeneratedMethods:
    """The generated methods for the dataclass instance *obj*.

    Anything else raises ``TypeError`` naming *caller*.
    """
    methods = getattr(type(obj), STATE, None)
    if isinstance(methods, GeneratedMethods):
        return methods
    return plain_instance_methods(obj, caller)


def plain_instance_methods(obj: object, caller: str) -> GeneratedMethods:
    """``instance_methods`` for an *obj* whose class ``ZeroCopyFields`` did not make."""
    methods = _plain.get(weakref.ref(type(obj)))
    if methods is not None:
        return methods
    if isinstance(obj, type):
        raise TypeError(f"{caller}() takes a dataclass instance, but got the class {obj.__qualname__} itself")
    if not is_dataclass(obj):
        raise TypeError(f"{caller}() takes a dataclass instance, but {type(obj).__qualname__} is not a dataclass")
    return _plain_methods(type(obj))


_DISPATCHERS: Final[dict[str, object]] = {
    ASDICT: ZeroCopy.__dict__[ASDICT],
    ASTUPLE: ZeroCopy.__dict__[ASTUPLE],
}
