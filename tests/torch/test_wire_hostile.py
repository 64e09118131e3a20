"""What a hostile or broken peer can make a receiver do: raise ``WireError``, and nothing else.

Each test takes a header that ``wire.pack`` made, changes one thing in it the
way docs/wire-format.md lays it out (the buffer table, then a msgpack body
``[class, digest, names, values]`` whose tensors, tuples, records, dtypes,
devices and pickles are msgpack extensions), and checks what ``unpack``
does with it.  The last test does the same over two gloo ranks, with a
rank 0 that writes frames by hand and a rank 1 watched by an audit hook.
"""

from __future__ import annotations

import collections
import contextlib
import copyreg
import ctypes
import datetime
import enum
import gc
import importlib
import io
import itertools
import math
import os
import pickle
import re
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc
import types
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, make_dataclass
from multiprocessing import shared_memory
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Optional, Union

import msgspec
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from metakit import OMIT, ZeroCopy, ZeroCopyFields, wire, zerocopy_classes
from metakit.wire import WireError

if TYPE_CHECKING:
    from collections.abc import Sequence  # only for type checkers: the field below cannot resolve it

_TABLE_HEAD = struct.Struct("<3sBI")
_SPEC_HEAD = struct.Struct("<BBBBIQ")  # with the flag _WIDE: 64-bit offset, sizes and strides
_WIDE = 2
_STRIDES = 4  # the strides follow the sizes
_TENSOR, _TUPLE, _RECORD, _DTYPE, _DEVICE, _PICKLE, _RECORD_AGAIN = range(1, 8)


@dataclass
class Step(ZeroCopy):
    """A record with every kind of field the checks know."""

    num_tokens: int
    slot_mapping: torch.Tensor
    seq_lens: list[int] | None = None
    scale: float = 1.0
    name: str = "step"
    flags: tuple[bool, ...] = ()
    extras: dict[str, int] = field(default_factory=dict)
    data_type: torch.dtype = torch.float16
    device: torch.device | None = None
    mask: bool | torch.Tensor = False
    unresolved: Sequence[int] | None = None
    wrapper: object = field(default=None, metadata=OMIT)
    total: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.total = self.num_tokens * 2


@dataclass
class Outer(ZeroCopy):
    inner: Step
    label: str = ""


def _step() -> Step:
    return Step(4, torch.arange(4), [1, 3], 0.5, "prefill", (True,), {"a": 1}, torch.bfloat16, torch.device("cpu"))


# --- taking a header apart and putting it back ------------------------------


def _split(header: bytes) -> tuple[bytes, Any]:
    """The buffer table and the msgpack body of *header*, its extensions left as ``Ext``."""
    _, _, count = _TABLE_HEAD.unpack_from(header)
    start = _TABLE_HEAD.size + 9 * count
    return header[:start], msgspec.msgpack.decode(header[start:], ext_hook=msgspec.msgpack.Ext)


def _join(table: bytes, body: Any) -> bytes:
    return table + msgspec.msgpack.encode(body)


def _edited(record: object, edit: Callable[[list[Any]], object]) -> tuple[bytes, list[memoryview]]:
    """*record* packed, with its body changed by *edit* (in place, or by returning a new body)."""
    header, buffers = wire.pack(record)
    table, body = _split(header)
    body = edit(body) or body
    return _join(table, body), buffers


def _tensor_ext(  # noqa: PLR0917  # the fields of a spec, in its order
    code: int, flags: int, kind: int, reference: int, offset: int, shape: Sequence[int], strides: Sequence[int]
) -> msgspec.msgpack.Ext:
    spec = _SPEC_HEAD.pack(code, flags | _WIDE | _STRIDES, len(shape), kind, reference, offset) + struct.pack(
        f"<{2 * len(shape)}Q", *shape, *strides
    )
    return msgspec.msgpack.Ext(_TENSOR, spec)


def _value_index(name: str) -> int:
    return [f.name for f in Step.__dataclass_fields__.values() if not f.metadata][:100].index(name)


def _refused(header: bytes, buffers: Sequence[Any], match: str | None = None, **options: Any) -> WireError:
    with pytest.raises(WireError, match=match) as caught:
        wire.unpack(header, buffers, **options)
    return caught.value


# --- the body: class, names, values ------------------------------------------------


@dataclass(init=False)
class _BuiltinInit(ZeroCopy, dict):  # dict's __init__, whose signature inspect cannot read
    a: int = 0


@dataclass
class _BadSignature(ZeroCopy):
    a: int = 0


_BadSignature.__signature__ = "not a Signature"  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", [_BuiltinInit, _BadSignature], ids=["builtin-init", "bad-signature"])
def test_naming_a_class_whose_signature_cannot_be_read_compiles_and_raises_nothing_else(cls: type) -> None:
    # inspect.signature raises ValueError or TypeError for these, and parses a builtin's text
    # signature with compile(): a receiver never asks for one.  (Found by an outside tester.)
    header = _TABLE_HEAD.pack(b"MKW", wire.FORMAT, 0) + msgspec.msgpack.encode(
        [f"{__name__}:{cls.__qualname__}", zlib.crc32(b"a"), None, [1]]
    )
    events: list[str] = []
    watching = [True]
    sys.addaudithook(lambda event, _: events.append(event) if watching[0] and event.startswith(_WATCHED) else None)
    try:
        got = wire.unpack(header, [])
    except WireError:
        pass
    else:
        assert type(got) is cls
    finally:
        watching[0] = False
    assert events == []
    packed = wire.pack(cls())  # the sender reads what it can, and sends
    assert type(wire.unpack(*packed)) is cls


def test_a_record_that_is_not_edited_arrives_equal() -> None:
    header, buffers = wire.pack(_step())
    got = wire.unpack(header, buffers)
    assert (got.num_tokens, got.seq_lens, got.flags, got.extras, got.data_type) == (
        4,
        [1, 3],
        (True,),
        {"a": 1},
        torch.bfloat16,
    )
    assert got.total == 8, "init=False fields travel and are set after __init__"


def test_an_unknown_format_version_is_refused() -> None:
    header, buffers = wire.pack(_step())
    changed = header[:3] + bytes([wire.FORMAT + 1]) + header[4:]
    _refused(changed, buffers, f"a header of format {wire.FORMAT + 1} arrived")


def test_a_class_name_that_no_zerocopy_class_bears_is_refused_without_an_import() -> None:
    for name in ("os:system", "subprocess:Popen", "builtins:eval", "metakit_nonexistent_module:X", "no colon"):
        header, buffers = _edited(_step(), lambda body, name=name: body.__setitem__(0, name))
        _refused(header, buffers)
    assert "metakit_nonexistent_module" not in sys.modules


def test_a_digest_of_other_fields_is_refused() -> None:
    header, buffers = _edited(_step(), lambda body: body.__setitem__(1, body[1] ^ 1))
    _refused(header, buffers, "but the sender's differ")


def _skewed(omitted: str) -> type:
    """A class of the same name and fields each time, with *omitted* its OMIT field."""

    @dataclass
    class Skewed(ZeroCopy):
        first: int = field(default=0, metadata=OMIT if omitted == "first" else None)
        second: int = field(default=0, metadata=OMIT if omitted == "second" else None)
        third: int = 0

    return Skewed


def test_a_class_whose_other_fields_are_omit_is_refused() -> None:
    # A driver and workers that run different code: the same fields, OMIT on another one.  The
    # values would land in the wrong fields.  (Found by an outside tester.)
    sender = _skewed("second")
    header, buffers = wire.pack(sender(1, 2, 3))
    assert sender(1, 2, 3).asdict_zerocopy() == {"first": 1, "third": 3}
    del sender
    gc.collect()
    receiver = _skewed("first")
    assert _refused(header, buffers, "with OMIT on 'first', but the sender's differ")
    del receiver
    gc.collect()
    same = _skewed("second")
    assert wire.unpack(header, buffers) == same(1, 0, 3)


@pytest.mark.parametrize(
    ("positions", "match"),
    [
        ([0, 0, 1], "the field 'num_tokens' arrived twice"),
        ([0, 1, 99], "not a list of field numbers"),
        ([0, 1, -1], "not a list of field numbers"),
        ([0, 1, "__class__"], "not a list of field numbers"),
        ([0, 1, 11], "'wrapper' never travels"),
        ("all", "not a list of field numbers"),
    ],
)
def test_only_the_travelling_fields_each_once_can_arrive(positions: Any, match: str) -> None:
    def edit(body: list[Any]) -> None:
        body[2] = positions
        if isinstance(positions, list):
            body[3] = [*body[3][:2], None][: len(positions)]

    header, buffers = _edited(Step(4, torch.arange(4)), edit)
    _refused(header, buffers, match)


def test_a_value_count_that_differs_from_the_names_is_refused() -> None:
    header, buffers = _edited(_step(), lambda body: body[3].append(1))
    _refused(header, buffers, "fields travel, but")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("num_tokens", "four", "Expected `int`, got `str` - at `$.num_tokens`"),
        ("seq_lens", [1, "x"], "Expected `int`, got `str` - at `$.seq_lens[1]`"),
        ("scale", "x", "Expected `float`, got `str` - at `$.scale`"),
        ("extras", {"a": "b"}, "Expected `int`, got `str` - at `$.extras['a']`"),
        ("mask", 3, "Expected `bool | torch.Tensor`, got `int` - at `$.mask`"),
        ("slot_mapping", None, "Expected `torch.Tensor`, got `NoneType` - at `$.slot_mapping`"),
    ],
)
def test_values_are_checked_against_the_declared_types_on_both_sides(name: str, value: Any, expected: str) -> None:
    position = [f.name for f in Step.__dataclass_fields__.values()].index(name)

    def edit(body: list[Any]) -> None:
        body[3][position] = value

    header, buffers = _edited(_step(), edit)
    _refused(header, buffers, re.escape(f"Step: {expected}"))
    record = _step()
    object.__setattr__(record, name, value)
    with pytest.raises(TypeError, match=re.escape(f"Step cannot be sent: {expected}")):
        wire.pack(record)


@dataclass
class Counted(ZeroCopy):
    made: ClassVar[int] = 0
    step: int

    def __post_init__(self) -> None:
        type(self).made += 1


@dataclass
class HoldsCounted(ZeroCopy):
    first: Counted
    num_tokens: int
    last: Counted


def test_a_refused_value_makes_no_record_inside_the_others_twice() -> None:
    # The typed reading makes ``first`` before it meets the bad int; saying which field is bad must not make it
    # again.  ``last`` comes after the bad value, and is made at most once too.
    header, buffers = _edited(HoldsCounted(Counted(1), 2, Counted(3)), lambda body: body[3].__setitem__(1, "two"))
    Counted.made = 0
    _refused(header, buffers, re.escape("HoldsCounted: Expected `int`, got `str` - at `$.num_tokens`"))
    assert Counted.made == 1


@dataclass
class TensorThenCount(ZeroCopy):
    slot_mapping: torch.Tensor
    num_tokens: int
    names: list[str] = field(default_factory=list)


_TENSOR_0_AGAIN = msgspec.msgpack.Ext(_TENSOR, struct.pack("<BBBBII", 0, 0, 0, 2, 0, 0))  # kind 2, narrow
_RECORD_0_AGAIN = msgspec.msgpack.Ext(_RECORD_AGAIN, struct.pack("<I", 0))


@pytest.mark.parametrize(
    ("record", "position", "value", "expected"),
    [
        (
            HoldsCounted(Counted(1), 2, Counted(3)),
            1,
            _RECORD_0_AGAIN,
            "Expected `int`, got `{}.Counted` - at `$.num_tokens`",
        ),
        (
            TensorThenCount(torch.arange(3), 4),
            1,
            _TENSOR_0_AGAIN,
            "Expected `int`, got `torch.Tensor` - at `$.num_tokens`",
        ),
        (
            TensorThenCount(torch.arange(3), 4),
            2,
            [_TENSOR_0_AGAIN],
            "Expected `str`, got `torch.Tensor` - at `$.names[0]`",
        ),
    ],
)
def test_a_value_that_names_a_record_or_tensor_before_it_where_its_type_refuses_one_says_so(
    record: object, position: int, value: object, expected: str
) -> None:
    # The typed reading refused the value; the reading that says why started over and had forgotten the record
    # or tensor that an earlier value brought, so it said that one "did not arrive before it".  (Found by an
    # outside tester.)
    header, buffers = _edited(record, lambda body: body[3].__setitem__(position, value))
    Counted.made = 0
    _refused(header, buffers, re.escape(f"{type(record).__qualname__}: {expected.format(__name__)}"))
    assert Counted.made <= 1  # the record before the refused value is not made again


def test_a_record_where_its_type_refuses_one_is_made_once_and_those_before_it_not_again() -> None:
    # The reading that says why the value is refused handed out the records that the typed reading made, but
    # ran out at the record in the refused value, which it never made: it gave up, and the general way then
    # made every record again (found by an outside tester).
    def edit(body: list[Any]) -> None:
        body[3][1] = body[3][0]  # the first Counted, whole, in the int field

    header, buffers = _edited(HoldsCounted(Counted(1), 2, Counted(3)), edit)
    Counted.made = 0
    _refused(header, buffers, re.escape(f"HoldsCounted: Expected `int`, got `{__name__}.Counted` - at `$.num_tokens`"))
    assert Counted.made == 2  # the first, and the one in the int field


@dataclass
class Leaf(ZeroCopy):
    num_tokens: int


@dataclass
class Branch(ZeroCopy):
    first: Leaf
    second: Leaf
    many: list[Any] = field(default_factory=list)
    named: dict[str, Any] = field(default_factory=dict)
    pair: tuple[Any, ...] = ()


def _with_bad_leaf(record: Branch, edit: Callable[[list[Any]], None]) -> tuple[bytes, list[memoryview]]:
    """*record* packed, with one of the Leaf bodies inside its values changed by *edit*."""
    header, buffers = wire.pack(record)
    table, body = _split(header)
    edit(body[3])
    return _join(table, body), buffers


def _bad_leaf() -> msgspec.msgpack.Ext:
    body = msgspec.msgpack.decode(wire.pack(Leaf(1)).header[_TABLE_HEAD.size + 9 :])
    body[3][0] = "one"
    return msgspec.msgpack.Ext(_RECORD, msgspec.msgpack.encode(body))


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda values: values.__setitem__(1, _bad_leaf()), "$.second.num_tokens"),
        (lambda values: values.__setitem__(2, [1, _bad_leaf()]), "$.many[1].num_tokens"),
        (lambda values: values.__setitem__(3, {"k": _bad_leaf()}), "$.named['k'].num_tokens"),
        (
            lambda values: values.__setitem__(4, msgspec.msgpack.Ext(_TUPLE, msgspec.msgpack.encode([_bad_leaf()]))),
            "$.pair[0].num_tokens",
        ),
    ],
    ids=["a field", "in a list", "in a dict", "in a tuple"],
)
def test_a_bad_value_inside_a_record_inside_another_is_named_by_its_path_from_the_record_sent(
    edit: Callable[[list[Any]], None], path: str
) -> None:
    header, buffers = _with_bad_leaf(Branch(Leaf(1), Leaf(2)), edit)
    _refused(header, buffers, re.escape(f"Branch: Expected `int`, got `str` - at `{path}`") + "$")


@dataclass
class Trunk(ZeroCopy):
    branch: Branch


def test_the_path_runs_through_every_record_it_lies_in() -> None:
    header, buffers = wire.pack(Trunk(Branch(Leaf(1), Leaf(2))))
    table, body = _split(header)
    branch = msgspec.msgpack.decode(body[3][0].data, ext_hook=msgspec.msgpack.Ext)
    branch[3][1] = _bad_leaf()
    body[3][0] = msgspec.msgpack.Ext(_RECORD, msgspec.msgpack.encode(branch))
    expected = "Trunk: Expected `int`, got `str` - at `$.branch.second.num_tokens`"
    _refused(_join(table, body), buffers, re.escape(expected))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (Branch(Leaf(1), Leaf("two")), "Branch cannot be sent: Expected `int`, got `str` - at `$.second.num_tokens`"),
        (
            Branch(Leaf(1), Leaf(2), many=[1, Leaf(3), {"k": Leaf([4])}]),
            "Branch cannot be sent: Expected `int`, got `list` - at `$.many[2]['k'].num_tokens`",
        ),
        (
            Trunk(Branch(Leaf(1), Leaf(2), pair=(Leaf(None),))),
            "Trunk cannot be sent: Expected `int`, got `NoneType` - at `$.branch.pair[0].num_tokens`",
        ),
        (
            Branch(Leaf(1), Leaf(2), named={"a": [Branch(Leaf(1), Leaf(2), many=[object()])]}),
            "field 'named' of Branch cannot be sent ($.named['a'][0].many[0]): a value of type builtins.object",
        ),
        (
            Trunk(Branch(Leaf(1), Leaf(2), many=[1 << 64])),
            "field 'branch' of Trunk cannot be sent ($.branch.many[0]): the int 18446744073709551616 does not fit",
        ),
    ],
    ids=["a field", "in a list and a dict", "through two records", "not plain data", "an int beyond 64 bits"],
)
def test_the_sender_names_a_bad_value_inside_a_record_by_its_path_from_the_record_sent(
    record: object, message: str
) -> None:
    with pytest.raises(TypeError, match="^" + re.escape(message)):
        wire.pack(record)


@dataclass
class ImplicitOptional(ZeroCopy):
    """vllm-ascend's shape: a tensor field whose default is None."""

    query_start_loc: torch.Tensor = None  # type: ignore[assignment]
    seq_lens: torch.Tensor | None = None


def test_a_field_whose_default_is_none_accepts_none_as_engines_write_it() -> None:
    got = wire.unpack(*wire.pack(ImplicitOptional()))
    assert (got.query_start_loc, got.seq_lens) == (None, None)
    with pytest.raises(TypeError, match=re.escape("Expected `torch.Tensor | None`, got `int`")):
        wire.pack(ImplicitOptional(3))  # type: ignore[arg-type]


def test_a_field_whose_annotation_cannot_resolve_takes_any_plain_value() -> None:
    record = _step()
    record.unresolved = (1, "two", None)  # type: ignore[assignment]
    got = wire.unpack(*wire.pack(record))
    assert got.unresolved == (1, "two", None)


@pytest.mark.parametrize(
    "key",
    [b"bytes", 1.5, None, True, msgspec.msgpack.Ext(_DTYPE, b"float32"), msgspec.msgpack.Ext(_TUPLE, b"\x90")],
    ids=["bytes", "float", "NoneType", "bool", "torch.dtype", "tuple"],
)
def test_a_dict_key_that_is_not_a_str_or_an_int_is_refused(key: object, request: pytest.FixtureRequest) -> None:
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")

    def edit(body: list[Any]) -> None:
        # msgspec writes no such map, and some such keys are not hashable: the bytes, by hand.
        body[3][position] = msgspec.Raw(b"\x81" + msgspec.msgpack.encode(key) + b"\x01")

    header, buffers = _edited(_step(), edit)
    kind = request.node.callspec.id
    _refused(header, buffers, rf"^Step: a dict key of type `{kind}` in `\$\.unresolved` is not plain data \(keys are")
    # Deeper, its place is named, a long key cut short.
    long = "k" * 1000

    def deeper(body: list[Any]) -> None:
        inner = b"\x81" + msgspec.msgpack.encode(key) + b"\x01"
        body[3][position] = msgspec.Raw(b"\x92\x01\x81" + msgspec.msgpack.encode(long) + inner)

    header, buffers = _edited(_step(), deeper)
    error = _refused(header, buffers, r"in `\$\.unresolved\[1\]\['k{59}\.\.\.\]` is not plain data")
    assert len(str(error)) < 200


@pytest.mark.parametrize(
    ("extension", "match"),
    [
        (msgspec.msgpack.Ext(99, b""), "a value of an unknown kind"),
        (msgspec.msgpack.Ext(_DTYPE, b"qint8x"), "a torch.dtype arrived that this torch does not have"),
        (msgspec.msgpack.Ext(_DEVICE, b"cuda:0; import os"), "a torch.device arrived that is not one"),
        (msgspec.msgpack.Ext(_DEVICE, b"warp:1"), "a torch.device arrived that this torch does not know"),
        # Indexes past torch's wrap: "cuda:256" read as cuda:0, "cuda:255" as cuda, "cpu:128" as cpu:-128.
        (msgspec.msgpack.Ext(_DEVICE, b"cuda:256"), "a torch.device arrived whose index this torch cannot hold"),
        (msgspec.msgpack.Ext(_DEVICE, b"cuda:255"), "a torch.device arrived whose index this torch cannot hold"),
        (msgspec.msgpack.Ext(_DEVICE, b"cpu:128"), "a torch.device arrived whose index this torch cannot hold"),
        (msgspec.msgpack.Ext(_TUPLE, b"\xc1"), "the header cannot be read"),
        (msgspec.msgpack.Ext(_TUPLE, b"\x01"), "a tuple arrived that is not an array"),
        (msgspec.msgpack.Ext(_RECORD, b"\x93\x01\x02\x03"), "not \\[class, digest, names, values\\]"),
        (msgspec.msgpack.Ext(_RECORD_AGAIN, b"\x00\x00\x00\x00"), "did not arrive before it"),
        (msgspec.msgpack.Ext(_RECORD_AGAIN, b"\x00"), "its number is not 4 bytes long \\(1\\)"),
    ],
)
def test_a_malformed_extension_is_refused_naming_its_field(extension: msgspec.msgpack.Ext, match: str) -> None:
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")

    def edit(body: list[Any]) -> None:
        body[3][position] = [extension]

    header, buffers = _edited(_step(), edit)
    error = _refused(header, buffers, match)
    assert str(error).startswith("Step: ")
    assert str(error).endswith(" - at `$.unresolved`")


def test_a_malformed_extension_inside_a_record_is_named_by_its_path_from_the_record_sent() -> None:
    position = [f.name for f in Step.__dataclass_fields__.values()].index("data_type")

    def edit(body: list[Any]) -> None:
        inner = msgspec.msgpack.decode(body[3][0].data, ext_hook=msgspec.msgpack.Ext)
        inner[3][position] = msgspec.msgpack.Ext(_DTYPE, b"float8_from_a_newer_torch")
        body[3][0] = msgspec.msgpack.Ext(_RECORD, msgspec.msgpack.encode(inner))

    header, buffers = _edited(Outer(_step(), "outer"), edit)
    _refused(
        header, buffers, r"^Outer: a torch.dtype arrived that this torch does not have: .* - at `\$\.inner\.data_type`$"
    )


def test_deep_nesting_is_refused_not_a_crash() -> None:
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")
    deep = b"\x00"
    for _ in range(5000):  # each level one more tuple: the payload of an extension is a header of its own
        payload = b"\x91" + deep
        deep = (
            b"\xc7" + bytes([len(payload)]) + bytes([_TUPLE]) + payload
            if len(payload) < 256
            else (b"\xc8" + struct.pack(">H", len(payload)) + bytes([_TUPLE]) + payload)
        )
    deep = msgspec.Raw(deep)

    def edit(body: list[Any]) -> None:
        body[3][position] = deep

    header, buffers = _edited(_step(), edit)
    with pytest.raises(WireError):
        wire.unpack(header, buffers)
    header, buffers = wire.pack(_step())
    table, _ = _split(header)
    _refused(table + b"\x91" * 100_000 + b"\xc0", buffers, "a record's body is not")  # an array of one array...
    class_name, digest = msgspec.msgpack.decode(header[len(table) :])[:2]
    values = b"\x91" * 100_000 + b"\xc0"  # values nested deeper than any decoder recurses
    body = msgspec.msgpack.encode([class_name, digest, None]) + values
    _refused(table + b"\x94" + body[1:], buffers, "the header cannot be read")


def test_a_device_whose_index_torch_cannot_read_back_is_refused_on_the_sender() -> None:
    step = _step()
    step.device = torch.device("cuda:128")  # torch keeps the index as 65408, and writes it as "cuda:-128"
    with pytest.raises(TypeError, match=re.escape("field 'device' of Step cannot be sent ($.device): the torch")):
        wire.pack(step)
    step.device = torch.device("cuda:127")
    assert wire.unpack(*wire.pack(step)).device == torch.device("cuda:127")  # type: ignore[attr-defined]


@dataclass
class SetLater(ZeroCopy):
    size: int
    doubled: int = field(init=False)  # no default: only __post_init__ or the wire sets it

    def __post_init__(self) -> None:
        self.doubled = 2 * self.size


@dataclass
class NeverSet(ZeroCopy):
    size: int
    doubled: int = field(init=False)


@dataclass
class OmittedNeverSet(ZeroCopy):
    size: int
    kernel: object = field(init=False, metadata=OMIT)


def test_an_init_false_field_without_a_default_arrives_or_is_set_by_post_init_or_the_record_is_refused() -> None:
    never = NeverSet(3)
    never.doubled = 6
    assert wire.unpack(*wire.pack(never)) == never

    def without_doubled(body: list[Any]) -> None:
        body[2], body[3] = [0], body[3][:1]  # a record with no value for the field, as a peer would send it

    header, buffers = _edited(never, without_doubled)
    _refused(header, buffers, "the field 'doubled' \\(init=False, with no default\\) did not arrive, and NeverSet")
    # The sender refuses to send such a record in the first place.
    # (Found by an outside tester: it sent what every receiver refuses.)
    with pytest.raises(TypeError, match=re.escape("NeverSet cannot be sent: its field 'doubled' (init=False, with no")):
        wire.pack(never, skip_fields={"doubled"})
    with pytest.raises(TypeError, match=re.escape("OmittedNeverSet cannot be sent: its field 'kernel' (init=False")):
        wire.pack(OmittedNeverSet(3))
    with pytest.raises(TypeError, match=re.escape("NeverSet cannot be sent: its field 'doubled' (init=False, with")):
        wire.pack(NeverSet(3))  # never set: an AttributeError from reading it, before
    later = SetLater(3)
    received = wire.unpack(*wire.pack(later, skip_fields={"doubled"}))
    assert (received.size, received.doubled) == (3, 6)  # type: ignore[attr-defined]


@dataclass
class DropsItsWrapper(ZeroCopy):
    size: int = 0
    wrapper: object = field(init=False)  # set later, never sent: the override drops it

    def __post_init__(self) -> None:
        pass

    def asdict_zerocopy(self, skip_fields: Any = None) -> dict[str, Any]:
        return super().asdict_zerocopy({"wrapper", *(skip_fields or ())})


@dataclass
class AddsAFieldSetLater(DropsItsWrapper):
    extra: int = field(init=False)  # travels


def test_a_record_refused_for_a_field_never_set_is_refused_for_the_one_it_could_not_read() -> None:
    # (An outside tester: the message named the first field not set, which the override leaves out.)
    record = AddsAFieldSetLater(1)
    with pytest.raises(TypeError, match=re.escape("its field 'extra' (init=False, with no default) was never set")):
        wire.pack(record)
    record.extra = 5
    wire.pack(record)  # sent: the field not set is one the override leaves out


@dataclass(init=False)
class TakesArgs(ZeroCopy):
    size: int
    name: str

    def __init__(self, *args: Any) -> None:
        self.size, self.name = args


@dataclass(init=False)
class PositionalOnly(ZeroCopy):
    size: int
    name: str = ""

    def __init__(self, size: int, /, name: str = "") -> None:
        self.size, self.name = size, name


@dataclass(init=False)
class TakesKeywords(ZeroCopy):
    size: int

    def __init__(self, **values: Any) -> None:
        self.size = values["size"]


def test_a_class_whose_init_cannot_take_its_fields_by_keyword_is_refused_on_the_sender() -> None:
    # The receiver calls __init__ by keyword (or, with the usual fields, by position where
    # __init__ takes them in order): these arrived only to be refused there.
    with pytest.raises(TypeError, match=re.escape("TakesArgs.__init__ takes no keyword 'size', 'name'")):
        wire.pack(TakesArgs(1, "a"))
    with pytest.raises(TypeError, match=re.escape("PositionalOnly.__init__ takes no keyword 'size'")):
        wire.pack(PositionalOnly(1, "a"), skip_fields={"name"})
    assert wire.unpack(*wire.pack(PositionalOnly(1, "a"))).name == "a"  # type: ignore[attr-defined]  # in order
    assert wire.unpack(*wire.pack(TakesKeywords(size=1))).size == 1  # type: ignore[attr-defined]


class _Watched:
    """A module-level object whose attributes, read the usual way, run code."""

    read: ClassVar[list[str]] = []

    def __getattribute__(self, name: str) -> Any:
        _Watched.read.append(name)
        return object.__getattribute__(self, name)


watched = _Watched()


@dataclass
class DottedThroughAnObject(ZeroCopy):
    value: watched.Thing  # type: ignore[name-defined]  # text: read by the parser, never evaluated


def test_a_dotted_name_in_an_annotation_goes_through_modules_and_classes_only() -> None:
    # It read each part through getattr, so an object's __getattribute__ ran on the receiver.
    header = _as(DottedThroughAnObject, "any value")
    _Watched.read.clear()  # pytest's collection looked at it
    assert wire.unpack(header, [bytearray(0)]) == DottedThroughAnObject("any value")
    assert _Watched.read == []


@dataclass
class Anything(ZeroCopy):
    value: Any


Json = int | str | list["Json"] | dict[str, "Json"]  # a recursive alias, as JSON is often typed
Loop = int | list["Unguarded"]
Unguarded = int | float | str | list["Loop"] | Optional["Unguarded"]  # met again outside a container too


Odd = list["Odd"] | list["Even"] | None  # two lists in each union: each level tried both
Even = list["Odd"] | list["Even"] | int


@dataclass
class Alternatives(ZeroCopy):
    value: Odd = None


@dataclass
class JsonFirstPacked(ZeroCopy):
    value: Json


@dataclass
class JsonFirstReceived(ZeroCopy):
    value: Json


@dataclass
class JsonFirstReceivedDeeper(ZeroCopy):
    value: Json


@dataclass
class Alternating(ZeroCopy):
    value: Loop


# A str is a sequence of strs of one character, as in typing: each of these takes a str.
Nested = Union[int, "collections.abc.Sequence[Nested]"]


@dataclass
class NestedStrings(ZeroCopy):
    value: Nested = 0


@dataclass
class DeepStrings(ZeroCopy):
    value: collections.abc.Sequence[collections.abc.Sequence[collections.abc.Sequence[str]]] = ()


@dataclass
class Letters(ZeroCopy):
    value: collections.abc.Iterable[Literal["a", "b"]] = ()


@dataclass
class Bits(ZeroCopy):
    value: collections.abc.Sequence[Literal[0, 1]] = ()


def _as(cls: type, value: Any) -> bytes:
    """A header of a record of *cls*, whose one field is ``value``, written by hand: *cls* is never packed."""
    table, body = _split(wire.pack(Anything(None))[0])
    return _join(table, [f"{__name__}:{cls.__qualname__}", body[1], None, [value]])


def _run_here(program: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run *program* (indented as in a test) in a fresh interpreter here, where it can import this module."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parent,
        timeout=timeout,
    )


def _at_depth(levels: int, call: Callable[[], Any]) -> Any:
    return call() if levels == 0 else _at_depth(levels - 1, call)


def test_a_recursive_alias_is_checked_as_deep_as_the_value_goes_on_both_sides_wherever_it_is_first_read() -> None:
    # Its annotation was read until the stack ran out, each branch again: hours for
    # Json, and a check or none depending on how deep the stack was when first read.
    good = {"a": [1, "s", {"b": [[[[2]]]]}]}
    bad = {"a": [1, {"b": [[1.5]]}]}
    expected = "Expected `int | str | list | dict`, got `float` - at `$.value['a'][1]['b'][0][0]`"
    with pytest.raises(TypeError, match=re.escape(expected)):
        _at_depth(3, lambda: wire.pack(JsonFirstPacked(bad)))
    assert wire.unpack(*wire.pack(JsonFirstPacked(good))) == JsonFirstPacked(good)
    for levels, cls in [(0, JsonFirstReceived), (5, JsonFirstReceivedDeeper)]:
        with pytest.raises(WireError, match=re.escape(expected)):
            _at_depth(levels, lambda cls=cls: wire.unpack(_as(cls, bad), [bytearray(0)]))
        assert wire.unpack(_as(cls, good), [bytearray(0)]) == cls(good)
    assert wire.unpack(*wire.pack(Alternating([[[1, 2.5], 3], None]))) == Alternating([[[1, 2.5], 3], None])
    with pytest.raises(TypeError, match=re.escape("Expected `int | list`, got `float` - at `$.value[0][0]`")):
        wire.pack(Alternating([[1.5]]))  # Loop's items are Unguarded, whose lists hold Loop
    with pytest.raises(TypeError, match=re.escape("Expected `int | float | str | list | Unguarded | None`, got")):
        wire.pack(Alternating([b"bytes"]))  # each option named once, though unions hold unions


@pytest.mark.parametrize("allow_pickle", [frozenset(), True], ids=["no globals", "any"])
@pytest.mark.parametrize("names", [None, [0]], ids=["names implied", "names given"])
def test_a_pickled_value_that_holds_itself_under_a_recursive_alias_is_a_wire_error(
    allow_pickle: bool | frozenset[str], names: list[int] | None
) -> None:
    # The check of a pickled value, which no depth limit of the format bounds, raised a raw
    # RecursionError; the same with names implied blamed JsonFirstReceived(...) (an outside tester).
    cycle: list[object] = []
    cycle.append(cycle)
    # Lists nested deeper than the stack goes, which pickle.dumps cannot write: each new list is
    # appended to the one before, kept in the memo (PROTO 4, EMPTY_LIST, MEMOIZE, APPEND, LONG_BINGET).
    deep = bytearray(b"\x80\x04]\x94")
    levels = sys.getrecursionlimit() * 2
    for level in range(1, levels + 1):
        deep += b"]\x94a0j" + struct.pack("<I", level)
    deep += b"0j" + struct.pack("<I", 0) + b"."
    for data in (pickle.dumps(cycle), bytes(deep)):
        table, body = _split(wire.pack(Anything(None))[0])
        pickled = msgspec.msgpack.Ext(_PICKLE, data)
        header = _join(table, [f"{__name__}:JsonFirstReceived", body[1], names, [pickled]])
        message = "JsonFirstReceived: the value at `$.value` is nested too deep to check, or holds itself"
        _refused(header, [bytearray(0)], re.escape(message), allow_pickle=allow_pickle)
    shallow = msgspec.msgpack.Ext(_PICKLE, pickle.dumps([[1, "a"], {"b": [2]}]))
    header = _join(table, [f"{__name__}:JsonFirstReceived", body[1], names, [shallow]])
    assert wire.unpack(header, [bytearray(0)], allow_pickle=allow_pickle).value == [[1, "a"], {"b": [2]}]


def test_a_recursive_alias_with_two_lists_in_a_union_is_checked_in_time_linear_in_the_depth() -> None:
    # Each level tried both lists, to the bottom: a header of 102 bytes, 64 lists
    # deep, took longer than anyone would wait, on both sides.
    program = f"""
        from {__name__} import Alternatives, _as
        from metakit import wire
        value = "not an int"
        for _ in range(wire.MAX_DEPTH):
            value = [value]
        try:
            wire.pack(Alternatives(value))
        except TypeError as error:
            print("sender:", error)
        try:
            wire.unpack(_as(Alternatives, value), [bytearray(0)])
        except wire.WireError as error:
            print("receiver:", error)
    """
    done = _run_here(program, timeout=60)
    path = "$.value" + "[0]" * wire.MAX_DEPTH
    assert done.stdout == (
        f"sender: Alternatives cannot be sent: Expected `list | None`, got `str` - at `{path}`\n"
        f"receiver: Alternatives: Expected `list | None`, got `str` - at `{path}`\n"
    ), done.stderr[-2000:]


def test_a_long_str_is_checked_as_a_sequence_by_its_distinct_characters() -> None:
    # Checked one character at a time, a str of 4 million took over a minute, on both sides.
    program = f"""
        from {__name__} import DeepStrings, Letters, NestedStrings, _as
        from metakit import wire
        text = "ab" * 2_000_000
        for cls in (NestedStrings, DeepStrings, Letters):
            received, sent = wire.unpack(_as(cls, text), [bytearray(0)]), wire.unpack(*wire.pack(cls(text)))
            print(received.value == text, sent.value == text)
        try:
            wire.unpack(_as(Letters, text + "c"), [bytearray(0)])
        except wire.WireError as error:
            print("receiver:", error)
        try:
            wire.pack(Letters(text + "c"))
        except TypeError as error:
            print("sender:", error)
    """
    done = _run_here(program, timeout=90)  # one character at a time took over a minute on each side
    assert done.stdout == (
        "True True\n" * 3
        + "receiver: Letters: Expected `Literal['a', 'b']`, got `'c'` - at `$.value[4000000]`\n"
        + "sender: Letters cannot be sent: Expected `Literal['a', 'b']`, got `'c'` - at `$.value[4000000]`\n"
    ), done.stderr[-2000:]


def test_long_bytes_are_checked_as_a_sequence_by_their_distinct_values() -> None:
    # Checked one byte at a time, 1 MB took 2 s on each side (an outside tester), as a str once did.
    data = b"\x00\x01" * 500_000
    started = time.perf_counter()
    assert wire.unpack(_as(Bits, data), [bytearray(0)]).value == data
    assert wire.unpack(*wire.pack(Bits(data))).value == data
    with pytest.raises(WireError, match=r"Expected `Literal\[0, 1\]`, got `2` - at `\$\.value\[1000000\]`"):
        wire.unpack(_as(Bits, data + b"\x02"), [bytearray(0)])
    with pytest.raises(TypeError, match=r"Expected `Literal\[0, 1\]`, got `2` - at `\$\.value\[1000000\]`"):
        wire.pack(Bits(data + b"\x02"))
    assert time.perf_counter() - started < 4.0  # one byte at a time took 2 s for each of the four


def test_a_str_beyond_latin_1_matches_a_recursive_alias_of_sequences() -> None:
    # Each time a str is read, its characters beyond latin-1 are new objects: told apart by identity, a
    # character met again inside its own check was not seen as met again, and the check recurred too deep.
    text = "".join(chr(0x10000 + index) for index in range(100))
    assert wire.unpack(_as(NestedStrings, text), [bytearray(0)]).value == text
    assert wire.unpack(*wire.pack(NestedStrings(text))).value == text


def test_a_value_that_holds_itself_in_a_recursive_alias_is_refused_as_too_deep() -> None:
    itself: list[Any] = []
    itself.append(itself)
    with pytest.raises(TypeError, match=r"field 'value' of JsonFirstPacked cannot be sent \(\$\.value\): it is nested"):
        wire.pack(JsonFirstPacked(itself))


def _nested(levels: int, kind: str) -> Any:
    """A value *levels* deep, as it travels: lists, tuples (extension 2) or records (extension 3)."""
    class_name, digest = _split(wire.pack(Anything(None))[0])[1][:2]
    value: Any = None
    for _ in range(levels):
        if kind == "list":
            value = [value]
        elif kind == "tuple":
            value = msgspec.msgpack.Ext(_TUPLE, msgspec.msgpack.encode([value]))
        else:
            value = msgspec.msgpack.Ext(_RECORD, msgspec.msgpack.encode([class_name, digest, None, [value]]))
    return value


@dataclass
class OneInt(ZeroCopy):
    value: int = 0


@pytest.mark.parametrize("wrong", ["value", "class"])
def test_a_record_refused_deep_inside_others_costs_no_copy_of_it_per_level(wrong: str) -> None:
    # To say where a refused record lay, each record around it kept a copy of its bytes, held until the
    # error was gone: a header of 2 MB refused 60 records deep held 60 copies of it.
    class_name, digest = _split(wire.pack(OneInt())[0])[1][:2]
    if wrong == "class":
        class_name = f"{__name__}:NoSuchClass"
    value: Any = msgspec.msgpack.Ext(_RECORD, msgspec.msgpack.encode([class_name, digest, None, [bytes(2 << 20)]]))
    around, around_digest = _split(wire.pack(Anything(None))[0])[1][:2]
    for _ in range(59):
        value = msgspec.msgpack.Ext(_RECORD, msgspec.msgpack.encode([around, around_digest, None, [value]]))
    header, _ = _edited(Anything(None), lambda body: body[3].__setitem__(0, value))
    tracemalloc.start()
    try:
        error = _refused(header, [bytearray(0)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(header), (peak, len(header))
    if wrong == "value":
        assert str(error).startswith(f"Anything: Expected `int`, got `bytes` - at `$.value{'.value' * 60}`")
    else:
        assert "NoSuchClass" in str(error)


@pytest.mark.parametrize("kind", ["list", "tuple", "record"])
def test_a_receiver_takes_what_a_sender_may_send_and_nothing_nested_deeper(kind: str) -> None:
    def edited(levels: int) -> bytes:
        header, _ = _edited(Anything(None), lambda body: body[3].__setitem__(0, _nested(levels, kind)))
        return header

    assert type(wire.unpack(edited(wire.MAX_DEPTH), [bytearray(0)])) is Anything
    message = "64 levels deep" if kind == "list" else "more than 64 tuples and records"
    _refused(edited(wire.MAX_DEPTH + 1), [bytearray(0)], message)


def test_a_deep_header_cannot_crash_a_thread_with_a_small_stack() -> None:
    # Nesting of metakit's own (tuples, records, the walk of what arrived) stops at
    # MAX_DEPTH; a 256 KiB thread died at 200 nested tuples, or 600 arrays, before.
    program = f"""
        import threading, msgspec
        from {__name__} import Anything, _edited, _nested
        from metakit import wire
        outcomes = []
        def receive(kind, levels):
            header, _ = _edited(Anything(None), lambda body: body[3].__setitem__(0, _nested(levels, kind)))
            try:
                wire.unpack(header, [bytearray(0)])
            except wire.WireError:
                outcomes.append("refused")
        threading.stack_size(256 << 10)
        for kind, levels in [("tuple", 200), ("record", 200), ("list", 600)]:
            thread = threading.Thread(target=receive, args=(kind, levels))
            thread.start()
            thread.join()
        print(outcomes)
    """
    done = _run_here(program, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, str(["refused"] * 3)), done.stderr[-2000:]


# --- pickle: refused unless the receiver opts in ------------------------------


class _RunsCode:
    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("a pickle ran code on the receiver",))


def _with_pickle(value: object) -> tuple[bytes, list[memoryview]]:
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")

    def edit(body: list[Any]) -> None:
        body[3][position] = msgspec.msgpack.Ext(_PICKLE, pickle.dumps(value))

    return _edited(_step(), edit)


def test_a_long_chain_of_a_listed_globals_instances_is_read_in_linear_time() -> None:
    # Each link named OrderedDict again, and each in-place opcode looked through every global named
    # so far: 12 s for 20,000 links with allow_pickle={"collections.OrderedDict"} (an outside tester).
    # OrderedDict(k=OrderedDict(k=...)), deeper than pickle.dumps goes: every link made by GLOBAL,
    # EMPTY_TUPLE and REDUCE, then each given the next by a SETITEM, innermost first.
    link = b"ccollections\nOrderedDict\n)R"
    links = 20_000
    data = b"\x80\x02" + link + (b"X\x01\x00\x00\x00k" + link) * links + b"s" * links + b"."
    header, buffers = _with_pickled_bytes(data)  # Step.unresolved: a name that does not resolve
    started = time.perf_counter()
    got = wire.unpack(header, buffers, allow_pickle={"collections.OrderedDict"})
    assert time.perf_counter() - started < 2.0  # 20 times what a linear read takes here
    assert type(got.unresolved) is collections.OrderedDict
    del got  # freeing 20,000 links is iterative in CPython (the trashcan)


def test_a_name_that_many_live_classes_share_is_refused_in_time_linear_in_their_number() -> None:
    # Each class was compared with every other to find the old class of a slots=True pair: a 50-byte header
    # naming a factory's class took 1.9 s with 2,000 of them alive, 8.5 s with 4,000 (an outside tester).
    def factory() -> type:
        @dataclass
        class Many(ZeroCopy):
            v: Any = None

        return Many

    alive = [factory() for _ in range(1_500)]
    header, buffers = wire.pack(alive[0]())
    started = time.perf_counter()
    with pytest.raises(WireError, match="1500 dataclasses made by ZeroCopyFields are named"):
        wire.unpack(header, buffers)
    assert time.perf_counter() - started < 0.5  # 50 times what a linear search takes here


def test_a_pickle_is_refused_unless_the_receiver_opts_in(capsys: pytest.CaptureFixture[str]) -> None:
    header, buffers = _with_pickle(_RunsCode())
    _refused(header, buffers, "this receiver does not read pickles")
    _refused(header, buffers, "refers to builtins.print, which allow_pickle does not list", allow_pickle={"x.y"})
    assert "ran code" not in capsys.readouterr().out
    wire.unpack(header, buffers, allow_pickle=True)  # trusting the peer: it did run code
    assert "ran code" in capsys.readouterr().out


def test_values_that_are_not_plain_data_travel_pickled_only_when_both_sides_allow_it() -> None:
    record = _step()
    record.unresolved = [datetime.date(2026, 1, 2)]  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"is not plain data .*allow_pickle=True"):
        wire.pack(record)
    header, buffers = wire.pack(record, allow_pickle=True)
    _refused(header, buffers, "does not read pickles")
    assert wire.unpack(header, buffers, allow_pickle={"datetime.date"}).unresolved == [datetime.date(2026, 1, 2)]
    # A pickled datetime was taken for a msgpack timestamp, which is not plain data, and refused.
    moment = datetime.datetime(2026, 1, 2, 3, 4, 5)
    record.unresolved = [moment, [moment]]  # type: ignore[list-item]
    header, buffers = wire.pack(record, allow_pickle=True)
    assert wire.unpack(header, buffers, allow_pickle={"datetime.datetime"}).unresolved == [moment, [moment]]


def test_a_class_name_that_matches_nothing_runs_no_metaclass_code_of_the_live_classes() -> None:
    # Each live record class's dict was read through its metaclass's __getattribute__ (an outside tester).
    read: list[str] = []

    class Watching(ZeroCopyFields):
        def __getattribute__(cls, name: str) -> Any:
            read.append(name)
            return super().__getattribute__(name)

    @dataclass
    class Watched(metaclass=Watching):
        a: int = 0

    header, buffers = wire.pack(_step())
    table, body = _split(header)
    body[0] = "nosuch:Thing"
    read.clear()
    _refused(_join(table, body), buffers, "no dataclass made by ZeroCopyFields named nosuch.Thing")
    assert read == []
    assert Watched in zerocopy_classes()


_made: list[int] = []


@dataclass
class _Counted(ZeroCopy):
    number: int = 0

    def __post_init__(self) -> None:
        _made.append(self.number)


@dataclass
class _Around(ZeroCopy):
    counted: list[_Counted]
    later: _Counted | None = None
    fails: Any = None


@pytest.mark.parametrize("bad", ["a reference to a record that never arrived", "a record whose __init__ raises"])
def test_a_record_inside_a_value_is_made_once_when_a_later_value_fails(bad: str) -> None:
    # The reading that names the failing field read the values again, and made each record in them again
    # (found by an outside tester: their __post_init__ ran twice).
    def edit(body: list[Any]) -> None:
        if bad.startswith("a reference"):
            body[3][1] = msgspec.msgpack.Ext(_RECORD_AGAIN, struct.pack("<I", 99))  # "record 99 again"
        else:
            _, inner = _split(wire.pack(_Counted(-1)).header)
            body[3][2] = msgspec.msgpack.Ext(_RECORD, msgspec.msgpack.encode(inner))

    record = _Around([_Counted(1), _Counted(2), _Counted(3)])
    header, buffers = _edited(record, edit)
    _made.clear()
    original = _Counted.__post_init__

    def refusing(self: _Counted) -> None:
        original(self)
        if self.number < 0:
            raise ValueError("no negative numbers")

    _Counted.__post_init__ = refusing  # type: ignore[method-assign]
    try:
        error = _refused(header, buffers)
    finally:
        _Counted.__post_init__ = original  # type: ignore[method-assign]
    assert "at `$." in str(error)  # the failing field is named
    made_once = [1, 2, 3] if bad.startswith("a reference") else [1, 2, 3, -1]
    assert _made == made_once


class _TensorHolder:
    """A value no annotation knows, holding tensors: it travels pickled."""

    def __init__(self, whole: torch.Tensor, part: torch.Tensor) -> None:
        self.whole = whole
        self.part = part


@dataclass
class _Carrier(ZeroCopy):
    tensor: torch.Tensor
    value: Any = None


def test_a_tensor_in_a_pickled_value_travels_as_the_records_tensors_do() -> None:
    # torch pickles a tensor through torch.storage._load_from_bytes, which unpickles its bytes with no
    # list at all: an allow-list that let a tensor through let any global through (found by an outside tester).
    tensor = torch.arange(4)
    header, buffers = wire.pack(_Carrier(tensor, _TensorHolder(tensor, tensor[1:3])), allow_pickle=True)
    got = wire.unpack(header, buffers, allow_pickle={f"{__name__}._TensorHolder"})
    holder = got.value
    assert holder.whole is got.tensor  # one tensor, sent once
    assert holder.part.tolist() == [1, 2]
    holder.part[0] = 100  # a view of the tensor it was a view of, as sent
    assert got.tensor.tolist() == [0, 100, 2, 3]
    start = ctypes.addressof(ctypes.c_char.from_buffer(buffers[0]))
    assert start <= holder.whole.data_ptr() < start + len(buffers[0])  # in the buffer given
    assert wire.unpack(header, buffers, allow_pickle=True).value.whole.tolist() == [0, 100, 2, 3]  # the same bytes


@pytest.mark.parametrize("name", ["torch.storage._load_from_bytes", "pickle.loads", "torch.load"])
def test_allow_pickle_refuses_a_name_that_unpickles_with_no_list(name: str) -> None:
    header, buffers = wire.pack(_step())
    with pytest.raises(ValueError, match=rf"allow_pickle lists {re.escape(name)}, which unpickles bytes with no list"):
        wire.unpack(header, buffers, allow_pickle={f"{__name__}._TensorHolder", name})


def test_torchs_own_pickle_of_a_tensor_is_refused_by_an_allow_list(capsys: pytest.CaptureFixture[str]) -> None:
    # A hostile pickle hidden in the bytes that torch.storage._load_from_bytes would load.
    hidden = pickle.dumps(_RunsCode())
    data = (
        b"\x80\x04\x8c\rtorch.storage\x8c\x10_load_from_bytes\x93B"
        + struct.pack("<I", len(hidden))
        + hidden
        + b"\x85R."
    )
    header, buffers = _with_pickled_bytes(data)
    message = "refers to torch.storage._load_from_bytes, which allow_pickle does not list"
    _refused(header, buffers, message, allow_pickle={"x.y"})
    assert "ran code" not in capsys.readouterr().out


def _pickle_calling(module: str, qualname: str, argument: bytes) -> bytes:
    """A pickle that calls the global *module*.*qualname* with the bytes *argument*."""
    text = [pickle.SHORT_BINUNICODE + bytes([len(part)]) + part.encode() for part in (module, qualname)]
    called = pickle.BINBYTES + struct.pack("<I", len(argument)) + argument
    return pickle.PROTO + b"\x04" + b"".join(text) + pickle.STACK_GLOBAL + called + pickle.TUPLE1 + pickle.REDUCE + b"."


@pytest.mark.parametrize(
    ("module", "qualname"),
    [
        ("multiprocessing.reduction", "ForkingPickler.loads"),
        ("pickle", "_Unpickler"),
        ("marshal", "loads"),
        ("numpy.lib.format", "read_array"),  # numpy.load's reader, which unpickles when told to (an outside tester)
    ],
)
def test_an_unpickler_under_any_name_is_refused_by_an_allow_list(
    module: str, qualname: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The refusal went by name: pickle.loads listed as multiprocessing.reduction.ForkingPickler.loads, the
    # same function, let a pickle unpickle anything (found by an outside tester).
    importlib.import_module(module)
    header, buffers = _with_pickled_bytes(_pickle_calling(module, qualname, pickle.dumps(_RunsCode())))
    _refused(header, buffers, "which unpickles bytes with no list at all", allow_pickle={f"{module}.{qualname}"})
    assert "ran code" not in capsys.readouterr().out


def test_a_pickle_may_not_change_a_tensor_that_arrived_in_place() -> None:
    # BUILD on a tensor is Tensor.__setstate__, which set_() it anywhere in any storage: past the buffer given,
    # over other tensors, growing the storage (found by an outside tester).
    same_as_first = struct.pack("<BBBBII", 0, 0, 0, 2, 0, 0)  # the record's tensor 0, as a persistent id
    state = pickle.MARK + pickle.NONE + pickle.BININT + struct.pack("<i", -64) + pickle.TUPLE
    data = pickle.PROTO + b"\x04" + pickle.SHORT_BINBYTES + bytes([len(same_as_first)]) + same_as_first
    header, buffers = _with_pickled_bytes(data + pickle.BINPERSID + state + pickle.BUILD + b".")
    _refused(header, buffers, "would change a tensor in place", allow_pickle={"x.y"})


@pytest.mark.parametrize(
    "pid",
    [7, "spec", b"", bytes(_tensor_ext(1, 0, 0, 0, 1 << 40, [4], [1]).data)],
    ids=["int", "str", "empty", "outside"],
)
def test_a_pickles_persistent_id_that_is_no_valid_tensor_spec_is_a_wire_error(pid: object) -> None:
    stream = io.BytesIO()
    pickler = pickle.Pickler(stream, pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = lambda item: pid if item == "tensor here" else None  # type: ignore[method-assign]
    pickler.dump(["tensor here"])
    header, buffers = _with_pickled_bytes(stream.getvalue())
    for allow_pickle in (True, {"x.y"}):
        _refused(header, buffers, None, allow_pickle=allow_pickle)


def test_a_pickle_that_ends_before_its_bytes_do_is_refused() -> None:
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")

    def edit(body: list[Any]) -> None:
        body[3][position] = msgspec.msgpack.Ext(_PICKLE, pickle.dumps([1, 2]) + b"hidden")

    header, buffers = _edited(_step(), edit)
    _refused(header, buffers, "a pickled value is followed by 6 bytes that are not part of it", allow_pickle=True)


@pytest.mark.parametrize("allow_pickle", [True, {"datetime.date"}])
def test_bytes_after_stop_inside_a_pickles_last_frame_are_refused(allow_pickle: Any) -> None:
    # Both unpicklers read a frame whole, so bytes after STOP in it went unseen.
    framed = pickle.dumps(datetime.date(2026, 1, 2), protocol=4)
    assert framed[2] == pickle.FRAME[0]
    inside = framed[11:] + b"hidden"
    header, buffers = _with_pickled_bytes(framed[:2] + pickle.FRAME + struct.pack("<Q", len(inside)) + inside)
    _refused(header, buffers, "a pickled value is followed by 6 bytes", allow_pickle=allow_pickle)


@pytest.mark.parametrize("names", [[1], ["nodot"], [b"builtins.int"], {"builtins.int": 1, None: 2}])
def test_allow_pickle_takes_only_module_qualname_strings(names: Any) -> None:
    header, buffers = wire.pack(_step())
    with pytest.raises(TypeError, match=r"allow_pickle's names must be 'module\.qualname' strings"):
        wire.unpack(header, buffers, allow_pickle=names)


def test_a_pickle_never_imports_a_module() -> None:
    script = textwrap.dedent(
        """
        import pickle, sys
        from metakit import wire
        import colorsys
        import test_wire_hostile as t
        value = colorsys.rgb_to_hsv
        header, buffers = t._with_pickle(value)
        del sys.modules["colorsys"]
        try:
            wire.unpack(header, buffers, allow_pickle=True)
        except wire.WireError as error:
            assert "colorsys is not imported here" in str(error), error
        assert "colorsys" not in sys.modules
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=Path(__file__).parent, capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_a_pickle_never_runs_a_modules_getattr() -> None:
    # A module that provides names through ``__getattr__`` (torch's lazy
    # submodules) is read by its dict: the lookup runs none of its code.
    lazy = types.ModuleType("metakit_lazy_module")
    asked: list[str] = []

    def module_getattr(name: str) -> object:
        asked.append(name)
        return print

    lazy.__getattr__ = module_getattr  # type: ignore[method-assign]
    lazy.defined = len  # type: ignore[attr-defined]
    sys.modules[lazy.__name__] = lazy
    try:

        def edit_to(name: str) -> Callable[[list[Any]], None]:
            position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")
            data = b"\x80\x04\x8c" + bytes([len(lazy.__name__)]) + lazy.__name__.encode()
            data += b"\x8c" + bytes([len(name)]) + name.encode() + b"\x93."

            def edit(body: list[Any]) -> None:
                body[3][position] = msgspec.msgpack.Ext(_PICKLE, data)

            return edit

        header, buffers = _edited(_step(), edit_to("submodule"))
        _refused(
            header,
            buffers,
            "refers to metakit_lazy_module.submodule, which its module does not define",
            allow_pickle=True,
        )
        assert asked == []
        header, buffers = _edited(_step(), edit_to("defined"))
        assert wire.unpack(header, buffers, allow_pickle=True).unresolved is len  # type: ignore[attr-defined]
    finally:
        del sys.modules[lazy.__name__]


def _with_pickled_bytes(data: bytes) -> tuple[bytes, list[memoryview]]:
    """A ``Step`` whose field ``unresolved`` arrives as the pickle *data*."""
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")

    def edit(body: list[Any]) -> None:
        body[3][position] = msgspec.msgpack.Ext(_PICKLE, data)

    return _edited(_step(), edit)


def _global(module: str, name: str) -> bytes:
    """Pickle opcodes that push the global *module.name* (``SHORT_BINUNICODE`` twice, ``STACK_GLOBAL``)."""
    return b"\x8c" + bytes([len(module)]) + module.encode() + b"\x8c" + bytes([len(name)]) + name.encode() + b"\x93"


def _listed_helper(value: int, scale: int = 1) -> int:
    return value * scale


_LISTED_TABLE: dict[str, int] = {"kept": 1}
_LISTED_ITEMS: list[int] = [1]


@pytest.mark.parametrize(
    ("name", "opcodes"),
    [
        # BUILD (None, {"__defaults__": (100,)}): a function's defaults changed for good
        ("_listed_helper", b"N}\x8c\x0c__defaults__Kd\x85s\x86b"),
        # BUILD ({"__doc__": "x"}): a function's attributes
        ("_listed_helper", b"}\x8c\x07__doc__\x8c\x01xsb"),
        ("_LISTED_TABLE", b"\x8c\x04kindK\x02s"),  # SETITEM
        ("_LISTED_TABLE", b"(\x8c\x04kindK\x02u"),  # SETITEMS
        ("_LISTED_ITEMS", b"K\x02a"),  # APPEND
        ("_LISTED_ITEMS", b"(K\x02e"),  # APPENDS
    ],
)
def test_a_pickle_may_use_a_listed_global_but_never_change_it(name: str, opcodes: bytes) -> None:
    # Found by an outside tester: with allow_pickle={"pk.helper"}, BUILD set the receiver's own
    # pk.helper.__defaults__, for the rest of its life.
    before = (_listed_helper.__defaults__, _listed_helper.__doc__, dict(_LISTED_TABLE), list(_LISTED_ITEMS))
    header, buffers = _with_pickled_bytes(b"\x80\x04" + _global(__name__, name) + opcodes + b".")
    _refused(header, buffers, rf"would change {__name__}\.{name} in place", allow_pickle={f"{__name__}.{name}"})
    assert (_listed_helper.__defaults__, _listed_helper.__doc__, dict(_LISTED_TABLE), list(_LISTED_ITEMS)) == before


class _Shade(enum.Enum):
    RED = 1


class _Interned:
    """A class whose calls hand out one shared instance for each value."""

    made: ClassVar[dict[int, _Interned]] = {}

    def __new__(cls, value: int = 0) -> _Interned:
        return cls.made.setdefault(value, super().__new__(cls))


@pytest.mark.parametrize(
    ("name", "opcodes"),
    [
        # _Shade(1) is the member _Shade.RED: REDUCE, then BUILD {"_value_": 99}
        ("_Shade", b"K\x01\x85R}\x8c\x07_value_Kcsb"),
        # _Shade.__new__(_Shade, 1), the same member: NEWOBJ, then BUILD
        ("_Shade", b"K\x01\x85\x81}\x8c\x07_value_Kcsb"),
        # _Interned(): the shared instance, by REDUCE, then BUILD {"value": 99}
        ("_Interned", b")R}\x8c\x05valueKcsb"),
    ],
    ids=["an enum's member by REDUCE", "an enum's member by NEWOBJ", "a shared instance"],
)
def test_a_pickle_may_not_change_what_a_listed_global_hands_out_shared(name: str, opcodes: bytes) -> None:
    # Found by an outside tester: with allow_pickle={"engmod.Color"}, Color(1) gave the member Color.RED
    # and BUILD rewrote it, for the rest of the receiver's life: Color(1) was Color.EVIL.
    shared = _Interned()
    header, buffers = _with_pickled_bytes(b"\x80\x04" + _global(__name__, name) + opcodes + b".")
    changed = r"would change what a call returned \(something else holds it too\) in place"
    _refused(header, buffers, changed, allow_pickle={f"{__name__}.{name}"})
    assert (_Shade.RED.value, _Shade(1), vars(shared)) == (1, _Shade.RED, {})


class _Handler:
    """An ``__init__`` that keeps a bound method of the instance: a reference to itself."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.callback = self.run

    def run(self) -> int:
        return self.value

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Handler, (self.value,), {"calls": 3})


def test_what_a_call_returns_holding_a_reference_to_itself_counts_as_held_elsewhere() -> None:
    # docs/wire-format.md: its state cannot be set with a list of names (an outside tester found it
    # arrived before the check that keeps an enum's members from change); with allow_pickle=True it can.
    record = _step()
    record.unresolved = _Handler(2)  # type: ignore[assignment]
    header, buffers = wire.pack(record, allow_pickle=True)
    _refused(header, buffers, r"would change what a call returned", allow_pickle={f"{__name__}._Handler"})
    arrived = wire.unpack(header, buffers, allow_pickle=True).unresolved  # type: ignore[attr-defined]
    assert (arrived.value, arrived.calls, arrived.callback()) == (2, 3, 2)


def test_a_pickle_may_change_what_a_listed_class_makes_anew() -> None:
    # The usual pickle of an instance: NEWOBJ (or REDUCE), then BUILD with its state.
    data = b"\x80\x04" + _global(__name__, "_Listed") + b")\x81}\x8c\x05valueK\x07sb."
    header, buffers = _with_pickled_bytes(data)
    arrived = wire.unpack(header, buffers, allow_pickle={f"{__name__}._Listed"}).unresolved  # type: ignore[attr-defined]
    assert arrived == _Listed(7)


@dataclass
class _ListedRecord(ZeroCopy):
    value: int
    secret: object = field(default=None, metadata=OMIT)


def test_an_allow_list_cannot_let_a_pickle_make_a_record() -> None:
    # A pickle that names a listed record class made one without its __init__, its OMIT field set by the
    # peer; the sender never pickles a record.  (Found by an outside tester.)
    data = (
        b"\x80\x04"
        + _global(__name__, "_ListedRecord")
        + b")\x81}(\x8c\x05valueK\x07\x8c\x06secret\x8c\x04peeru"
        + b"b."
    )
    header, buffers = _with_pickled_bytes(data)
    _refused(
        header,
        buffers,
        r"refers to the record class .*_ListedRecord: a record travels by its own rules, never pickled",
        allow_pickle={f"{__name__}._ListedRecord"},
    )


@pytest.fixture
def extension() -> Iterator[Callable[[str, str], int]]:
    """Registers globals in copyreg's extension registry (a code for each), as an application may."""
    added: list[tuple[str, str, int]] = []

    def add(module: str, name: str) -> int:
        code = 0x7FFF_FF00 + len(added)
        copyreg.add_extension(module, name, code)
        added.append((module, name, code))
        return code

    yield add
    for module, name, code in added:
        copyreg.remove_extension(module, name, code)


def test_a_global_named_by_an_extension_code_is_listed_or_refused(extension: Callable[[str, str], int]) -> None:
    # Found by an outside tester: once copyreg's cache held a code's global (a pickle.loads anywhere in
    # the process), EXT4 handed it out with no look at allow_pickle's list: os.system ran.
    code = extension("posix", "system")
    assert pickle.loads(b"\x80\x04\x84" + struct.pack("<i", code) + b".") is os.system  # now in the cache
    data = b"\x80\x04\x84" + struct.pack("<i", code) + b"\x8c\x04echo\x85R."
    header, buffers = _with_pickled_bytes(data)
    _refused(header, buffers, r"refers to posix\.system, which allow_pickle does not list", allow_pickle={"x.y"})


def test_a_listed_global_named_by_an_extension_code_is_not_changed(extension: Callable[[str, str], int]) -> None:
    # Found by an outside tester: BUILD on a listed class reached by EXT4 was refused, but the record was
    # read again, and the code, cached by then, gave the class with no look: it was changed.
    code = extension(__name__, "_Listed")
    # BUILD (None, {"marker": 5}): setattr on the class
    data = b"\x80\x04\x84" + struct.pack("<i", code) + b"N}\x8c\x06markerK\x05s\x86b."
    header, buffers = _with_pickled_bytes(data)
    name = f"{__name__}._Listed"
    _refused(header, buffers, rf"would change {re.escape(name)} in place", allow_pickle={name})
    assert not hasattr(_Listed, "marker")
    arrived = wire.unpack(*_with_pickled_bytes(data[:7] + b"."), allow_pickle={name}).unresolved  # type: ignore[attr-defined]
    assert arrived is _Listed


def test_a_listed_class_still_rebuilds_its_instances_with_their_state() -> None:
    record = _step()
    record.unresolved = [datetime.timedelta(days=2), _Listed(3)]  # type: ignore[list-item]
    header, buffers = wire.pack(record, allow_pickle=True)
    names = {"datetime.timedelta", f"{__name__}._Listed"}
    arrived = wire.unpack(header, buffers, allow_pickle=names).unresolved  # type: ignore[attr-defined]
    assert arrived == [datetime.timedelta(days=2), _Listed(3)]


@dataclass
class _Listed:
    value: int


@pytest.mark.parametrize("allow_pickle", [True, {"x.y"}])
def test_a_pickled_global_name_of_megabytes_is_quoted_cut_short(allow_pickle: Any) -> None:
    # Found by an outside tester: a 4 MB module name gave a WireError of 16 M characters.
    long = "m" * 70_000 + "\x00" * 70_000
    data = b"\x80\x04\x8d" + struct.pack("<Q", len(long)) + long.encode() + b"\x8c\x01x\x93."
    header, buffers = _with_pickled_bytes(data)
    error = _refused(header, buffers, allow_pickle=allow_pickle)
    assert len(str(error)) < 2_000, len(str(error))


class _Counting(ZeroCopyFields):
    """A metaclass that counts how often a class's ``__qualname__`` is read."""

    reads = 0

    def __getattribute__(cls, name: str) -> Any:
        if name == "__qualname__":
            _Counting.reads += 1
        return super().__getattribute__(name)


class _CountingBase(ZeroCopy, metaclass=_Counting):
    pass


@dataclass
class _Holder(ZeroCopy):
    items: list[Any]


def test_records_of_classes_found_among_the_live_ones_cost_one_search_a_header() -> None:
    # Found by an outside tester: a class that its module's namespace does not hold (defined in a
    # function, made by make_dataclass) was searched for among all live classes once per record, so a
    # 100 KB header of 5,000 records cost 4 s with 3,000 live classes.
    classes = [
        make_dataclass(f"Far{i}", [("n", int)], bases=(_CountingBase,), namespace={"__module__": "far"})
        for i in range(40)
    ]
    header, buffers = wire.pack(_Holder([classes[7](i) for i in range(300)]))
    _Counting.reads = 0
    arrived = wire.unpack(header, buffers)
    assert [item.n for item in arrived.items] == list(range(300))  # type: ignore[attr-defined]
    assert type(arrived.items[0]) is classes[7]  # type: ignore[attr-defined]
    assert _Counting.reads < 10 * len(classes), _Counting.reads  # not once per record (12,000)


class _DictIsAProperty(types.ModuleType):
    """A module whose ``__dict__`` is computed, as lazy-loading packages make theirs."""

    reads = 0

    @property  # type: ignore[misc]
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        _DictIsAProperty.reads += 1
        return super().__dict__


def test_resolving_a_fields_annotation_runs_no_code_of_its_module_object() -> None:
    # Found by an outside tester: the receiver read the module's ``__dict__`` through its property.
    module = _DictIsAProperty("metakit_lazy_records")
    sys.modules[module.__name__] = module
    try:
        Lazy = make_dataclass("Lazy", [("n", "int")], bases=(ZeroCopy,), namespace={"__module__": module.__name__})
        types.ModuleType.__dict__["__dict__"].__get__(module)["Lazy"] = Lazy
        _DictIsAProperty.reads = 0
        assert wire.unpack(*wire.pack(Lazy(3))) == Lazy(3)
        header, buffers = wire.pack(Lazy(3))
        table, body = _split(header)
        body[3][0] = "three"
        _refused(_join(table, body), buffers, "Expected `int`, got `str`")
        assert _DictIsAProperty.reads == 0
    finally:
        del sys.modules[module.__name__]


# --- tensors: every spec checked against its buffer ------------------------------


def _with_tensor(extension: msgspec.msgpack.Ext, buffers: list[Any] | None = None) -> tuple[bytes, list[Any]]:
    """A ``Step`` whose ``slot_mapping`` is *extension*, with 1 KiB of buffer 0 unless *buffers* are given."""
    position = [f.name for f in Step.__dataclass_fields__.values()].index("slot_mapping")
    header, given = wire.pack(Step(4, torch.arange(128)))
    table, body = _split(header)
    body[3][position] = extension
    return _join(table, body), given if buffers is None else buffers


_INT64 = 5  # the dtype code of torch.int64 in the table of docs/wire-format.md
_FLOAT32 = 8
_COMPLEX32 = 10


@pytest.mark.parametrize(
    ("extension", "match"),
    [
        (_tensor_ext(200, 0, 0, 0, 0, [4], [1]), "dtype code \\(200\\)"),
        (_tensor_ext(_INT64, 0x0F, 0, 0, 0, [4], [1]), "flags"),
        (_tensor_ext(_INT64, 0xF0, 0, 0, 0, [4], [1]), "flags"),
        (_tensor_ext(_INT64, 0, 0, 1, 0, [4], [1]), "lies in buffer 1"),
        (_tensor_ext(_INT64, 0, 0, 0, 4, [4], [1]), "at a multiple of 64"),
        (_tensor_ext(_INT64, 0, 0, 0, 1024, [4], [1]), "which holds 1024"),
        (_tensor_ext(_INT64, 0, 0, 0, 0, [1 << 40], [0]), "out of range|strides"),
        (_tensor_ext(_INT64, 0, 0, 0, 0, [1 << 37], [1]), "which holds 1024"),
        (_tensor_ext(_INT64, 0, 0, 0, 0, [4, 4], [0, 1]), "strides"),
        (_tensor_ext(_INT64, 0, 0, 0, 0, [4, 4], [1, 1]), "strides"),
        (_tensor_ext(_INT64, 0, 0, 0, 0, [1 << 62, 0], [1, 1]), "out of range"),
        (_tensor_ext(_INT64, 0, 0, 0, (1 << 64) - 8, [1], [1]), "out of range"),
        (_tensor_ext(_INT64, 1, 0, 0, 0, [4], [1]), "cannot require grad|cannot"),
        (_tensor_ext(_INT64, 0, 1, 0, 0, [4], [1]), "view of tensor 0, which sent no bytes"),
        (_tensor_ext(_INT64, 0, 2, 0, 0, [], []), "said to be tensor 0 again, but its spec says more"),
        (msgspec.msgpack.Ext(_TENSOR, b"\x00\x00\x00\x02" + struct.pack("<II", 0, 0)), "did not arrive before it"),
        (msgspec.msgpack.Ext(_TENSOR, b""), "spec is cut short"),
        (_tensor_ext(_INT64, 0, 9, 0, 0, [4], [1]), "unknown kind"),
        (msgspec.msgpack.Ext(_TENSOR, b"\x05\x00"), "spec is cut short"),
        (msgspec.msgpack.Ext(_TENSOR, _SPEC_HEAD.pack(_INT64, 0, 65, 0, 0, 0)), "has 65 dimensions, and the format"),
        (
            msgspec.msgpack.Ext(_TENSOR, _SPEC_HEAD.pack(_INT64, 0, 1, 0, 0, 0) + b"\x04" * 15),
            r"spec is 31 bytes long, not the 16 of its flags and 1 dimension -",
        ),
        (
            msgspec.msgpack.Ext(_TENSOR, b"\x05\x00\x01\x00"),
            r"spec is 4 bytes long, not the 16 of its flags and 1 dimension -",
        ),
        # A tensor with no elements lies in no buffer: its reference and offset are 0, and it is no view.
        (_tensor_ext(_FLOAT32, 0, 0, 7, 0, [0], [1]), "no elements"),
        (_tensor_ext(_FLOAT32, 0, 0, 0, 12345, [0], [1]), "no elements"),
        (_tensor_ext(_FLOAT32, 0, 1, 0, 999, [0], [1]), "no elements"),
        # torch takes every empty tensor as contiguous, so none is sent with other strides: strides of 0
        # under sizes near 2^62 made a tensor that torch's own operations could not handle (an outside tester).
        (_tensor_ext(_FLOAT32, 0, 0, 0, 0, [0, 3], [0, 0]), r"strides \(0, 0\) that a sender never sends"),
        (_tensor_ext(_FLOAT32, 0, 0, 0, 0, [0, (1 << 62) - 1, (1 << 62) - 1], [0, 0, 0]), "that a sender never"),
        # A dimension of size 1 is sent with its contiguous stride, in a spec of either kind (an outside tester).
        (_tensor_ext(_INT64, 0, 0, 0, 0, [1, 4], [(1 << 62) - 1, 1]), "a dimension of size 1 has the stride"),
        (_tensor_ext(_INT64, 0, 0, 0, 0, [4, 1], [1, 0]), "a dimension of size 1 has the stride"),
    ],
)
def test_a_tensor_spec_that_a_sender_never_writes_is_refused_naming_its_field(
    extension: msgspec.msgpack.Ext, match: str
) -> None:
    # Issue: "A violation is a WireError naming the field."
    header, buffers = _with_tensor(extension)
    assert str(_refused(header, buffers, match)).endswith(" - at `$.slot_mapping`")


def test_a_small_tensor_in_a_buffer_of_its_own_is_refused() -> None:
    # Only a tensor of PACK_OWN_BUFFER bytes or more has a buffer of its own, from its start.
    # (Found by an outside tester, with the rules for empty tensors above.)
    big = wire.PACK_OWN_BUFFER
    table = _TABLE_HEAD.pack(b"MKW", wire.FORMAT, 2) + struct.pack("<2Q2B", 1024, big, 0, 0)
    header, _ = wire.pack(Step(4, torch.arange(128)))
    _, body = _split(header)
    position = [f.name for f in Step.__dataclass_fields__.values()].index("slot_mapping")
    for extension in (_tensor_ext(_INT64, 0, 0, 1, 64, [4], [1]), _tensor_ext(_INT64, 0, 0, 1, 0, [4], [1])):
        body[3][position] = extension
        _refused(_join(table, body), [bytearray(1024), bytearray(big)], "a buffer of its own")
    body[3][position] = _tensor_ext(_INT64, 0, 0, 1, 0, [big // 8], [1])
    got = wire.unpack(_join(table, body), [bytearray(1024), bytearray(big)])
    assert got.slot_mapping.shape == (big // 8,)


def _short_ext(code: int, buffer: int, offset: int, shape: Sequence[int]) -> msgspec.msgpack.Ext:
    """The spec a sender writes for the usual tensor: no flags, 32-bit numbers, no strides."""
    return msgspec.msgpack.Ext(
        _TENSOR, struct.pack(f"<BBBBII{len(shape)}I", code, 0, len(shape), 0, buffer, offset, *shape)
    )


def _contiguous(shape: Sequence[int]) -> list[int]:
    return [math.prod(shape[axis + 1 :]) for axis in range(len(shape))]


@pytest.mark.parametrize(
    ("code", "buffer", "offset", "shape", "match"),
    [
        (200, 0, 0, [4], "dtype code \\(200\\)"),
        (_INT64, 1, 0, [4], "lies in buffer 1"),
        (_INT64, 0, 4, [4], "at a multiple of 64"),
        (_INT64, 0, 8, [4], "at a multiple of 64"),
        (_INT64, 0, 1024, [1], "which holds 1024"),
        (_INT64, 0, 0, [129], "which holds 1024"),
        (_INT64, 0, 960, [9], "which holds 1024"),
        (_INT64, 0, 0, [(1 << 32) - 1, (1 << 32) - 1], "which holds 1024"),
        (_INT64, 0, 64, [1 << 31, 2, 0], "no elements"),  # sizes whose product is 0, placed all the same
    ],
)
def test_the_short_spec_of_the_usual_tensor_is_held_to_the_same_rules(
    code: int, buffer: int, offset: int, shape: list[int], match: str
) -> None:
    # A sender writes the usual tensor's spec in a short form, which the receiver reads on a path of its
    # own: it refuses what the long form refuses, with the same words.
    for extension in (
        _short_ext(code, buffer, offset, shape),
        _tensor_ext(code, 0, 0, buffer, offset, shape, _contiguous(shape)),
    ):
        header, buffers = _with_tensor(extension)
        _refused(header, buffers, match)


@pytest.mark.parametrize(
    "shape",
    [[0, 1 << 31, 1 << 31], [0, 1 << 31, 1 << 31, 2], [0, (1 << 32) - 1, (1 << 32) - 1, (1 << 32) - 1]],
    ids=["strides of 2^62", "strides over 2^63", "strides over 2^64"],
)
def test_an_empty_tensor_whose_contiguous_strides_are_out_of_range_is_refused_in_every_form(shape: list[int]) -> None:
    # The strides that a contiguous spec leaves out are held to the bound of those written out; past
    # int64, torch refused them with a message holding its C++ backtrace: this process's addresses.
    # (Found by an outside tester.)
    wide = msgspec.msgpack.Ext(
        _TENSOR, _SPEC_HEAD.pack(_INT64, _WIDE, len(shape), 0, 0, 0) + struct.pack(f"<{len(shape)}Q", *shape)
    )
    fits = max(_contiguous(shape)) < 1 << 64  # else the long form cannot even write them
    long_form = [_tensor_ext(_INT64, 0, 0, 0, 0, shape, _contiguous(shape))] if fits else []
    for extension in (_short_ext(_INT64, 0, 0, shape), wide, *long_form):
        header, buffers = _with_tensor(extension)
        error = _refused(header, buffers, "tensor 0 has a size, stride or offset out of range")
        assert "0x" not in str(error)


def test_an_empty_complex32_tensor_arrives_without_a_warning() -> None:
    # torch warns when it makes an empty complex32 tensor: a peer could write to the receiver's stderr,
    # and a receiver that turns warnings into errors got a UserWarning.  (Found by an outside tester.)
    header, buffers = _with_tensor(_short_ext(_COMPLEX32, 0, 0, [0, 3]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = wire.unpack(header, buffers)
    assert got.slot_mapping.dtype == torch.complex32
    assert got.slot_mapping.shape == (0, 3)


def test_the_short_spec_keeps_tensors_apart_and_large_ones_alone_at_the_start_of_their_buffer() -> None:
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")
    header, buffers = wire.pack(Step(4, torch.arange(128)))
    table, body = _split(header)
    body[3][position] = [_short_ext(_INT64, 0, 0, [8])]  # slot_mapping's bytes again
    _refused(_join(table, body), buffers, "not after the tensors before it")
    body[3][position] = [_short_ext(_INT64, 0, 64, [0])]  # an empty tensor lies nowhere
    _refused(_join(table, body), buffers, "no elements")
    body[3][position] = [_short_ext(_INT64, 1, 0, [8])]  # a buffer that is not there (the message said otherwise)
    _refused(_join(table, body), buffers, "tensor 1 lies in buffer 1, but the header lists 1 buffers")
    big = wire.PACK_OWN_BUFFER
    table = _TABLE_HEAD.pack(b"MKW", wire.FORMAT, 2) + struct.pack("<2Q2B", 1024, big, 0, 0)
    slot = [f.name for f in Step.__dataclass_fields__.values()].index("slot_mapping")
    body[3][position] = []
    for extension in (_short_ext(_INT64, 1, 64, [4]), _short_ext(_INT64, 1, 0, [4])):
        body[3][slot] = extension
        _refused(_join(table, body), [bytearray(1024), bytearray(big)], "a buffer of its own")
    body[3][slot] = _short_ext(_INT64, 1, 0, [big // 8])
    body[3][position] = [_short_ext(_INT64, 1, 0, [big // 8])]
    _refused(_join(table, body), [bytearray(1024), bytearray(big)], "not after the tensors before it")
    body[3][position] = [_short_ext(_INT64, 0, 0, []), _short_ext(_INT64, 0, 64, [2, 3])]
    got = wire.unpack(_join(table, body), [bytearray(1024), bytearray(big)])
    assert got.slot_mapping.shape == (big // 8,)
    assert [tuple(t.shape) for t in got.unresolved] == [(), (2, 3)]


def test_a_float_tensor_may_require_grad() -> None:
    header, buffers = _with_tensor(_tensor_ext(_FLOAT32, 1, 0, 0, 0, [4], [1]))
    got = wire.unpack(header, buffers)
    assert got.slot_mapping.requires_grad


def test_two_tensors_cannot_share_bytes_unless_one_is_said_to_be_a_view() -> None:
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")
    overlapping = [_tensor_ext(_INT64, 0, 0, 0, 0, [8], [1]), _tensor_ext(_INT64, 0, 0, 0, 32, [8], [1])]
    header, buffers = wire.pack(Step(4, torch.arange(128)))
    table, body = _split(header)
    body[3][position] = overlapping
    _refused(_join(table, body), buffers, "not after the tensors before it")
    view = [_tensor_ext(_INT64, 0, 1, 0, 16, [4], [1])]  # tensor 1 is a view of tensor 0, slot_mapping
    body[3][position] = view
    got = wire.unpack(_join(table, body), buffers)
    got.slot_mapping[2] = -7
    assert got.unresolved[0][0] == -7, "the view the sender declared shares its parent's bytes"
    body[3][position] = [_tensor_ext(_INT64, 0, 1, 0, 1016, [2], [1])]
    _refused(_join(table, body), buffers, "view of tensor 0, but lies outside it")
    # Inside its parent, but the elements overlap ((2, 3) at its stride 2 reaches element 2 twice), or could
    # for all the rule can tell (an outside tester's (3, 3) at (3, 2)).
    for shape, strides in [((4, 4), (1, 1)), ((2, 3), (2, 1)), ((3, 3), (3, 2))]:
        body[3][position] = [_tensor_ext(_INT64, 0, 1, 0, 0, shape, strides)]
        message = f"view of tensor 0, but its strides {strides} for shape {shape} are not a slice's"
        _refused(_join(table, body), buffers, re.escape(message))
    for shape, strides in [((1, 4), (1, 1)), ((4, 1), (1, 0))]:  # a dimension of size 1, at another stride
        body[3][position] = [_tensor_ext(_INT64, 0, 1, 0, 0, shape, strides)]
        _refused(_join(table, body), buffers, "a dimension of size 1 has the stride a contiguous tensor gives it")
    body[3][position] = [_tensor_ext(_INT64, 0, 1, 0, 0, [4, 3], [5, 2])]  # m[:, ::2] of a 4 x 5 m: stride 5 > 4
    assert wire.unpack(_join(table, body), buffers).unresolved[0].stride() == (5, 2)
    body[3][position] = [_tensor_ext(_INT64, 0x10, 1, 0, 16, [4], [1])]  # device kind 1, cuda
    _refused(
        _join(table, body), buffers, re.escape("view of tensor 0, but lies on another kind of device (cuda, not cpu)")
    )


@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(0, 12)), min_size=1, max_size=3),
    st.integers(0, 4),
)
def test_a_view_the_receiver_accepts_has_elements_of_their_own_inside_its_parent(
    dimensions: list[tuple[int, int]], offset: int
) -> None:
    shape, strides = zip(*dimensions, strict=True)
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")
    header, buffers = wire.pack(Step(4, torch.arange(128)))
    table, body = _split(header)
    body[3][position] = [_tensor_ext(_INT64, 0, 1, 0, 8 * offset, list(shape), list(strides))]
    try:
        got = wire.unpack(_join(table, body), buffers)
    except WireError:
        return
    view, parent = got.unresolved[0], got.slot_mapping
    assert (tuple(view.shape), view.stride()) == (shape, strides)
    elements = [
        offset + sum(index * stride for index, stride in zip(place, strides, strict=True))
        for place in itertools.product(*map(range, shape))
    ]
    assert len(set(elements)) == len(elements), "two elements of the view share memory"
    assert max(elements) < len(parent)
    assert view.untyped_storage().data_ptr() == parent.untyped_storage().data_ptr()


def test_a_tensor_stays_inside_a_buffer_given_as_a_slice() -> None:
    ring = torch.zeros(4096, dtype=torch.uint8)
    header, buffers = wire.pack(Step(4, torch.arange(128)))
    slot = ring[1024:2048]
    slot.copy_(torch.frombuffer(bytearray(buffers[0]), dtype=torch.uint8))
    got = wire.unpack(header, [slot])
    assert got.slot_mapping.data_ptr() == slot.data_ptr()
    position = [f.name for f in Step.__dataclass_fields__.values()].index("slot_mapping")
    table, body = _split(header)
    body[3][position] = _tensor_ext(_INT64, 0, 0, 0, 0, [129], [1])
    _refused(_join(table, body), [slot], "which holds 1024")


@pytest.mark.parametrize(
    ("buffers", "match"),
    [
        ([], "lists 1 buffers, but 0 were given"),
        ([bytearray(1024), bytearray(8)], "lists 1 buffers, but 2 were given"),
        ([bytearray(1023)], "holds 1023 bytes, but the header says 1024"),
        ([torch.zeros(256, dtype=torch.int32)], "not a contiguous 1-D uint8 tensor"),
        ([torch.zeros(2048, dtype=torch.uint8)[::2]], "not a contiguous 1-D uint8 tensor"),
        ([object()], "not a bytes-like object"),
        ([torch.empty(1024, dtype=torch.uint8, device="meta")], "a tensor on the meta device, which holds no bytes"),
    ],
)
def test_buffers_that_do_not_match_the_table_are_refused(buffers: list[Any], match: str) -> None:
    header, _ = wire.pack(Step(4, torch.arange(128)))
    _refused(header, buffers, match)


def test_a_read_only_buffer_is_copied_once_and_gives_a_correct_record() -> None:
    record = Step(4, torch.arange(128))
    header, (buffer,) = wire.pack(record)
    got = wire.unpack(header, [bytes(buffer)])
    assert torch.equal(got.slot_mapping, record.slot_mapping)
    got.slot_mapping[0] = 5  # a copy of its own: writing it is safe


def test_a_buffer_at_an_address_its_items_cannot_start_at_is_refused() -> None:
    # Found by the fuzzer: torch's complex kernels crashed on elements at an odd address.
    for record in (
        Step(4, torch.arange(128)),
        Step(4, torch.arange(4), unresolved=[torch.ones(17, 17, dtype=torch.complex128)]),
    ):  # type: ignore[list-item]
        header, (buffer,) = wire.pack(record)
        room = bytearray(len(buffer) + 1)
        room[1:] = buffer
        _refused(header, [memoryview(room)[1:]], "does not start at an address that is a multiple of")
        ring = torch.zeros(len(buffer) + 1, dtype=torch.uint8)
        ring[1:].copy_(torch.frombuffer(bytearray(buffer), dtype=torch.uint8))
        _refused(header, [ring[1:]], "does not start at an address that is a multiple of")
    bytes_only = Step(4, torch.arange(128), unresolved=[torch.ones(3, dtype=torch.uint8)])  # type: ignore[list-item]
    header, (buffer,) = wire.pack(bytes_only)
    room = bytearray(len(buffer) + 1)
    room[1:] = buffer
    position = [f.name for f in Step.__dataclass_fields__.values()].index("slot_mapping")
    table, body = _split(header)
    body[3][position] = _tensor_ext(1, 0, 0, 0, 0, [5], [1])  # uint8: any address will do
    got = wire.unpack(_join(table, body), [memoryview(room)[1:]])
    assert got.slot_mapping.data_ptr() % 2 == 1


def test_a_msgpack_timestamp_is_refused_as_it_is_not_plain_data() -> None:
    # Found by the fuzzer: msgspec reads the timestamp extension (-1) as a datetime by itself.
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")
    timestamp = msgspec.Raw(b"\xd7\xff" + bytes(8))
    for value in (
        timestamp,
        [1, timestamp],
        {"a": [timestamp]},
        msgspec.msgpack.Ext(_TUPLE, b"\x91" + bytes(timestamp)),
    ):

        def edit(body: list[Any], value: object = value) -> None:
            body[3][position] = value

        header, buffers = _edited(_step(), edit)
        _refused(header, buffers, "a msgpack timestamp")


@pytest.mark.parametrize(
    "header",
    [b"", b"MK", b"XYZ\x03\x00\x00\x00\x00", b"MKW\x03\xff\xff\xff\xff", b"MKW\x03\x01\x00\x00\x00" + b"\x00" * 3],
    ids=["empty", "cut", "not metakit", "a table of 4 G buffers", "a cut table"],
)
def test_a_header_cut_short_or_not_metakit_is_refused(header: bytes) -> None:
    _refused(header, [bytearray(0)])
    with pytest.raises(WireError):
        wire.buffer_count(header)


@dataclass
class Pair(ZeroCopy):
    kids: list[Pair]


def test_a_record_shared_at_every_level_arrives_shared_in_memory_linear_in_the_header() -> None:
    # docs/wire-format.md, "Shared records": each level holds the one below twice, so a walk of the
    # result as a tree meets 2^depth paths; the header, the receiver's work and its memory grow with the depth.
    record = Pair([])
    for _ in range(30):
        record = Pair([record, record])
    header, buffers = wire.pack(record)
    assert len(header) < 2_000
    got: Any = wire.unpack(header, buffers)
    for _ in range(30):
        assert got.kids[0] is got.kids[1]
        got = got.kids[0]
    assert got == Pair([])


# --- a hostile rank 0 over gloo -----------------------------------------------------

# status, layout, header bytes, message bytes, the last 8 bytes of the rest (docs/wire-format.md)
_PREFIX = struct.Struct("<HHIQ8s")
_LAYOUT = 1
_TRAILER = b"metakit\x01"  # the last 8 bytes of every frame
_WATCHED = ("os.system", "subprocess.Popen", "pickle.find_class", "exec", "compile", "import", "ctypes", "open")


def _hostile_frames(marker: Path) -> list[tuple[str, int, bytes, list[int], str]]:
    """What rank 0 sends: (case, status, header, sizes of the buffers after the frame's pool, expected error)."""
    record = Step(4, torch.arange(128))
    header, buffers = wire.pack(record)
    table, body = _split(header)
    pool = len(buffers[0])
    runs_code = pickle.dumps(_Touch(str(marker)))
    position = [f.name for f in Step.__dataclass_fields__.values()].index("unresolved")
    with_pickle = [*body[:3], [*body[3][:position], msgspec.msgpack.Ext(_PICKLE, runs_code), *body[3][position + 1 :]]]
    outside = [*body[:3], [*body[3][:1], _tensor_ext(_INT64, 0, 0, 1, 0, [16], [1]), *body[3][2:]]]
    two_buffers = _TABLE_HEAD.pack(b"MKW", wire.FORMAT, 2) + struct.pack("<2Q2B", pool, 64, 0, 0)
    large_header, large_buffers = wire.pack(Step(4, torch.arange(wire.PACK_OWN_BUFFER)))  # a buffer of its own
    assert [len(buffer) for buffer in large_buffers] == [0, 8 * wire.PACK_OWN_BUFFER]
    return [
        ("unknown status", 9, header, [], "status 9"),
        ("a header longer than the message", 0, b"", [], "not a frame of this format"),
        ("a message over max_bytes", 0, b"", [], "is over max_bytes="),
        ("not a metakit header", 0, b"XYZ" + header[3:], [], "not a metakit header"),
        ("no buffer", 0, _TABLE_HEAD.pack(b"MKW", wire.FORMAT, 0) + header[len(table) :], [], "lists no buffer"),
        ("an unknown lane", 0, table[:-1] + b"\x03" + header[len(table) :], [], "a lane other than 0 and 1"),
        ("lane 1, no device group", 0, two_buffers[:-1] + b"\x01" + header[len(table) :], [], "carries lane 0 only"),
        ("buffer 0 in lane 1", 0, table[:-1] + b"\x01" + header[len(table) :], [], "buffer 0 (lane 0's shared"),
        ("a pool larger than the frame", 0, table[:8] + struct.pack("<Q", 1 << 20) + header[16:], [], "does not lie"),
        ("a buffer over max_bytes", 0, two_buffers[:-10] + struct.pack("<Q", 1 << 40) + b"\0\0", [], "over max_bytes"),
        ("a pickle that runs code", 0, _join(table, with_pickle), [], "does not read pickles"),
        # Refused from the table, before any buffer is received (it was refused once received).
        ("a small tensor in a buffer of its own", 0, _join(two_buffers, outside), [], "a small buffer of its own"),
        ("the source's error, long", 1, bytes(range(256)) * 64, [], "could not send its record"),
        ("a frame of another layout", 0, header, [], "a frame of layout 7 arrived"),
        ("a rest's end with no rest", 0, header, [], "but none follows"),  # found by an outside tester
        # gloo lets a source send fewer bytes than a receiver posted: the rest must never be read.
        ("a frame cut short", 1, b"x" * 3000, [], "the frame ("),
        ("a frame cut by one byte", 0, header, [], "the frame ("),
        ("a buffer cut short", 0, large_header, [1], "buffer 1 (524288 bytes) does not end as the source said"),
        ("a buffer cut by one byte", 0, large_header, [8 * wire.PACK_OWN_BUFFER - 1], "buffer 1 (524288 bytes)"),
        # Where gloo relays a broadcast, a rank gets the whole buffer a relay posted, whatever the source sent.
        ("a frame that ends otherwise", 0, header, [], "the frame ("),
        ("a buffer that ends otherwise", 0, large_header, [8 * wire.PACK_OWN_BUFFER], "buffer 1 (524288 bytes)"),
    ]


class _Touch:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (Path(self.path),))


def _send_by_hand(status: int, header: bytes, sizes: list[int], case: str) -> None:
    """Rank 0: one frame written by hand, then the buffers it lists, as a receiver will expect them."""
    import torch.distributed as dist

    from metakit.distributed import _route

    route = _route(dist.group.WORLD, None)  # rank 0 follows the frame size as its receivers do
    frame_nbytes = route.frame_nbytes
    # The header, the last bytes of each buffer its table lists after the first (zeros, as sent), lane 0's pool.
    try:
        tails = 8 * max(wire.buffer_count(header) - 1, 0)
    except WireError:
        tails = 0
    message = -(-(_PREFIX.size + len(header) + tails) // 64) * 64 + (1024 if status == 0 else 0)
    carried = frame_nbytes - 8  # the message's bytes that the frame carries, before the trailer
    raw = bytearray(max(message, carried))
    raw[_PREFIX.size : _PREFIX.size + len(header)] = header
    if case == "a buffer that ends otherwise":
        raw[_PREFIX.size + len(header) : _PREFIX.size + len(header) + 8] = b"not this"
    rest = raw[carried:message]
    rest_tail = bytes(rest[-8:]).ljust(8, b"\0")
    raw[: _PREFIX.size] = {
        "a header longer than the message": _PREFIX.pack(0, _LAYOUT, 1 << 20, 4096, rest_tail),
        "a message over max_bytes": _PREFIX.pack(0, _LAYOUT, 16, 1 << 60, rest_tail),
        "a frame of another layout": _PREFIX.pack(status, 7, len(header), message, rest_tail),
        "a rest's end with no rest": _PREFIX.pack(status, _LAYOUT, len(header), message, b"not this"),
    }.get(case, _PREFIX.pack(status, _LAYOUT, len(header), message, rest_tail))
    frame = raw[:carried] + (b"not this" if case == "a frame that ends otherwise" else _TRAILER)
    sent = torch.frombuffer(frame, dtype=torch.uint8)
    dist.broadcast(
        {"a frame cut short": sent[: _PREFIX.size], "a frame cut by one byte": sent[:-1]}.get(case, sent), src=0
    )
    refused = ("a header longer", "a message over", "a frame cut", "a frame that ends", "a frame of another")
    refused += ("a rest's",)
    if status in (0, 1) and not case.startswith(refused):
        if message > carried:
            dist.broadcast(torch.frombuffer(rest, dtype=torch.uint8), src=0)
        route.saw(message + 8)
    # A receiver starts again from the first frame's size after the source's error, or a frame not whole.
    if (status == 1 and not case.startswith(refused)) or case.startswith(("a frame cut", "a frame that ends")):
        route.start_again()
    for size in sizes:
        dist.broadcast(torch.zeros(size, dtype=torch.uint8), src=0)


def _receive_watched(case: str, expected: str, watching: list[bool]) -> str | None:
    """Rank 1: what was wrong with how it received *case*, or ``None``."""
    from metakit.distributed import BroadcastError, broadcast_metadata

    watching[0] = True
    try:
        broadcast_metadata(None)
    except BroadcastError as error:
        if expected not in str(error) or len(str(error)) > 6000:
            return f"{case}: {str(error)[:300]}"
    except Exception as error:
        return f"{case}: {type(error).__name__}: {error}"
    else:
        return f"{case}: a record arrived"
    finally:
        watching[0] = False
    return None


def _hostile_rank(rank: int, port: int, marker: str, out: str) -> None:
    import torch.distributed as dist

    from metakit.distributed import broadcast_metadata

    timeout = datetime.timedelta(seconds=60)
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=timeout)
    events: list[str] = []
    watching = [False]
    if rank == 1:
        watched = _WATCHED
        sys.addaudithook(lambda event, _: events.append(event) if watching[0] and event.startswith(watched) else None)
    report = []
    for case, status, header, sizes, expected in _hostile_frames(Path(marker)):
        if rank == 0:
            _send_by_hand(status, header, sizes, case)
        else:
            report.append(_receive_watched(case, expected, watching))
        # The group still works: an honest record goes through after every hostile frame.
        got = broadcast_metadata(Step(2, torch.arange(2)) if rank == 0 else None)
        if rank == 1 and not torch.equal(got.slot_mapping, torch.arange(2)):
            report.append(f"{case}: the next record arrived wrong")
    if rank == 1:
        problems = [line for line in report if line] + [f"audit event {event}" for event in events]
        Path(out).write_text("\n".join(problems) if problems else "ok")
    dist.barrier()
    dist.destroy_process_group()


def test_a_hostile_rank_0_makes_receivers_raise_broadcast_error_and_nothing_else(tmp_path: Path) -> None:
    import multiprocessing

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    context = multiprocessing.get_context("spawn")
    marker, out = tmp_path / "the pickle ran", tmp_path / "rank1.txt"
    processes = [
        context.Process(target=_hostile_rank, args=(rank, store.port, str(marker), str(out))) for rank in range(2)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(180)
        if process.is_alive():
            process.kill()
    assert [process.exitcode for process in processes] == [0, 0], "a rank crashed or hung"
    assert out.read_text() == "ok"
    assert not marker.exists(), "a pickle from rank 0 ran code on rank 1"


# --- found by an independent tester ---------------------------------------------------


def test_a_table_of_many_small_buffers_is_refused_before_it_is_read() -> None:
    header, _ = wire.pack(Step(4, torch.arange(4)))
    _, body = _split(header)
    count = 1_000_000
    many = _TABLE_HEAD.pack(b"MKW", wire.FORMAT, count) + bytes(8 * count) + bytes(count)
    _refused(_join(many, body), [b""] * 3, "lists 1000000 buffers, but 3 were given")
    _refused(_join(many, body), [b""] * count, "a small buffer of its own")


def test_a_second_buffer_in_lane_0_is_a_large_tensors_own() -> None:
    # Only lane 1's shared buffer may be small after the first (an outside tester read the format so, and a
    # broadcast received a small one before the tensor in it was refused).
    header, buffers = wire.pack(Step(4, torch.arange(4)))
    _, body = _split(header)
    small = _TABLE_HEAD.pack(b"MKW", wire.FORMAT, 2) + struct.pack("<2Q2B", len(buffers[0]), 64, 0, 0)
    with pytest.raises(WireError, match="a small buffer of its own"):
        wire.buffer_table(_join(small, body))
    lane_1 = _TABLE_HEAD.pack(b"MKW", wire.FORMAT, 2) + struct.pack("<2Q2B", len(buffers[0]), 64, 0, 1)
    assert [spec.lane for spec in wire.buffer_table(_join(lane_1, body))] == [0, 1]


def test_a_lane_other_than_0_and_1_is_refused() -> None:
    header, buffers = wire.pack(Step(4, torch.arange(4)))
    changed = bytearray(header)
    changed[_TABLE_HEAD.size + 8] = 200
    _refused(bytes(changed), buffers, "a lane other than 0 and 1")


@pytest.mark.parametrize(
    "buffers",
    [None, 7, iter([b""]), {0: b""}, {b""}, b"", bytearray(1), memoryview(b"")],
    ids=["None", "an int", "an iterator", "a dict", "a set", "bytes", "a bytearray", "a memoryview"],
)
def test_buffers_given_as_no_sequence_are_a_type_error_that_says_so(buffers: Any) -> None:
    # (Found by outside testers: unpack(header, None) said "object of type 'NoneType' has no len()", and a dict
    # was read as buffers, a peer's error.)
    header, _ = wire.pack(Step(4, torch.arange(4)))
    with pytest.raises(TypeError, match="takes the buffers that came with the header as a sequence, not "):
        wire.unpack(header, buffers)


def test_buffer_0_in_lane_1_is_refused() -> None:
    # (Found by an outside tester: buffer 0 is lane 0's shared buffer, but a table that put it in lane 1 was
    # read.)
    header, buffers = wire.pack(Step(4, torch.arange(4)))
    changed = bytearray(header)
    changed[_TABLE_HEAD.size + 8] = 1
    _refused(bytes(changed), buffers, r"buffer 0 \(lane 0's shared buffer\) in another lane")
    with pytest.raises(WireError, match="buffer 0"):
        wire.buffer_table(bytes(changed))


class _Proxy:
    """Shaped like a web framework's context-local proxy: any attribute read runs code."""

    __slots__ = ("_target",)

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"__getattr__({name!r}) ran")


current_app = _Proxy()


def test_a_class_name_through_an_object_runs_none_of_its_code() -> None:
    for name in (f"{__name__}:current_app.Step", f"{__name__}:_Proxy.__getattr__.Step", f"{__name__}:Step.x"):
        header, buffers = _edited(_step(), lambda body, name=name: body.__setitem__(0, name))
        _refused(header, buffers, "no dataclass made by ZeroCopyFields")


def test_allow_pickle_as_one_str_is_refused_not_read_by_substring() -> None:
    header, buffers = _with_pickle(_RunsCode())
    with pytest.raises(TypeError, match="allow_pickle takes True, False, or a collection"):
        wire.unpack(header, buffers, allow_pickle="my_app.builtins.print_wrapper")  # type: ignore[arg-type]


@pytest.mark.parametrize("allow_pickle", [1, 0, None, "yes", {"builtins.int"}])
def test_packs_allow_pickle_takes_only_a_bool(allow_pickle: Any) -> None:
    # It was taken by its truth, so 1 or a set of names pickled silently (an outside tester).
    with pytest.raises(TypeError, match=r"pack\(\)'s allow_pickle takes True or False, not "):
        wire.pack(_step(), allow_pickle=allow_pickle)


def test_a_value_nested_too_deep_or_holding_itself_is_refused_on_the_sender() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    deep: object = 1
    for _ in range(wire.MAX_DEPTH):
        deep = (deep,)
    assert wire.unpack(*wire.pack(Step(4, torch.arange(4), unresolved=deep))).unresolved == deep  # type: ignore[arg-type]
    for value in (cycle, (deep,), [{"a": deep}]):
        with pytest.raises(TypeError, match=f"nested more than {wire.MAX_DEPTH} levels deep, or holds itself"):
            wire.pack(Step(4, torch.arange(4), unresolved=value))  # type: ignore[arg-type]


@dataclass
class Chain(ZeroCopy):
    next: Chain | None = None


def test_a_chain_of_records_too_deep_is_refused_once_for_the_field_of_the_record_packed() -> None:
    chain = Chain()
    for _ in range(wire.MAX_DEPTH + 10):
        chain = Chain(chain)
    with pytest.raises(TypeError) as caught:
        wire.pack(chain)
    assert str(caught.value) == (
        f"field 'next' of Chain cannot be sent ($.next): it is nested more than {wire.MAX_DEPTH} levels deep, "
        "or holds itself"
    )


def test_a_tensor_with_numbers_of_4_gib_or_more_travels_in_a_wide_spec() -> None:
    empty = torch.empty(0, 1 << 33)  # no bytes, and strides of 2**33 elements
    got = wire.unpack(*wire.pack(Step(4, torch.arange(4), unresolved=[empty])))  # type: ignore[list-item]
    assert got.unresolved[0].shape == empty.shape
    assert got.unresolved[0].stride() == empty.stride()


# --- what a receiver says -------------------------------------------------------


class _Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this message cannot be read")


@dataclass
class RefusesValues(ZeroCopy):
    refusing: ClassVar[bool] = False
    step: int

    def __post_init__(self) -> None:
        if self.refusing:
            raise _Unreadable


@dataclass
class ChecksItsName(ZeroCopy):
    name: str

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"bad name {self.name}")


def test_an_init_error_that_quotes_a_value_that_arrived_is_one_printable_line_cut_short() -> None:
    # (Found by an outside tester: the message of a class's own error, which may quote a value a peer chose,
    # went into the WireError as it was: control characters and new lines that forge lines in a log, at any
    # length.)
    forged = "\x1b[2J " * 1000 + "\nERROR forged line"
    header, buffers = wire.pack(ChecksItsName("step"))
    body = bytes(header).replace(msgspec.msgpack.encode("step"), msgspec.msgpack.encode(forged))
    message = str(_refused(body, buffers, r"ChecksItsName\(\.\.\.\) raised ValueError: bad name \\x1b\[2J \\x1b"))
    assert message.isprintable()
    assert "forged" not in message
    assert len(message) < 1200
    assert message.endswith("...")


def test_an_init_error_whose_message_cannot_be_read_is_still_a_wire_error(monkeypatch: pytest.MonkeyPatch) -> None:
    header, buffers = wire.pack(RefusesValues(1))
    monkeypatch.setattr(RefusesValues, "refusing", True)
    _refused(header, buffers, r"RefusesValues\(\.\.\.\) raised _Unreadable \(its message cannot be read\)")


def test_a_class_name_from_the_peer_is_quoted_without_control_characters() -> None:
    def edit(body: list[Any]) -> None:
        body[0] = "no\x1b[31mmodule\x00:Step"

    header, buffers = _edited(_step(), edit)
    error = _refused(header, buffers, "no dataclass made by ZeroCopyFields")
    assert str(error).isprintable()
    assert "no\\x1b[31mmodule\\x00.Step" in str(error)


def test_the_format_document_names_the_version_that_headers_carry():
    # docs/wire-format.md: its title and its header table give the format's version, the fourth byte.
    text = (Path(__file__).parents[2] / "docs" / "wire-format.md").read_text(encoding="utf-8")
    header = wire.pack(Step(num_tokens=1, slot_mapping=torch.arange(3))).header
    assert header[3] == wire.FORMAT
    assert re.search(r"^# The wire format \(format (\d+)\)$", text, re.MULTILINE).group(1) == str(wire.FORMAT)
    assert re.search(r"^3 +1 +format: (\d+)$", text, re.MULTILINE).group(1) == str(wire.FORMAT)


# --- unpack's usual way --------------------------------------------------------------


@dataclass
class Usual(ZeroCopy):
    """A record that ``unpack`` reads its usual way: plain values, and tensors each of a storage of its own."""

    num_tokens: int
    first: torch.Tensor
    second: torch.Tensor | None
    lens: list[int] | None = None


_USUAL_SPEC = struct.Struct("<B3sII")
"""The usual spec of a tensor: its dtype code, three bytes of flags, ndim and kind, its buffer and offset; then
its sizes, each a ``u32``."""


def _outcome(read: Callable[[], Any]) -> object:
    """``WireError``, or the record's values, each tensor by where it lies: the same memory, the same values."""
    try:
        record = read()
    except WireError:
        return WireError
    return [
        (value.dtype, value.shape, value.stride(), value.data_ptr()) if isinstance(value, torch.Tensor) else value
        for value in record.astuple_zerocopy()
    ]


@pytest.mark.parametrize("value", [0, 1, 2, 7, 63, 64, 72, 128, 255, 1 << 16, (1 << 31) + 64, (1 << 32) - 1])
@pytest.mark.parametrize("part", ["dtype code", "buffer", "offset", "first size", "last size"])
@pytest.mark.parametrize("name", ["first", "second"])
def test_unpacks_usual_way_reads_a_changed_tensor_spec_as_its_general_way_does(
    name: str, part: str, value: int
) -> None:
    # The usual way reads its record in one pass; it must take exactly what the general way takes, and make
    # the same tensors of it: a second tensor moved over the first one's bytes, say, is refused by both.
    record = Usual(3, torch.arange(5, dtype=torch.int64), torch.ones(2, 3, dtype=torch.int32), [1, 2])
    position = [f.name for f in Usual.__dataclass_fields__.values()].index(name)

    def edit(body: list[Any]) -> None:
        data = bytearray(body[3][position].data)
        code, tags, buffer, offset = _USUAL_SPEC.unpack_from(data)
        sizes = list(struct.unpack_from(f"<{tags[1]}I", data, _USUAL_SPEC.size))
        if part == "dtype code":
            code = value & 0xFF
        elif part == "buffer":
            buffer = value
        elif part == "offset":
            offset = value
        else:
            sizes[0 if part == "first size" else -1] = value
        body[3][position] = msgspec.msgpack.Ext(
            _TENSOR, _USUAL_SPEC.pack(code, tags, buffer, offset) + struct.pack(f"<{len(sizes)}I", *sizes)
        )

    header, buffers = _edited(record, edit)
    assert type(header) is bytes  # the usual way reads a bytes header
    usual = _outcome(lambda: wire.unpack(header, buffers))
    assert usual == _outcome(lambda: wire._unpack_general(header, buffers, False))
    if part == "offset" and name == "second" and value == 0:
        assert usual is WireError  # over the first tensor's bytes


@pytest.mark.parametrize("header_as", [bytes, memoryview], ids=["usual way", "general way"])
def test_a_bytearray_that_received_tensors_view_cannot_be_resized_under_them(header_as: type) -> None:
    # (Found by an outside tester: the usual way made its tensors of the bytearrays themselves, which torch
    # holds no export of; a caller reusing its receive buffer freed the memory the tensors still read.)
    record = Usual(1, torch.arange(4, dtype=torch.int64), torch.arange(1 << 15, dtype=torch.int32))
    header, buffers = wire.pack(record)
    received = [bytearray(buffer) for buffer in buffers]
    assert len(received) == 2  # the small tensor in the shared buffer, the large one in a buffer of its own
    back = wire.unpack(header_as(bytes(header)), received)
    for buffer in received:
        with pytest.raises(BufferError):
            buffer.clear()
    assert back.first.tolist() == [0, 1, 2, 3]
    assert torch.equal(back.second, record.second)


@pytest.mark.parametrize("header_as", [bytes, memoryview], ids=["usual way", "general way"])
def test_releasing_the_memoryview_a_buffer_came_in_frees_nothing_a_received_tensor_reads(header_as: type) -> None:
    # (Found by an outside tester: the usual way made its tensors of the caller's own memoryview, which
    # torch holds no export of; releasing it, or closing the SharedMemory it came from, freed or unmapped
    # the memory the tensors read, and the process crashed.)
    record = Usual(1, torch.arange(4, dtype=torch.int64), torch.arange(1 << 15, dtype=torch.int32))
    header, buffers = wire.pack(record)
    memory = [bytearray(buffer) for buffer in buffers]
    given = [memoryview(buffer) for buffer in memory]
    back = wire.unpack(header_as(bytes(header)), given)
    for view in given:
        view.release()
    for buffer in memory:
        with pytest.raises(BufferError):
            buffer.clear()
    shared = shared_memory.SharedMemory(create=True, size=len(buffers[1]))
    try:
        shared.buf[:] = buffers[1]
        back = wire.unpack(header_as(bytes(header)), [bytearray(buffers[0]), shared.buf])
        with pytest.raises(BufferError):
            shared.close()
        assert torch.equal(back.second, record.second)
        del back
        gc.collect()
    finally:
        shared.close()
        shared.unlink()


class _ShortBytes(bytes):
    def __len__(self) -> int:
        return 3


def _outcome_of_unpacking(header: Any, buffers: Sequence[Any]) -> object:
    try:
        return wire.unpack(header, buffers).astuple_zerocopy()[0]
    except WireError as error:
        return str(error)


@pytest.mark.parametrize(
    "form",
    [
        lambda data: memoryview(data).cast("B", (1, len(data))),
        lambda data: memoryview(data).cast("H"),
        lambda data: memoryview(data).cast("i"),
        _ShortBytes,
        lambda data: memoryview(data).cast("c"),
        lambda data: (ctypes.c_char * len(data)).from_buffer_copy(data),
    ],
    ids=["2-D", "u16 items", "i32 items", "a bytes subclass whose len lies", "char items", "a ctypes array"],
)
def test_a_header_is_read_by_its_bytes_whatever_holds_them(form: Callable[[bytes], Any]) -> None:
    # (Found by outside testers: a memoryview header was measured, sliced and indexed by its items, so a
    # valid header was refused as cut short, bytes refused as bytes were read as 16-bit items, and a header
    # in a ctypes array raised NotImplementedError.)
    header, buffers = wire.pack(Usual(7, torch.arange(4, dtype=torch.int64), torch.arange(1 << 15)))
    assert len(buffers) == 2  # the table's lanes are read, byte by byte
    header = bytes(header)
    table = 8 + 9 * len(buffers)
    for data in (
        header + b"\0" * (-len(header) % 4),  # the header, then bytes that are not msgpack
        header[:table] + b"\xc1" * 4 * table + header[table:] + b"\0" * (-len(header) % 4),  # junk inside
    ):
        assert _outcome_of_unpacking(form(data), buffers) == _outcome_of_unpacking(data, buffers)
    exact = header if len(header) % 4 == 0 else None
    if exact is not None:
        assert _outcome_of_unpacking(form(exact), buffers) == 7
    assert wire.buffer_count(form(header + b"\0" * (-len(header) % 4))) == len(buffers)
    assert [spec.nbytes for spec in wire.buffer_table(form(header + b"\0" * (-len(header) % 4)))] == [
        len(buffer) for buffer in buffers
    ]


def test_a_header_of_char_items_reads_the_lane_of_each_buffer_by_its_byte() -> None:
    # (Found by an outside tester: the lane of buffer 1 was read as an item, b'\x01', which is not 1, so a
    # valid header whose buffer 1 is lane 1's shared buffer was refused.)
    header, (shared,) = wire.pack(Usual(7, torch.arange(8, dtype=torch.int64), None))
    table = _TABLE_HEAD.size + 9
    spec = bytes([5, 0, 1, 0]) + struct.pack("<III", 0, 0, 8)  # int64, flags 0, 1 dimension, kind 0; buffer 0
    assert header.count(spec) == 1
    body = bytes(header[table:]).replace(spec, spec[:4] + struct.pack("<III", 1, 0, 8))  # now in buffer 1
    moved = _TABLE_HEAD.pack(b"MKW", wire.FORMAT, 2) + struct.pack("<QQ", 0, len(shared)) + bytes([0, 1]) + body
    for header_given in (moved, memoryview(bytearray(moved)).cast("c")):
        assert wire.unpack(header_given, [bytearray(), bytearray(shared)]).first.tolist() == list(range(8))


def test_a_header_given_as_a_two_dimensional_view_of_its_bytes_arrives() -> None:
    header, buffers = wire.pack(Usual(7, torch.arange(4, dtype=torch.int64), None))
    assert wire.unpack(memoryview(bytes(header)).cast("B", (1, len(header))), buffers).num_tokens == 7


def test_a_header_that_is_not_contiguous_bytes_is_refused_naming_it() -> None:
    header, buffers = wire.pack(Usual(1, torch.arange(4, dtype=torch.int64), None))
    strided = memoryview(bytes(header) * 2)[::2]
    with pytest.raises(WireError, match="the header is not a contiguous bytes-like object"):
        wire.unpack(strided, buffers)
    with pytest.raises(WireError, match="the header is not a contiguous bytes-like object"):
        wire.unpack("not bytes", buffers)  # type: ignore[arg-type]


@contextlib.contextmanager
def _at_collection(number: int, change: Callable[[], None]) -> Iterator[None]:
    """Run *change* at the *number*-th garbage collection inside the block, one at every allocation: where a
    finalizer, or another thread, could run between any two steps of what the block calls."""
    count = 0

    def callback(phase: str, _: dict[str, int]) -> None:
        nonlocal count
        if phase == "start":
            count += 1
            if count == number:
                change()

    gc.callbacks.append(callback)
    threshold = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(callback)


@pytest.mark.parametrize("header_as", [bytes, memoryview], ids=["usual way", "general way"])
@pytest.mark.parametrize("change", ["clear", "extend"])
def test_a_buffer_changed_while_it_is_read_gives_a_wire_error_or_the_record_never_a_wrong_size(
    header_as: type, change: str
) -> None:
    # (Found by an outside tester: the usual way read a buffer's size before it held the buffer, so a buffer
    # cleared meanwhile raised a raw ValueError, and one grown meanwhile gave a record of a buffer no longer
    # the size the table lists.)
    record = Usual(1, torch.arange(4, dtype=torch.int64), torch.arange(1 << 15, dtype=torch.int32))
    header, buffers = wire.pack(record)
    for number in range(1, 40):
        given = [bytearray(buffer) for buffer in buffers]

        def changed(buffer: bytearray = given[1]) -> None:
            with contextlib.suppress(BufferError):  # refused once the buffer is held
                buffer.clear() if change == "clear" else buffer.extend(bytes(1024))

        try:
            with _at_collection(number, changed):
                back = wire.unpack(header_as(bytes(header)), given)
        except WireError:
            continue
        assert len(given[1]) == len(buffers[1])
        assert torch.equal(back.second, record.second)


@pytest.mark.parametrize("general", [False, True], ids=["usual way", "general way"])
def test_a_tensor_whose_storage_is_replaced_while_it_is_packed_sends_its_old_or_new_bytes(general: bool) -> None:
    # (Found by an outside tester: pack read a small tensor's address, ran Python code, then copied from the
    # address, which a set_ meanwhile had freed: it sent another tensor's bytes, or the allocator's.)
    for number in range(1, 40):
        small = torch.arange(4096, dtype=torch.int64)
        record = Usual(1, small, None)
        kept: list[torch.Tensor] = []

        def replaced(small: torch.Tensor = small, kept: list[torch.Tensor] = kept) -> None:
            small.set_(torch.zeros(4096, dtype=torch.int64))
            kept.extend(torch.full((4096,), -7, dtype=torch.int64) for _ in range(4))  # over the freed bytes

        with _at_collection(number, replaced):
            packed = wire.pack(record, skip_fields=() if general else None)
        sent = torch.frombuffer(bytearray(packed.buffers[0]), dtype=torch.int64)[:4096]
        assert torch.equal(sent, torch.arange(4096)) or not sent.any(), f"collection {number}: {sent[:4]}"


@pytest.mark.parametrize("header_as", [bytes, memoryview], ids=["usual way", "general way"])
def test_a_released_memoryview_given_as_a_buffer_is_a_wire_error(header_as: type) -> None:
    header, (buffer,) = wire.pack(Usual(1, torch.arange(4, dtype=torch.int64), None))
    released = memoryview(bytearray(buffer))
    released.release()
    with pytest.raises(WireError, match=r"buffer 0 is not a bytes-like object.*released"):
        wire.unpack(header_as(bytes(header)), [released])


def test_a_bytearray_header_cleared_while_it_is_read_gives_a_wire_error_or_the_record() -> None:
    # (Found by an outside tester: the general way read a bytearray header without holding it, so one
    # cleared meanwhile, by another thread or a finalizer, raised a raw struct.error.)
    record = Usual(1, torch.arange(4, dtype=torch.int64), None)
    header, buffers = wire.pack(record)
    tensors = [torch.frombuffer(bytearray(buffer), dtype=torch.uint8) for buffer in buffers]  # the general way
    for number in range(1, 30):
        given = bytearray(header)

        def cleared(given: bytearray = given) -> None:
            with contextlib.suppress(BufferError):  # refused once the header is held
                given.clear()

        try:
            with _at_collection(number, cleared):
                back = wire.unpack(given, tensors)
        except WireError:
            continue
        assert back.first.tolist() == [0, 1, 2, 3]


class _Plain:
    """A listed class whose instances take attributes."""


def _hands_out_the_table() -> dict[str, int]:
    return _LISTED_TABLE


@pytest.mark.parametrize(
    ("listed", "table"),
    [
        ("_LISTED_TABLE", _global(__name__, "_LISTED_TABLE")),
        ("_hands_out_the_table", _global(__name__, "_hands_out_the_table") + b")R"),
    ],
    ids=["a listed dict", "a dict a listed function hands out"],
)
@pytest.mark.parametrize("then", [b"}\x8c\x04evil\x8c\x05PWNEDsb", b""], ids=["built again", "built once"])
def test_a_pickle_may_not_make_a_listed_dict_an_instances_dict(listed: str, table: bytes, then: bytes) -> None:
    # Found by an outside tester: BUILD with the slot state {"__dict__": D} made a listed dict the __dict__ of a
    # new instance of a listed class, and a second BUILD (or an attribute set once it arrived) wrote into it.
    data = b"\x80\x04" + _global(__name__, "_Plain") + b")RN}\x8c\x08__dict__" + table + b"s\x86b" + then + b"."
    header, buffers = _with_pickled_bytes(data)
    allowed = {f"{__name__}._Plain", f"{__name__}.{listed}"}
    _refused(header, buffers, r"would change (.*_LISTED_TABLE|what a call returned .*) in place", allow_pickle=allowed)
    assert _LISTED_TABLE == {"kept": 1}


# --- what docs/wire-format.md says of the bytes pack writes (found unstated by an outside tester) ----------


@dataclass
class _Pair(ZeroCopy):
    first: torch.Tensor
    second: torch.Tensor
    group: object = None


def test_a_tensor_sent_again_is_a_twelve_byte_spec_that_says_nothing_more() -> None:
    # docs/wire-format.md: kind 2's spec is 12 bytes: code, flags and D 0, the earlier tensor's number, offset 0.
    tensor = torch.arange(4)
    _, body = _split(wire.pack(_Pair(tensor, tensor)).header)
    assert body[3][1] == msgspec.msgpack.Ext(_TENSOR, bytes([0, 0, 0, 2]) + struct.pack("<II", 0, 0))


def test_a_dimension_of_size_one_is_sent_with_the_contiguous_stride() -> None:
    # docs/wire-format.md: the stride of a dimension of size 1 is written as a contiguous tensor has it, the
    # offset of a view is in bytes.
    parent = torch.arange(40)
    view = parent.as_strided((3, 1), (2, 10), 10)
    _, body = _split(wire.pack(_Pair(parent, view)).header)
    _, flags, _, kind, reference, offset = struct.unpack_from("<BBBBII", body[3][1].data)
    assert (kind, reference, offset, flags & _STRIDES) == (1, 0, 80, _STRIDES)
    assert struct.unpack_from("<4I", body[3][1].data, 12) == (3, 1, 2, 1)
    assert wire.unpack(*wire.pack(_Pair(parent, view))).second.stride() == (2, 1)


def test_a_record_sent_again_is_numbered_from_zero_little_endian() -> None:
    # docs/wire-format.md: ext 7 holds a record's number (u32, little-endian), counting from 0.
    inner = _Pair(torch.arange(1), torch.arange(1))
    _, body = _split(wire.pack(_Pair(torch.arange(1), torch.arange(1), [inner, inner])).header)
    assert body[3][2][1] == msgspec.msgpack.Ext(_RECORD_AGAIN, struct.pack("<I", 0))


def test_the_digest_is_the_crc32_of_the_utf8_field_lines() -> None:
    fields = [("ñame", int), ("x", object, field(default=None, metadata=OMIT)), ("değer", int, field(default=0))]
    record = make_dataclass("Ünï", fields, bases=(ZeroCopy,))(1)
    _, body = _split(wire.pack(record).header)
    assert body[1] == zlib.crc32("ñame\nx OMIT\ndeğer".encode())
