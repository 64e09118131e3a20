"""The wire's ways for one record class: an encoder generated from its fields, and a typed builder.

``metakit.wire`` reads and writes any record the general way, one field at a
time through its check.  For the usual record it also makes, the first time
a record of the class travels, what is written for the class:

- on the sender, ``encode(obj, packer)``, generated from source as
  ``ZeroCopyFields`` generates ``asdict_zerocopy`` (for a class whose
  ``asdict_zerocopy`` is its own generated one and that has no
  ``__getstate__`` of its own).  It reads each field that travels as an
  attribute and returns the list of values the header holds.  A value whose
  type alone says it passes its field's check (an ``int`` for an ``int``
  field, a ``torch.Tensor`` for a tensor field, a list of ints for a
  ``list[int]`` field) is written inline; any other goes through
  ``packer.field``, the general way, which checks it and raises the
  ``TypeError`` that names the field.
- on the receiver, a ``Builder``: a msgspec decoder typed from the
  annotations, which checks in C every field whose check a msgspec type
  makes exactly, then a loop over the other fields' checks, then the call
  of the class.  The receiver compiles nothing: what a peer sends never
  makes it run ``compile`` or ``exec``.

Neither holds a reference to the class, so that a class stays collectable:
the class is passed in.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import msgspec
import torch

from metakit._wire_types import FieldChecks

_AS_IS: Final = frozenset({type(None), bool, int, float, str, bytes})
"""The types whose values msgpack writes as they are."""


class Refused(TypeError):
    """A value that cannot travel; the message says what it is, the caller adds which field."""

    path = ""
    """Where the value lies inside the field's value, in msgspec's words (``[2]``, ``['key'].name``), added
    to as the error leaves each list, tuple, dict and record it lies in."""


class Encoder(NamedTuple):
    """A record class's generated ``encode``, and what must still hold for it to apply."""

    encode: Callable[[object, Any], list[Any]]
    asdict: object
    """The class's own generated ``asdict_zerocopy``: ``encode`` reads what it returns, while the class holds it."""
    getstate: object
    """The class's ``__getstate__`` (Python's or dataclasses'), which sends what ``asdict_zerocopy`` says."""


class Checked(NamedTuple):
    """A field that the typed decoder does not check: ``Builder`` checks it as ``encode`` does."""

    position: int
    name: str
    passing: frozenset[type]
    lists: frozenset[type]


class Builder(NamedTuple):
    """How a receiver reads a record class's values and calls the class."""

    values: msgspec.msgpack.Decoder[tuple[Any, ...]]
    """Reads the values: typed, so that msgspec checks in C each field whose check it can make exactly."""
    checked: tuple[Checked, ...]
    """The other fields, each checked in Python."""
    names: tuple[str, ...]
    init: types.CodeType | None
    """The code of the class's ``__init__`` if its first parameters are *names*, in order: while the class's
    ``__init__`` runs that code (and neither a ``__new__`` of its own nor a metaclass ``__call__`` comes
    first), the values are passed by position, the same call as by name and faster."""

    def build(self, cls: Any, values: tuple[Any, ...], field: Callable[[type, str, object], None]) -> object:
        """Check the values that msgspec did not, then call *cls*; *field* raises for a value that fails."""
        for position, name, passing, lists in self.checked:
            value = values[position]
            kind = type(value)
            if kind not in passing and not (kind is list and lists and lists.issuperset(map(type, value))):
                field(cls, name, value)
        if (
            self.init is not None
            and getattr(cls.__init__, "__code__", None) is self.init
            and cls.__new__ is OBJECT_NEW
            and type(cls).__call__ is TYPE_CALL
        ):
            return cls(*values)
        return cls(**dict(zip(self.names, values, strict=True)))


OBJECT_NEW: Final[Any] = object.__new__
TYPE_CALL: Final[Any] = type.__call__


def positional_init(cls: Any, names: tuple[str, ...]) -> types.CodeType | None:
    """The code of *cls*'s ``__init__``, if its first parameters after ``self`` are *names*, in order.

    Read from the code itself, not from ``inspect.signature``, which a
    wrapper's ``__wrapped__`` or a ``__signature__`` can make say otherwise.
    """
    init = cls.__init__
    if cls.__new__ is not OBJECT_NEW or type(cls).__call__ is not TYPE_CALL or type(init) is not types.FunctionType:
        return None
    code = init.__code__
    if code.co_argcount < 1 + len(names) or code.co_varnames[1 : 1 + len(names)] != names:
        return None
    return code


def make_builder(
    names: tuple[str, ...],
    checks: FieldChecks,
    ext_hook: Callable[[int, memoryview], Any],
    init: types.CodeType | None,
) -> Builder:
    """The ``Builder`` of a class whose travelling fields are *names*, all of them ``__init__`` arguments."""
    exact = [_decodable(checks.exact(name)) for name in names]
    checked = tuple(
        Checked(index, name, checks.passing(name), checks.lists(name))
        for index, (name, decoded) in enumerate(zip(names, exact, strict=True))
        if decoded is Any
    )
    values = msgspec.msgpack.Decoder(tuple.__class_getitem__(tuple(exact)), ext_hook=ext_hook)
    return Builder(values, checked, names, init)


def _decodable(exact: object) -> object:
    """*exact*, if msgspec can decode it; else ``Any`` (a union msgspec does not take, such as two kinds of list)."""
    try:
        msgspec.msgpack.Decoder(exact)
    except TypeError:
        return Any
    return exact


def make_encoder(
    qualname: str, names: tuple[str, ...], checks: FieldChecks, asdict: object, getstate: object
) -> Encoder:
    """Generate ``encode`` for the class whose travelling fields are *names* (none of them ``_source.unwritable``)."""
    namespace: dict[str, Any] = {"Tensor": torch.Tensor, "Refused": Refused}
    lines = ["def encode(obj, packer):", "    tensor = packer.tensor", "    field = packer.field"]
    for index, name in enumerate(names):
        passing, lists = checks.passing(name), checks.lists(name)
        namespace[f"lists{index}"], namespace[f"as_is{index}"] = lists, passing & _AS_IS
        lines.append(f"    v{index} = obj.{name}")
        lines += _encode_value(index, name, passing, lists)
    lines.append(f"    return [{', '.join(f'v{index}' for index in range(len(names)))}]")
    exec(compile("\n".join(lines) + "\n", f"<metakit.wire {qualname}>", "exec"), namespace)
    return Encoder(namespace["encode"], asdict, getstate)


def _encode_value(index: int, name: str, passing: frozenset[type], lists: frozenset[type]) -> list[str]:
    """The lines that write ``v<index>``, the value of field *name*: inline where its type says it passes.

    An int travels as it is: msgspec refuses one beyond 64 bits (``OverflowError``),
    and the sender then goes the general way, which names the field.
    """
    value = f"v{index}"
    general = f"{value} = field(obj, {name!r}, {value})"
    if not lists <= _AS_IS:
        lists = frozenset()  # a list of dtypes or devices: the general way writes each
    lines = []
    branch = "if"
    if torch.Tensor in passing:
        lines += [
            f"    if type({value}) is Tensor:",
            "        try:",
            f"            {value} = tensor({value})",
            "        except Refused as error:",
            f"            packer.refused(obj, {name!r}, error)",
        ]
        branch = "elif"
    if lists:
        lines += [
            f"    {branch} type({value}) is list:",
            f"        if not lists{index}.issuperset(map(type, {value})):",
        ]
        lines.append(f"            {general}")
        branch = "elif"
    if passing & _AS_IS:
        lines += [f"    {branch} type({value}) not in as_is{index}:", f"        {general}"]
    elif branch == "elif":
        lines += ["    else:", f"        {general}"]
    else:
        lines.append(f"    {general}")
    return lines
