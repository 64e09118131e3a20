"""Which fields travel: the one rule that every part of metakit reads.

The generated methods, the function forms, ``metakit.testing``, the mypy
plugin, stubgen and ``metakit.distributed`` all take the names of the
methods and the fields that ``asdict_zerocopy`` returns from here.  This
module imports nothing from the rest of metakit.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import Field, fields
from types import CodeType, MappingProxyType, ModuleType
from typing import Any, Final, NamedTuple

ASDICT: Final = "asdict_zerocopy"
ASTUPLE: Final = "astuple_zerocopy"
REPLACE: Final = "__replace__"
METHOD_NAMES: Final = (ASDICT, ASTUPLE, REPLACE)
"""The names under which a class made by ``ZeroCopyFields`` gets generated methods."""

OMIT_KEY: Final = "metakit.omit"

OMIT: Final[MappingProxyType[str, Any]] = MappingProxyType({OMIT_KEY: True})
"""Field metadata that keeps a field out of ``asdict_zerocopy`` and ``astuple_zerocopy``.

Pass it as ``field(metadata=OMIT)``, or merged with other metadata as
``field(metadata={**OMIT, "doc": ...})`` or ``metadata=OMIT | {...}``.  The
field stays a dataclass field in every other way: ``__init__``, ``repr``,
``eq``, ``replace`` and ``dataclasses.fields`` still see it.
"""


def is_omitted(f: Field[Any]) -> bool:
    """Whether the field *f* is marked with ``OMIT``.

    ``field(metadata=...)`` takes any object with a ``__getitem__``, which
    ``dataclasses`` wraps in a read-only proxy and never reads: it need not
    have a ``get``, nor raise ``KeyError`` for a key it lacks.  So the mark
    is read by ``get`` where there is one (a dict's runs no ``__missing__``,
    which would answer for a key it lacks, and add it), else by subscript;
    a lookup that fails, however it fails, means that there is none.
    """
    metadata = f.metadata
    if metadata is _NO_METADATA:
        return False
    try:
        return bool(metadata.get(OMIT_KEY))
    except Exception:  # no get (the proxy asks the user's object for one), or one that fails in its own way
        pass
    try:
        return bool(metadata[OMIT_KEY])
    except Exception:  # a metadata object of the user's own that lacks the key, in its own way
        return False


def included_names(cls: type) -> tuple[str, ...]:
    """The names of the dataclass *cls*'s fields that ``asdict_zerocopy`` returns, in order."""
    return tuple([as_text(f.name) for f in fields(cls) if not is_omitted(f)])


def stranded(cls: type) -> tuple[str, ...]:
    """The fields that ``cls(**d)`` leaves unset unless *d* holds them: ``init=False`` fields with no default,
    in a dataclass *cls* with no ``__post_init__`` that could set them.

    ``metakit.wire`` refuses to send a record that leaves one out, and
    ``metakit.testing`` an override that does.
    """
    if getattr(cls, "__post_init__", None) is not None:
        return ()
    return tuple(f.name for f in fields(cls) if not f.init and f.default is _MISSING and f.default_factory is _MISSING)


def required_init_vars(cls: type) -> list[str]:
    """The ``InitVar`` pseudo-fields of the dataclass *cls* without a default, which ``replace`` must be given."""
    layout = layout_of(cls)
    return [name for name, role in zip(layout.names, layout.roles, strict=True) if role == REQUIRED]


def declared_in(cls: type, f: Field[Any]) -> type:
    """The class in *cls*'s MRO that declared the field *f*, where its annotation was written: the first
    from the top that holds that very ``Field`` (its dict read with no code of the class's run)."""
    for klass in reversed(cls.__mro__):
        if CLASS_DICT(klass).get("__dataclass_fields__", {}).get(f.name) is f:
            return klass
    return cls


CLASS_DICT: Final[Any] = type.__dict__["__dict__"].__get__
"""A class's own dict, read with no code of a metaclass's run (a ``__dict__`` property, ``__getattribute__``)."""
MODULE_DICT: Final[Any] = vars(ModuleType)["__dict__"].__get__
"""A module's dict, read with no code of its own run (a module's ``__getattr__``, a subclass's property)."""
QUALNAME: Final[Any] = type.__dict__["__qualname__"].__get__
"""A class's qualified name, read with no code of a metaclass's run."""


def as_text(name: str) -> str:
    """*name* as a plain ``str``: a subclass's ``__repr__`` or ``__format__`` must never write source."""
    return name if type(name) is str or not isinstance(name, str) else str.__str__(name)


# What ``dataclasses.replace`` does with each entry of ``__dataclass_fields__``
# (3.10 to 3.14 mark the kind of an entry with these private sentinels; where
# they are missing, the generated ``__replace__`` leaves all to
# ``dataclasses.replace``, see ``Layout.exact``).
_CLASSVAR: Final = getattr(dataclasses, "_FIELD_CLASSVAR", None)
_INITVAR: Final = getattr(dataclasses, "_FIELD_INITVAR", None)
_PLAIN_FIELD: Final = getattr(dataclasses, "_FIELD", None)
_KINDS_KNOWN: Final = None not in (_PLAIN_FIELD, _CLASSVAR, _INITVAR)
_MISSING: Final = dataclasses.MISSING
_NO_METADATA: Final = getattr(dataclasses, "_EMPTY_METADATA", object())
"""The metadata of a field given none (where this Python shares one such mapping)."""

CARRIED: Final = "c"
"""An ``__init__`` argument that ``replace`` takes from the instance when it is not changed."""
REFUSED: Final = "r"
"""An ``init=False`` field: ``replace`` refuses to change it."""
REQUIRED: Final = "q"
"""An ``InitVar`` without a default: ``replace`` must be given it."""


class Layout(NamedTuple):
    """What the generated methods of one class need to know of its fields.

    ``names`` are the entries of ``__dataclass_fields__`` that are not
    ``ClassVar``, in order; ``roles[i]`` is what ``replace`` does with
    ``names[i]`` (``CARRIED``, ``REFUSED`` or ``REQUIRED``); ``included``
    is the subsequence that ``asdict_zerocopy`` returns.
    """

    names: tuple[str, ...]
    roles: str
    included: tuple[str, ...]
    exact: bool
    """False where this Python marks field kinds in a way metakit does not know."""
    by_position: bool = False
    """Whether ``replace`` passes the ``__init__`` arguments by position: where that binds them as keywords would."""

    @property
    def arguments(self) -> tuple[str, ...]:
        """The names that ``__init__`` takes: every entry but the ``init=False`` fields."""
        if REFUSED not in self.roles:
            return self.names
        return tuple([name for name, role in zip(self.names, self.roles, strict=True) if role != REFUSED])


_TYPE_CALL: Final = type.__call__
_OBJECT_NEW: Final = object.__new__
_ONLY_NAMED_PARAMETERS: Final = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def takes_by_position(cls: type, arguments: tuple[str, ...]) -> bool:
    """Whether calling *cls* binds *arguments* by position as it would bind them as keywords.

    So it does where ``type.__call__`` and ``object.__new__`` hand them to an
    ``__init__`` that is a Python function whose parameters after ``self``
    are exactly *arguments*, in order: no ``*args``, ``**kwargs``,
    positional-only or keyword-only ones; and where ``obj.__class__`` is
    *cls*.  Then ``replace`` may pass them by position, which skips the
    matching of each keyword to its parameter: about half of ``__init__``'s
    cost on 15 fields.
    """
    called = type(cls).__call__ is _TYPE_CALL and _instances_class_is(cls)
    called_as_type_calls = called and cls.__new__ is _OBJECT_NEW  # type: ignore[comparison-overlap]
    code = getattr(getattr(cls, "__init__", None), "__code__", None) if called_as_type_calls else None
    return (
        isinstance(code, CodeType)
        and not code.co_flags & _ONLY_NAMED_PARAMETERS
        and not code.co_posonlyargcount
        and not code.co_kwonlyargcount
        and code.co_varnames[1 : code.co_argcount] == arguments
    )


def _instances_class_is(cls: type) -> bool:
    """Whether ``obj.__class__``, which ``replace`` calls as ``dataclasses.replace`` does, is *cls* for its
    instances: no class in its MRO defines ``__class__`` (a property may name another class)."""
    for klass in cls.__mro__:
        namespace = CLASS_DICT(klass)
        if "__class__" in namespace:
            return namespace["__class__"] is _OBJECTS_CLASS
    return True


_OBJECTS_CLASS: Final = object.__dict__["__class__"]


def layout_of(cls: type) -> Layout:
    """The ``Layout`` of the dataclass *cls*, read from its ``__dataclass_fields__`` (never its annotations)."""
    if not _KINDS_KNOWN:  # the included names, and replace left to dataclasses
        returned = included_names(cls)
        return Layout(returned, CARRIED * len(returned), returned, False, False)
    names: list[str] = []
    roles: list[str] = []
    included: list[str] = []
    arguments: list[str] = []
    keyword_only = False
    for f in getattr(cls, "__dataclass_fields__").values():  # noqa: B009  # a dataclass's own attribute
        name = f.name
        kind = f._field_type  # as dataclasses.fields() reads it
        if kind is _CLASSVAR:
            continue
        if type(name) is not str:
            name = as_text(name)
        names.append(name)
        if f.init:
            arguments.append(name)
            keyword_only = keyword_only or f.kw_only is True
            roles.append(REQUIRED if kind is _INITVAR and f.default is _MISSING else CARRIED)
        else:
            roles.append(REFUSED)
        # A field as dataclasses.fields() gives them (not an InitVar, nor an entry of no kind).
        if kind is _PLAIN_FIELD and (f.metadata is _NO_METADATA or not is_omitted(f)):  # most fields have none
            included.append(name)
    by_position = not keyword_only and takes_by_position(cls, tuple(arguments))
    return Layout(tuple(names), "".join(roles), tuple(included), True, by_position)
