"""``ZeroCopyFields`` and ``ZeroCopy``: where a class gets its generated methods, and the registry of the classes made.

This module acts when classes are made and changed; what a call does at run time is in ``_functions``.  The
rules it keeps, for each method name (``asdict_zerocopy``, ``astuple_zerocopy``, ``__replace__``):

1. A value that a user put on a class (in its body, or assigned later) is never replaced.  A class that
   inherits such a method gets no generated one; except ``__replace__`` from 3.13 on, where ``dataclasses``
   gives every dataclass its own.
2. Where a call on an instance can reach a user's method (its class has one, or inherits one), each generated
   method of the class's bases is replaced by a forwarder (``_forwarder``): a call goes on as it would if
   metakit's methods were not there, to the next user's method in the instance's MRO, or else to the generated
   code of the instance's own class.  So ``super().asdict_zerocopy()`` in an override returns the instance's
   fields, not a base's, and a generated method of one base never hides a user's method inherited through another.
3. The rules hold however the methods came to be: at class creation, on assignment to a class, and on ``del``.

Each change to a class that the rules act on happens under ``LOCK``, with what the rules make of it: threads
that make classes, or change them, do so one after the other, so that none decides from what another has half done.
"""

from __future__ import annotations

import collections
import functools
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import Any, Final, TypeVar

from metakit._codegen import STATE, GeneratedMethods, generate, holds_generated
from metakit._combined import PROBE, check_cooperates, cooperating, probed
from metakit._fields import ASDICT, ASTUPLE, CLASS_DICT, METHOD_NAMES, REPLACE, Layout, layout_of, takes_by_position
from metakit._functions import instance_methods
from metakit._overrides import (
    ABSENT,
    DISPATCHERS,
    cover_deletion,
    delete,
    disown_replace,
    dispatch,
    family,
    guard_bases,
    is_ours,
    placing,
    put_back,
    reaches_users,
    replace_if,
    uncover,
)
from metakit._source import label_of, writable

_M = TypeVar("_M", bound="ZeroCopyFields")

LOCK: Final = threading.RLock()
"""Held over each change to a class that the rules act on, with what the rules make of it.  Re-entrant:
a finalizer, a signal handler or a profiler may make or change a class in the same thread meanwhile."""


_registry: Final[dict[int, weakref.ref[Any]]] = {}
"""Every live class that ``ZeroCopyFields`` made, oldest first, weakly, under its ``id``, which it leaves as it
is collected (before the ``id`` can be taken again).  No lock: each change is one dict operation."""


_set: Final = type.__setattr__  # metakit's own changes: nothing need watch them


_WATCHED: Final = frozenset(
    ["__dataclass_fields__", "__qualname__", "__bases__", "__init__", "__new__", PROBE, *METHOD_NAMES]
)
"""The attribute names whose setting tells metakit something."""


class ZeroCopyFields(type):
    """Metaclass that gives each dataclass it creates generated conversions.

    Any class it creates that is, or becomes, a dataclass gets an ``asdict_zerocopy``, an ``astuple_zerocopy``
    and a ``__replace__`` written for its own fields, unless it has a user's method of that name (rule 1).
    Nothing else about the class changes.

    Most code inherits ``ZeroCopy`` rather than naming the metaclass.  To combine it with another metaclass,
    derive from both, in either order::

        class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta): ...
    """

    def __new__(mcls: type[_M], name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **kwargs: Any) -> _M:
        if "__module__" not in namespace:  # type.__new__ would take this frame's module: take our caller's
            namespace = {"__module__": sys._getframe(1).f_globals.get("__name__"), **namespace}
        before = _changes
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        if mcls is not ZeroCopyFields and mcls not in cooperating:
            check_cooperates(cls, ZeroCopyFields)
        # A callback that runs no Python code, where a Ctrl-C would only be printed.
        _registry[id(cls)] = weakref.ref(cls, functools.partial(_registry.pop, id(cls)))
        with LOCK:
            if _needs_methods_of_its_own(cls, namespace):
                _install(cls)
            # Only a class with several bases, or methods of its own, can put
            # a user's method in front of generated ones (rule 2).
            if len(bases) > 1 or not namespace.keys().isdisjoint(METHOD_NAMES):
                guard_bases(cls)
            if _changes != before:
                _settle(cls, before)
        return cls

    def __setattr__(cls, name: str, value: Any) -> None:
        if name not in _WATCHED:
            super().__setattr__(name, value)
            return
        if name == PROBE:
            probed("set")
            super().__setattr__(name, value)
            return
        global _changes  # noqa: PLW0603  # counted under LOCK
        with LOCK:  # the change and what the rules make of it, as one to other threads
            _changes = before = _changes + 1
            _changed_classes.append(id(cls))
            users = name in METHOD_NAMES and not is_ours(cls.__dict__, name, value)
            if users:
                # A user's method is about to appear: whatever it can reach
                # through ``super()`` must serve the instance's class before
                # any thread can call it.
                _guard_above(cls)
            super().__setattr__(name, value)
            _watched_set(cls, name, users)
            if _changes != before:
                _settle(cls, before)

    def __delattr__(cls, name: str) -> None:
        if name == PROBE:
            probed("deleted")
            super().__delattr__(name)
            return
        global _changes  # noqa: PLW0603  # counted under LOCK
        with LOCK:
            _changes = before = _changes + 1
            _changed_classes.append(id(cls))
            covered = cover_deletion(cls, name) if name in METHOD_NAMES else None
            try:
                super().__delattr__(name)
            except BaseException:
                uncover(covered)
                raise
            if name == REPLACE and holds_fields(cls.__dict__):
                disown_replace(cls)  # its own __replace__ (3.13+) is gone: a call goes on to the bases
            if name == "__dataclass_fields__":
                _decide_again(cls)
            elif name in METHOD_NAMES:
                _changed(cls)
            elif name in ("__init__", "__new__"):
                _recheck_calls(cls)
            if not _settle(cls, before) and not reaches_users(cls):
                uncover(covered)  # else rule 2 holds for the bases: the forwarder stays


_changes = 0
"""How many changes to classes that the rules act on have begun (each counted under ``LOCK``)."""
_changed_classes: Final[collections.deque[int]] = collections.deque(maxlen=1024)  # the latest changes' classes' ids


def _settle(cls: type, before: int) -> bool:
    """Apply the rules again to *cls* and the classes below it, until no change to them comes in between;
    whether it did.

    Under ``LOCK`` no other thread changes a class, but the same thread can, in the middle of the work (a
    finalizer, a signal handler, a profiler): what the rules decided before may no longer hold.  Another
    class's change is left to its own rules (a profiler that makes classes would keep this loop going).
    """
    settled = False
    while _changes != before and _concerns(cls, _changes - before):
        before, settled = _changes, True
        _changed(cls)
        _recheck_calls(cls)
    return settled


def _concerns(cls: type, count: int) -> bool:
    """Whether one of the last *count* changes was to *cls*, a class below it or a base of one (or may have been)."""
    if count > len(_changed_classes):
        return True
    near = {id(base) for member in family(cls) for base in member.__mro__}
    return not near.isdisjoint(list(_changed_classes)[-count:])


def _needs_methods_of_its_own(cls: type, namespace: Mapping[str, Any]) -> bool:
    """Whether *cls*, just made with *namespace*, is a dataclass that needs methods made for it."""
    if holds_fields(namespace):
        # ``@dataclass(slots=True)`` makes a new class from the old one's
        # namespace, fields included (and then sets its __qualname__).
        return True
    mro = cls.__mro__
    for at, base in enumerate(mro[1:], 1):  # read from their dicts: a metaclass's __getattr__ runs no code here
        if type(base.__dict__.get("__dataclass_fields__")) is dict:  # holds_fields, without a call per base
            up_to_fields = mro[1 : at + 1]
            break
    else:
        return False
    # An undecorated subclass of a dataclass.  It shares the methods made for the fields it inherits (that
    # dataclass's, or a class's between), unless it is called otherwise than ``replace`` would call it.
    inherited = next((base.__dict__[STATE] for base in up_to_fields if STATE in base.__dict__), None)
    return type(inherited) is not GeneratedMethods or not _calls_hold(cls, inherited.layout)


def holds_fields(namespace: Mapping[str, Any]) -> bool:
    """Whether *namespace* is a dataclass's: it holds the dict of its fields.

    Any other value under that name is the default of a field so named, which ``dataclasses`` sets first.
    """
    return type(namespace.get("__dataclass_fields__")) is dict


def _watched_set(cls: type, name: str, users: bool) -> None:
    """The rules for *cls*, whose attribute *name* was just set (*users*: to a user's method)."""
    namespace = cls.__dict__
    if name == "__dataclass_fields__":
        # ``dataclasses`` sets the fields once every one is known.  Where it writes ``__init__`` next, which
        # ``replace`` calls, a class with no methods waits for it; one with methods for other fields gets new
        # ones now, checked again then (a decoration may fail, or a user set the fields).  A name that cannot
        # be written into source is refused now, before ``dataclasses`` fails to compile its ``__init__``.
        if not holds_fields(namespace):
            return
        init_next = "__init__" not in namespace and getattr(namespace.get("__dataclass_params__"), "init", False)
        if init_next and writable(namespace["__dataclass_fields__"]):
            if STATE not in namespace:
                return
            _drop_methods(cls)  # first, so that the new code takes the class's own file name
        _install(cls)
    elif name == "__qualname__":
        # ``slots=True`` names its new class only after making it.
        methods = namespace.get(STATE)
        label = label_of(namespace.get("__module__"), cls.__qualname__)
        if type(methods) is GeneratedMethods and methods.label != label:
            _install(cls)
    elif name == "__bases__":
        # A new MRO, for the classes below too: other fields to inherit, other
        # users' methods to reach, another ``__init__`` to call.
        _decide_again(cls)
        _recheck_calls(cls)
    elif name in ("__init__", "__new__"):
        if name == "__init__" and STATE not in namespace and holds_fields(namespace):
            _install(cls)  # written by dataclasses, which set the fields just before
        else:
            _recheck_calls(cls)
    elif users or STATE in namespace or type.__subclasses__(cls):
        # A method name: a user's method, or one the rules take for metakit's
        # (such as ``dataclasses``' generic ``__replace__``, which the generated
        # one replaces).  A class with no methods nor subclasses yet waits.
        _changed(cls)


def _decide_again(cls: type) -> None:
    """The fields that *cls* and the classes below it inherit changed (``__dataclass_fields__`` of *cls* was
    deleted, or its ``__bases__`` set): each that is no dataclass of its own drops the methods it made for
    the old ones, and each gets methods as a new class would (its bases' fields), or none."""
    for member in family(cls):
        if STATE in member.__dict__ and not holds_fields(member.__dict__):
            _drop_methods(member)
        if STATE not in member.__dict__ and _needs_methods_of_its_own(member, member.__dict__):
            _install(member)
    _changed(cls)


def _calls_hold(cls: type, layout: Layout) -> bool:
    """Whether ``replace`` for *layout* calls *cls* as it must: by position only where that binds as keywords do."""
    return not layout.by_position or takes_by_position(cls, layout.arguments)


def _recheck_calls(cls: type) -> None:
    """``__init__`` or ``__new__`` of *cls* changed: new methods for each class, *cls* or below it, that
    ``replace`` would now call wrongly (by position where that no longer binds as keywords do: see ``_fields``)."""
    for member in family(cls):
        methods = getattr(member, STATE, None)  # its own, or those it shares with the dataclass above it
        if type(methods) is GeneratedMethods and not _calls_hold(member, methods.layout):
            _install(member)


def _install(cls: type) -> None:
    """Give the dataclass *cls* generated methods for its own fields; and each class below it that has
    methods of its own for the fields it inherits, new ones (they may be the fields that changed)."""
    members = family(cls) if type.__subclasses__(cls) else [cls]
    for member in members:
        namespace = member.__dict__
        if member is not cls and (STATE not in namespace or holds_fields(namespace)):
            continue
        old = namespace.get(STATE)
        # Methods made before for other fields (an undecorated subclass's, or under a name ``slots=True``
        # changed since) stay until the new ones take their places: no thread finds a method missing.
        previous = (old.asdict, old.astuple, old.replace) if type(old) is GeneratedMethods else ()
        methods = generate(namespace.get("__module__"), member.__qualname__, layout_of(member))
        _set(member, STATE, methods)
        gone, wanted = placing(member, methods, frozenset(), previous)
        for name, found in gone:
            replace_if(member, name, found, ABSENT)
        for name, generated, found in wanted:
            replace_if(member, name, found, generated)
    if len(members) > 1:
        # Overrides below may reach the new methods (rule 2); classes below that share them may be called otherwise.
        for member in members:
            guard_bases(member)
        _recheck_calls(cls)


def _changed(cls: type) -> None:
    """Apply the rules again to *cls* and to every class below it: a user changed one of its methods.

    Each class is decided as its bases will be when all is done, from the top down; generated methods go
    from the top down and come back from the bottom up, each as a forwarder where rule 2 holds, so that no
    class ever inherits a base's generated method in place of its own, nor reaches one through ``super()``.
    """
    members = family(cls)
    coming_back: set[tuple[int, str]] = set()
    back: list[tuple[type, str, object, object]] = []
    for member in members:
        methods = member.__dict__.get(STATE)
        if type(methods) is GeneratedMethods:
            gone, wanted = placing(member, methods, coming_back)
            for name, found in gone:
                replace_if(member, name, found, ABSENT)
            for name, generated, found in wanted:
                coming_back.add((id(member), name))
                back.append((member, name, generated, found))
    # Rule 2, decided before anything comes back: a base that it holds for gets a forwarder at once.
    users = [member for member in members if reaches_users(member)]
    guarded = {id(base) for member in users for base in member.__mro__[1:]}
    for member, name, generated, found in reversed(back):
        put_back(member, name, generated, found, id(member) in guarded)
    for member in users:
        dispatch(member.__mro__[1:])


def _guard_above(cls: type) -> None:
    """Rule 2 for a user's method about to be put on *cls*: in the bases of *cls* and of each class below it."""
    for member in family(cls):
        dispatch(member.__mro__[1:])


def _drop_methods(cls: type) -> None:
    """Take away the generated methods of *cls*, and their functions."""
    namespace = cls.__dict__
    for name in METHOD_NAMES:
        if holds_generated(namespace, namespace.get(name)):
            delete(cls, name)
    delete(cls, STATE)


def zerocopy_classes() -> list[type]:
    """The live classes created by ``ZeroCopyFields``, oldest first.

    They are held weakly: a class that is no longer used drops out.  The class that
    ``@dataclass(slots=True)`` replaces by a new one is not listed.
    """
    classes = [cls for ref in _registry.copy().values() if (cls := ref()) is not None]
    # The two classes of ``slots=True`` share one ``__dataclass_fields__``: keep the newer.  Read through
    # type's descriptor: no metaclass's ``__getattribute__`` runs (a receiver lists these for a wire name).
    fields = [CLASS_DICT(cls).get("__dataclass_fields__") for cls in classes]
    newest = {id(own): cls for cls, own in zip(classes, fields, strict=True) if own is not None}
    return [cls for cls, own in zip(classes, fields, strict=True) if newest.get(id(own), cls) is cls]


class ZeroCopy(metaclass=ZeroCopyFields):
    """Base class for dataclasses that convert to a dict without copying.

    ::

        @dataclass
        class InputMetadata(ZeroCopy):
            is_prompt: bool
            slot_mapping: torch.Tensor

        meta.asdict_zerocopy()  # {'is_prompt': ..., 'slot_mapping': <the same tensor>}

    The methods below are what a dataclass gets, written for its fields.  On a class that is not a
    dataclass they raise ``TypeError``.
    """

    __slots__ = ()

    # skip_fields is Any so that overrides may narrow it (vLLM's takes
    # Optional[Set[str]]); the mypy plugin checks it is an Iterable[str].
    def asdict_zerocopy(self, skip_fields: Any = None) -> dict[str, Any]:
        """A new dict of this instance's fields, holding the very same objects (never copied).

        Its keys are the names in ``dataclasses.fields(self)``, in order, without ``OMIT`` fields and the names
        in *skip_fields*; one there that is no field raises ``ValueError``.
        """
        return instance_methods(self, ASDICT).asdict(self, skip_fields)

    def astuple_zerocopy(self) -> tuple[Any, ...]:
        """A tuple of this instance's field values, in the order of ``asdict_zerocopy``."""
        return instance_methods(self, ASTUPLE).astuple(self)

    def __replace__(self, /, **changes: Any) -> Any:
        """A new instance with the fields in *changes* changed, as ``dataclasses.replace`` makes it."""
        return instance_methods(self, "replace").replace(self, **changes)


DISPATCHERS.update({name: ZeroCopy.__dict__[name] for name in METHOD_NAMES})
