"""The wire's code for one record class: its field values read, checked and written by generated source.

``metakit.wire`` reads and writes any record through the general path, one
field at a time through its check.  For the usual record (the class's own
generated ``asdict_zerocopy``, no custom ``__getstate__``, fields with plain
names) it also makes, the first time a record of the class travels, two
functions written for the class, as ``ZeroCopyFields`` does for
``asdict_zerocopy``:

- ``encode(obj, packer)`` reads each field that travels as an attribute and
  returns the list of values the header holds.  A value whose type alone
  says it passes its field's check (an ``int`` within 64 bits for an
  ``int`` field, a ``torch.Tensor`` for a tensor field) is written inline;
  any other goes through ``packer.field``, the general path, which checks
  it and raises the ``TypeError`` that names the field.
- ``build(cls, values, field)`` takes those values on the receiver, checks
  them the same way (any value not passed inline goes to ``field``, which
  raises the ``WireError`` that names the field) and calls
  ``cls(name=value, ...)``.

The functions hold no reference to the class, so that a class stays
collectable: the receiver passes it in.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import msgspec
import torch

from metakit._wire_types import FieldChecks

_AS_IS: Final = frozenset({type(None), bool, int, float, str, bytes})
"""The types whose values msgpack writes as they are."""


class Refused(TypeError):
    """A value that cannot travel; the message says what it is, the caller adds which field."""


class Plan(NamedTuple):
    """A record class's generated wire functions, and what must still hold for them to apply."""

    encode: Callable[[object, Any], list[Any]] | None
    """``None`` where ``asdict_zerocopy`` or ``__getstate__`` is the class's own, or ``__init__`` needs more."""
    build: Callable[[type, list[Any], Any], object] | None
    """``None`` where the class has ``init=False`` fields, which the general path sets after ``__init__``."""
    values: msgspec.msgpack.Decoder[tuple[Any, ...]]
    """Reads the values that ``build`` takes: typed, so that msgspec checks in C each field whose check it can make
    exactly (its ``exact`` type); ``build`` checks the others."""
    asdict: object
    """The class's own generated ``asdict_zerocopy``: ``encode`` reads what it returns, while the class holds it."""
    getstate: object
    """The class's ``__getstate__`` (Python's or dataclasses'), which sends what ``asdict_zerocopy`` says."""


def plain_names(names: tuple[str, ...]) -> bool:
    """Whether every name can be written in source as an attribute and a keyword argument."""
    return all(name.isidentifier() and not keyword.iskeyword(name) for name in names)


def make_plan(  # noqa: PLR0917  # what the class's codec knows
    qualname: str,
    names: tuple[str, ...],
    checks: FieldChecks,
    encodes: bool,
    later: bool,
    asdict: object,
    getstate: object,
    ext_hook: Callable[[int, memoryview], Any],
) -> Plan:
    """Generate ``encode`` and ``build`` for the class whose travelling fields are *names* (all plain)."""
    namespace: dict[str, Any] = {"Tensor": torch.Tensor, "Refused": Refused}
    encode = ["def encode(obj, packer):", "    tensor = packer.tensor", "    field = packer.field"]
    build = ["def build(cls, values, field):"]
    if names:
        build.append(f"    {''.join(f'v{index}, ' for index in range(len(names)))}= values")
    types = [_decodable(checks.exact(name)) for name in names]
    for index, name in enumerate(names):
        passing, lists = checks.passing(name), checks.lists(name)
        namespace[f"passing{index}"], namespace[f"lists{index}"] = passing, lists
        namespace[f"as_is{index}"] = passing & _AS_IS
        encode.append(f"    v{index} = obj.{name}")
        encode += _encode_value(index, name, passing, lists)
        if types[index] is Any:  # msgspec checked the others
            build += _build_check(index, name, passing, lists)
    encode.append(f"    return [{', '.join(f'v{index}' for index in range(len(names)))}]")
    build.append(f"    return cls({', '.join(f'{name}=v{index}' for index, name in enumerate(names))})")
    source = "\n".join(encode) + "\n\n" + "\n".join(build) + "\n"
    exec(compile(source, f"<metakit.wire {qualname}>", "exec"), namespace)  # made from field names
    values = msgspec.msgpack.Decoder(tuple.__class_getitem__(tuple(types)), ext_hook=ext_hook)
    return Plan(
        namespace["encode"] if encodes else None, None if later else namespace["build"], values, asdict, getstate
    )


def _decodable(exact: object) -> object:
    """*exact*, if msgspec can decode it; else ``Any`` (a union msgspec does not take, such as two kinds of list)."""
    try:
        msgspec.msgpack.Decoder(exact)
    except TypeError:
        return Any
    return exact


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


def _build_check(index: int, name: str, passing: frozenset[type], lists: frozenset[type]) -> list[str]:
    """The lines that check ``v<index>``, as it arrived for the field *name*: ``field`` raises if it must."""
    value = f"v{index}"
    general = f"field(cls, {name!r}, {value})"
    tests = []
    if passing:
        tests.append(f"type({value}) not in passing{index}")
    if lists:
        tests.append(f"not (type({value}) is list and lists{index}.issuperset(map(type, {value})))")
    if not tests:
        return [f"    {general}"]
    return [f"    if {' and '.join(tests)}:", f"        {general}"]
