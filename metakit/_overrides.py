"""Which method a call reaches: a user's, or metakit's, and the forwarders of rule 2.

``_meta`` decides when a class gets its generated methods; this module
decides where they may stand, by the rules that ``_meta``'s docstring
gives.  Rule 1: a user's method (one that ``is_ours`` does not know) is
never replaced, and a class that inherits one gets no generated method.
Rule 2: where a call on an instance can reach a user's method, each
generated method of its bases is replaced by a forwarder, which goes on as
Python would if metakit's methods were not there.

Everything here reads classes and their namespaces; the changes it decides
are made by ``_meta``, under its lock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Mapping, Set
from types import CodeType
from typing import Any, Final

from metakit._codegen import STATE, GeneratedMethods, holds_generated
from metakit._fields import ASDICT, ASTUPLE, METHOD_NAMES, REPLACE
from metakit._functions import instance_methods

_set: Final = type.__setattr__
_delattr: Final = type.__delattr__

ABSENT: Final = object()
_DATACLASSES_REPLACE: Final = getattr(dataclasses, "_replace", ABSENT)
"""The generic ``__replace__`` that ``dataclasses`` gives every dataclass from 3.13 on (so must metakit)."""

DISPATCHERS: Final[dict[str, object]] = {}
"""``ZeroCopy``'s methods, by name (``_meta`` fills it in once ``ZeroCopy`` exists): each serves the
instance's own class."""


def is_ours(namespace: Mapping[str, Any], name: str, value: object) -> bool:
    """Whether *value*, found under *name* in the class namespace *namespace*, is a method metakit put there.

    That is a generated method of that class's own, ``ZeroCopy``'s method,
    a forwarder that rule 2 put there, or the generic ``__replace__`` of
    3.13's ``dataclasses``.  Anything else is a user's, which the rules never
    replace.
    """
    return (
        value is DISPATCHERS.get(name)
        or value is _DATACLASSES_REPLACE
        or holds_generated(namespace, value)
        or _is_forwarder(value)
    )


def users_methods(cls: type, name: str) -> list[type]:
    """The classes whose method *name*, written by a user, a call on an instance of *cls* reaches, in order.

    metakit's methods are passed over, as if they were not there: the first
    class is the one whose method the call runs, and ``super()`` in each
    reaches the next.  After the last comes metakit's generated code for the
    instance's own class, if metakit's method lies beyond it.  The walk ends
    at ``ZeroCopy``'s method, which serves the instance's own class.
    """
    found: list[type] = []
    mro = cls.__mro__
    at = _next_users(mro, 0, name)
    while at is not None:
        found.append(mro[at])
        at = _next_users(mro, at + 1, name)
    return found


def reaches_metakit(cls: type, users: list[type], name: str) -> bool:
    """Whether metakit's code serves a call on an instance of *cls* once *users* (``users_methods``) have run.

    So it does when there are none and the class has the method at all, or when a
    class past the last of them holds it: only metakit's lie there.
    """
    mro = cls.__mro__
    start = next(at for at, klass in enumerate(mro) if klass is users[-1]) + 1 if users else 0
    return any(name in vars(klass) for klass in mro[start:])


def _next_users(
    mro: tuple[type, ...], start: int, name: str, coming_back: Set[tuple[int, str]] = frozenset()
) -> int | None:
    """Where in *mro*, from *start* on, the next user's method *name* lies; ``None`` if ``ZeroCopy``'s comes first.

    *coming_back* is as for ``placing``: those classes' methods are metakit's.
    """
    dispatcher = DISPATCHERS.get(name)
    for at in range(start, len(mro)):
        namespace = mro[at].__dict__
        value = namespace.get(name, ABSENT)
        if value is ABSENT or (coming_back and (id(mro[at]), name) in coming_back):
            continue
        if value is dispatcher:
            return None
        if not is_ours(namespace, name, value):
            return at
        if name is REPLACE and _owns_replace(mro[at]):
            return None
    return None


def _owns_replace(cls: type) -> bool:
    """Whether *cls* is a dataclass that has a ``__replace__`` of its own, from 3.13 on.

    There Python itself puts a method of its own (``dataclasses``' generic
    one, which metakit's takes the place of), and a call stops at it, as at
    ``ZeroCopy``'s: it serves the instance's own class.  Once a user deletes
    it (``disown_replace``), a call goes on to the bases, as it would without metakit.
    """
    # Decorated, not given fields by hand: ``dataclasses`` sets the parameters first, and only a decoration does.
    return _DATACLASSES_REPLACE is not ABSENT and "__dataclass_params__" in cls.__dict__ and id(cls) not in DISOWNED


DISOWNED: Final[dict[int, weakref.ref[type]]] = {}
"""The dataclasses whose own ``__replace__`` (3.13+) a user deleted, by ``id`` (each entry leaves with its
class): metakit puts none there, so that a call goes on to the bases as it would without metakit (a base's
generated one forwards it to the instance's own class), and ``dataclasses`` writes one again if the class is
decorated again."""


def disown_replace(cls: type) -> None:
    """Note that a user deleted the dataclass *cls*'s own ``__replace__`` (where ``dataclasses`` writes one)."""
    if _DATACLASSES_REPLACE is ABSENT:
        return  # before 3.13 the one there was metakit's: the rules give it back
    key = id(cls)
    DISOWNED[key] = weakref.ref(cls, lambda _, key=key: DISOWNED.pop(key, None))  # type: ignore[misc]


def placing(
    cls: type, methods: GeneratedMethods, coming_back: Set[tuple[int, str]], previous: tuple[object, ...] = ()
) -> tuple[list[tuple[str, object]], list[tuple[str, object, object]]]:
    """Rule 1 for *cls*: the names whose generated method must go, and the generated methods it must get, each
    with the value it found there (``ABSENT`` for none), which ``replace_if`` replaces only if it is still there.

    *coming_back* holds ``(id(class), name)`` for each generated method that
    a class above will get back; *previous* are the functions of the methods
    that *methods* replace (metakit's, not a user's).
    """
    namespace = cls.__dict__
    mro = cls.__mro__
    gone: list[tuple[str, object]] = []
    wanted: list[tuple[str, object, object]] = []
    for name, generated in ((ASDICT, methods.asdict), (ASTUPLE, methods.astuple), (REPLACE, methods.replace)):
        own = namespace.get(name, ABSENT)
        if own is _DATACLASSES_REPLACE and DISOWNED:
            DISOWNED.pop(id(cls), None)  # written by a new decoration: the class owns one again
        # (``previous`` by identity: a user's value may define ``__eq__``.)
        if not (own is ABSENT or own is generated or is_ours(namespace, name, own) or any(own is f for f in previous)):
            continue  # a user's method: never replaced
        # A method that a user wrote, inherited through any base: a generated
        # method of one base does not hide a user's of another.  But where
        # ``dataclasses`` gives the class a ``__replace__`` of its own, so does metakit;
        # where a user deleted that one, metakit puts none either.
        if (name is REPLACE and id(cls) in DISOWNED) or (
            not (name is REPLACE and _owns_replace(cls)) and _next_users(mro, 1, name, coming_back) is not None
        ):
            if own is not ABSENT:  # the user's method above was put there later, or the class disowned its own
                gone.append((name, own))
        elif own is ABSENT or (own is not generated and own is not DISPATCHERS[name] and not _is_forwarder(own)):
            # (A forwarder, put there by rule 2, stays: it serves the
            # instance's own class too.)
            wanted.append((name, generated, own))
    return gone, wanted


def replace_if(cls: type, name: str, found: object, value: object) -> None:
    """Put *value* (``ABSENT``: nothing) under *name* on *cls* where *found* still is.

    Code that runs in the middle of the rules' work (a trace function, a
    finalizer) may change the class meanwhile; what it put there stays, and
    the rules decide again (``_meta._settle``).  The test and the change are
    one line: no line event of a trace function comes between them (a
    profiler's events for the two C calls do: see docs/internals.md).
    """
    namespace = cls.__dict__
    if value is ABSENT:
        namespace.get(name, ABSENT) is found is not ABSENT and _delattr(cls, name)
    else:
        namespace.get(name, ABSENT) is found and _set(cls, name, value)


def delete(cls: type, name: str) -> None:
    """Take *name* off *cls*, if a finalizer or profiler that ran meanwhile left it (``_meta._settle`` decides
    again)."""
    with contextlib.suppress(AttributeError):  # gone already
        _delattr(cls, name)


def family(cls: type) -> list[type]:
    """*cls* and its subclasses, each once, every class after its bases."""
    seen: set[int] = set()  # by identity: a metaclass may define __eq__ and __hash__
    members = []
    todo = [cls]
    while todo:
        member = todo.pop()
        if id(member) not in seen:
            seen.add(id(member))
            members.append(member)
            todo += type.__subclasses__(member)
    # A class's MRO is longer than that of each of its bases.
    members.sort(key=lambda member: len(member.__mro__))
    return members


def guard_bases(cls: type) -> None:
    """Rule 2: where a call on an instance of *cls* can reach a user's method, no base's generated method stays."""
    if reaches_users(cls):
        dispatch(cls.__mro__[1:])


def reaches_users(cls: type) -> bool:
    """Whether a call on an instance of *cls* can reach a user's method, or a base's ``__replace__`` past a
    dataclass whose own a user deleted: rule 2 then holds for its bases."""
    mro = cls.__mro__
    if DISOWNED and any(id(klass) in DISOWNED for klass in mro):
        return True  # a call may pass a class whose own __replace__ was deleted, on to a base's generated one
    return any(_next_users(mro, 0, name) is not None for name in METHOD_NAMES)


def put_back(cls: type, name: str, generated: object, found: object, guarded: bool) -> None:
    """Give *cls* its *generated* method *name* again, in place of *found*, as a forwarder where rule 2 holds for
    it (*guarded*): at no moment does a ``super()`` call from a user's method below it reach the generated code."""
    replace_if(cls, name, found, _forwarder(cls, name, generated) if guarded else generated)


def cover_deletion(cls: type, name: str) -> tuple[type, str, object, object] | None:
    """Before metakit's own method *name* of *cls* is deleted, which the rules then give back: let what a call on
    an instance of *cls* finds meanwhile, the next base's generated method, serve the instance's own class.

    That base gets a forwarder until ``uncover``: at no moment does a call
    run a base's generated code, for the base's fields alone.
    """
    namespace = cls.__dict__
    if type(namespace.get(STATE)) is not GeneratedMethods or not is_ours(namespace, name, namespace.get(name)):
        return None
    for base in cls.__mro__[1:]:
        inherited = base.__dict__.get(name, ABSENT)
        if inherited is not ABSENT:
            if not holds_generated(base.__dict__, inherited):
                return None  # a forwarder, ZeroCopy's method or a user's: it serves the instance's class already
            forwarder = _forwarder(base, name, inherited)
            _set(base, name, forwarder)
            return base, name, forwarder, inherited
    return None


def uncover(covered: tuple[type, str, object, object] | None) -> None:
    """Give back the base's generated method that ``cover_deletion`` put a forwarder in place of, if it still
    holds that forwarder."""
    if covered is not None:
        base, name, forwarder, generated = covered
        replace_if(base, name, forwarder, generated)


def dispatch(classes: tuple[type, ...]) -> None:
    """Replace each generated method in *classes* by a forwarder, which serves the instance's own class."""
    for above in classes:
        namespace = above.__dict__
        for name in METHOD_NAMES:
            generated = namespace.get(name)
            if holds_generated(namespace, generated):
                replace_if(above, name, generated, _forwarder(above, name, generated))


def _forwarder(holder: type, name: str, generated: object) -> Any:
    """What rule 2 puts in place of *holder*'s *generated* method *name*.

    A call goes on as Python's would if metakit's methods were not there: to
    the next user's method after *holder* in the instance's MRO, or else to
    the generated code of the instance's own class (as ``ZeroCopy``'s method
    does).  To ``inspect`` it is the method it replaced (``__wrapped__``):
    the same signature, and the generated source.
    """
    caller, attribute = _SERVED[name]
    dispatcher = DISPATCHERS[name]

    def forward(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        # Asked at each call: *holder* may become a dataclass, or lose its own __replace__, after this was made.
        walks = not (name is REPLACE and _owns_replace(holder))
        passed = False  # whether holder is behind: then look on for a user's method
        for klass in cls.__mro__ if walks else ():
            if not passed:
                passed = klass is holder  # by identity: a metaclass may define __eq__
                continue
            namespace = klass.__dict__
            method = namespace.get(name, ABSENT)
            if method is ABSENT:
                continue
            if method is dispatcher:
                break  # ZeroCopy's: it serves the instance's own class, as below
            if not is_ours(namespace, name, method):
                bind = getattr(type(method), "__get__", None)  # as attribute lookup binds it
                return (method if bind is None else bind(method, self, cls))(*args, **kwargs)
            if name is REPLACE and _owns_replace(klass):
                break
        methods = getattr(cls, STATE, None)
        if type(methods) is not GeneratedMethods:
            methods = instance_methods(self, caller)
        return getattr(methods, attribute)(self, *args, **kwargs)

    forward.__name__ = name
    forward.__qualname__ = f"{holder.__qualname__}.{name}"
    forward.__module__ = holder.__module__
    forward.__doc__ = DISPATCHERS[name].__doc__
    forward.__wrapped__ = generated  # type: ignore[attr-defined]
    return forward


_SERVED: Final = {ASDICT: (ASDICT, "asdict"), ASTUPLE: (ASTUPLE, "astuple"), REPLACE: ("replace", "replace")}
"""For each method name: the name its errors give, and its ``GeneratedMethods`` attribute."""

_FORWARDER_CODE: Final = next(
    const for const in _forwarder.__code__.co_consts if isinstance(const, CodeType) and const.co_name == "forward"
)
"""The code that every forwarder runs: how ``is_ours`` knows one."""


def _is_forwarder(value: object) -> bool:
    return getattr(value, "__code__", None) is _FORWARDER_CODE
