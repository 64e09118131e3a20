"""Which fields travel: the one rule that every part of metakit reads.

The generated methods, the function forms, ``metakit.testing``, the mypy
plugin, stubgen and ``metakit.distributed`` all take the names of the
methods and the fields that ``asdict_zerocopy`` returns from here.  This
module imports nothing from the rest of metakit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, fields
from types import MappingProxyType
from typing import Any, Final

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
