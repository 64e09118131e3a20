"""``metakit.wire``'s generated code for a record class: it sends and reads exactly what the general way does.

A class whose ``asdict_zerocopy`` is its own generated one gets, the first
time a record of it travels, an ``encode`` and a ``build`` written for its
fields.  ``skip_fields=()`` sends the same fields the general way, so the two
can be compared byte for byte.
"""

from __future__ import annotations

import ast
import datetime
import functools
import re
import subprocess
import sys
import time
import types
import warnings
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, fields, make_dataclass, replace
from typing import (  # noqa: UP035
    TYPE_CHECKING,
    Annotated,
    Any,
    Dict,
    Final,
    ForwardRef,
    Literal,
    LiteralString,
    NewType,
    NoReturn,
    Optional,
    Protocol,
    Self,
    Tuple,
    TypedDict,
    TypeVar,
    TypeVarTuple,
    Union,
    Unpack,
)
from unittest import mock

import msgspec
import pytest
import torch
import typing_extensions
from engine_records import KernelWrapper, WrapperMetadata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.testing._internal.two_tensor import TwoTensor

from metakit import ZeroCopy, wire
from metakit.examples.engine import example_records
from metakit.wire import WireError

if TYPE_CHECKING:
    from engine_records import NeverImported  # type: ignore[attr-defined]  # a name no one can resolve at run time


@dataclass
class Mixed(ZeroCopy):
    count: int
    ratio: float
    flag: bool
    name: str
    blob: bytes
    lens: list[int] | None
    scores: list[float]
    tokens: torch.Tensor
    optional: torch.Tensor | None
    dtype: torch.dtype
    anything: Any = None


def _mixed(**changes: Any) -> Mixed:
    values: dict[str, Any] = {
        "count": 3,
        "ratio": 0.5,
        "flag": True,
        "name": "step",
        "blob": b"\x00\x01",
        "lens": [1, 2, True],
        "scores": [1, 2.5, False],
        "tokens": torch.arange(6, dtype=torch.int32).view(2, 3),
        "optional": None,
        "dtype": torch.bfloat16,
        "anything": {"nested": [1, (2, 3)]},
    }
    values.update(changes)
    return Mixed(**values)


def _general_header(record: object) -> bytes:
    return wire.pack(record, skip_fields=()).header


@pytest.mark.parametrize("record", [*example_records(), _mixed(), _mixed(optional=torch.ones(2), lens=None)])
def test_the_generated_way_sends_the_bytes_the_general_way_sends(record: object) -> None:
    header, buffers = wire.pack(record)
    assert header == _general_header(record)
    back = wire.unpack(header, buffers)
    for name, value in record.asdict_zerocopy().items():  # type: ignore[attr-defined]
        got = getattr(back, name)
        if isinstance(value, torch.Tensor):
            assert torch.equal(got, value)
        else:
            assert type(got) is type(value)
            assert got == value


def test_values_keep_their_own_types_where_the_annotation_takes_several() -> None:
    back = wire.unpack(*wire.pack(_mixed(count=True, ratio=7, scores=[1, 2.5, True])))
    assert (type(back.count), type(back.ratio)) == (bool, int)
    assert [type(score) for score in back.scores] == [int, float, bool]


@dataclass
class Rotation(ZeroCopy):
    scale: complex = 1.0
    shift: complex | None = None


def test_an_int_and_a_float_are_complex_values_as_in_typing() -> None:
    back = wire.unpack(*wire.pack(Rotation(2, 0.5)))
    assert (type(back.scale), type(back.shift)) == (int, float)
    with pytest.raises(TypeError, match=r"^Rotation cannot be sent: Expected `complex`, got `str` - at `\$.scale`$"):
        wire.pack(Rotation("2"))
    with pytest.raises(TypeError, match=r"a value of type builtins\.complex is not plain data"):
        wire.pack(Rotation(1j))  # travels pickled, with the opt-in


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"count": 1 << 64}, "$.count"),
        ({"lens": [1, -(1 << 63) - 1]}, "$.lens[1]"),
        ({"anything": {"deep": [1 << 70]}}, "$.anything['deep'][0]"),
    ],
)
def test_an_int_beyond_64_bits_names_its_field_and_its_place_in_it(changes: dict[str, Any], path: str) -> None:
    name = path[2:].partition("[")[0]
    with pytest.raises(TypeError, match=rf"field '{name}' of Mixed cannot be sent \({re.escape(path)}\).*64 bits"):
        wire.pack(_mixed(**changes))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"count": "3"}, "Expected `int`, got `str` - at `$.count`"),
        ({"lens": [1, "2"]}, "Expected `int`, got `str` - at `$.lens[1]`"),
        ({"tokens": None}, "Expected `torch.Tensor`, got `NoneType` - at `$.tokens`"),
        ({"dtype": "bfloat16"}, "Expected `torch.dtype`, got `str` - at `$.dtype`"),
    ],
)
def test_the_sender_refuses_what_breaks_the_annotations(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message.replace("$", r"\$").replace("[", r"\[")):
        wire.pack(_mixed(**changes))


def _claiming(kind: type) -> object:
    """An object whose ``__class__`` claims *kind*: ``isinstance`` takes it for one."""

    class Claiming:
        @property
        def __class__(self) -> type:  # type: ignore[override]
            return kind

    return Claiming()


def _fake_tensor() -> torch.Tensor:
    from torch._subclasses.fake_tensor import FakeTensorMode  # torch's own, imported where used

    with FakeTensorMode():
        return torch.ones(2)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"optional": _claiming(torch.Tensor)}, r"field 'optional' of Mixed cannot be sent \(\$\.optional\): a "),
        ({"lens": _claiming(list)}, r"Expected `list \| None`, got `[\w.<>]+Claiming` - at `\$\.lens`"),
        ({"anything": _claiming(dict)}, r"field 'anything' of Mixed cannot be sent \(\$\.anything\): a value of"),
        ({"scores": mock.Mock(spec=list)}, r"Expected `list`, got `unittest\.mock\.Mock` - at `\$\.scores`"),
        ({"tokens": mock.Mock(spec=torch.Tensor)}, r"\(\$\.tokens\): a value of type unittest\.mock\.Mock is not"),
        ({"optional": TwoTensor(torch.ones(2), torch.ones(2))}, r"\(\$\.optional\): a [\w.]+TwoTensor, whose data"),
        ({"optional": _fake_tensor()}, r"\(\$\.optional\): a [\w.]+FakeTensor, whose data cannot be read"),
    ],
    ids=["claims a tensor", "claims a list", "claims a dict", "mock list", "mock tensor", "wrapper tensor", "fake"],
)
def test_a_value_that_claims_a_type_or_a_tensor_without_data_is_refused_naming_its_field(
    changes: dict[str, Any], message: str
) -> None:
    # DESIGN: "Any other value is refused on the sender with a TypeError naming the field."  These raised
    # AttributeError, RuntimeError or a TypeError of their own (an outside tester).
    with pytest.raises(TypeError, match=message):
        wire.pack(_mixed(**changes))


def test_a_tuple_of_the_wrong_length_and_a_value_no_literal_holds_are_shown_as_they_came() -> None:
    # "Expected `tuple of 2`, got `tuple`" said neither the length nor the value (an outside tester).
    cls = make_dataclass(
        f"Shown{len(_made)}", [("pair", tuple[int, int]), ("mode", Literal["decode", "prefill"])], bases=(ZeroCopy,)
    )
    _made.append(cls)
    good = cls((1, 2), "decode")
    for changes, message in [
        ({"pair": (1, 2, 3)}, "Expected `tuple of 2`, got `tuple of 3` - at `$.pair`"),
        ({"mode": "chunked"}, "Expected `Literal['decode', 'prefill']`, got `'chunked'` - at `$.mode`"),
        ({"mode": 5}, "Expected `Literal['decode', 'prefill']`, got `int` - at `$.mode`"),
    ]:
        with pytest.raises(TypeError, match=re.escape(message)):
            wire.pack(replace(good, **changes))
    with pytest.raises(WireError, match=re.escape("got `'" + "x" * 59 + "...` - at `$.mode`")):
        wire.unpack(_with_value(good, 1, "x" * 1000), wire.pack(good).buffers)  # a peer's value, cut short


def test_a_slots_field_named_like_a_builtin_does_not_hide_it_from_the_other_annotations() -> None:
    # With slots=True the class holds a descriptor under each field's name, which hid the builtin ``bytes``
    # from ``data: bytes``: that field took any value (an outside tester).
    cls = make_dataclass(
        f"Slotted{len(_made)}",
        [("bytes", "int"), ("data", "bytes", field(default=b""))],
        bases=(ZeroCopy,),
        namespace={"__module__": __name__},
        slots=True,
    )
    _made.append(cls)
    good = cls(1, b"x")
    assert wire.unpack(*wire.pack(good)) == good
    with pytest.raises(TypeError, match=re.escape("Expected `bytes`, got `int` - at `$.data`")):
        wire.pack(cls(1, 12345))
    with pytest.raises(WireError, match=re.escape("Expected `bytes`, got `int` - at `$.data`")):
        wire.unpack(_with_value(good, 1, 12345), wire.pack(good).buffers)


Ts = TypeVarTuple("Ts")


@pytest.mark.parametrize(
    "annotation",
    [
        tuple[Unpack[Ts]],  # tuple[*Ts]
        tuple[int, Unpack[Ts]],
        tuple.__class_getitem__((str, *tuple[int, ...])),  # tuple[str, *tuple[int, ...]], on 3.10's parser
        Tuple[int, Unpack[Tuple[str, ...]]],  # noqa: UP006  # typing's spelling, on purpose
    ],
    ids=["*Ts", "int, *Ts", "str, *tuple[int, ...]", "typing's Unpack"],
)
def test_a_tuple_with_an_unpacked_item_takes_any_tuple(annotation: object) -> None:
    # PEP 646: the unpacked item was read as one item that must be a tuple, so a record could not even send
    # its own default (an outside tester).  Its items are left unchecked, as a TypeVar's value is.
    cls = make_dataclass(f"Variadic{len(_made)}", [("value", annotation)], bases=(ZeroCopy,))
    _made.append(cls)
    for value in [(), (1,), ("layer", 1, 2), (1, "x", 2.5)]:
        record = cls(value)
        assert wire.unpack(*wire.pack(record)) == record
    with pytest.raises(TypeError, match=r"Expected `tuple`, got `list` - at `\$\.value`"):
        wire.pack(cls([1]))
    with pytest.raises(WireError, match=r"Expected `tuple`, got `list` - at `\$\.value`"):
        wire.unpack(_with_value(cls((1,)), 0, [1]), wire.pack(cls((1,))).buffers)


@dataclass
class Chained(ZeroCopy):
    step: int = 0
    parent: typing_extensions.Self | None = None  # typing's own Self from 3.11 on
    children: list[Self] = field(default_factory=list)


@dataclass
class ChainedFurther(Chained):
    pass


def test_self_is_a_record_of_the_class_checked() -> None:
    # Self took any value (the last session's note).  As a type checker binds it, a subclass's record holds
    # records of the subclass.
    good = Chained(1, Chained(2), [Chained(3)])
    assert wire.unpack(*wire.pack(good)) == good
    further = ChainedFurther(1, ChainedFurther(2), [ChainedFurther(3)])
    assert wire.unpack(*wire.pack(further)) == further
    assert wire.unpack(*wire.pack(Chained(1, further))) == Chained(1, further)
    with pytest.raises(TypeError, match=re.escape(f"Expected `{__name__}.Chained | None`, got `int` - at `$.parent`")):
        wire.pack(Chained(1, 5))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=re.escape(f"Expected `{__name__}.ChainedFurther`, got `{__name__}.Chained`")):
        wire.pack(ChainedFurther(1, None, [Chained(3)]))
    with pytest.raises(WireError, match=re.escape("got `int` - at `$.children[0]`")):
        wire.unpack(_with_value(good, 2, [7]), wire.pack(good).buffers)


@pytest.mark.parametrize(
    ("index", "value", "message"),
    [
        (0, "3", "Expected `int`, got `str` - at `$.count`"),
        (5, [1, "2"], "Expected `int`, got `str` - at `$.lens[1]`"),
        (4, "text", "Expected `bytes`, got `str` - at `$.blob`"),
        (7, 5, "Expected `torch.Tensor`, got `int` - at `$.tokens`"),
        (0, 1.5, "Expected `int`, got `float` - at `$.count`"),
        (3, None, "Expected `str`, got `NoneType` - at `$.name`"),
        (6, [1, "x"], "Expected `float`, got `str` - at `$.scores[1]`"),
        (2, 1, "Expected `bool`, got `int` - at `$.flag`"),
    ],
)
def test_the_receiver_names_the_field_that_breaks_the_annotations(index: int, value: object, message: str) -> None:
    header, buffers = wire.pack(_mixed())
    count = wire.buffer_count(header)
    start = 8 + 9 * count
    body = msgspec.msgpack.decode(header[start:], ext_hook=msgspec.msgpack.Ext)
    body[3][index] = value
    changed = header[:start] + msgspec.msgpack.encode(body)
    with pytest.raises(WireError, match=message.replace("$", r"\$").replace("[", r"\[")):
        wire.unpack(changed, buffers)


@dataclass
class Keyed(ZeroCopy):
    by_layer: dict[int, torch.Tensor] = field(default_factory=dict)
    layers: Iterable[int] = ()
    scales: dict[str, float] | None = None


@pytest.mark.parametrize(
    ("index", "value", "message"),
    [
        (0, {"0": 1}, "Expected `int`, got `str` - at `key` in `$.by_layer`"),
        (0, {0: "x"}, "Expected `torch.Tensor`, got `str` - at `$.by_layer[0]`"),
        (1, {"a": 1}, "Expected `int`, got `str` - at `key` in `$.layers`"),  # a dict's items are its keys
        (1, [1, "a"], "Expected `int`, got `str` - at `$.layers[1]`"),
        (2, {1: 0.5}, "Expected `str`, got `int` - at `key` in `$.scales`"),  # inside an Optional
    ],
)
def test_a_dict_key_that_breaks_the_annotation_is_named_as_msgspec_names_it(
    index: int, value: object, message: str
) -> None:
    pattern = re.escape(message)
    with pytest.raises(TypeError, match=pattern):
        wire.pack(Keyed(**{["by_layer", "layers", "scales"][index]: value}))  # type: ignore[arg-type]
    header, buffers = wire.pack(Keyed())
    start = 8 + 9 * wire.buffer_count(header)
    body = msgspec.msgpack.decode(header[start:], ext_hook=msgspec.msgpack.Ext)
    body[3][index] = value
    with pytest.raises(WireError, match=pattern):
        wire.unpack(header[:start] + msgspec.msgpack.encode(body), buffers)


def test_a_later_override_of_asdict_zerocopy_is_honoured() -> None:
    @dataclass
    class Late(ZeroCopy):
        kept: int
        dropped: int = 0

    wire.pack(Late(1, 2))  # the generated code is made
    Late.asdict_zerocopy = lambda self, skip_fields=None: {"kept": self.kept}  # type: ignore[method-assign]
    back = wire.unpack(*wire.pack(Late(1, 2)))
    assert (back.kept, back.dropped) == (1, 0)


def test_a_later_getstate_is_honoured() -> None:
    @dataclass
    class Late(ZeroCopy):
        kept: int
        dropped: int = 0

    wire.pack(Late(1, 2))
    Late.__getstate__ = lambda self: {"kept": self.kept}  # type: ignore[method-assign]
    back = wire.unpack(*wire.pack(Late(1, 2)))
    assert (back.kept, back.dropped) == (1, 0)


def test_an_override_from_the_class_body_is_honoured() -> None:
    record = WrapperMetadata(3, torch.arange(3), None, 32, KernelWrapper(), KernelWrapper())
    back = wire.unpack(*wire.pack(record))
    assert (back.page_size, back.prefill_wrapper, back.decode_wrapper) == (32, None, None)


def test_a_contiguous_tensor_travels_without_strides_and_a_transposed_one_keeps_them() -> None:
    @dataclass
    class Pair(ZeroCopy):
        tensor: torch.Tensor

    plain = torch.arange(12.0).view(3, 4)
    short, long = wire.pack(Pair(plain)).header, wire.pack(Pair(plain.t())).header
    assert len(long) == len(short) + 2 * 4  # two u32 strides more
    back = wire.unpack(*wire.pack(Pair(plain.t())))
    assert back.tensor.stride() == (1, 4)
    assert torch.equal(back.tensor, plain.t())


_INTS = st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
_PLAIN_VALUES = st.recursive(
    st.none() | st.booleans() | _INTS | st.floats(allow_nan=False) | st.text(max_size=5) | st.binary(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3) | _INTS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_typed_way_and_the_general_way_take_and_refuse_the_same_values(data: st.DataObject) -> None:
    header, buffers = wire.pack(_mixed())
    start = 8 + 9 * wire.buffer_count(header)
    body = msgspec.msgpack.decode(header[start:], ext_hook=msgspec.msgpack.Ext)
    values = body[3]
    for index in data.draw(st.sets(st.integers(0, len(values) - 1), max_size=3)):
        values[index] = data.draw(_PLAIN_VALUES)
    outcomes = []
    for names in (None, list(range(len(values)))):  # the typed way, then the general way
        changed = header[:start] + msgspec.msgpack.encode([body[0], body[1], names, values])
        try:
            back = wire.unpack(changed, buffers)
        except WireError:
            outcomes.append("WireError")
        else:
            outcomes.append(
                [(type(value), value) for value in back.astuple_zerocopy() if not isinstance(value, torch.Tensor)]
            )
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(
    ("index", "value", "message"),
    [
        (0, msgspec.msgpack.Ext(2, msgspec.msgpack.encode([1, 2])), "Expected `int`, got `tuple` - at `$.count`"),
        (5, msgspec.msgpack.Ext(2, msgspec.msgpack.encode([1])), "Expected `list | None`, got `tuple` - at `$.lens`"),
        (5, [1, msgspec.msgpack.Ext(4, b"float32")], "Expected `int`, got `torch.dtype` - at `$.lens[1]`"),
        (3, msgspec.msgpack.Ext(5, b"cpu"), "Expected `str`, got `torch.device` - at `$.name`"),
    ],
)
def test_an_extension_where_a_plain_value_belongs_is_named_as_the_general_way_names_it(
    index: int, value: object, message: str
) -> None:
    header, buffers = wire.pack(_mixed())
    start = 8 + 9 * wire.buffer_count(header)
    body = msgspec.msgpack.decode(header[start:], ext_hook=msgspec.msgpack.Ext)
    body[3][index] = value
    for names in (None, list(range(len(body[3])))):  # the typed way, then the general way
        changed = header[:start] + msgspec.msgpack.encode([body[0], body[1], names, body[3]])
        with pytest.raises(WireError, match=re.escape(message)) as caught:
            wire.unpack(changed, buffers)
        assert type(caught.value) is WireError  # no private subclass in the caller's traceback


@pytest.mark.parametrize(
    ("value", "place", "problem"),
    [
        ({1 << 64: 1}, "", "the int dict key 18446744073709551616, which does not fit in 64 bits, is not plain"),
        ([{-(1 << 63) - 1: 0}], "[0]", "does not fit in 64 bits"),
        ("\ud800", "", "is not UTF-8 text"),
        ({"\udc80": 1}, "", "is not UTF-8 text"),
        (["ok", ("\ud800",)], "[1][0]", "is not UTF-8 text"),
    ],
)
def test_what_msgspec_cannot_write_is_refused_naming_the_field_both_ways(
    value: object, place: str, problem: str
) -> None:
    for skip_fields in (None, ()):
        with pytest.raises(
            TypeError,
            match=rf"field 'anything' of Mixed cannot be sent \(\$\.anything{re.escape(place)}\): .*{problem}",
        ):
            wire.pack(_mixed(anything=value), skip_fields=skip_fields)
        # With the opt-in, on both sides, it travels pickled and arrives as it left.
        # (Found by an outside tester: these were refused with the opt-in too, and the message named none.)
        with pytest.raises(TypeError, match=r"send (it|the dict) pickled with allow_pickle=True on both sides"):
            wire.pack(_mixed(anything=value), skip_fields=skip_fields)
        packed = wire.pack(_mixed(anything=value), skip_fields=skip_fields, allow_pickle=True)
        assert wire.unpack(*packed, allow_pickle=True).anything == value


@pytest.mark.parametrize("value", [1 << 64, "\ud800"], ids=["int", "str"])
def test_a_field_typed_for_what_msgspec_cannot_write_travels_pickled_with_the_opt_in(value: object) -> None:
    changes = {"count": value} if type(value) is int else {"name": value}
    with pytest.raises(TypeError, match=rf"field '{next(iter(changes))}' of Mixed cannot be sent"):
        wire.pack(_mixed(**changes))
    got = wire.unpack(*wire.pack(_mixed(**changes), allow_pickle=True), allow_pickle=True)
    assert (got.count, got.name) == (_mixed(**changes).count, _mixed(**changes).name)


def test_an_asdict_zerocopy_set_on_the_instance_is_honoured() -> None:
    record = _mixed()
    record.asdict_zerocopy = lambda skip_fields=None: {  # type: ignore[method-assign]
        name: value for name, value in Mixed.asdict_zerocopy(record).items() if name != "anything"
    }
    assert wire.unpack(*wire.pack(record)).anything is None


def test_values_reach_init_by_name_when_its_parameters_are_in_another_order() -> None:
    @dataclass(init=False)
    class Swapped(ZeroCopy):
        a: int
        b: str

        def __init__(self, b: str, a: int) -> None:
            self.a, self.b = a, b

    back = wire.unpack(*wire.pack(Swapped("x", 1)))
    assert (back.a, back.b) == (1, "x")


def test_an_init_replaced_after_a_record_arrived_is_called_by_name() -> None:
    @dataclass
    class Late(ZeroCopy):
        a: int
        b: str

    packed = wire.pack(Late(1, "x"))
    assert wire.unpack(*packed).a == 1

    def swapped(self: Late, b: str, a: int) -> None:
        self.a, self.b = a, b

    Late.__init__ = swapped  # type: ignore[method-assign]
    back = wire.unpack(*packed)
    assert (back.a, back.b) == (1, "x")


def test_a_class_with_its_own_new_gets_its_values_by_name() -> None:
    seen: list[dict[str, Any]] = []

    @dataclass
    class Logged(ZeroCopy):
        a: int
        b: str

        def __new__(cls, *args: Any, **kwargs: Any) -> Logged:
            seen.append(kwargs)
            return super().__new__(cls)

    wire.unpack(*wire.pack(Logged(1, "x")))
    assert seen[-1] == {"a": 1, "b": "x"}


def test_a_class_whose_init_holds_it_is_collected_after_it_travelled() -> None:
    import gc
    import weakref

    def make() -> weakref.ref[type]:
        @dataclass
        class Held(ZeroCopy):
            a: int

            def __init__(self, a: int) -> None:
                super().__init__()
                self.a = a

        assert wire.unpack(*wire.pack(Held(1))).a == 1
        return weakref.ref(Held)

    gone = make()
    gc.collect()
    assert gone() is None


def test_a_class_whose_fields_name_it_is_collected_after_it_travelled() -> None:
    import gc
    import weakref

    def make() -> weakref.ref[type]:
        @dataclass
        class Tree(ZeroCopy):
            kids: list[Tree]

        Tree.__dataclass_fields__["kids"].type = list[Tree]  # not the text: the Field holds the class
        assert wire.unpack(*wire.pack(Tree([Tree([])]))).kids == [Tree([])]
        return weakref.ref(Tree)

    gone = make()
    gc.collect()
    assert gone() is None


def test_a_metaclass_call_of_its_own_gets_the_values_by_name() -> None:
    seen: list[dict[str, Any]] = []

    class Counting(type(ZeroCopy)):  # type: ignore[misc]
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            seen.append(kwargs)
            return super().__call__(*args, **kwargs)

    @dataclass
    class Counted(ZeroCopy, metaclass=Counting):
        a: int
        b: str

    wire.unpack(*wire.pack(Counted(1, "x")))
    assert seen[-1] == {"a": 1, "b": "x"}


def test_a_metaclass_call_added_after_a_record_arrived_gets_the_values_by_name() -> None:
    class Late(type(ZeroCopy)):  # type: ignore[misc]
        pass

    @dataclass
    class Record(ZeroCopy, metaclass=Late):
        a: int
        b: str

    assert wire.unpack(*wire.pack(Record(1, "x"))) == Record(1, "x")

    def call(cls: type, b: str, a: int) -> Any:
        return type.__call__(cls, a=a, b=b)

    Late.__call__ = call  # type: ignore[method-assign, assignment]
    assert wire.unpack(*wire.pack(Record(b="x", a=1))) == Record(b="x", a=1)


def test_a_positional_only_init_that_takes_the_fields_in_order_gets_them() -> None:
    @dataclass(init=False)
    class PositionalOnly(ZeroCopy):
        a: int
        b: str

        def __init__(self, a: int, b: str, /) -> None:
            self.a, self.b = a, b

    back = wire.unpack(*wire.pack(PositionalOnly(1, "x")))
    assert (back.a, back.b) == (1, "x")


def test_an_init_that_says_other_parameters_than_it_takes_gets_the_values_by_name() -> None:
    import functools

    @dataclass
    class Wrapped(ZeroCopy):
        a: int
        b: str

    generated = Wrapped.__init__

    @functools.wraps(generated)  # inspect.signature follows __wrapped__ and reports (self, a, b)
    def keywords_only(self: Wrapped, **values: Any) -> None:
        generated(self, **values)

    Wrapped.__init__ = keywords_only  # type: ignore[method-assign]
    assert wire.unpack(*wire.pack(Wrapped(a=1, b="x"))) == Wrapped(a=1, b="x")


def test_an_init_whose_code_was_replaced_after_a_record_arrived_gets_the_values_by_name() -> None:
    @dataclass
    class Recoded(ZeroCopy):
        a: int
        b: str

    packed = wire.pack(Recoded(1, "x"))
    wire.unpack(*packed)

    def swapped(self: Recoded, b: str, a: int) -> None:
        self.a, self.b = a, b

    Recoded.__init__.__code__ = swapped.__code__
    back = wire.unpack(*packed)
    assert (back.a, back.b) == (1, "x")


def test_a_device_torch_warns_about_arrives_without_a_warning(recwarn: pytest.WarningsRecorder) -> None:
    @dataclass
    class OnDevice(ZeroCopy):
        device: torch.device

    header, buffers = wire.pack(OnDevice(torch.device("cpu")))
    changed = header.replace(b"\xd7\x05cpu", b"\xc7\x06\x05mkldnn") if b"\xd7\x05cpu" in header else header
    changed = changed.replace(b"\xc7\x03\x05cpu", b"\xc7\x06\x05mkldnn")
    assert changed != header
    assert wire.unpack(changed, buffers).device.type == "mkldnn"
    assert not recwarn.list


def test_a_record_that_holds_itself_is_refused_in_one_short_sentence() -> None:
    @dataclass
    class Node(ZeroCopy):
        child: Any = None

    loop = Node()
    loop.child = [loop]
    pair = Node(Node())
    pair.child.child = {"back": pair}
    for record in (loop, pair):
        with pytest.raises(TypeError, match=r"holds the \S*Node record it lies in") as caught:
            wire.pack(record)
        assert str(caught.value).count("cannot be sent") <= 2  # not once per level of a nesting limit
    chain = Node(Node(Node()))  # the same class, three deep, holding nothing of itself: travels
    assert wire.unpack(*wire.pack(chain)).child.child == Node()


# --- what each kind of annotation checks ----------------------------------------------------

UserId = NewType("UserId", int)


OneOrTwo = typing_extensions.TypeAliasType("OneOrTwo", Literal[1, 2])


class Point(TypedDict):
    x: int


class Shaped(Protocol):
    def shape(self) -> int: ...


_ANNOTATED: list[tuple[object, object, object]] = [
    # (annotation, a value that matches it, one that does not)
    (datetime.datetime | None, None, "not a date"),
    (set[int] | None, None, [1, 2]),
    (Literal["prefill", "decode"], "decode", "bogus"),
    (Literal[1], 1, True),
    (UserId, 5, "5"),
    (Point, {"x": 1}, [1]),
    (tuple[()], (), (1,)),
    (Tuple[()], (), (1, "x")),  # noqa: UP006  # typing's spelling, on purpose
    (Annotated[int, "number of tokens"], 3, "3"),
    (Annotated[int, 5], 3, "3"),
    (Annotated[int, {"unit": "tokens"}], 3, "3"),
    (Annotated[list[int], lambda: 0], [3], ["3"]),
    (Literal[b"x"], b"x", b"y"),
    (list["int"], [1], ["x"]),  # text inside an annotation object
    (Final[int], 3, "3"),
    (LiteralString, "eos", 5),  # it took any value (an outside tester)
    (Iterable[int], [1], "ab"),  # a str is iterable, of str
    (Collection[int], (1,), ["x"]),
    (Sequence[str], "eos", [1, "e"]),  # a str is a Sequence[str]
    (Sequence[int], b"eos", "eos"),  # bytes, a Sequence[int]
    (Literal["\n", "it's"], "\n", "\\n"),  # escapes in the text read as Python reads them
    (Literal[b"\x00"], b"\x00", b"\\x00"),
    (Literal["on"], "on", "off"),  # as text below, ``u'on'``: the check was off (an outside tester)
    (Literal[Literal[1, 2], 3], 3, "x"),  # noqa: RUF041  # nested, as text: the check was off (an outside tester)
    (Literal[OneOrTwo, 3], 1, 4),  # an alias's values: they were refused (an outside tester)
    (Sequence[int], [1], ""),  # an empty str is still a sequence of str: it passed (an outside tester)
    (Sequence[str], ["a"], b""),  # and empty bytes one of int
]
_ANY_VALUE: list[object] = [Shaped, Callable[[int], int], object]

# The same annotations written as text, read by the parser (this module has ``from __future__ import annotations``).


@dataclass
class Written(ZeroCopy):
    when: datetime.datetime | None = None
    ids: set[int] | None = None
    mode: Literal["prefill", "decode"] = "decode"
    one: Literal[1] = 1
    uid: UserId = UserId(5)
    point: Point | None = None
    empty: tuple[()] = ()
    empty_typing: Tuple[()] = ()  # noqa: UP006
    doc: Annotated[int, "number of tokens"] = 3
    number: Annotated[int, 5] = 3
    unit: Annotated[int, {"unit": "tokens"}] = 3
    made: Annotated[list[int], lambda: 0] = field(default_factory=lambda: [3])
    tag: Literal[b"x"] = b"x"
    counts: list["int"] = field(default_factory=lambda: [1])  # noqa: UP037  # text inside text, on purpose
    final: Final[int] = 3
    literal_string: LiteralString = "eos"
    iterable: Iterable[int] = field(default_factory=lambda: [1])
    collection: Collection[int] = (1,)
    stop: Sequence[str] = "eos"
    stop_ids: Sequence[int] = b"eos"
    separator: Literal["\n", "it's"] = "\n"
    pad: Literal[b"\x00"] = b"\x00"
    switch: Literal[u"on"] = "on"  # noqa: UP025  # fmt: skip
    nested: Literal[Literal[1, 2], 3] = 3  # noqa: RUF041  # nested, on purpose
    aliased: Literal[OneOrTwo, 3] = 1
    ints: Sequence[int] = (1,)
    strs: Sequence[str] = ("a",)


Built = make_dataclass(
    "Built", [(f"f{index}", annotation) for index, (annotation, _, _) in enumerate(_ANNOTATED)], bases=(ZeroCopy,)
)
Loose = make_dataclass(
    "Loose", [(f"f{index}", annotation) for index, annotation in enumerate(_ANY_VALUE)], bases=(ZeroCopy,)
)


def _with_value(record: object, index: int, value: object) -> bytes:
    header, _ = wire.pack(record)
    start = 8 + 9 * wire.buffer_count(header)
    body = msgspec.msgpack.decode(header[start:], ext_hook=msgspec.msgpack.Ext)
    body[3][index] = value
    return header[:start] + msgspec.msgpack.encode(body)


@pytest.mark.parametrize("cls", [Written, Built], ids=["as-text", "as-objects"])
@pytest.mark.parametrize("index", range(len(_ANNOTATED)), ids=[repr(bad) for _, _, bad in _ANNOTATED])
def test_every_annotation_that_names_a_type_is_checked_on_both_sides(cls: type, index: int) -> None:
    # README: "Where a class's field annotations resolve, values must match them, on both sides."
    # (Found by an outside tester: these once took any plain value.)
    bad = _ANNOTATED[index][2]
    record = cls(*(good for _, good, _ in _ANNOTATED))
    assert wire.unpack(*wire.pack(record)) == record
    name = [f.name for f in fields(cls)][index]
    with pytest.raises(TypeError, match=rf"Expected `[^`]+`, got `[^`]+` - at `\$\.{name}(\[0\])?`"):
        wire.pack(replace(record, **{name: bad}))
    with pytest.raises(WireError, match=rf"Expected `[^`]+`, got `[^`]+` - at `\$\.{name}(\[0\])?`"):
        wire.unpack(_with_value(record, index, bad), wire.pack(record).buffers)


Mode = Literal[1, 2]
Ämter = int  # noqa: PLC2401  # a name that is not ASCII, on purpose

# Annotations written as text by hand, not by ``ast.unparse``: the parser reads Python's literals as
# Python's tokenizer does.  (An outside tester: each of these once took any value.)
_AS_TEXT: list[tuple[str, object, object]] = [
    ("Literal[Literal[1, 2], 3]", 3, "x"),
    ("Literal[Mode, 3]", 2, 4),
    ("Literal[0x10, 0o17, 0b11, 1_000]", 15, 14),
    ("Literal[-1, +2, ~0]", 2, 1),  # ~0 is -1
    ("Literal['''a''', b'x' b'y']", b"xy", b"x"),
    ("Literal['a' 'b', u'c', r'\\d']", "\\d", "a"),
    ("Literal[1, 2,]", 2, 3),
    ("(int) | None", None, "3"),
    ("int  # a count", 3, "3"),
    ("'int | None'", 3, "3"),
    ("Ämter | None", None, "3"),  # a name that starts with a letter that is not ASCII
    ("Literal[(1), (-2)]", -2, 2),  # a value in parentheses: the check was off (an outside tester)
    ("Annotated[int \\\n | str, 'doc']", "text", 3.5),  # a line continuation: it read int alone
    ("Annotated[int, 'note \\\n] | bytes'] | str", "text", b"x"),  # a continued line in a string
    ("Literal[1,  # one\r 2]", 2, 3),  # a comment ends at a carriage return, as Python's does
    ("list[None.real] | int", [1], "1"),  # no type there: any value where it stands (an outside tester)
    ("Literal[" + "(" * 199 + "1" + ")" * 199 + "]", 1, 2),  # 200 brackets open, as many as Python takes
    ("Optional[\uff49\uff4e\uff54]", 3, "3"),  # full-width int: Python reads names in NFKC form (an outside tester)
]


def _annotated_as(name: str, text: str) -> type:
    """A record class whose one field, ``value``, has the annotation *text*; named uniquely (the receiver
    finds it by name among the live classes)."""
    name = f"{name}{len(_made)}"
    _made.append(make_dataclass(name, [("value", text)], bases=(ZeroCopy,), namespace={"__module__": __name__}))
    return _made[-1]


_made: list[type] = []


@pytest.mark.parametrize(("text", "good", "bad"), _AS_TEXT, ids=[text for text, _, _ in _AS_TEXT])
def test_an_annotation_written_as_text_is_read_as_python_reads_it(text: str, good: object, bad: object) -> None:
    cls = _annotated_as("Texted", text)
    record = cls(good)
    assert wire.unpack(*wire.pack(record)) == record
    with pytest.raises(TypeError, match=r"Expected `[^`]+`, got `[^`]+` - at `\$\.value`"):
        wire.pack(cls(bad))
    with pytest.raises(WireError, match=r"Expected `[^`]+`, got `[^`]+` - at `\$\.value`"):
        wire.unpack(_with_value(record, 0, bad), wire.pack(record).buffers)


_LITERAL_PIECES = st.sampled_from(
    [*"\\abfnrtvxuUN{}0478'\"qé\u0100\U0001f600\r\n \t", "\\N{LATIN SMALL LETTER A}", "\\x41", "\\777", "\\\r\n"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    prefix=st.sampled_from(["", "r", "u", "b", "br", "Rb", "B"]),
    quote=st.sampled_from(["'", '"', "'''", '"""']),
    body=st.lists(_LITERAL_PIECES, max_size=8).map("".join),
)
def test_a_string_literal_in_an_annotation_is_read_as_python_reads_it(prefix: str, quote: str, body: str) -> None:
    text = f"{prefix}{quote}{body}{quote}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an escape Python warns of ('\q'), read as Python reads it then
        _check_literal_as_python_reads_it(text)


def _check_literal_as_python_reads_it(text: str) -> None:
    try:
        value = ast.literal_eval(f"({text})")  # in brackets, as in Literal[...]: a newline there is no end
    except (SyntaxError, ValueError):  # not one literal (""f"" is an f-string), or one Python refuses: the field
        value = None  # takes any value
    cls = _annotated_as("Quoted", f"Literal[{text}]")
    if value is None:
        assert wire.unpack(*wire.pack(cls(1))) == cls(1)
        return
    assert wire.unpack(*wire.pack(cls(value))) == cls(value)
    other = value + (b"." if isinstance(value, bytes) else ".")
    with pytest.raises(TypeError, match=r"Expected `[^`]+`, got `[^`]+` - at `\$\.value`"):
        wire.pack(cls(other))


_LITERALS_RECEIVED = r"""
import sys
from dataclasses import make_dataclass
from typing import Literal
import msgspec
from metakit import ZeroCopy, wire

Receiver = make_dataclass(
    "Receiver",
    [("value", "Literal['a\\n', b'x\\x00', u'\u00e9', r'\\d', '\\N{LATIN SMALL LETTER A}'] | None")],
    bases=(ZeroCopy,),
    namespace={"__module__": __name__},
)
Sender = make_dataclass("Sender", [("value", object)], bases=(ZeroCopy,), namespace={"__module__": __name__})
header, buffers = wire.pack(Sender("x"))
start = 8 + 9 * wire.buffer_count(header)
body = msgspec.msgpack.decode(header[start:], ext_hook=msgspec.msgpack.Ext)
body[0] = f"{__name__}:Receiver"
events = []
sys.addaudithook(lambda event, arguments: events.append((event, str(arguments)[:60])) if event in WATCHED else None)
WATCHED = ("compile", "exec", "import")
for value, expected in [("a\n", True), (b"x\x00", True), ("\u00e9", True), ("\\d", True), ("a", True), ("b", False)]:
    body[3] = [value]
    try:
        got = wire.unpack(header[:start] + msgspec.msgpack.encode(body), buffers)
    except wire.WireError as error:
        assert not expected and "Expected" in str(error), (value, error)
    else:
        assert expected and got == Receiver(value), (value, got)
print(events)
"""


def test_reading_string_literals_in_an_annotation_compiles_and_imports_nothing() -> None:
    # The parser read each with ast.literal_eval, which compiles; then with the unicode_escape codec,
    # which a receiver imported: audit events that a hook watching for code from the peer sees
    # (outside testers).  In a fresh interpreter, where nothing was read before.
    run = subprocess.run(
        [sys.executable, "-W", "ignore::UserWarning", "-c", _LITERALS_RECEIVED],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "text",
    [
        "Literal[-(1)]",
        "Literal[012]",
        "Literal['a' b'b']",
        "Literal[1.5]",
        "(int",
        "Annotated[None if False else int, 'doc']",  # it read None alone (an outside tester)
        "Literal[\u0661]",  # a digit of another script: Python's tokenizer reads only 0-9 (an outside tester)
        "Annotated[int, $]",  # a character Python never takes outside a string
        "Annotated[int, (]]",  # brackets that do not match
        " int",  # indented
        "list[\xa0int]",  # a space Python's tokenizer does not take
        "list[int] | dict[a..b, int]",  # no name
        "list[x²]",
        "list[lambda]",  # a keyword
        "'''int' | list[int]",  # a triple quote that does not end
        "list[' int']",
        "Literal['a\x00']",  # a NUL: Python reads no source text that holds one (an outside tester)
        "Literal['\ud800']",  # a lone surrogate: not UTF-8
        "Literal[" + "(" * 200 + "1" + ")" * 200 + "]",  # 201 brackets open: Python's tokenizer stops at 200
    ],
)
def test_an_annotation_the_parser_cannot_read_takes_any_plain_value(text: str) -> None:
    cls = _annotated_as("Unread", text)
    for value in (1, "x", [None]):
        assert wire.unpack(*wire.pack(cls(value))) == cls(value)


@dataclass
class PartlyKnown(ZeroCopy):
    by_name: dict[str, NeverImported]
    pair: tuple[int, NeverImported]
    items: list[NeverImported] | None
    wholly: NeverImported
    inside: NeverImported[int] | None = None
    dotted: torch.NotATorchName = None  # type: ignore[name-defined]  # a module that lacks the name


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"by_name": {1: 2}}, r"`key` in `\$\.by_name`"),
        ({"pair": (1, 2, 3)}, r"`\$\.pair`"),
        ({"items": 5}, r"`\$\.items`"),
    ],
)
def test_a_name_that_does_not_resolve_takes_any_value_and_the_rest_of_its_annotation_is_checked(
    changes: dict[str, Any], path: str
) -> None:
    # (Found by an outside tester: one such name once turned off the whole field's check.)
    record = PartlyKnown({"a": object}, (1, "x"), [b"", None], "any", [1], (2,))
    good = PartlyKnown({"a": 1}, (1, "x"), [b"", None], "any", [1], (2,))
    assert wire.unpack(*wire.pack(good)) == good
    with pytest.raises(TypeError, match="is not plain data"):
        wire.pack(record)  # the name takes any value that travels, and only those
    bad = replace(good, **changes)
    with pytest.raises(TypeError, match=rf"Expected `[^`]+`, got `[^`]+` - at {path}$"):
        wire.pack(bad)
    index = [f.name for f in fields(PartlyKnown)].index(next(iter(changes)))
    bad_value = next(iter(changes.values()))
    sent = msgspec.msgpack.Ext(2, msgspec.msgpack.encode(list(bad_value))) if type(bad_value) is tuple else bad_value
    with pytest.raises(WireError, match=rf"Expected `[^`]+`, got `[^`]+` - at {path}$"):
        wire.unpack(_with_value(good, index, sent), wire.pack(good).buffers)


# From 3.14 on (PEP 649/749), dataclasses reads annotations in the FORWARDREF format: a name not
# defined yet becomes a ``ForwardRef`` inside an otherwise live annotation.  The same objects here.
Deferred = make_dataclass(
    "Deferred",
    [
        ("later", Optional[ForwardRef("DefinedLater")], None),  # noqa: UP045  # as 3.14 builds it
        ("laters", list[ForwardRef("DefinedLater")], field(default_factory=list)),
        ("by_name", Dict[str, ForwardRef("NeverImported")], field(default_factory=dict)),  # noqa: UP006
        ("either", ForwardRef("int | DefinedLater"), 0),
        ("tensor", ForwardRef("torch.Tensor | None"), None),
    ],
    bases=(ZeroCopy,),
    namespace={"__module__": __name__},  # make_dataclass takes no module before 3.12
)


@dataclass
class DefinedLater(ZeroCopy):
    x: int = 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"later": 5}, r"Expected `test_wire_generated.DefinedLater \| None`, got `int` - at `\$\.later`"),
        ({"laters": [1]}, r"Expected `test_wire_generated.DefinedLater`, got `int` - at `\$\.laters\[0\]`"),
        ({"either": "s"}, r"Expected `int \| test_wire_generated.DefinedLater`, got `str` - at `\$\.either`"),
        ({"tensor": 3}, r"Expected `torch.Tensor \| None`, got `int` - at `\$\.tensor`"),
    ],
)
def test_forward_references_inside_live_annotations_are_read_when_a_record_first_travels(
    changes: dict[str, Any], message: str
) -> None:
    record = Deferred(DefinedLater(1), [DefinedLater(2)], {"a": [1, "x"]}, DefinedLater(3), torch.ones(2))
    arrived = wire.unpack(*wire.pack(record))
    assert arrived.later == DefinedLater(1)
    assert arrived.laters == [DefinedLater(2)]
    assert arrived.by_name == {"a": [1, "x"]}  # a name that never resolves takes any value that travels
    assert torch.equal(arrived.tensor, torch.ones(2))
    with pytest.raises(TypeError, match=message):
        wire.pack(replace(record, **changes))


# ``type BlockIds = list[int]`` (3.12+), here as typing_extensions' backport of it, which metakit takes alike.
# (Found by an outside tester: such a field took any value.)
_T = TypeVar("_T")
BlockIds = typing_extensions.TypeAliasType("BlockIds", list[int])
SeqTree = Union[int, Sequence["SeqTree"]]  # noqa: UP007
IterTree = Union[int, Iterable["IterTree"]]  # noqa: UP007


@dataclass
class Trees(ZeroCopy):
    seq: SeqTree = 0
    it: IterTree = 0


def test_a_str_under_a_recursive_alias_through_sequence_or_iterable_matches_as_in_typing() -> None:
    # A str's item is a str, whose item is itself: its check recurred until refused as "holding
    # itself", where mypy takes `x: SeqTree = "ab"` (an outside tester).
    for good in (Trees(seq="ab"), Trees(it={"k": 1}), Trees(seq=[1, ["ab", [2]]]), Trees(it=["", "x"])):
        assert wire.unpack(*wire.pack(good)) == good
        header, buffers = wire.pack(Trees())
        body = msgspec.msgpack.decode(header[8 + 9 * wire.buffer_count(header) :], ext_hook=msgspec.msgpack.Ext)
        assert body[2] is None  # the values of both fields, in order: the receiver checks these too
        assert wire.unpack(_with_value(Trees(), 0, good.seq), buffers).seq == good.seq
        assert wire.unpack(_with_value(Trees(), 1, good.it), buffers).it == good.it
    with pytest.raises(TypeError, match=r"Expected `int \| Sequence`, got `float` - at `\$\.seq\[1\]\[0\]`"):
        wire.pack(Trees(seq=[1, [2.5]]))
    with pytest.raises(WireError, match=r"got `float`"):
        wire.unpack(_with_value(Trees(), 1, ["a", 2.5]), wire.pack(Trees()).buffers)


Json = typing_extensions.TypeAliasType("Json", Union[int, str, list["Json"], None])  # noqa: UP007
Pair = typing_extensions.TypeAliasType("Pair", tuple[_T, _T], type_params=(_T,))


@dataclass
class Aliased(ZeroCopy):
    block_ids: BlockIds
    tree: Json = None
    pair: Pair[int] = (1, 2)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"block_ids": "12"}, r"Expected `list`, got `str` - at `\$\.block_ids`"),
        ({"block_ids": [1.5]}, r"Expected `int`, got `float` - at `\$\.block_ids\[0\]`"),
        ({"tree": [1, [2.5]]}, r"got `float` - at `\$\.tree\[1\]\[0\]`"),
        ({"pair": [1, 2]}, r"Expected `tuple of 2`, got `list` - at `\$\.pair`"),
    ],
)
def test_a_type_statements_alias_is_checked_as_what_it_names(changes: dict[str, Any], message: str) -> None:
    good = Aliased([1, 2], [1, ["x", [None]]], (3, "any"))  # Pair's T takes any value
    assert wire.unpack(*wire.pack(good)) == good
    with pytest.raises(TypeError, match=message):
        wire.pack(replace(good, **changes))


def _module_of(monkeypatch: pytest.MonkeyPatch, name: str, source: str, **names: Any) -> Any:
    """A module *name*, in ``sys.modules`` for the test, holding ``ZeroCopy``, ``dataclass`` and *names*, and
    what *source* defines there (run with none of this file's ``__future__`` imports)."""
    module = types.ModuleType(name)
    module.__dict__.update(ZeroCopy=ZeroCopy, dataclass=dataclass, **names)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(source, f"<{name}>", "exec", dont_inherit=True), module.__dict__)
    return module


def test_a_type_parameter_hides_a_module_name_of_its_name_in_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # (An outside tester: in ``class Box[T]`` (3.12+) under ``from __future__ import annotations``, a ``T``
    # in the text was read as the module's ``T = str``, and a valid record refused.) The class statement
    # puts its parameters in the body as ``__type_params__``, as this one does by hand: the torch tests
    # run on 3.11, where that syntax does not parse.
    source = (
        "from __future__ import annotations\n"
        "@dataclass\n"
        "class Box(ZeroCopy):\n"
        "    __type_params__ = (TypeVar('T'),)\n"
        "    item: T\n"
        "    items: list['T']\n"
        "    label: T | int = 0\n"
        "@dataclass\n"
        "class Hiding(ZeroCopy):\n"
        "    __type_params__ = (TypeVar('Hidden'),)\n"
        "    Hidden = int  # the class's own name hides its parameter, as in typing.get_type_hints\n"
        "    x: Hidden = 0\n"
    )
    module = _module_of(monkeypatch, "metakit_type_parameters", source, TypeVar=TypeVar, T=str, Hidden=str)
    good = module.Box(1, [2.5, None], "x")
    assert wire.unpack(*wire.pack(good)) == good
    assert wire.unpack(*wire.pack(module.Hiding(3))) == module.Hiding(3)
    with pytest.raises(TypeError, match=r"Expected `int`, got `str` - at `\$\.x`"):
        wire.pack(module.Hiding("3"))


def test_a_class_var_that_dataclasses_takes_for_a_field_is_checked_as_what_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (An outside tester: such a field took any value.) ``dataclasses`` knows a ClassVar in a string only
    # through ``typing``'s own name before 3.15: ``"te.ClassVar[int]"`` is a field there.
    source = "@dataclass\nclass Counted(ZeroCopy):\n    count: 'te.ClassVar[int]' = 0\n"
    module = _module_of(monkeypatch, "metakit_class_var_field", source, te=typing_extensions)
    if sys.version_info >= (3, 15):  # dataclasses reads the ClassVar as one: no field to check
        assert not fields(module.Counted)
        return
    assert wire.unpack(*wire.pack(module.Counted(3))) == module.Counted(3)
    with pytest.raises(TypeError, match=r"Expected `int`, got `str` - at `\$\.count`"):
        wire.pack(module.Counted("3"))


def test_text_in_an_alias_value_names_what_the_aliases_module_has(monkeypatch: pytest.MonkeyPatch) -> None:
    # Text in a ``type`` statement's value (``type Pair = tuple["Item", "Item"]``) is read where the alias was
    # written, as a type checker reads it, never in the module of the class that uses the alias. (An outside
    # tester, after that: a generic alias's own parameter was read as the module's name, and a value that was
    # all text took any value.)
    source = (
        "Pair = TypeAliasType('Pair', tuple['Item', 'Item'])\n"  # its __module__: this one
        "Listed = TypeAliasType('Listed', list['T'], type_params=(TypeVar('T'),))\n"  # T: its own, any value
        "Text = TypeAliasType('Text', 'list[Item]')\n"
    )
    names = {"TypeAliasType": typing_extensions.TypeAliasType, "TypeVar": TypeVar, "Item": int, "T": str}
    home = _module_of(monkeypatch, "metakit_alias_home", source, **names)
    aliases = {name: getattr(home, name) for name in ("Pair", "Listed", "Text")}
    body = "    pair: Pair\n    listed: Listed[int] = None\n    text: Text = None\n"
    user = _module_of(
        monkeypatch, "metakit_alias_user", f"@dataclass\nclass Uses(ZeroCopy):\n{body}", Item=str, **aliases
    )
    good = user.Uses((1, 2), [1, "any"], [3])
    assert wire.unpack(*wire.pack(good)) == good
    with pytest.raises(TypeError, match=r"Expected `int`, got `str` - at `\$\.pair\[0\]`"):
        wire.pack(user.Uses(("a", "b")))
    with pytest.raises(TypeError, match=r"Expected `int`, got `str` - at `\$\.text\[0\]`"):
        wire.pack(user.Uses((1, 2), None, ["s"]))


if sys.version_info >= (3, 14):  # deferred annotations (the torch tests run on 3.11: run by hand where torch is)

    def test_a_deferred_annotation_names_the_class_made_after_it_in_its_function() -> None:
        # (Found by an outside tester: the module's class of that name was taken.)
        def make() -> tuple[type, type]:
            # The module's DefinedLater, another class of that name.
            namespace: dict[str, Any] = {"ZeroCopy": ZeroCopy, "dataclass": dataclass, "DefinedLater": DefinedLater}
            source = (
                "def make():\n"
                "    @dataclass\n"
                "    class Parent(ZeroCopy):\n"
                "        child: DefinedLater\n"
                "        kids: list[DefinedLater | None]\n"
                "    @dataclass\n"
                "    class DefinedLater(ZeroCopy):\n"
                "        name: str\n"
                "    return Parent, DefinedLater\n"
            )
            exec(compile(source, "<deferred>", "exec", dont_inherit=True), namespace)  # no __future__ import
            return namespace["make"]()  # type: ignore[no-any-return]

        parent, local = make()
        good = parent(local("a"), [local("b"), None])
        assert wire.unpack(*wire.pack(good)) == good
        with pytest.raises(TypeError, match=r"got `test_wire_generated\.DefinedLater` - at `\$\.child`"):
            wire.pack(parent(DefinedLater(1), []))
        with pytest.raises(TypeError, match=r"got `str` - at `\$\.kids\[0\]`"):
            wire.pack(parent(local("a"), ["b"]))

    def test_a_deferred_annotation_naming_a_local_never_set_takes_any_value() -> None:
        # (Found by an outside tester: the module's object of that name was taken, as if Python
        # looked past the function's own name, which it does not: it raises NameError.)
        module = types.ModuleType("metakit_unset_local")
        module.__dict__.update(ZeroCopy=ZeroCopy, dataclass=dataclass, Handle=str)  # the module's Handle
        source = (
            "def make(typing_only=False):\n"
            "    if typing_only:\n"
            "        from engine.kernels import Handle\n"
            "    @dataclass\n"
            "    class Meta(ZeroCopy):\n"
            "        handle: Handle | None = None\n"
            "        handles: list[Handle] | None = None\n"
            "    return Meta\n"
        )
        sys.modules[module.__name__] = module
        try:
            exec(compile(source, "<deferred>", "exec", dont_inherit=True), module.__dict__)  # no __future__
            meta = module.make()
            for good in (meta(12345), meta(None, [1, "a"])):
                assert wire.unpack(*wire.pack(good)) == good
            with pytest.raises(TypeError, match=r"got `str` - at `\$\.handles`"):
                wire.pack(meta(None, "a"))  # the rest of the annotation is still checked
        finally:
            del sys.modules[module.__name__]

    def test_a_literal_of_a_type_alias_whose_value_does_not_resolve_takes_any_value() -> None:
        # (An outside tester: the alias itself was taken for a value, and every value refused.)
        module = types.ModuleType("metakit_unresolved_alias")
        module.__dict__.update(ZeroCopy=ZeroCopy, dataclass=dataclass, Literal=Literal)
        source = (
            "type Mode = Literal[Level.LOW, Level.HIGH]  # Level: imported only under TYPE_CHECKING\n"
            "@dataclass\n"
            "class Step(ZeroCopy):\n"
            "    mode: Literal[Mode, 'auto'] = 'auto'\n"
        )
        sys.modules[module.__name__] = module
        try:
            exec(compile(source, "<alias>", "exec", dont_inherit=True), module.__dict__)
            for value in ("auto", 1, "low"):
                assert wire.unpack(*wire.pack(module.Step(value))) == module.Step(value)
        finally:
            del sys.modules[module.__name__]

    def test_a_static_init_is_read_as_inspect_reads_it() -> None:
        # (An outside tester: its first parameter was dropped as if it took the instance.)
        def new(cls: type, x: int, y: int = 0) -> Any:
            record = object.__new__(cls)
            record.x, record.y = x, y
            return record

        def init(x: int, y: int = 0) -> None: ...

        namespace = {"__new__": new, "__module__": __name__}
        base = make_dataclass("Made", [("x", int), ("y", int, 0)], bases=(ZeroCopy,), init=False, namespace=namespace)
        static = types.new_class("Static", (base,), exec_body=lambda ns: ns.update(__init__=staticmethod(init)))
        assert wire.unpack(*wire.pack(static(1, 2))) == static(1, 2)


def test_a_field_annotated_never_takes_no_value() -> None:
    never = make_dataclass("Never", [("x", NoReturn)], bases=(ZeroCopy,))
    with pytest.raises(TypeError, match=r"Expected `Never`, got `int` - at `\$\.x`"):
        wire.pack(never(1))


def test_a_protocol_a_callable_and_object_take_any_value_that_travels() -> None:
    record = Loose("x", 1, [None])
    assert wire.unpack(*wire.pack(record)) == record
    assert wire.unpack(*wire.pack(Loose(2.5, {"a": b""}, "y"))) == Loose(2.5, {"a": b""}, "y")


_CONSTRUCTED = {  # what the class statement below gets: in its body, and after it
    "by dataclasses": ("", ""),
    "wrapped": (
        "",
        "_init = Lazily.__init__\n"
        "Lazily.__init__ = functools.wraps(_init)(lambda self, *args, **kwargs: _init(self, *args, **kwargs))\n",
    ),
    "with a __new__": (
        "    def __new__(cls, *args: lazy.Thing, **kwargs: lazy.Thing):\n        return object.__new__(cls)\n",
        "",
    ),
}


@pytest.mark.parametrize("constructed", list(_CONSTRUCTED))
def test_sending_and_receiving_a_record_runs_no_code_of_its_annotations(constructed: str) -> None:
    # Found by outside testers on 3.14, where annotations are deferred: reading the signature of a
    # class's __init__ (wrapped or not) or __new__ evaluated them for real, so a module's lazy
    # __getattr__ (which may import) and the metadata of Annotated ran on the first record sent. The
    # module here has no ``from __future__ import annotations``: before 3.14 they run when the class
    # is made.
    ran: list[object] = []
    lazy = types.ModuleType("metakit_lazy_annotations")

    def module_getattr(name: str) -> object:
        ran.append(name)
        if name == "Thing":
            return int
        raise AttributeError(name)

    lazy.__getattr__ = module_getattr  # type: ignore[method-assign]
    module = types.ModuleType("metakit_annotated_lazily")
    module.__dict__.update(dataclass=dataclass, ZeroCopy=ZeroCopy, Annotated=Annotated, lazy=lazy, ran=ran)
    module.functools = functools  # type: ignore[attr-defined]
    unresolved = "list[Unresolved] | None" if sys.version_info >= (3, 14) else "'list[Unresolved] | None'"
    source = (
        "@dataclass\n"
        "class Lazily(ZeroCopy):\n"
        "    a: lazy.Thing\n"
        "    b: Annotated[int, ran.append('metadata')] = 0\n"
        f"    c: {unresolved} = None  # a name imported only for type checkers\n"
        f"{_CONSTRUCTED[constructed][0]}"
        f"{_CONSTRUCTED[constructed][1]}"
    )
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, "<lazily>", "exec", dont_inherit=True), module.__dict__)  # no future import
        record = module.Lazily(7)
        ran.clear()
        assert wire.unpack(*wire.pack(record)) == record
        assert ran == []
    finally:
        del sys.modules[module.__name__]


def test_long_annotation_text_is_read_in_linear_time() -> None:
    # (Outside testers: a digit run followed by a letter took 8.5 s at 32,000 digits, and a run of
    # escaped quotes 94 s at 160,000 characters, where tokens backtracked or each quote scanned to
    # the end; now one pass. The bound is 20 times what a linear read takes here.)
    texts = {  # the text, and whether it is read (else it takes any value)
        f"Annotated[int, {'1' * 100_000}x]": True,
        f"Annotated[int, {'a' * 100_000}'x']": True,
        "int" + " " * 100_000: True,
        "Annotated[int, '''\\\n'" + "\\'" * 50_000 + "]": False,  # quotes that start no string that ends
    }
    started = time.perf_counter()
    for text, read in texts.items():
        cls = _annotated_as("Long", text)
        assert wire.unpack(*wire.pack(cls(3))) == cls(3)
        if read:
            with pytest.raises(TypeError, match=r"Expected `int`, got `str`"):
                wire.pack(cls("3"))
        else:
            assert wire.unpack(*wire.pack(cls("3"))) == cls("3")
    assert time.perf_counter() - started < 2.0


def test_a_partialmethod_init_is_read_as_it_binds() -> None:
    # (An outside tester: on 3.14 it was read as ``(*args, **keywords)``, so the sender let a record
    # go whose receiver could not call the class.)
    def init(self: Any, x: int, y: int = 0, *, scale: int = 1) -> None:
        self.x, self.y = x * scale, y

    partial = make_dataclass(
        "Partial",
        [("x", int), ("y", int, 0)],
        bases=(ZeroCopy,),
        init=False,
        namespace={"__init__": functools.partialmethod(init, scale=1), "__module__": __name__},
    )
    assert wire.unpack(*wire.pack(partial(2))) == partial(2)
    with pytest.raises(TypeError, match=r"Partial.__init__ requires 'x', which would not travel"):
        wire.pack(partial(2), skip_fields={"x"})
