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
  ``TypeError`` that names the field.  Beside it, ``usual(obj, own_below)``,
  ``pack``'s one pass over a record whose values all pass by their type and
  whose tensors are all the usual kind; it gives up on anything else.
- on the receiver, a ``Builder``: a msgspec decoder typed from the
  annotations, which checks in C every field whose check a msgspec type
  makes exactly, then a loop over the other fields' checks, then the call
  of the class; and, where every other field takes only a tensor, a second
  decoder that leaves those fields' tensor specs for ``unpack``'s one pass.
  The receiver compiles nothing: what a peer sends never makes it run
  ``compile`` or ``exec``.

Neither holds a reference to the class, so that a class stays collectable:
the class is passed in.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

import msgspec
import torch

from metakit._wire_types import FieldChecks

_AS_IS: Final = frozenset({type(None), bool, int, float, str, bytes})
"""The types whose values msgpack writes as they are."""
_USUAL_ITEMS: Final = (float, int, str, bytes, bool, type(None))
"""The type that the items of a list usually have, the first of these its annotation takes: ``list[int]`` takes
``bool`` items too, as typing says, but holds ints."""


class Refused(TypeError):
    """A value that cannot travel; the message says what it is, the caller adds which field."""

    path = ""
    """Where the value lies inside the field's value, in msgspec's words (``[2]``, ``['key'].name``), added
    to as the error leaves each list, tuple, dict and record it lies in."""
    within: type | None = None
    """The innermost record inside the field's value that the value lies in, if any: where it can be left out."""


class Encoder(NamedTuple):
    """A record class's generated ``encode`` and ``usual``, and what must still hold for them to apply."""

    encode: Callable[[object, Any], list[Any]]
    usual: Callable[[object, int], Usual | None]
    """``pack``'s way for the usual record: see ``make_encoder``."""
    asdict: object
    """The class's own generated ``asdict_zerocopy``: ``encode`` reads what it returns, while the class holds it."""
    getstate: object
    """The class's ``__getstate__`` (Python's or dataclasses'), which sends what ``asdict_zerocopy`` says."""

    def serves(self, obj: Any) -> bool:
        """Whether ``encode`` and ``usual`` apply to *obj*: its class holds the methods they were made for still."""
        return (
            getattr(obj.asdict_zerocopy, "__func__", None) is self.asdict
            and getattr(type(obj), "__getstate__", None) is self.getstate
        )


class Usual(NamedTuple):
    """A usual record as the generated ``usual`` reads it: what ``pack`` sends, with no more checks to make."""

    values: list[Any]
    """The values the header holds, each tensor's as its usual spec."""
    parts: list[memoryview | bytes]
    """The shared buffer's bytes in order: each small tensor's, then zeros up to the next multiple of ``ALIGN``."""
    held: list[object]
    """The small tensors' storages, which keep their bytes alive until *parts* are joined: the storages, not the
    tensors, since a finalizer that runs meanwhile may give a tensor another storage (``set_``) and free the old."""
    nbytes: int
    """The size of the shared buffer."""
    own: list[tuple[torch.Tensor, int]]
    """The large tensors, each with its size: buffers 1 on."""


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
    usual: msgspec.msgpack.Decoder[tuple[Any, ...]] | None
    """Reads the usual record's values for ``unpack``'s way: typed as ``values``, but each field that takes a
    tensor, and perhaps ``None``, and nothing else (those at *tensors*) is read as its extension value, left to
    the caller to check and make.  ``None`` where any other field is not exact."""
    tensors: tuple[int, ...]
    """The positions of the fields that ``usual`` reads as extension values."""
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
        return self.call(cls, values)

    def call(self, cls: Any, values: tuple[Any, ...] | list[Any]) -> object:
        """Call *cls* with *values*, checked, one per name."""
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
    tensors = tuple(position for position, name, _, _ in checked if _tensor_alone(checks.passing(name)))
    usual = None
    if len(tensors) == len(checked):
        for position in tensors:
            takes_none = type(None) in checks.passing(names[position])
            exact[position] = msgspec.msgpack.Ext | None if takes_none else msgspec.msgpack.Ext
        usual = msgspec.msgpack.Decoder(tuple.__class_getitem__(tuple(exact)))
    return Builder(values, checked, names, usual, tensors, init)


def _tensor_alone(passing: frozenset[type]) -> bool:
    """Whether a field whose values of the types *passing* pass takes a tensor, perhaps ``None``, and no other."""
    return torch.Tensor in passing and passing <= {torch.Tensor, type(None)}


def _decodable(exact: object) -> object:
    """*exact*, if msgspec can decode it; else ``Any`` (a union msgspec does not take, such as two kinds of list)."""
    try:
        msgspec.msgpack.Decoder(exact)
    except TypeError:
        return Any
    return exact


def make_encoder(
    qualname: str,
    names: tuple[str, ...],
    checks: FieldChecks,
    asdict: object,
    getstate: object,
    *,
    usual: Mapping[str, object],
) -> Encoder:
    """Generate ``encode`` and ``usual`` for the class whose travelling fields are *names* (none of them
    ``_source.unwritable``).

    ``usual(obj, own_below)`` is ``pack``'s way for the usual record, whose
    every value passes by its type alone and whose tensors are each the
    usual tensor (``wire._Packer.tensor`` says which) of a storage of its own.
    It keeps no other account: it returns a ``Usual``, or ``None`` as soon
    as a value is not usual, and the general way then packs the record.  A
    tensor under *own_below* bytes goes in the shared buffer, a larger one in
    a buffer of its own.  *usual* holds the wire's tables that it reads.
    """
    namespace: dict[str, Any] = {
        **usual,
        "Tensor": torch.Tensor,
        "Refused": Refused,
        "Usual": Usual,
        "countOf": operator.countOf,
    }
    lines = ["def encode(obj, packer):", "    tensor = packer.tensor", "    field = packer.field"]
    usual_lines = ["def usual(obj, own_below):", "    parts = []", "    held = []", "    own = []", "    starts = []"]
    usual_lines.append("    end = 0")
    for index, name in enumerate(names):
        passing, lists = checks.passing(name), checks.lists(name)
        namespace[f"lists{index}"], namespace[f"as_is{index}"] = lists, passing & _AS_IS
        namespace[f"item{index}"] = next((kind for kind in _USUAL_ITEMS if kind in lists), None)  # _items_pass
        lines.append(f"    v{index} = obj.{name}")
        lines += _encode_value(index, name, passing, lists)
        usual_lines.append(f"    v{index} = obj.{name}")
        usual_lines += _usual_value(index, passing, lists)
    values = ", ".join(f"v{index}" for index in range(len(names)))
    lines.append(f"    return [{values}]")
    usual_lines += [
        # Two tensors of one storage may be views of each other: the general way sends such a tensor as a view.
        "    if len(starts) > 1 and len(set(starts)) != len(starts):",
        "        return None",
        f"    return Usual([{values}], parts, held, end, own)",
    ]
    source = "\n".join(lines) + "\n\n" + "\n".join(usual_lines) + "\n"
    exec(compile(source, f"<metakit.wire {qualname}>", "exec"), namespace)
    return Encoder(namespace["encode"], namespace["usual"], asdict, getstate)


def _usual_value(index: int, passing: frozenset[type], lists: frozenset[type]) -> list[str]:
    """The lines of ``usual`` that check ``v<index>`` and, for a tensor, place it: ``return None`` if not usual."""
    value = f"v{index}"
    lines = []
    branch = "if"
    if torch.Tensor in passing:
        lines += [
            f"    if type({value}) is Tensor:",
            # A complex tensor, the only kind that can carry the conjugate bit, goes the general way.
            f"        code = real_codes.get({value}.dtype)",
            f"        if (code is None or not {value}.is_cpu or {value}.layout is not strided or {value}.is_nested",
            f"                or {value}.requires_grad or not {value}.is_contiguous() or {value}.is_neg()):",
            "            return None",
            f"        shape = {value}.shape",  # before its size, as _Packer.tensor reads them
            f"        nbytes = {value}.nbytes",
            f"        address = {value}.data_ptr()",
            "        if not 0 < nbytes < U32 or end >= U32 or len(shape) > MAX_DIMS:",
            "            return None",
            f"        storage = {value}.untyped_storage()",
            "        starts.append(storage.data_ptr())",
            "        if nbytes < own_below:",
            "            pad = -nbytes % ALIGN",
            "            parts += (MEMORY[address : address + nbytes], PADS[pad])",
            "            held.append(storage)",
            f"            {value} = Ext(TENSOR, {_spec('0', 'end')})",
            "            end += nbytes + pad",
            "        else:",
            f"            own.append(({value}, nbytes))",
            f"            {value} = Ext(TENSOR, {_spec('len(own)', '0')})",
        ]
        branch = "elif"
    if lists and lists <= _AS_IS:
        lines += [
            f"    {branch} type({value}) is list:",
            f"        if not {_items_pass(index, lists)}:",
            "            return None",
        ]
        branch = "elif"
    lines += [f"    {branch} type({value}) not in as_is{index}:", "        return None"]
    return lines


def _items_pass(index: int, lists: frozenset[type]) -> str:
    """The expression of whether every item of the list ``v<index>`` is of a type in *lists* (``lists<index>``),
    the items' types read in C: first counted against the usual item type (``item<index>``), which is faster
    than a set's test, then, if some are of another type, by the set."""
    counted = f"countOf(map(type, v{index}), item{index}) == len(v{index})"
    return counted if len(lists) == 1 else f"({counted} or lists{index}.issuperset(map(type, v{index})))"


def _spec(buffer: str, offset: str) -> str:
    """The expression of the usual spec of the tensor of sizes ``shape`` at *offset* of *buffer*: one dimension,
    the most usual, is packed by a struct of its own, which need not unpack ``shape``."""
    return (
        f"one.pack(code, tag1, {buffer}, {offset}, shape[0]) if len(shape) == 1"
        f" else specs[len(shape)].pack(code, tags[len(shape)], {buffer}, {offset}, *shape)"
    )


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
            f"        if not {_items_pass(index, lists)}:",
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
