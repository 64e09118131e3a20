"""Which fields travel: the one rule that every part of metakit reads.

The generated methods, the function forms, ``metakit.testing``, the mypy
plugin, stubgen and ``metakit.distributed`` all take the names of the
methods and the fields that ``asdict_zerocopy`` returns from here.  This
module imports nothing from the rest of metakit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import Field, fields
from types import MappingProxyType
from typing import Any, Final, NamedTuple

ASDICT: Final = "asdict_zerocopy"
ASTUPLE: Final = "astuple_zerocopy"
REPLACE: Final = "__replace__"
METHOD_NAMES: Final = (ASDICT, ASTUPLE, REPLACE)
"""The names under which a class made by ``ZeroCopyFields`` gets generated methods."""

OMIT_KEY: Final = "metakit.omit"

OMIT: Final[Mapping[str, Any]] = MappingProxyType({OMIT_KEY: True})
"""Field metadata that keeps a field out of ``asdict_zerocopy`` and ``astuple_zerocopy``.

Pass it as ``field(metadata=OMIT)``, or merged with other metadata as
``field(metadata={**OMIT, "doc": ...})`` or ``metadata=OMIT | {...}``.  The
field stays a dataclass field in every other way: ``__init__``, ``repr``,
``eq``, ``replace`` and ``dataclasses.fields`` still see it.
"""


def is_omitted(f: Field[Any]) -> bool:
    """Whether the field *f* is marked with ``OMIT``."""
    return bool(f.metadata.get(OMIT_KEY))


def included_names(cls: type) -> tuple[str, ...]:
    """The names of the dataclass *cls*'s fields that ``asdict_zerocopy`` returns, in order."""
    return tuple([f.name for f in fields(cls) if not f.metadata.get(OMIT_KEY)])


# What ``dataclasses.replace`` does with each entry of ``__dataclass_fields__``
# (3.10 to 3.14 mark the kind of an entry with these private sentinels; where
# they are missing, the generated ``__replace__`` leaves all to
# ``dataclasses.replace``, see ``Layout.exact``).
_CLASSVAR: Final = getattr(dataclasses, "_FIELD_CLASSVAR", None)
_INITVAR: Final = getattr(dataclasses, "_FIELD_INITVAR", None)
_KINDS_KNOWN: Final = _CLASSVAR is not None and _INITVAR is not None

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


def layout_of(cls: type) -> Layout:
    """The ``Layout`` of the dataclass *cls*."""
    names: list[str] = []
    roles: list[str] = []
    included: list[str] = []
    for f in getattr(cls, "__dataclass_fields__").values():  # noqa: B009  # a dataclass's own attribute
        kind = getattr(f, "_field_type", None)
        if kind is _CLASSVAR:
            continue
        names.append(f.name)
        if not f.init:
            roles.append(REFUSED)
        elif kind is _INITVAR and f.default is dataclasses.MISSING:
            roles.append(REQUIRED)
        else:
            roles.append(CARRIED)
        if kind is not _INITVAR and not f.metadata.get(OMIT_KEY):
            included.append(f.name)
    if not _KINDS_KNOWN:
        return Layout(tuple(names), "".join(roles), included_names(cls), exact=False)
    return Layout(tuple(names), "".join(roles), tuple(included), exact=True)
