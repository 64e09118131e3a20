"""DESIGN "Public API": ``metakit.testing``.

``assert_zerocopy`` and ``assert_zerocopy_class`` pass every correct class (of every dataclass
kind, engine-shaped records, random classes) and name the class, the code that broke (generated
code or the user's override), the call and the difference; the one-test-per-class recipe
(``zerocopy_classes_in``, ``class_id``) reads well under ``pytest -q``.
"""

import abc
import copy
import dataclasses
import importlib
import itertools
import os
import re
import subprocess
import sys
import textwrap
import types
from dataclasses import KW_ONLY, InitVar, dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, ClassVar, Dict, Generic, Iterable, List, Mapping, Optional, Set, Tuple, TypeVar  # noqa: UP035  # vLLM's spelling

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metakit
import metakit.testing
import metakit.testing as mt
from metakit import OMIT, ZeroCopy, ZeroCopyFields
from metakit.testing import assert_zerocopy, assert_zerocopy_class, class_id, zerocopy_classes_in
from tests import records
from tests.records import (
    INSTANCE_IDS,
    METHOD_SHADOWED,
    AbstractBackendMeta,
    AbstractBackendMeta2,
    AttnMeta,
    Box,
    FlashInferMeta,
    FlashInferUndecorated,
    FlashMeta,
    Meta,
    MethodNamesMeta,
    OvBase,
    OvFrozenSlots,
    OvKeyword,
    OvLeaf,
    OvLeafLeaf,
    OvNoSkip,
    OvPositional,
    OvReplace,
    OvReplaceSub,
    OvUndecorated,
    PlainMeta,
    UndecoratedConcrete,
    Val,
    check_generated,
    inst,
)
from tests.strategies import build_shape, class_options, construct, shape_specs


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_assert_zerocopy_passes_on_correct_classes(name):
    if name in METHOD_SHADOWED:
        # a field named asdict_zerocopy shadows the method on the instance
        check_generated(inst(name), method=False)
    else:
        mt.assert_zerocopy(inst(name))


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_assert_zerocopy_class_passes_on_correct_classes(name):
    obj = inst(name)
    target = Box[int] if name == "BoxAlias" else type(obj)
    if name in METHOD_SHADOWED:
        check_generated(obj, method=False)
    else:
        mt.assert_zerocopy_class(target)


@dataclass(frozen=True, slots=True)
class TrickyFrozen(ZeroCopy):
    a: int
    b: InitVar[int] = 0
    c: ClassVar[int] = 5
    w: object = field(default=None, metadata=OMIT)
    n: int = field(init=False, default=0)
    _: KW_ONLY
    k: int = 3

    def __post_init__(self, b):
        object.__setattr__(self, "n", b)


class OvPositionalChild(OvPositional):
    pass


@dataclass
class OvPositionalGrandchild(OvPositionalChild):
    z: int = 9


@pytest.mark.parametrize(
    "cls",
    [
        *(OvPositional, OvPositionalChild, OvPositionalGrandchild, OvKeyword, OvNoSkip, OvLeaf, OvLeafLeaf),
        *(OvUndecorated, OvFrozenSlots, OvReplace, OvReplaceSub, TrickyFrozen, Meta, PlainMeta),
    ],
)
def test_correct_overrides_pass_both_helpers(cls):
    # README: "`assert_zerocopy` and `assert_zerocopy_class` work on classes with a user override
    # too" / "so frozen and slots classes work as well. `ClassVar` and `InitVar` are not fields"
    mt.assert_zerocopy_class(cls)
    mt.assert_zerocopy(cls(1) if cls is TrickyFrozen else cls())


def _wrong(name: str, body: str):
    ns: dict = {}
    exec(
        textwrap.dedent(body),
        {"super": super, "dataclasses": dataclasses, "copy": copy, "types": types, "OvBase": OvBase},
        ns,
    )
    cls = type(name, (OvBase,), ns)
    cls.__module__ = __name__
    return dataclass(cls)


WRONG_OVERRIDES = {
    "MutatesSkip": """
        def asdict_zerocopy(self, skip_fields=None):
            if skip_fields is None:
                skip_fields = set()
            skip_fields.add("w")
            return super(OvBase, self).asdict_zerocopy(skip_fields)
    """,
    "DeepCopies": """
        def asdict_zerocopy(self, skip_fields=None):
            return dataclasses.asdict(self)
    """,
    "Reorders": """
        def asdict_zerocopy(self, skip_fields=None):
            return dict(reversed(list(super(OvBase, self).asdict_zerocopy(skip_fields).items())))
    """,
    "AddsKey": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy(skip_fields)
            d["attn_bias"] = None
            return d
    """,
    "SameDict": """
        def asdict_zerocopy(self, skip_fields=None):
            c = self.__dict__.setdefault("_c", super(OvBase, self).asdict_zerocopy(skip_fields))
            return c
    """,
    "IgnoresSkip": """
        def asdict_zerocopy(self, skip_fields=None):
            return super(OvBase, self).asdict_zerocopy()
    """,
    "OnlyFirstSkip": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy()
            if skip_fields:
                d.pop(next(iter(skip_fields)))
            return d
    """,
    "Proxy": """
        def asdict_zerocopy(self, skip_fields=None):
            return types.MappingProxyType(super(OvBase, self).asdict_zerocopy(skip_fields))
    """,
    "SwapsValues": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy(skip_fields)
            if "a" in d and "b" in d:
                d["a"], d["b"] = d["b"], d["a"]
            return d
    """,
    "CopiesOnSkip": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy(skip_fields)
            return {k: copy.copy(v) for k, v in d.items()} if skip_fields else d
    """,
    "SkipsMore": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy(skip_fields)
            if skip_fields:
                d.pop("w", None)
            return d
    """,
    "TupleReversed": """
        def astuple_zerocopy(self):
            return tuple(reversed(super(OvBase, self).astuple_zerocopy()))
    """,
    "TupleIsList": """
        def astuple_zerocopy(self):
            return list(super(OvBase, self).astuple_zerocopy())
    """,
    "TupleCopies": """
        def astuple_zerocopy(self):
            return tuple(copy.copy(v) for v in super(OvBase, self).astuple_zerocopy())
    """,
    "TupleExtra": """
        def astuple_zerocopy(self):
            return super(OvBase, self).astuple_zerocopy() + (self.a,)
    """,
}


@pytest.mark.parametrize("name", list(WRONG_OVERRIDES))
def test_wrong_override_caught_by_assert_zerocopy_class(name):
    cls = _wrong(name, WRONG_OVERRIDES[name])
    with pytest.raises(AssertionError) as ei:
        mt.assert_zerocopy_class(cls)
    msg = str(ei.value)
    assert name in msg
    assert "override" in msg


@pytest.mark.parametrize("name", list(WRONG_OVERRIDES))
def test_wrong_override_caught_by_assert_zerocopy(name):
    cls = _wrong(name, WRONG_OVERRIDES[name])
    with pytest.raises(AssertionError) as ei:
        mt.assert_zerocopy(cls([1], [2], [3]))
    assert name in str(ei.value)
    assert "override" in str(ei.value)


def test_wrong_override_dropping_required_field_caught():
    @dataclass
    class Req(ZeroCopy):
        must: int
        opt: int = 0

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"must", *(skip_fields or ())})

    with pytest.raises(AssertionError, match="Req"):
        mt.assert_zerocopy_class(Req)


def test_override_dropping_defaulted_field_passes():
    @dataclass
    class Opt(ZeroCopy):
        must: int
        opt: object = None
        later: int = field(init=False, default=0)

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"opt", *(skip_fields or ())})

    mt.assert_zerocopy_class(Opt)
    mt.assert_zerocopy(Opt(1, object()))


def test_fields_comprehension_override_is_a_correct_override():
    # vLLM's own asdict_zerocopy, as an override: new dict, fields in order, the very
    # objects, skip_fields honoured and never changed.
    @dataclass
    class VllmStyle(OvBase):
        def asdict_zerocopy(self, skip_fields=None):
            if skip_fields is None:
                skip_fields = set()
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip_fields}

    mt.assert_zerocopy_class(VllmStyle)


def test_helpers_refuse_wrong_kinds():
    with pytest.raises(TypeError):
        mt.assert_zerocopy(AttnMeta)
    with pytest.raises(TypeError):
        mt.assert_zerocopy(3)
    with pytest.raises(TypeError):
        mt.assert_zerocopy_class(AttnMeta(1, 2, 3, []))
    with pytest.raises(TypeError):
        mt.assert_zerocopy_class(int)


def test_helpers_on_plain_dataclass():
    @dataclass
    class PlainRec:
        a: int = 0
        w: object = field(default=None, metadata=OMIT)

    mt.assert_zerocopy(PlainRec())
    mt.assert_zerocopy_class(PlainRec)
    assert metakit.asdict_zerocopy(PlainRec(1, object())) == {"a": 1}


def test_helper_class_with_post_init_arithmetic():
    @dataclass
    class Arith(ZeroCopy):
        n: int
        doubled: int = field(init=False, default=0)

        def __post_init__(self):
            self.doubled = self.n * 2

    mt.assert_zerocopy_class(Arith)
    mt.assert_zerocopy(Arith(3))


def test_plain_helper_after_class_becomes_dataclass():
    @dataclass
    class P:
        a: int = 1

    class Q(P):
        b: int = 2

    metakit.asdict_zerocopy(Q())
    dataclass(Q)
    mt.assert_zerocopy(Q())


def test_view_descriptor_compared_by_type_in_helper():
    class Viewing:
        def __set_name__(self, owner, name):
            self.slot = "_" + name

        def __get__(self, obj, typ=None):
            if obj is None:
                return ()
            return tuple(getattr(obj, self.slot, ()))  # a new object on every read

        def __set__(self, obj, v):
            setattr(obj, self.slot, list(v))

    @dataclass
    class VD(ZeroCopy):
        v: Viewing = Viewing()  # noqa: RUF009
        n: int = 0

    mt.assert_zerocopy(VD([1, 2]))


def test_helper_reports_descriptor_refusing_sentinel():
    class IntOnly:
        def __set_name__(self, owner, name):
            self.slot = "_" + name

        def __get__(self, obj, typ=None):
            if obj is None:
                return 0
            return getattr(obj, self.slot, 0)

        def __set__(self, obj, v):
            object.__setattr__(obj, self.slot, int(v))

    @dataclass
    class IO(ZeroCopy):
        n: IntOnly = IntOnly()  # noqa: RUF009

    mt.assert_zerocopy(IO(3))
    with pytest.raises(AssertionError) as ei:
        mt.assert_zerocopy_class(IO)
    assert "IO" in str(ei.value)
    assert "sentinel" in str(ei.value)


# The recipe of the README, over every metakit class of the shared records (MethodNamesMeta
# is left out: its field named asdict_zerocopy shadows the method on instances).
@pytest.mark.parametrize(
    "cls",
    [c for c in mt.zerocopy_classes_in(records) if c is not MethodNamesMeta],
    ids=mt.class_id,
)
def test_recipe_every_class_of_the_shared_records(cls):
    mt.assert_zerocopy_class(cls)


@dataclass
class KeywordOnlySkip(ZeroCopy):
    a: int = 1

    def asdict_zerocopy(self, *, skip_fields=None):
        return super().asdict_zerocopy(skip_fields)


@dataclass
class ReplaceNamedMeta(ZeroCopy):
    a: int
    __replace__: int = 0  # a field that hides the method, on purpose


_FAILED_AS_THEY_ARE = [
    # It was blamed on "the override MethodNamesMeta.asdict_zerocopy", which no one wrote.
    (
        MethodNamesMeta,
        (1, 2),
        "MethodNamesMeta: its field 'asdict_zerocopy' hides the method asdict_zerocopy() on every instance:"
        " rename the field (metakit.asdict_zerocopy(obj) still runs the generated code)",
    ),
    # The failure told to check an instance with real values, which would fail the same (an outside tester).
    (
        KeywordOnlySkip,
        (),
        "KeywordOnlySkip: the override KeywordOnlySkip.asdict_zerocopy: obj.asdict_zerocopy({'a'}) raised"
        " TypeError: KeywordOnlySkip.asdict_zerocopy() takes 1 positional argument but 2 were given",
    ),
    # Its default stands on the class, where copy.replace looks the method up: copy.replace calls 0.  It
    # passed (an outside tester).  With no default, the field is harmless (a test below).
    (
        ReplaceNamedMeta,
        (1, 5),
        "ReplaceNamedMeta: the default of its field '__replace__' stands on the class in place of the method"
        " __replace__(), which copy.replace calls: rename the field (metakit.replace(obj, ...) still runs the"
        " generated code)",
    ),
]


@pytest.mark.parametrize("on_instance", [False, True], ids=["assert_zerocopy_class", "assert_zerocopy"])
@pytest.mark.parametrize(
    ("cls", "values", "message"), _FAILED_AS_THEY_ARE, ids=lambda value: getattr(value, "__name__", "")
)
def test_a_broken_class_fails_with_what_is_wrong_with_it(cls, values, message, on_instance):
    subject = cls(*values) if on_instance else cls
    check = mt.assert_zerocopy if on_instance else mt.assert_zerocopy_class
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}$"):
        check(subject)


FieldsNamedMeta = make_dataclass("FieldsNamedMeta", [("__dataclass_fields__", int)], bases=(ZeroCopy,))


@pytest.mark.parametrize("on_instance", [False, True], ids=["assert_zerocopy_class", "assert_zerocopy"])
def test_a_field_that_hides_the_fields_from_dataclasses_fails_the_check(on_instance):
    # dataclasses.fields(obj) reads the instance's value of the field, so the reference cannot be made: the
    # helpers raised a TypeError of their own, naming neither the class nor the problem (an outside tester).
    subject = FieldsNamedMeta(7) if on_instance else FieldsNamedMeta
    check = mt.assert_zerocopy if on_instance else mt.assert_zerocopy_class
    message = (
        "FieldsNamedMeta: dataclasses.fields() cannot read the fields of its instance, so the reference cannot be"
        " made (nor does dataclasses.replace or asdict work on it): it raised AttributeError: "
    )
    with pytest.raises(AssertionError, match=f"^{re.escape(message)}"):
        check(subject)


@pytest.mark.parametrize("module", [5, None, records.__dict__])
def test_zerocopy_classes_in_names_an_argument_that_is_no_module(module):
    with pytest.raises(TypeError, match=r"zerocopy_classes_in\(\) takes a module or its dotted name, not "):
        zerocopy_classes_in(module)


def test_a_plain_dataclasss_own_astuple_is_checked_against_its_fields():
    @dataclass
    class Whole:
        a: int
        b: int = 0

        def astuple_zerocopy(self):
            return (self.a, self.b)

    @dataclass
    class Short:
        a: int
        b: int = 0

        def astuple_zerocopy(self):
            return (self.a,)

    assert_zerocopy(Whole(1))
    with pytest.raises(AssertionError, match=r"holds the values of \['a'\], but the fields' dict holds those of"):
        assert_zerocopy(Short(1))


def test_an_override_raising_an_error_whose_message_cannot_be_read_is_still_a_failed_check():
    class Unreadable(Exception):
        def __str__(self):
            raise RuntimeError("this message cannot be read")

    def raises(self, skip_fields=None):
        raise Unreadable

    with pytest.raises(AssertionError, match=r"raised Unreadable \(its message cannot be read\)"):
        assert_zerocopy(broken("RaisesUnreadable", asdict_zerocopy=raises))


def test_zerocopy_classes_in_this_module_excludes_abstract():
    found = mt.zerocopy_classes_in(records)
    assert AbstractBackendMeta not in found
    assert AbstractBackendMeta2 not in found
    assert ZeroCopy not in found
    assert found.index(AttnMeta) < found.index(FlashMeta) < found.index(FlashInferMeta)
    assert UndecoratedConcrete in found
    assert FlashInferUndecorated in found
    assert mt.class_id(FlashInferMeta) == "FlashInferMeta"


def test_testing_helpers_accept_good_classes():
    # DESIGN: metakit.testing.assert_zerocopy(obj) / assert_zerocopy_class(cls) check generated methods and overrides
    from metakit.testing import assert_zerocopy, assert_zerocopy_class

    @dataclass
    class Good(ZeroCopy):
        a: object = None
        w: object = field(default=None, metadata=OMIT)

    @dataclass
    class GoodOv(Good):
        wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"wrapper", *(skip_fields or ())})

    @dataclass(frozen=True, slots=True)
    class FS(ZeroCopy):
        a: object = None

    for cls in (Good, GoodOv, FS):
        assert_zerocopy_class(cls)
        assert_zerocopy(cls())


def test_testing_helper_reports_mutating_override():
    # README "Testing your own classes": an override that calls .add() on skip_fields "is reported with the names it
    # added", and the failure names the class
    from metakit.testing import assert_zerocopy_class

    @dataclass
    class Base(ZeroCopy):
        a: object = None

    @dataclass
    class BadOv(Base):
        decode_wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            skip_fields = skip_fields if skip_fields is not None else set()
            skip_fields.add("decode_wrapper")
            return super().asdict_zerocopy(skip_fields)

    with pytest.raises(AssertionError) as ei:
        assert_zerocopy_class(BadOv)
    msg = str(ei.value)
    assert "BadOv" in msg
    assert "decode_wrapper" in msg
    assert "override" in msg


@pytest.mark.parametrize("check", ["instance", "class"])
def test_an_override_that_changes_a_field_it_leaves_out_is_blamed_for_it(check):
    # (An outside tester: the astuple check of the generated code, run after it, was blamed.)
    @dataclass
    class DecodeMeta(ZeroCopy):
        num_decode_tokens: int = 0
        decode_wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            self.decode_wrapper = None
            return super().asdict_zerocopy({"decode_wrapper", *(skip_fields or ())})

    message = (
        r"^DecodeMeta: the override DecodeMeta\.asdict_zerocopy: obj\.asdict_zerocopy\(\) changed the instance's"
        r" field 'decode_wrapper': a conversion must leave the record as it was$"
    )
    with pytest.raises(AssertionError, match=message):
        assert_zerocopy(DecodeMeta(3, object())) if check == "instance" else assert_zerocopy_class(DecodeMeta)


@pytest.mark.parametrize("check", ["instance", "class"])
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_an_override_that_changes_what_a_field_holds_is_blamed_for_it(check, kind):
    # (An outside tester: only a field set to another object was seen, and the check, run on a record,
    # appended to its list on every call.)
    @dataclass
    class Batch(ZeroCopy):
        seq_lens: list[int] | dict[str, int]

        def asdict_zerocopy(self, skip_fields=None):
            if isinstance(self.seq_lens, list):
                self.seq_lens.append(0)
            else:
                self.seq_lens["added"] = 0
            return super().asdict_zerocopy(skip_fields)

    message = (
        r"^Batch: the override Batch\.asdict_zerocopy: obj\.asdict_zerocopy\(\) changed what the instance's"
        r" field 'seq_lens' holds: a conversion must leave the record as it was$"
    )
    record = Batch([1, 2] if kind == "list" else {"a": 1})
    with pytest.raises(AssertionError, match=message):
        assert_zerocopy(record) if check == "instance" else assert_zerocopy_class(Batch)
    if check == "instance":
        assert len(record.seq_lens) == 3 if kind == "list" else 2, "the check stops at the first change"


def test_instance_to_generated_source_and_assert_zerocopy_class():
    # DESIGN: "Classes passed where instances belong" get a clear TypeError, and (README) so do
    # instances passed where classes belong: generated_source(cls), assert_zerocopy_class(cls)
    with pytest.raises(TypeError, match="Meta"):
        metakit.generated_source(Meta())
    with pytest.raises(TypeError, match="assert_zerocopy"):
        metakit.testing.assert_zerocopy_class(Meta())


def _bad(name, body):
    ns = {"__module__": __name__, "__annotations__": {"a": int, "b": int}, "a": 1, "b": 2, **body}
    return dataclass(type(name, (ZeroCopy,), ns))


BAD_OVERRIDES = [
    ("extra key", {"asdict_zerocopy": lambda self, skip_fields=None: {"a": self.a, "b": self.b, "zz": 1}}, "zz"),
    ("wrong order", {"asdict_zerocopy": lambda self, skip_fields=None: {"b": self.b, "a": self.a}}, "order"),
    ("copied value", {"asdict_zerocopy": lambda self, skip_fields=None: {"a": Val(1), "b": self.b}}, "'a'"),
    ("ignores skip", {"asdict_zerocopy": lambda self, skip_fields=None: {"a": self.a, "b": self.b}}, "skip_fields"),
    (
        "mutates skip",
        {
            "asdict_zerocopy": lambda self, skip_fields=None: (
                skip_fields.add("b") if isinstance(skip_fields, set) else None,
                {"a": self.a},
            )[1]
        },
        "added",
    ),
    ("tuple is a list", {"astuple_zerocopy": lambda self: [self.a, self.b]}, "tuple"),
    ("tuple reversed", {"astuple_zerocopy": lambda self: (self.b, self.a)}, "order"),
]


@pytest.mark.parametrize(("label", "body", "word"), BAD_OVERRIDES, ids=[b[0] for b in BAD_OVERRIDES])
@pytest.mark.parametrize("late", [False, True], ids=["in body", "assigned late"])
def test_testing_helpers_name_the_broken_override(label, body, word, late):
    # DESIGN: "on failure names the class and the difference" / "a failure says which of the two
    # broke"
    cls = _bad(f"Bad{label.title().replace(' ', '')}", {} if late else body)
    if late:
        for k, v in body.items():
            setattr(cls, k, v)
    for check in (lambda: metakit.testing.assert_zerocopy_class(cls), lambda: metakit.testing.assert_zerocopy(cls())):
        with pytest.raises(AssertionError) as info:
            check()
        msg = str(info.value)
        assert msg.startswith(cls.__name__), msg
        assert "override" in msg, msg
        assert word in msg, msg
    for k in body:
        delattr(cls, k) if late else None
    if late:
        metakit.testing.assert_zerocopy_class(cls)  # after del, the generated methods are back


def test_testing_helpers_on_generic_and_descriptor_fields():
    # README: "`Box[int]` checks `Box`." / "A field whose descriptor refuses a sentinel ... fails with
    # a message that says so" / "A field whose descriptor returns a new object on every read (a view,
    # say) is compared by type, not identity"
    from typing import Generic, TypeVar

    T = TypeVar("T")

    @dataclass
    class Box(ZeroCopy, Generic[T]):
        item: T | None = None

    metakit.testing.assert_zerocopy_class(Box[int])
    metakit.testing.assert_zerocopy(Box[int](3))

    class IntOnly:
        def __set_name__(self, owner, name):
            self.slot = "_" + name

        def __get__(self, obj, owner=None):
            return 0 if obj is None else getattr(obj, self.slot)

        def __set__(self, obj, value):
            setattr(obj, self.slot, int(value))

    descriptor = IntOnly()

    @dataclass
    class WithDescriptor(ZeroCopy):
        x: IntOnly = descriptor  # type: ignore[assignment]

    with pytest.raises(AssertionError, match="WithDescriptor"):
        metakit.testing.assert_zerocopy_class(WithDescriptor)
    metakit.testing.assert_zerocopy(WithDescriptor(3))


T_TESTING = TypeVar("T_TESTING")


def check_instance(obj: Any) -> None:
    assert_zerocopy(obj)


def check_class(obj: Any) -> None:
    assert_zerocopy_class(type(obj))


HELPERS = [pytest.param(check_instance, id="assert_zerocopy"), pytest.param(check_class, id="assert_zerocopy_class")]


@dataclass
class Metadata(ZeroCopy):
    is_prompt: bool
    seq_lens: list[int]
    wrapper: object = field(default=None, metadata=OMIT)
    computed: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.attn_bias = None


@dataclass(slots=True, frozen=True)
class Slotted(ZeroCopy):
    block_tables: tuple[int, ...]
    page_size: int = 16


@dataclass(frozen=True)
class Frozen(ZeroCopy):
    slot_mapping: list[int]
    num_tokens: int = 0


@dataclass(slots=True)
class SlotsOnly(ZeroCopy):
    slot_mapping: list[int]


@dataclass
class WithInitVar(ZeroCopy):
    lens: list[int]
    scale: InitVar[int] = 2
    kind: ClassVar[str] = "flash"
    scaled: list[int] = field(init=False)

    def __post_init__(self, scale: int) -> None:
        self.scaled = [n * scale for n in self.lens]


@dataclass
class Box_testing(ZeroCopy, Generic[T_TESTING]):
    item: T_TESTING
    items: list[T_TESTING] = field(default_factory=list)


class Stored:
    """A descriptor field that keeps its value under another name, as the dataclass docs show."""

    def __init__(self, default: object) -> None:
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.attribute = f"_{name}"

    def __get__(self, obj: object, owner: type | None = None) -> object:
        return self.default if obj is None else getattr(obj, self.attribute, self.default)

    def __set__(self, obj: object, value: object) -> None:
        setattr(obj, self.attribute, value)


@dataclass
class WithDescriptor(ZeroCopy):
    num_tokens: int
    block_table: object = Stored(default=None)


@dataclass
class PlainMetadata:
    is_prompt: bool
    seq_lens: list[int] = field(default_factory=list)
    wrapper: object = field(default=None, metadata=OMIT)


@dataclass
class TransparentOverride(Metadata):
    extra: object = None

    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy(skip_fields)


class Undecorated(Metadata):
    pass


@dataclass
class Empty(ZeroCopy):
    pass


@dataclass
class AwkwardNames(ZeroCopy):
    self: int
    skip_fields: int
    dict: int
    cls: int


class ABCZeroCopyFields_testing(ZeroCopyFields, abc.ABCMeta):
    pass


@dataclass
class WithABCMeta(metaclass=ABCZeroCopyFields_testing):
    seq_lens: list[int]


Made = make_dataclass("Made", [("slot_mapping", list), ("num_tokens", int, 0)], bases=(ZeroCopy,))


ACCEPTED = [
    Metadata(True, [1, 2], wrapper=object()),
    Slotted((1, 2)),
    Frozen([1]),
    SlotsOnly([2]),
    WithInitVar([1, 2], 3),
    Box_testing(1, [2]),
    WithDescriptor(3, block_table=[1]),
    PlainMetadata(False, [3]),
    TransparentOverride(True, [4], extra=object()),
    Undecorated(False, [5]),
    Empty(),
    AwkwardNames(1, 2, 3, 4),
    WithABCMeta([1]),
    Made([1]),
]


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize("obj", ACCEPTED, ids=lambda obj: type(obj).__name__)
def test_both_helpers_pass_on_correct_classes(check, obj):
    check(obj)


def test_a_generic_alias_checks_its_class():
    assert_zerocopy_class(Box_testing[int])


def test_the_class_helper_runs_no_init_and_sets_every_field_to_its_own_sentinel(monkeypatch):
    seen = []
    real = metakit.testing._bare_instance

    def spy(cls):
        obj, notes = real(cls)
        seen.append(obj)
        return obj, notes

    monkeypatch.setattr(metakit.testing, "_bare_instance", spy)
    assert_zerocopy_class(WithInitVar)
    (obj,) = seen
    values = [getattr(obj, f.name) for f in dataclasses.fields(WithInitVar)]
    # A list field's sentinel is a list of its own, holding one sentinel.
    assert [repr(value) for value in values] == [
        "[<sentinel WithInitVar.lens[0]>]",
        "[<sentinel WithInitVar.scaled[0]>]",
    ]
    assert "scale" not in vars(obj)  # an InitVar is no field, and __post_init__ never ran


class View:
    def __init__(self, target: object) -> None:
        self.target = target


class FreshEachRead:
    """A descriptor field that hands out a new view of its value on every read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attribute = f"_{name}"

    def __get__(self, obj: object, owner: type | None = None) -> object:
        return None if obj is None else View(getattr(obj, self.attribute, None))

    def __set__(self, obj: object, value: object) -> None:
        setattr(obj, self.attribute, value)


@dataclass
class WithFreshView(ZeroCopy):
    seq_lens: list[int]
    positions: list[int] = FreshEachRead()


@pytest.mark.parametrize("check", HELPERS)
def test_a_field_that_reads_as_a_new_object_each_time_is_not_reported_as_copied(check):
    check(WithFreshView([1], positions=[0, 1]))


@pytest.mark.parametrize("check", HELPERS)
def test_a_copy_of_a_plain_field_beside_it_is_still_reported(check):
    @dataclass
    class CopiesBeside(WithFreshView):
        def asdict_zerocopy(self, skip_fields=None):
            d = super().asdict_zerocopy(skip_fields)
            if "seq_lens" in d:
                d["seq_lens"] = copy.copy(d["seq_lens"])
            return d

    with pytest.raises(AssertionError, match=r"\['seq_lens'\] is not the object the instance holds"):
        check(CopiesBeside([1], positions=[0]))


@dataclass
class DropsItsWrapper(ZeroCopy):
    """The README's override: the wrapper is a plain field the override leaves out."""

    num_prefills: int
    slot_mapping: list[int]
    decode_wrapper: object = None

    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy({"decode_wrapper", *(skip_fields or ())})


@dataclass
class CopiesThenAdds(DropsItsWrapper):
    """vLLM's override, written so that it leaves the caller's set alone."""

    prefill_wrapper: object = None

    def asdict_zerocopy(self, skip_fields=None):
        skip = set(skip_fields or ())
        skip.add("prefill_wrapper")
        return super().asdict_zerocopy(skip)


@dataclass
class ReturnsItsOwnDict:
    """A plain dataclass whose own method builds the dict by hand, as vLLM's base once did."""

    num_tokens: int
    slot_mapping: list[int]

    def asdict_zerocopy(self, skip_fields=None):
        skip = set(skip_fields or ())
        for name in skip:
            if name not in {f.name for f in dataclasses.fields(self)}:
                raise ValueError(f"skip_fields names {name!r}, which is not a field")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize(
    "obj",
    [DropsItsWrapper(1, [0], object()), CopiesThenAdds(1, [0], object(), object()), ReturnsItsOwnDict(1, [0])],
    ids=lambda obj: type(obj).__name__,
)
def test_an_override_that_leaves_fields_out_and_keeps_the_rules_passes(check, obj):
    check(obj)


@dataclass
class DropsARequiredField(ZeroCopy):
    num_prefills: int
    slot_mapping: list[int]

    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy({"slot_mapping", *(skip_fields or ())})


@pytest.mark.parametrize("check", HELPERS)
def test_an_override_that_leaves_out_a_field_init_requires_is_reported(check):
    expected = (
        "DropsARequiredField: the override DropsARequiredField.asdict_zerocopy: obj.asdict_zerocopy()"
        " has keys ['num_prefills']: it leaves out ['slot_mapping'], which __init__ requires,"
        " so DropsARequiredField(**d) cannot rebuild the record; leave out only fields with a default"
    )
    with pytest.raises(AssertionError) as error:
        check(DropsARequiredField(1, [0]))
    assert str(error.value) == expected


@dataclass
class ReturnsItsOmitField(ZeroCopy):
    num_prefills: int
    wrapper: object = field(default=None, metadata=OMIT)

    def asdict_zerocopy(self, skip_fields=None):
        d = {"num_prefills": self.num_prefills, "wrapper": self.wrapper}
        for name in skip_fields or ():
            d.pop(name, None)
        return d


@pytest.mark.parametrize("check", HELPERS)
def test_an_override_that_returns_an_omit_field_is_reported(check):
    # The wire refuses such a record: the helper says so before a broadcast does.
    with pytest.raises(AssertionError) as error:
        check(ReturnsItsOmitField(1, object()))
    assert str(error.value).startswith(
        "ReturnsItsOmitField: the override ReturnsItsOmitField.asdict_zerocopy: obj.asdict_zerocopy()"
        " has keys ['num_prefills', 'wrapper']: ['wrapper'] are OMIT fields, which never appear in the dict"
    )


@dataclass
class WritesItsOwnDict(ZeroCopy):
    num_prefills: int

    def asdict_zerocopy(self, skip_fields=None):
        d = {"num_prefills": self.num_prefills}
        for name in skip_fields or ():
            d.pop(name, None)
        return d


@dataclass
class AddsADefaultedField(WritesItsOwnDict):
    num_decode_tokens: int = 0


@pytest.mark.parametrize("check", HELPERS)
def test_a_base_override_that_leaves_out_a_subclass_field_is_reported(check):
    # The base's own fields pass; a field declared below it would silently never travel.
    check(WritesItsOwnDict(1))
    with pytest.raises(AssertionError) as error:
        check(AddsADefaultedField(1, 7))
    assert str(error.value).startswith(
        "AddsADefaultedField: the override WritesItsOwnDict.asdict_zerocopy: obj.asdict_zerocopy() leaves out"
        " ['num_decode_tokens'], which AddsADefaultedField declares below WritesItsOwnDict"
    )


@dataclass
class Base(ZeroCopy):
    a: object = None
    b: list[int] = field(default_factory=list)
    c: object = None


def broken(name: str, **methods: object) -> Base:
    """An instance of a subclass of ``Base`` whose *methods* override the generated ones."""
    cls = dataclass(types.new_class(name, (Base,), exec_body=lambda ns: ns.update(methods)))
    return cls(object(), [1], object())


def adds_a_key(self, skip_fields=None):
    return {**super(type(self), self).asdict_zerocopy(skip_fields), "attn_bias": None}


def reorders_keys(self, skip_fields=None):
    return dict(reversed(super(type(self), self).asdict_zerocopy(skip_fields).items()))


def copies_a_value(self, skip_fields=None):
    d = super(type(self), self).asdict_zerocopy(skip_fields)
    if "b" in d:
        d["b"] = copy.copy(d["b"])
    return d


def ignores_skip_fields(self, skip_fields=None):
    return super(type(self), self).asdict_zerocopy()


def accepts_unknown_names(self, skip_fields=None):
    skip = set(skip_fields or ())
    return {k: v for k, v in super(type(self), self).asdict_zerocopy().items() if k not in skip}


def raises_key_error_on_unknown_names(self, skip_fields=None):
    d = super(type(self), self).asdict_zerocopy()
    for name in skip_fields or ():
        del d[name]
    return d


def empties_on_unknown_names(self, skip_fields=None):
    names = list(skip_fields or ())
    if set(names) - {f.name for f in dataclasses.fields(self)}:
        return {}
    return super(type(self), self).asdict_zerocopy(names)


def takes_only_sets(self, skip_fields=None):
    return super(type(self), self).asdict_zerocopy(set() | (skip_fields or set()))


def takes_the_sets_it_declares(self, skip_fields: Optional[Set[str]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045  # vLLM's spelling
    return super(type(self), self).asdict_zerocopy(set() | (skip_fields or set()))


@pytest.mark.parametrize("check", HELPERS)
def test_an_override_annotated_to_take_sets_is_called_with_sets_only(check):
    # vLLM's FlashInfer override declares Optional[Set[str]]: a list there is the caller's mistake.
    check(broken("TakesSets", asdict_zerocopy=takes_the_sets_it_declares))


def _set_union_override(annotation: str) -> Any:
    """An override whose ``skip_fields`` has *annotation* (live), and that takes the union of it with a set."""
    namespace: dict[str, Any] = {}
    exec(
        "from typing import *\n"
        f"def asdict_zerocopy(self, skip_fields: {annotation} = None):\n"
        "    return super(type(self), self).asdict_zerocopy({'c'} | (skip_fields or set()))\n",
        namespace,
    )
    return namespace["asdict_zerocopy"]


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize(
    "annotation",
    ["Optional[FrozenSet[str]]", "frozenset[str] | None", "Annotated[Optional[Set[str]], 'doc']", "KeysView[str]"],
)
def test_an_override_annotated_otherwise_than_to_take_any_iterable_is_called_with_sets(check, annotation):
    # Found by an outside tester: each of these takes sets only, and the helpers passed it a list.
    # Only an override unannotated or annotated Iterable, Collection or Any gets every kind.
    check(broken("TakesSets", asdict_zerocopy=_set_union_override(annotation)))


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize(
    "annotation",
    ["Optional[Iterable[str]]", "Iterable[str] | None", "Collection[str]", "Any", "'Optional[Iterable[str]]'"],
)
def test_an_override_annotated_to_take_any_iterable_is_called_with_lists_too(check, annotation):
    # Live annotations as well as text: Optional[...]'s options are read, not its name.
    with pytest.raises(AssertionError, match=r"\(skip_fields=\['a', 'b'\]\) raised TypeError: unsupported operand"):
        check(broken("TakesSets", asdict_zerocopy=_set_union_override(annotation)))


@dataclass
class DeclaresSets(ZeroCopy):
    n: int
    wrapper: object = None

    def asdict_zerocopy(self, skip_fields: Optional[Set[str]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        return super().asdict_zerocopy((skip_fields or set()) | {"wrapper"})


@dataclass
class PassesSetsOn(DeclaresSets):
    seq_lens: object = None

    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy(skip_fields)


@pytest.mark.parametrize("check", HELPERS)
def test_an_override_that_passes_skip_fields_on_takes_what_the_one_it_calls_takes(check):
    # The chain's contract is its strictest annotation's (found by an outside tester).
    check(PassesSetsOn(1))


_MEMO: dict[tuple[int, frozenset[str] | None], tuple[object, dict[str, object]]] = {}
"""The dicts of the overrides that return one dict again and again, by instance and ``skip_fields``, each with its
instance: one that died would leave its address to a later instance, which would get its dict."""


def _one_dict(self, names: frozenset[str] | None) -> dict[str, object]:
    key = (id(self), names)
    if key not in _MEMO:
        _MEMO[key] = (self, super(type(self), self).asdict_zerocopy(names))
    return _MEMO[key][1]


def keeps_one_dict_per_skip(self, skip_fields=None):
    if skip_fields is None:
        return super(type(self), self).asdict_zerocopy()
    return _one_dict(self, frozenset(skip_fields))


def removes_from_skip_fields(self, skip_fields=None):
    d = super(type(self), self).asdict_zerocopy(skip_fields)
    if isinstance(skip_fields, set):
        skip_fields.discard("a")
    return d


def adds_to_skip_fields(self, skip_fields=None):
    # vLLM's FlashInfer metadata did this with its decode wrapper.
    if skip_fields is None:
        skip_fields = set()
    skip_fields.add("c")
    return super(type(self), self).asdict_zerocopy(skip_fields)


def returns_one_dict(self, skip_fields=None):
    if skip_fields is not None:
        return super(type(self), self).asdict_zerocopy(skip_fields)
    return _one_dict(self, None)


def returns_a_mapping_proxy(self, skip_fields=None):
    return types.MappingProxyType(super(type(self), self).asdict_zerocopy(skip_fields))


def drops_c_when_skipping(self, skip_fields=None):
    # Meant to leave out one more name, it leaves out 'c' only when given some.
    return super(type(self), self).asdict_zerocopy({*skip_fields, "c"} if skip_fields else None)


def raises(self, skip_fields=None):
    return {name: getattr(self, name) for name in ("a", "b", "c", "d")}


def reorders_the_tuple(self):
    return tuple(reversed(super(type(self), self).astuple_zerocopy()))


def copies_in_the_tuple(self):
    a, b, c = super(type(self), self).astuple_zerocopy()
    return (a, copy.copy(b), c)


def returns_a_list(self):
    return list(super(type(self), self).astuple_zerocopy())


def takes_skip_fields_by_keyword_only(self, *, skip_fields=None):
    return super(type(self), self).asdict_zerocopy(skip_fields)


BROKEN = [
    (
        "KeywordOnly",  # engine code calls meta.asdict_zerocopy({"x"}) too
        takes_skip_fields_by_keyword_only,
        r"obj.asdict_zerocopy\(\{'a'\}\) raised TypeError: .*takes 1 positional argument but 2 were given",
    ),
    (
        "AddsKey",
        adds_a_key,
        r"has keys \['a', 'b', 'c', 'attn_bias'\]: unexpected \['attn_bias'\], which are not fields",
    ),
    ("ReordersKeys", reorders_keys, r"not in field order \['a', 'b', 'c'\]: the order differs"),
    ("CopiesValue", copies_a_value, r"obj.asdict_zerocopy\(\)\['b'\] is not the object the instance holds"),
    (
        "IgnoresSkip",
        ignores_skip_fields,
        r"\(skip_fields=\{'a'\}\) has keys .*: unexpected \['a'\], which skip_fields names",
    ),
    (
        "EmptiesOnUnknown",
        empties_on_unknown_names,
        r"\(skip_fields=\{'not_a_field'\}\) has keys \[\], expected \['a', 'b', 'c'\]: missing \['a', 'b', 'c'\]",
    ),
    ("RemovesFromSkip", removes_from_skip_fields, r"changed the skip_fields it was given: it removed \['a'\]"),
    (
        "AddsToSkip",
        adds_to_skip_fields,
        r"\(skip_fields=set\(\)\) changed the skip_fields it was given: it added \['c'\]",
    ),
    ("OneDict", returns_one_dict, r"obj.asdict_zerocopy\(\) returned the same dict twice"),
    ("Proxy", returns_a_mapping_proxy, r"obj.asdict_zerocopy\(\) returned mappingproxy, not dict"),
    (
        "DropsWhenSkipping",
        drops_c_when_skipping,
        r"\(skip_fields=\{'a'\}\) has keys \['b'\], expected \['b', 'c'\]: "
        r"missing \['c'\], which it returns when called with no arguments",
    ),
    ("Raises", raises, r"obj.asdict_zerocopy\(\) raised AttributeError: .*'d'"),
    ("TakesOnlySets", takes_only_sets, r"\(skip_fields=\['a', 'c'\]\) raised TypeError: unsupported operand"),
    ("OneDictPerSkip", keeps_one_dict_per_skip, r"\(skip_fields=\{'a', 'c'\}\) returned the same dict twice"),
]


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize(("name", "method", "difference"), BROKEN, ids=[case[0] for case in BROKEN])
def test_a_broken_override_is_named_with_the_call_and_the_difference(check, name, method, difference):
    obj = broken(name, asdict_zerocopy=method)
    with pytest.raises(AssertionError, match=difference) as error:
        check(obj)
    assert str(error.value).startswith(f"{name}: the override {name}.asdict_zerocopy: obj.asdict_zerocopy(")


def a_fields_comprehension(self, skip_fields=None):
    skip = skip_fields or set()
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}


def raises_value_error_in_its_own_words(self, skip_fields=None):
    skip = set(skip_fields or ())  # read once: skip_fields may be an iterator
    if skip - {f.name for f in dataclasses.fields(self)}:
        raise ValueError("skip_fields holds a name that is not a field")
    return super(type(self), self).asdict_zerocopy(skip)


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize(
    "method",
    [
        a_fields_comprehension,
        accepts_unknown_names,
        raises_key_error_on_unknown_names,
        raises_value_error_in_its_own_words,
    ],
)
def test_an_override_that_ignores_or_refuses_names_that_are_not_fields_passes(check, method):
    # A ``fields()`` comprehension, as engines wrote before metakit, leaves
    # out an unknown name as it leaves out the others: that keeps the rules.
    # An override may as well refuse it, with any error: no rule of an override's says how.
    check(broken("IgnoresUnknown", asdict_zerocopy=method))


BROKEN_TUPLES = [
    ("ReordersTuple", reorders_the_tuple, r"holds the values of \['c', 'b', 'a'\], which are not field values in"),
    ("CopiesInTuple", copies_in_the_tuple, r"holds the values of \['a', '\?', 'c'\]"),
    ("ListTuple", returns_a_list, r"returned list, not tuple"),
]


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize(("name", "method", "difference"), BROKEN_TUPLES, ids=[case[0] for case in BROKEN_TUPLES])
def test_a_broken_astuple_override_is_named_with_the_difference(check, name, method, difference):
    obj = broken(name, astuple_zerocopy=method)
    with pytest.raises(AssertionError, match=difference) as error:
        check(obj)
    assert str(error.value).startswith(f"{name}: the override {name}.astuple_zerocopy: obj.astuple_zerocopy() ")


def _drops_b_from_the_tuple(self):
    a, _, c = super(type(self), self).astuple_zerocopy()
    return (a, c)


def _drops_b_from_the_dict(self, skip_fields=None):
    return {name: value for name, value in super(type(self), self).asdict_zerocopy(skip_fields).items() if name != "b"}


@pytest.mark.parametrize("check", HELPERS)
def test_an_astuple_override_holds_what_asdict_holds_in_the_same_order(check):
    # Cls(*t) must bind each value to its own parameter: a value left out of the tuple alone
    # would shift those after it.
    with pytest.raises(AssertionError, match=r"holds the values of \['a', 'c'\], but asdict_zerocopy\(\) holds"):
        check(broken("DropsFromTuple", astuple_zerocopy=_drops_b_from_the_tuple))
    # Left out of both, as vLLM's FlashInfer metadata leaves out its wrappers: the two agree.
    check(broken("DropsFromBoth", astuple_zerocopy=_drops_b_from_the_tuple, asdict_zerocopy=_drops_b_from_the_dict))


def test_a_faithful_override_made_the_same_way_passes():
    # So each failure above comes from its method's one defect.
    def correct(self, skip_fields=None):
        return super(type(self), self).asdict_zerocopy(skip_fields)

    obj = broken("Correct", asdict_zerocopy=correct)
    assert_zerocopy(obj)
    assert_zerocopy_class(type(obj))


def test_an_override_in_a_base_is_named_by_its_class():
    @dataclass
    class Sub(broken("InBase", asdict_zerocopy=reorders_keys).__class__):
        d: object = None

    with pytest.raises(AssertionError, match=r"^Sub: the override InBase.asdict_zerocopy: obj.asdict_zerocopy\(\)"):
        assert_zerocopy_class(Sub)


def test_an_override_over_another_is_named_with_both():
    @dataclass
    class Inner(Base):
        def asdict_zerocopy(self, skip_fields=None):
            d = super().asdict_zerocopy(skip_fields)
            return {**d, "b": copy.copy(d["b"])} if "b" in d else d

    @dataclass
    class Outer(Inner):
        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy(skip_fields)

    pattern = (
        r"^Outer: the override Outer.asdict_zerocopy \(over Inner.asdict_zerocopy\):"
        r" obj.asdict_zerocopy\(\)\['b'\] is not"
    )
    with pytest.raises(AssertionError, match=pattern):
        assert_zerocopy_class(Outer)


def test_broken_generated_code_is_blamed_before_the_override(monkeypatch):
    def drops_slot_mapping(obj, skip_fields=None):
        values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {k: v for k, v in values.items() if k != "slot_mapping" and k not in (skip_fields or ())}

    monkeypatch.setattr(metakit, "asdict_zerocopy", drops_slot_mapping)
    obj = DropsItsWrapper(1, [0], object())
    with pytest.raises(AssertionError) as error:
        assert_zerocopy(obj)
    assert str(error.value).startswith(
        "DropsItsWrapper: the generated code: metakit.asdict_zerocopy(obj) has keys ['num_prefills', 'decode_wrapper'],"
        " expected ['num_prefills', 'slot_mapping', 'decode_wrapper']: missing ['slot_mapping']"
    )


def test_broken_generated_methods_of_the_class_are_blamed(monkeypatch):
    real = metakit._functions.methods_of

    class Reversed:
        def __init__(self, methods):
            self.methods = methods

        def asdict(self, obj, skip_fields=None):
            return dict(reversed(self.methods.asdict(obj, skip_fields).items()))

        def astuple(self, obj):
            return self.methods.astuple(obj)

    monkeypatch.setattr(metakit._functions, "methods_of", lambda cls: Reversed(real(cls)))
    with pytest.raises(AssertionError) as error:
        assert_zerocopy_class(Frozen)
    assert str(error.value) == (
        "Frozen: the generated code: methods_of(Frozen).asdict(obj) has keys ['num_tokens', 'slot_mapping'],"
        " expected ['slot_mapping', 'num_tokens']: the order differs"
    )


def test_another_classs_generated_method_in_a_class_body_is_checked_as_the_users_override():
    # Issue 24: a method written in a class body is the user's, even when it
    # is another class's generated code; it is checked for what any override
    # must keep, not blamed as metakit's generated code for other fields.
    @dataclass
    class Other(ZeroCopy):
        a: object = None

    class Mixin:
        asdict_zerocopy = vars(Other)["asdict_zerocopy"]

    @dataclass
    class Reaches(Mixin):
        a: object = None
        b: object = None

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy(skip_fields)

    assert_zerocopy_class(Reaches)  # a new dict of fields, in order, the very objects: all an override must keep

    @dataclass
    class Pair(ZeroCopy):
        a: object = None
        b: object = None

    class Reordering:
        def asdict_zerocopy(self, skip_fields=None):
            return dict(reversed(vars(Pair)["asdict_zerocopy"](self, skip_fields).items()))

    @dataclass
    class Reordered(Reordering):
        a: object = None
        b: object = None

    with pytest.raises(AssertionError, match=r"^Reordered: the override Reordering\.asdict_zerocopy"):
        assert_zerocopy_class(Reordered)


def test_a_generated_method_that_returns_the_same_dict_is_blamed_as_generated(monkeypatch):
    kept = {}
    real = metakit.asdict_zerocopy

    def one_dict(obj, skip_fields=None):
        return kept.setdefault(skip_fields is None, real(obj, skip_fields))

    monkeypatch.setattr(metakit, "asdict_zerocopy", one_dict)
    with pytest.raises(
        AssertionError, match=r"^Frozen: the generated code: metakit.asdict_zerocopy\(obj\) returned the same"
    ):
        assert_zerocopy_class(Frozen)


class Converted:
    """The dataclass docs' descriptor: it converts what it is given with int()."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attribute = f"_{name}"

    def __get__(self, obj: object, owner: type | None = None) -> object:
        return 0 if obj is None else getattr(obj, self.attribute, 0)

    def __set__(self, obj: object, value: Any) -> None:
        setattr(obj, self.attribute, int(value))


@dataclass
class WithConversion(ZeroCopy):
    seq_lens: list[int]
    num_tokens: int = Converted()  # type: ignore[assignment]


def test_a_field_that_refuses_a_sentinel_is_named_rather_than_reported_as_different():
    with pytest.raises(AssertionError) as error:
        assert_zerocopy_class(WithConversion)
    message = str(error.value)
    assert message.startswith("WithConversion: field 'num_tokens' cannot be set on a bare instance")
    assert "raised TypeError" in message
    assert "assert_zerocopy(obj)" in message
    assert_zerocopy(WithConversion([1], 3))  # an instance you make works


class Stringified(Stored):
    def __set__(self, obj: object, value: object) -> None:
        setattr(obj, self.attribute, str(value))


def test_a_field_that_stores_something_else_passes_and_is_noted_in_a_failure():
    @dataclass
    class WithStringified(ZeroCopy):
        name: object = Stringified(default="")

    assert_zerocopy_class(WithStringified)

    @dataclass
    class Reordered(WithStringified):
        other: object = None

        def asdict_zerocopy(self, skip_fields=None):
            return dict(reversed(super().asdict_zerocopy(skip_fields).items()))

    with pytest.raises(AssertionError, match=r"the order differs \(note: field 'name' does not read back the sentinel"):
        assert_zerocopy_class(Reordered)


def test_an_abstract_class_has_no_bare_instance():
    @dataclass
    class Abstract(metaclass=ABCZeroCopyFields_testing):
        seq_lens: list[int]

        @abc.abstractmethod
        def prefill_metadata(self) -> object: ...

    with pytest.raises(AssertionError) as error:
        assert_zerocopy_class(Abstract)
    assert str(error.value) == (
        "Abstract: assert_zerocopy_class cannot make a bare instance of Abstract, an abstract class (abstract:"
        " prefill_metadata): check its concrete subclasses instead"
    )


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize(
    "obj", [Metadata(True, [1]), Slotted((1,)), WithInitVar([1], 2)], ids=lambda o: type(o).__name__
)
def test_a_replace_that_agrees_with_dataclasses_replace_passes(monkeypatch, check, obj):
    monkeypatch.setattr(metakit, "replace", dataclasses.replace, raising=False)
    check(obj)


def returns_itself(obj, /, **changes):
    return obj


def copies_seq_lens(obj, /, **changes):
    return dataclasses.replace(obj, seq_lens=copy.copy(obj.seq_lens), **changes)


def returns_a_base(obj, /, **changes):
    return Metadata(obj.is_prompt, obj.seq_lens, obj.wrapper)


def refuses(obj, /, **changes):
    raise TypeError("no")


BROKEN_REPLACES = [
    ("Itself", returns_itself, r"returned the instance itself, not a new one"),
    ("Copies", copies_seq_lens, r"holds a new object in field 'seq_lens', where dataclasses.replace\(obj\) keeps"),
    ("Base", returns_a_base, r"returned Metadata, not WithReplace"),
    ("Raises", refuses, r"raised TypeError: no"),
]


@dataclass
class WithReplace(Metadata):
    pass


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize(("name", "replace", "difference"), BROKEN_REPLACES, ids=[c[0] for c in BROKEN_REPLACES])
def test_a_broken_replace_is_blamed_as_generated_code(monkeypatch, check, name, replace, difference):
    monkeypatch.setattr(metakit, "replace", replace, raising=False)
    with pytest.raises(AssertionError, match=difference) as error:
        check(WithReplace(True, [1]))
    assert str(error.value).startswith("WithReplace: the generated code: metakit.replace(obj) ")


@dataclass(init=False)
class MakesLists(ZeroCopy):
    """An ``__init__`` that holds new lists of what it is given: no field keeps the very object."""

    seq_lens: object = ()
    query_lens: object = ()

    def __init__(self, seq_lens=(), query_lens=()):
        self.seq_lens, self.query_lens = [seq_lens], [query_lens]


def swaps_the_fields(obj, /, **changes):
    return type(obj)(obj.query_lens, obj.seq_lens)


def counts(obj, /, **changes):
    return type(obj)(next(_COUNTER), obj.query_lens)


_COUNTER = itertools.count()


@dataclass(init=False)
class Counts(MakesLists):
    """An ``__init__`` that makes a new value each time: ``seq_lens`` has no one right value to compare."""

    def __init__(self, seq_lens=(), query_lens=()):
        super().__init__(next(_COUNTER), query_lens)


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize("lies", [False, True], ids=["honest __eq__", "lying __eq__"])
def test_a_replace_that_puts_values_in_other_fields_fails_where_init_makes_new_objects(monkeypatch, check, lies):
    # The helpers compared only the fields dataclasses.replace keeps as the very objects: where __init__
    # makes new ones, a replace that swapped two fields passed (an outside tester). Each such field's value
    # is now compared with dataclasses.replace's, by ==, where that gives the same value twice.
    monkeypatch.setattr(metakit, "replace", swaps_the_fields, raising=False)
    cls = type("Lies", (MakesLists,), {"__eq__": lambda self, other: True}) if lies else MakesLists
    swapped = r"holds \[.*\] in field 'seq_lens', where dataclasses.replace\(obj\) gives"
    with pytest.raises(AssertionError, match=swapped):
        check(cls([1], [2]))


@pytest.mark.parametrize("check", HELPERS)
def test_a_field_that_init_makes_anew_each_time_is_not_compared(monkeypatch, check):
    monkeypatch.setattr(metakit, "replace", counts, raising=False)
    check(Counts())
    monkeypatch.setattr(metakit, "replace", swaps_the_fields, raising=False)  # query_lens is still compared
    with pytest.raises(AssertionError, match=r"in field 'query_lens', where dataclasses.replace\(obj\) gives"):
        check(Counts())


@pytest.mark.parametrize("check", HELPERS)
def test_a_post_init_that_changes_what_it_is_given_is_blamed_not_the_generated_code(check):
    # dataclasses.replace(obj) itself changes the instance's list here; the failure blamed "the generated
    # code" (an outside tester).
    @dataclass
    class Appends(ZeroCopy):
        seq_lens: list[int]

        def __post_init__(self):
            self.seq_lens.append(0)

    with pytest.raises(AssertionError) as error:
        check(Appends([1]))
    assert "the generated code" not in str(error.value)
    assert re.match(
        r"Appends: its __init__ or __post_init__: dataclasses.replace\(obj\) changed what the instance's field"
        r" 'seq_lens' holds",
        str(error.value),
    ), str(error.value)


def test_replace_must_raise_where_dataclasses_replace_does(monkeypatch):
    @dataclass
    class NeedsScale(ZeroCopy):
        lens: list[int]
        scale: InitVar[int]

        def __post_init__(self, scale: int) -> None:
            pass

    monkeypatch.setattr(metakit, "replace", dataclasses.replace, raising=False)
    assert_zerocopy(NeedsScale([1], 2))  # both raise ValueError: the InitVar must be given
    monkeypatch.setattr(metakit, "replace", lambda obj: obj.__class__(obj.lens, 1), raising=False)
    with pytest.raises(AssertionError, match=r"metakit.replace\(obj\) returned, but dataclasses.replace\(obj\) raises"):
        assert_zerocopy(NeedsScale([1], 2))


def test_an_error_of_dataclasses_replace_whose_message_cannot_be_read_is_still_a_failed_check(monkeypatch):
    class Unreadable(Exception):
        def __str__(self):
            raise RuntimeError("this message cannot be read")

    @dataclass
    class Refuses(ZeroCopy):
        lens: list[int]
        closed: ClassVar[bool] = False

        def __post_init__(self) -> None:
            if Refuses.closed:
                raise Unreadable

    record = Refuses([1])
    Refuses.closed = True  # dataclasses.replace(record) raises from here on
    monkeypatch.setattr(metakit, "replace", copy.copy, raising=False)
    with pytest.raises(AssertionError, match=r"returned, but dataclasses.replace\(obj\) raises Unreadable \(its"):
        assert_zerocopy(record)


def test_the_real_metakit_replace_is_called(monkeypatch):
    calls = []
    real = metakit.replace

    def spy(obj, /, **changes):
        calls.append(type(obj))
        return real(obj, **changes)

    monkeypatch.setattr(metakit, "replace", spy)
    assert_zerocopy(Metadata(True, [1]))
    assert_zerocopy_class(Slotted)
    # The bare instance and the one __init__ made of it, each as made and with every field set anew.
    assert calls == [Metadata, Slotted, Slotted, Slotted, Slotted]


@dataclass
class ReturnsItsDict(metakit.ZeroCopy):
    num_tokens: int

    def __post_init__(self):
        self.attn_bias = None  # set per step: not a field

    def asdict_zerocopy(self, skip_fields=None):
        return {k: v for k, v in vars(self).items() if k not in (skip_fields or ())}


@dataclass
class ValidatesAndReturnsItsDict(ReturnsItsDict):
    def __post_init__(self):
        if self.num_tokens < 0:  # refuses a sentinel: no instance can be made by __init__
            raise ValueError("num_tokens must not be negative")
        super().__post_init__()


@dataclass
class NeedsAnInitVarAndReturnsItsDict(ReturnsItsDict):
    block_size: InitVar[int]

    def __post_init__(self, block_size):
        super().__post_init__()


_STAND_IN_NOTE = (
    " ('_metakit_set_in_post_init' is no name of yours: assert_zerocopy_class set it on its instance, which"
    " __init__ did not make, in place of the attributes that __post_init__ or a caching property sets; the"
    " override returns such attributes, as vars(self) does)"
)
"""What the message adds where the helper's own attribute shows (an outside tester took it for the user's)."""


@pytest.mark.parametrize(
    ("cls", "keys", "note"),
    [
        # The bare instance never ran __post_init__, but holds an attribute that is not a field, set on it
        # as __post_init__ or a caching property sets one: it shows first, whether or not __init__ can make
        # an instance (these two passed once: __init__ refused the sentinels, or needed the InitVar).
        (ReturnsItsDict, ["num_tokens", "_metakit_set_in_post_init"], _STAND_IN_NOTE),
        (ValidatesAndReturnsItsDict, ["num_tokens", "_metakit_set_in_post_init"], _STAND_IN_NOTE),
        (NeedsAnInitVarAndReturnsItsDict, ["num_tokens", "_metakit_set_in_post_init"], _STAND_IN_NOTE),
    ],
    ids=["made by __init__", "__init__ refuses the sentinels", "an InitVar"],
)
def test_an_override_that_returns_what_post_init_sets_is_reported_with_no_instance(cls, keys, note):
    with pytest.raises(AssertionError) as caught:
        assert_zerocopy_class(cls)
    assert str(caught.value) == (
        f"{cls.__name__}: the override ReturnsItsDict.asdict_zerocopy: obj.asdict_zerocopy() has keys {keys}:"
        f" unexpected {keys[1:]}, which are not fields{note}"
    )


@dataclass
class KeepsItsWrapperInTheTuple(metakit.ZeroCopy):
    num_prefills: int
    seq_lens: list[int] | None = None
    block_tables: list[int] | None = None
    wrapper: object = None

    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy({"wrapper", *(skip_fields or ())})

    def astuple_zerocopy(self):  # wrong: keeps the wrapper that asdict_zerocopy() leaves out
        return super().astuple_zerocopy()


def test_fields_that_hold_the_same_object_are_named_in_order_in_a_message():
    with pytest.raises(AssertionError) as caught:
        assert_zerocopy(KeepsItsWrapperInTheTuple(3))  # three fields hold None
    assert (
        "holds the values of ['num_prefills', 'seq_lens', 'block_tables', 'wrapper'], but asdict_zerocopy() holds"
        " those of ['num_prefills', 'seq_lens', 'block_tables']"
    ) in str(caught.value)


@dataclass
class ReadsWhatPostInitSets(metakit.ZeroCopy):
    num_tokens: int
    workspace: object = None

    def __post_init__(self):
        self.is_profile_run = False  # not a field

    def asdict_zerocopy(self, skip_fields=None):
        skip = set(skip_fields or ())
        if self.is_profile_run:
            skip.add("workspace")
        return super().asdict_zerocopy(skip)


def test_an_override_that_reads_what_post_init_sets_passes_with_no_instance():
    # It raises on the bare instance, which never ran __post_init__: the instance __init__ made answers.
    assert_zerocopy_class(ReadsWhatPostInitSets)
    assert_zerocopy(ReadsWhatPostInitSets(3))


@dataclass
class CachesOnFirstCall(metakit.ZeroCopy):
    num_tokens: int
    slot_mapping: object = None

    def asdict_zerocopy(self, skip_fields=None):
        if "_cache" not in self.__dict__:
            self.__dict__["_cache"] = super().asdict_zerocopy()
        return {k: v for k, v in self.__dict__["_cache"].items() if k not in (skip_fields or ())}


@dataclass
class CachesInPostInit(metakit.ZeroCopy):
    num_tokens: int
    slot_mapping: object = None

    def __post_init__(self):
        self.cache = super().asdict_zerocopy()

    def asdict_zerocopy(self, skip_fields=None):
        return {k: v for k, v in self.cache.items() if k not in (skip_fields or ())}


@pytest.mark.parametrize("cls", [CachesOnFirstCall, CachesInPostInit])
def test_an_override_that_returns_values_it_kept_from_before_is_reported_with_no_instance(cls):
    # Every field is set anew and every check runs again: the values kept from before show.
    with pytest.raises(AssertionError, match=r"is not the object the instance holds.*set anew"):
        assert_zerocopy_class(cls)


@dataclass
class LeavesAFieldUnset(metakit.ZeroCopy):
    num_tokens: int
    total: int = field(init=False)  # set later by the engine, not by __post_init__


def test_a_class_whose_init_leaves_a_field_unset_is_checked_on_the_bare_instance_alone():
    assert_zerocopy_class(LeavesAFieldUnset)


def test_another_classs_generated_replace_assigned_by_a_user_is_not_checked_as_generated_code():
    @dataclass
    class Other(ZeroCopy):
        a: object = None

    @dataclass
    class Replaced:
        a: object = None
        b: object = None

    # The generated __replace__ of Other, which knows nothing of 'b', assigned
    # by a user: the user's method (issue 24), whose behaviour is the user's.
    Replaced.__replace__ = vars(Other)["__replace__"]
    assert_zerocopy_class(Replaced)


def test_without_metakit_replace_the_helpers_still_run(monkeypatch):
    monkeypatch.delattr(metakit, "replace", raising=False)
    assert_zerocopy(Metadata(True, [1]))
    assert_zerocopy_class(Metadata)


def test_an_instance_missing_a_field_says_the_reference_cannot_be_built():
    @dataclass
    class Unset(ZeroCopy):
        seq_lens: list[int] = field(init=False)  # never set

    with pytest.raises(AssertionError, match=r"^Unset: reading the field 'seq_lens' raised AttributeError"):
        assert_zerocopy(Unset())
    assert_zerocopy_class(Unset)  # the bare instance holds a sentinel there


@pytest.mark.parametrize("cls", [Metadata, PlainMetadata])
def test_a_class_given_to_assert_zerocopy_raises_type_error(cls):
    pattern = f"got the class {re.escape(cls.__qualname__)} itself; use assert_zerocopy_class"
    with pytest.raises(TypeError, match=pattern):
        assert_zerocopy(cls)


@pytest.mark.parametrize("value", [3, "text", object(), [Metadata(True, [])]], ids=lambda v: type(v).__name__)
def test_a_non_dataclass_given_to_assert_zerocopy_raises_type_error(value):
    with pytest.raises(TypeError, match=f"{type(value).__qualname__} is not a dataclass"):
        assert_zerocopy(value)


def test_an_instance_given_to_assert_zerocopy_class_raises_type_error():
    with pytest.raises(TypeError, match="got an instance of Metadata; use assert_zerocopy"):
        assert_zerocopy_class(Metadata(True, []))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [5, None, type("NotADataclass", (ZeroCopy,), {})()], ids=lambda v: type(v).__name__)
def test_an_object_that_is_no_class_nor_dataclass_given_to_assert_zerocopy_class_is_called_no_dataclass(value):
    # (An outside tester: it was told to use assert_zerocopy(obj), which refuses it too.)
    with pytest.raises(TypeError, match=f"got an instance of {type(value).__name__}, which is not a dataclass$"):
        assert_zerocopy_class(value)


@pytest.mark.parametrize("cls", [int, ZeroCopy, type("NotADataclass", (ZeroCopy,), {})], ids=lambda c: c.__name__)
def test_a_class_that_is_not_a_dataclass_given_to_assert_zerocopy_class_raises_type_error(cls):
    with pytest.raises(TypeError, match=f"but {cls.__qualname__} is not a dataclass"):
        assert_zerocopy_class(cls)


class Wrapper:
    """Stands in for a FlashInfer kernel wrapper: it cannot be broadcast."""


@dataclass
class AttentionMetadata(ZeroCopy):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: list[int]


@dataclass
class FlashInferMetadata(AttentionMetadata):
    """vLLM's shape: the wrapper is a plain field, and the override adds its name to the set."""

    max_prefill_seq_len: int
    use_cuda_graph: bool = False
    decode_wrapper: Wrapper | None = None
    seq_start_loc: list[int] | None = None
    block_tables: list[int] | None = None
    paged_kv_indptr: list[int] | None = None
    page_size: int | None = None

    def __post_init__(self) -> None:
        if self.num_prefills == 0:
            self.decode_wrapper = Wrapper()

    def asdict_zerocopy(self, skip_fields: set[str] | None = None) -> dict[str, Any]:
        if skip_fields is None:
            skip_fields = set()
        # The wrapper cannot be broadcast, so it never travels.
        skip_fields.add("decode_wrapper")
        return super().asdict_zerocopy(skip_fields)


@dataclass
class FixedFlashInferMetadata(FlashInferMetadata):
    """The same override, mended: it adds to a copy of the set it is given."""

    def asdict_zerocopy(self, skip_fields: set[str] | None = None) -> dict[str, Any]:
        skip = set(skip_fields or ())
        skip.add("decode_wrapper")
        return super(FlashInferMetadata, self).asdict_zerocopy(skip)


@dataclass
class OmittedWrapperMetadata(AttentionMetadata):
    """What metakit offers instead: an OMIT field and no override."""

    max_prefill_seq_len: int
    decode_wrapper: Wrapper | None = field(default=None, metadata=OMIT)


def decode_step(cls: type[AttentionMetadata]) -> Any:
    return cls(0, 0, 2, [5, 9], max_prefill_seq_len=0, seq_start_loc=[0, 1, 2], page_size=16)


@pytest.mark.parametrize("make", [decode_step, lambda cls: cls], ids=["assert_zerocopy", "assert_zerocopy_class"])
def test_vllms_flashinfer_override_is_reported_for_adding_to_the_callers_set(make):
    subject = make(FlashInferMetadata)
    check = assert_zerocopy_class if isinstance(subject, type) else assert_zerocopy
    with pytest.raises(AssertionError) as error:
        check(subject)
    assert str(error.value) == (
        "FlashInferMetadata: the override FlashInferMetadata.asdict_zerocopy: obj.asdict_zerocopy(skip_fields=set())"
        " changed the skip_fields it was given: it added ['decode_wrapper'];"
        " it must leave the caller's set unchanged and change a copy"
    )


def test_leaving_the_wrapper_out_is_not_reported_as_missing():
    # The old helper said "missing ['decode_wrapper']" here; leaving a field out is the
    # override's right, so the mended override passes both helpers.
    assert_zerocopy(decode_step(FixedFlashInferMetadata))
    assert_zerocopy_class(FixedFlashInferMetadata)
    d = decode_step(FixedFlashInferMetadata).asdict_zerocopy()
    assert "decode_wrapper" not in d


def test_the_omit_field_form_passes():
    meta = OmittedWrapperMetadata(0, 0, 2, [5, 9], 0, decode_wrapper=Wrapper())
    assert_zerocopy(meta)
    assert_zerocopy_class(OmittedWrapperMetadata)


class ABCZeroCopyFields_testing_engines(ZeroCopyFields, abc.ABCMeta):
    pass


class ModelRunnerInputBase(metaclass=ABCZeroCopyFields_testing_engines):
    """vLLM's shape: an abstract base the runners' frozen inputs derive from."""

    @abc.abstractmethod
    def as_broadcastable_tensor_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ModelInputForGPU(ModelRunnerInputBase):
    input_tokens: list[int] | None = None
    input_positions: list[int] | None = None
    seq_lens: list[int] | None = None
    query_lens: list[int] | None = None
    lora_requests: set[str] | None = None
    attn_metadata: AttentionMetadata | None = None
    request_ids_to_seq_ids: dict[str, list[int]] | None = None
    finished_requests_ids: list[str] | None = None
    virtual_engine: int = 0
    async_callback: Any | None = field(default=None, metadata=OMIT)

    def as_broadcastable_tensor_dict(self) -> dict[str, Any]:
        return self.asdict_zerocopy(skip_fields={"seq_lens", "query_lens"})


@dataclass(frozen=True)
class ModelInputForGPUWithSamplingMetadata(ModelInputForGPU):
    sampling_metadata: object | None = None
    is_prompt: bool | None = None  # used by the driver only


@pytest.mark.parametrize("cls", [ModelInputForGPU, ModelInputForGPUWithSamplingMetadata])
def test_frozen_model_inputs_under_an_abstract_base_pass(cls):
    assert_zerocopy_class(cls)
    assert_zerocopy(cls(input_tokens=[1, 2], input_positions=[0, 1], attn_metadata=AttentionMetadata(0, 0, 2, [5, 9])))


@pytest.mark.parametrize(
    ("annotation", "copy_of"), [("Optional[List[int]]", list), ("list[int] | None", list), ("Dict[str, int]", dict)]
)
def test_an_override_that_copies_only_lists_or_dicts_is_reported_by_the_class_helper(annotation, copy_of):
    # The sentinel of a list or dict field is a list or dict: an override that copies only values of
    # that type runs its copy on it.  (Found by an outside tester: vLLM's seq_lens.)
    namespace = {"dataclass": dataclass, "ZeroCopy": ZeroCopy, "copy_of": copy_of}
    exec(
        "from typing import Dict, List, Optional\n"
        "@dataclass\n"
        "class DecodeMetadata(ZeroCopy):\n"
        "    num_decode_tokens: int\n"
        f"    seq_lens: {annotation} = None\n"
        "    def asdict_zerocopy(self, skip_fields=None):\n"
        "        d = super().asdict_zerocopy(skip_fields)\n"
        "        if isinstance(d.get('seq_lens'), copy_of):\n"
        "            d['seq_lens'] = copy_of(d['seq_lens'])\n"
        "        return d\n",
        namespace,
    )
    with pytest.raises(AssertionError, match=r"\['seq_lens'\] is not the object the instance holds"):
        assert_zerocopy_class(namespace["DecodeMetadata"])


def test_a_frozen_model_input_that_copies_its_tokens_is_reported():
    @dataclass(frozen=True)
    class CopyingInput(ModelInputForGPU):
        def asdict_zerocopy(self, skip_fields=None):
            d = super().asdict_zerocopy(skip_fields)
            if "input_tokens" in d:
                d["input_tokens"] = copy.copy(d["input_tokens"])
            return d

    with pytest.raises(AssertionError) as error:
        assert_zerocopy_class(CopyingInput)
    assert str(error.value) == (
        "CopyingInput: the override CopyingInput.asdict_zerocopy: obj.asdict_zerocopy()['input_tokens']"
        " is not the object the instance holds: it was copied or replaced"
    )


@dataclass
class FlashAttentionMetadataV1(ZeroCopy):
    """vLLM V1's shape: many tensors, cascade fields, and a nested record class."""

    num_actual_tokens: int
    max_query_len: int
    query_start_loc: list[int]
    max_seq_len: int
    seq_lens: list[int]
    block_table: list[int]
    slot_mapping: list[int]
    use_cascade: bool
    common_prefix_len: int
    cu_prefix_query_lens: list[int] | None
    prefix_kv_lens: list[int] | None
    suffix_kv_lens: list[int] | None
    scheduler_metadata: list[int] | None = None
    max_num_splits: int = 0
    causal: bool = True

    @dataclass
    class LocalAttentionMetadata(ZeroCopy):
        local_query_start_loc: list[int]
        local_seqused_k: list[int]
        local_block_table: list[int]
        local_max_query_len: int
        local_max_seq_len: int

    local_attn_metadata: LocalAttentionMetadata | None = None


def v1_step() -> FlashAttentionMetadataV1:
    local = FlashAttentionMetadataV1.LocalAttentionMetadata([0, 2], [2], [0], 2, 2)
    return FlashAttentionMetadataV1(
        2, 2, [0, 2], 2, [2], [0], [3, 4], False, 0, None, None, None, local_attn_metadata=local
    )


@pytest.mark.parametrize("cls", [FlashAttentionMetadataV1, FlashAttentionMetadataV1.LocalAttentionMetadata])
def test_v1_metadata_and_its_nested_class_pass(cls):
    assert_zerocopy_class(cls)


def test_v1_metadata_replaced_each_step_keeps_its_objects():
    step = v1_step()
    assert_zerocopy(step)
    later = dataclasses.replace(step, num_actual_tokens=1)
    assert_zerocopy(later)
    assert later.asdict_zerocopy()["slot_mapping"] is step.slot_mapping


def test_v1_metadata_whose_override_drops_a_field_only_with_skip_fields_is_reported():
    @dataclass
    class Sloppy(FlashAttentionMetadataV1):
        def asdict_zerocopy(self, skip_fields=None):
            # Meant to always leave out the scheduler metadata, it does so only when given names.
            if skip_fields:
                skip_fields = {*skip_fields, "scheduler_metadata"}
            return super().asdict_zerocopy(skip_fields)

    with pytest.raises(AssertionError) as error:
        assert_zerocopy_class(Sloppy)
    message = str(error.value)
    assert message.startswith(
        "Sloppy: the override Sloppy.asdict_zerocopy: obj.asdict_zerocopy(skip_fields={'num_actual_tokens'})"
    )
    assert message.endswith("missing ['scheduler_metadata'], which it returns when called with no arguments")


_names = itertools.count()


MODELS = """
    import abc
    from dataclasses import dataclass
    from metakit import ZeroCopy, ZeroCopyFields
    from {package}.sub.inputs import ModelInput   # imported: found in its own module

    class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
        pass

    @dataclass
    class AttentionMetadata(ZeroCopy):
        slot_mapping: list

    @dataclass
    class FlashAttentionMetadata(AttentionMetadata):
        max_seq_len: int = 0

        @dataclass
        class LocalAttentionMetadata(ZeroCopy):
            local_block_table: list

    @dataclass
    class Backend(metaclass=ABCZeroCopyFields):    # abstract: no instances to check
        seq_lens: list

        @abc.abstractmethod
        def build(self): ...

    @dataclass
    class Plain:                                   # not made by ZeroCopyFields
        seq_lens: list

    class NotADataclass(ZeroCopy):
        pass

    Alias = AttentionMetadata
"""


INPUTS = """
    from dataclasses import dataclass
    from metakit import ZeroCopy

    @dataclass(frozen=True)
    class ModelInput(ZeroCopy):
        input_tokens: list
"""


def write_package(root: Path, modules: dict[str, str]) -> str:
    package = f"engine_{next(_names)}_{root.name}".replace("-", "_")
    for relative, text in {"__init__.py": "", **modules}.items():
        path = root / package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text.format(package=package)))
    return package


@pytest.fixture
def package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return write_package(
        tmp_path,
        {
            "models.py": MODELS,
            "sub/__init__.py": "",
            "sub/inputs.py": INPUTS,
            "__main__.py": "raise SystemExit('__main__ must not be imported')",
        },
    )


def test_a_package_gives_its_classes_in_module_then_definition_order(package):
    classes = zerocopy_classes_in(package)
    assert [(cls.__module__, cls.__qualname__) for cls in classes] == [
        (f"{package}.models", "AttentionMetadata"),
        (f"{package}.models", "FlashAttentionMetadata"),
        (f"{package}.models", "FlashAttentionMetadata.LocalAttentionMetadata"),
        (f"{package}.sub.inputs", "ModelInput"),
    ]


FACTORY = """
    from dataclasses import dataclass, make_dataclass
    from metakit import ZeroCopy

    @dataclass
    class Direct(ZeroCopy):
        seq_lens: list

    def _backend(name):
        return make_dataclass(name, [("slot_mapping", list)], bases=(ZeroCopy,), namespace={{"__module__": __name__}})

    BACKENDS = {{"flash": _backend("FlashMeta"), "xformers": _backend("XFormersMeta")}}
    _backend("Dropped")  # made and let go: never found, whether collected yet or not
"""


def test_classes_a_module_holds_only_in_a_container_are_found_after_those_it_names(tmp_path, monkeypatch):
    # A factory's classes kept in a dict were left out, so the README's recipe never checked them
    # (an outside tester).
    monkeypatch.syspath_prepend(str(tmp_path))
    package = write_package(tmp_path, {"factory.py": FACTORY})
    names = [cls.__qualname__ for cls in zerocopy_classes_in(f"{package}.factory")]
    assert names == ["Direct", "FlashMeta", "XFormersMeta"]


def test_a_directory_without_init_is_searched_for_the_modules_imported_from_it(tmp_path, monkeypatch):
    # Its classes were left out even once imported, and the README's recipe never checked them (an outside
    # tester).  A module there that nothing imported stays unimported: it may be a script.
    monkeypatch.syspath_prepend(str(tmp_path))
    package = write_package(
        tmp_path,
        {
            "models.py": INPUTS,
            "plain/inputs.py": INPUTS.replace("ModelInput", "PlainInput"),
            "plain/script.py": "raise SystemExit('a script must not be imported')",
        },
    )
    assert [cls.__qualname__ for cls in zerocopy_classes_in(package)] == ["ModelInput"]
    assert f"{package}.plain.inputs" not in sys.modules
    importlib.import_module(f"{package}.plain.inputs")
    found = [(cls.__module__, cls.__qualname__) for cls in zerocopy_classes_in(package)]
    assert found == [(f"{package}.models", "ModelInput"), (f"{package}.plain.inputs", "PlainInput")]


def test_a_module_gives_only_its_own_classes(package):
    names = [cls.__qualname__ for cls in zerocopy_classes_in(f"{package}.sub.inputs")]
    assert names == ["ModelInput"]


def test_a_module_object_works_like_its_name(package):
    module = importlib.import_module(f"{package}.models")
    assert zerocopy_classes_in(module) == zerocopy_classes_in(f"{package}.models")


def test_every_class_found_passes_the_class_helper(package):
    for cls in zerocopy_classes_in(package):
        metakit.testing.assert_zerocopy_class(cls)


def test_a_module_without_such_classes_raises_lookup_error_rather_than_giving_an_empty_list():
    with pytest.raises(LookupError, match=r"no dataclass made by ZeroCopyFields is defined in textwrap$"):
        zerocopy_classes_in("textwrap")


def test_a_package_without_such_classes_names_the_package(tmp_path, monkeypatch):
    # README: "It leaves out abstract classes and classes a module only imports, and raises `LookupError` when it
    # finds none"
    monkeypatch.syspath_prepend(str(tmp_path))
    package = write_package(tmp_path, {"empty.py": "X = 1\n", "imports.py": "from tests.records import AttnMeta\n"})
    with pytest.raises(LookupError, match=f"the package {package} and its submodules"):
        zerocopy_classes_in(package)
    with pytest.raises(LookupError, match=f"defined in {package}.imports$"):
        zerocopy_classes_in(f"{package}.imports")


_LAZY_MODULE = """
import abc
from dataclasses import dataclass
from metakit import ZeroCopy, ZeroCopyFields

class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
    pass

@dataclass
class Abstract(metaclass=ABCZeroCopyFields):
    x: int

    @abc.abstractmethod
    def run(self): ...

def __getattr__(name):
    raise RuntimeError(f"asked for {name}")
"""


@pytest.mark.parametrize("concrete", [True, False], ids=["a-concrete-class", "abstract-ones-only"])
def test_a_module_with_a_getattr_of_its_own_is_asked_for_nothing(concrete, monkeypatch):
    # PEP 562: a module's __getattr__ runs for each name it lacks, such as __path__ (stubgen asked one for
    # __all__, an outside tester found).  One whose classes are all abstract says so.
    module = types.ModuleType("metakit_lazy_module")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    source = _LAZY_MODULE + ("\n@dataclass\nclass Concrete(ZeroCopy):\n    y: int\n" if concrete else "")
    exec(compile(source, "<lazy module>", "exec"), vars(module))
    if concrete:
        assert [cls.__name__ for cls in zerocopy_classes_in(module.__name__)] == ["Concrete"]
    else:
        with pytest.raises(
            LookupError, match=r"metakit_lazy_module \(only abstract ones, which have no instances: Abstract\)$"
        ):
            zerocopy_classes_in(module)


def test_a_wrong_name_raises_module_not_found_error():
    with pytest.raises(ModuleNotFoundError, match="no_such_engine"):
        zerocopy_classes_in("no_such_engine.metadata")


def test_a_submodule_that_fails_to_import_is_not_skipped(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = write_package(tmp_path, {"models.py": INPUTS, "broken.py": "import no_such_dependency\n"})
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency"):
        zerocopy_classes_in(package)


def test_class_id_is_the_qualified_name(package):
    ids = [class_id(cls) for cls in zerocopy_classes_in(package)]
    assert ids == [
        "AttentionMetadata",
        "FlashAttentionMetadata",
        "FlashAttentionMetadata.LocalAttentionMetadata",
        "ModelInput",
    ]


RECIPE = """
    import pytest
    from metakit.testing import assert_zerocopy_class, class_id, zerocopy_classes_in

    @pytest.mark.parametrize("cls", zerocopy_classes_in("{package}"), ids=class_id)
    def test_converts_without_copying(cls):
        assert_zerocopy_class(cls)
"""


BROKEN_TESTING_RECIPE = """
    from dataclasses import dataclass
    from metakit import ZeroCopy

    @dataclass
    class FlashInferMetadata(ZeroCopy):
        slot_mapping: list
        decode_wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            if skip_fields is None:
                skip_fields = set()
            skip_fields.add("decode_wrapper")
            return super().asdict_zerocopy(skip_fields)
"""


def run_pytest(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *arguments]
    return subprocess.run(command, cwd=directory, env=_env(), capture_output=True, text=True, timeout=120, check=False)


def _env() -> dict[str, str]:
    """The environment for a child Python that imports the metakit these tests import."""
    home = str(Path(metakit.testing.__file__).parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([home, os.environ.get("PYTHONPATH", "")])}


def test_the_recipe_gives_one_test_per_class_named_by_its_qualified_name(package, tmp_path):
    (tmp_path / "test_recipe.py").write_text(textwrap.dedent(RECIPE.format(package=package)))
    result = run_pytest(tmp_path, "-v", "test_recipe.py")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in [
        "AttentionMetadata",
        "FlashAttentionMetadata",
        "FlashAttentionMetadata.LocalAttentionMetadata",
        "ModelInput",
    ]:
        assert f"test_recipe.py::test_converts_without_copying[{name}] PASSED" in result.stdout


def test_a_failure_under_pytest_q_shows_the_message_and_no_metakit_frames(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = write_package(tmp_path, {"metadata.py": BROKEN_TESTING_RECIPE})
    (tmp_path / "test_recipe.py").write_text(textwrap.dedent(RECIPE.format(package=package)))
    result = run_pytest(tmp_path, "-q", "test_recipe.py")
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout
    message = (
        "E       AssertionError: FlashInferMetadata: the override FlashInferMetadata.asdict_zerocopy:"
        " obj.asdict_zerocopy(skip_fields=set()) changed the skip_fields it was given: it added"
        " ['decode_wrapper']; it must leave the caller's set unchanged and change a copy"
    )
    assert message in output
    assert "test_converts_without_copying[FlashInferMetadata]" in output
    assert "metakit" + "/" not in output.replace("metakit.testing import", "")  # no frame of metakit's files
    assert ">" + " " * 7 + "assert_zerocopy_class(cls)" in output  # the user's own line is the one shown


def test_import_metakit_imports_neither_pytest_nor_torch():
    code = "import sys, metakit, metakit.testing; print(sorted({'pytest', 'torch'} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=shape_specs, options=class_options, zerocopy=st.booleans())
def test_both_helpers_pass_every_correct_class(spec, options, zerocopy):
    cls, ordered = build_shape(spec, ZeroCopy if zerocopy else None, options)
    assert_zerocopy_class(cls)
    assert_zerocopy(construct(cls, ordered, options))


def reorders(self, skip_fields=None):
    return dict(reversed(ZeroCopy.asdict_zerocopy(self, skip_fields).items()))


def replaces_the_first(self, skip_fields=None):
    d = ZeroCopy.asdict_zerocopy(self, skip_fields)
    if d:
        first = next(iter(d))
        d[first] = [d[first]]  # another object, as a copy would be (a str or a small int has no copy)
    return d


def adds_a_key_testing_property(self, skip_fields=None):
    return {**ZeroCopy.asdict_zerocopy(self, skip_fields), "attn_bias": None}


def adds_to_the_set(self, skip_fields=None):
    if skip_fields is not None:
        skip_fields.add(dataclasses.fields(self)[0].name)
    return ZeroCopy.asdict_zerocopy(self, skip_fields)


DEFECTS = {
    reorders: "the order differs",
    replaces_the_first: "is not the object the instance holds",
    adds_a_key_testing_property: "unexpected ['attn_bias']",
    adds_to_the_set: "changed the skip_fields it was given",
}


def _keys(spec):
    """How many of *spec*'s fields are in the dict."""
    return sum(kind not in ("omit", "cv", "ivr", "ivd") for _, kind in spec)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    spec=shape_specs.filter(lambda spec: _keys(spec) >= 2), options=class_options, defect=st.sampled_from(list(DEFECTS))
)
def test_a_defect_in_an_override_of_any_class_is_reported_as_the_overrides(spec, options, defect):
    # ZeroCopy.asdict_zerocopy is the generated code of the instance's own
    # class, as super() reaches it.
    cls, ordered = build_shape(spec, ZeroCopy, options, cls_name="Broken", namespace={"asdict_zerocopy": defect})
    for check, subject in ((assert_zerocopy_class, cls), (assert_zerocopy, construct(cls, ordered, options))):
        try:
            check(subject)
        except AssertionError as error:
            message = str(error)
        else:
            raise AssertionError(f"{check.__name__} passed {defect.__name__} on {spec}")
        assert message.startswith("Broken: the override Broken.asdict_zerocopy: obj.asdict_zerocopy("), message
        assert DEFECTS[defect] in message, message


def test_a_field_named_dunder_replace_passes_as_copy_replace_sees_it():
    # Python looks __replace__ up on the class (copy.replace does): the field's value does not hide it.
    cls = make_dataclass("DunderField", [("__replace__", int), ("o", int, 0)], bases=(ZeroCopy,))
    mt.assert_zerocopy_class(cls)
    mt.assert_zerocopy(cls(1))


def test_a_call_that_raises_on_the_sentinels_fails_with_a_plain_assertion_error():
    # The override needs a real value, and __init__ refuses the sentinels, so no instance answers
    # for the class: the failure names the call, with no private class of metakit's in it.
    @dataclass
    class NeedsRealValues(ZeroCopy):
        num_tokens: int

        def __post_init__(self) -> None:
            if not isinstance(self.num_tokens, int):
                raise TypeError("num_tokens must be an int")

        def asdict_zerocopy(self, skip_fields=None):
            d = super().asdict_zerocopy(skip_fields)
            if "num_tokens" in d:
                d["num_tokens"] = self.num_tokens + 0  # a small int stays the same object
            return d

    with pytest.raises(AssertionError, match="raised TypeError: unsupported operand") as error:
        assert_zerocopy_class(NeedsRealValues)
    assert type(error.value) is AssertionError
    assert "for code that needs real values, check an instance you make with assert_zerocopy(obj)" in str(error.value)
    assert_zerocopy(NeedsRealValues(3))


# --- found by an outside tester (session 18) -----------------------------------------


@dataclass
class _HoldsAWrapper(metakit.ZeroCopy):
    num_prefills: int
    slot_mapping: list
    wrapper: Any = None


@dataclass
class TakesAList(_HoldsAWrapper):
    def asdict_zerocopy(self, skip_fields: Optional[List[str]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        return super().asdict_zerocopy((skip_fields or []) + ["wrapper"])  # never changes the caller's list


@dataclass
class TakesATuple(_HoldsAWrapper):
    def asdict_zerocopy(self, skip_fields: Optional[Tuple[str, ...]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        return super().asdict_zerocopy((*(skip_fields or ()), "wrapper"))


@dataclass
class TakesAnyIterable(_HoldsAWrapper):
    def asdict_zerocopy(self, skip_fields: Optional[Iterable[str]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        names = skip_fields or ()
        if "wrapper" not in names:  # reads an iterator: the names it held are gone
            names = [*names, "wrapper"]
        return super().asdict_zerocopy(names)


@dataclass
class TakesADict(_HoldsAWrapper):
    def asdict_zerocopy(self, skip_fields: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        return super().asdict_zerocopy({**(skip_fields or {}), "wrapper": None})  # a dict is an iterable of names


@pytest.mark.parametrize("cls", [TakesAList, TakesATuple, TakesADict])
def test_an_override_gets_skip_fields_of_the_kinds_its_annotation_takes(cls):
    # A List[str], Tuple[str, ...] or Dict[str, Any] override was called with a set, and failed though correct
    # (the Dict one found by an outside tester).
    assert_zerocopy_class(cls)


@dataclass
class AddsToTheCallersDict(_HoldsAWrapper):
    def asdict_zerocopy(self, skip_fields: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        if skip_fields is None:
            skip_fields = {}
        skip_fields["wrapper"] = True
        return super().asdict_zerocopy(skip_fields)


@dataclass
class ChangesTheCallersDict(_HoldsAWrapper):
    def asdict_zerocopy(self, skip_fields: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        if skip_fields is not None:
            skip_fields.update(dict.fromkeys(skip_fields, "skipped"))
        return super().asdict_zerocopy({**(skip_fields or {}), "wrapper": None})


@pytest.mark.parametrize(
    ("cls", "said"), [(AddsToTheCallersDict, "it added ['wrapper']"), (ChangesTheCallersDict, "it changed its values")]
)
def test_an_override_that_writes_into_the_callers_mapping_is_reported(cls, said):
    # (Found by an outside tester: a set or a list the caller gave was checked to be left as it was, a dict not.)
    with pytest.raises(AssertionError, match=re.escape(f"changed the skip_fields it was given: {said}")):
        assert_zerocopy_class(cls)


ALIASED_OVERRIDES = """
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, TypeAlias

from metakit import ZeroCopy

SkipText: TypeAlias = "Optional[Mapping[str, Any]]"
SkipLive: TypeAlias = Optional[Mapping[str, Any]]


@dataclass
class ByText(ZeroCopy):
    a: int
    wrapper: object = None

    def asdict_zerocopy(self, skip_fields: SkipText = None) -> Dict[str, Any]:
        return super().asdict_zerocopy(["wrapper", *(skip_fields.keys() if skip_fields is not None else ())])


@dataclass
class ByLiveAlias(ByText):
    def asdict_zerocopy(self, skip_fields: SkipLive = None) -> Dict[str, Any]:
        return super().asdict_zerocopy(skip_fields)
"""


TYPE_STATEMENT_OVERRIDES = """
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from metakit import ZeroCopy

type Inner = Mapping[str, Any]
type SkipMap = Optional[Inner]


@dataclass
class ByTypeStatement(ZeroCopy):
    a: int
    wrapper: object = None

    def asdict_zerocopy(self, skip_fields: SkipMap = None) -> dict[str, Any]:
        return super().asdict_zerocopy(["wrapper", *(skip_fields.keys() if skip_fields is not None else ())])
"""


@pytest.mark.parametrize(
    ("source", "names", "since"),
    [(ALIASED_OVERRIDES, ["ByText", "ByLiveAlias"], (3, 10)), (TYPE_STATEMENT_OVERRIDES, ["ByTypeStatement"], (3, 12))],
    ids=["alias", "type-statement"],
)
def test_an_override_annotated_by_an_alias_gets_the_kinds_the_alias_names(tmp_path, monkeypatch, source, names, since):
    # Under `from __future__ import annotations` the annotation is the alias's name: it was read as a set's, as
    # was a `type` statement's alias (found by outside testers). The alias is looked up in the module's dict.
    if sys.version_info < since:  # the type statement is new in 3.12
        return
    (tmp_path / "aliased_overrides.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module("aliased_overrides")
        for name in names:
            assert_zerocopy_class(getattr(module, name))
    finally:
        sys.modules.pop("aliased_overrides", None)


def test_an_override_annotated_to_take_a_mapping_is_checked_with_one():
    @dataclass
    class IgnoresItsMapping(_HoldsAWrapper):
        def asdict_zerocopy(self, skip_fields: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
            return super().asdict_zerocopy({"wrapper"})

    with pytest.raises(AssertionError, match=r"skip_fields=dict\.fromkeys\(\['num_prefills'\]\)\) has keys"):
        assert_zerocopy_class(IgnoresItsMapping)


def test_an_override_annotated_iterable_gets_an_iterator_too():
    with pytest.raises(AssertionError, match=r"skip_fields=iter\(\['num_prefills', 'slot_mapping'\]\)"):
        assert_zerocopy_class(TakesAnyIterable)


@dataclass
class ReadsUpToTheFirstKey(_HoldsAWrapper):
    def asdict_zerocopy(self, skip_fields: Optional[Iterable[str]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        names = ["wrapper"]
        if skip_fields is not None and "num_prefills" in skip_fields:  # reads an iterator up to that name
            names.append("num_prefills")
        if skip_fields is not None:
            names += [name for name in skip_fields if name != "num_prefills"]
        return super().asdict_zerocopy(names)


def test_an_override_that_reads_an_iterator_up_to_one_name_is_reported():
    # (An outside tester: the first key and the last were passed in field order only, which this passes.)
    obj = ReadsUpToTheFirstKey(1, [2])
    assert obj.asdict_zerocopy(iter(["num_prefills", "slot_mapping"])) == {}
    with pytest.raises(AssertionError, match=r"skip_fields=iter\(\['slot_mapping', 'num_prefills'\]\)"):
        assert_zerocopy_class(ReadsUpToTheFirstKey)


@dataclass
class ReversesASequence(metakit.ZeroCopy):
    a: int = 0
    b: int = 1
    c: int = 2

    def asdict_zerocopy(self, skip_fields=None):
        d = super().asdict_zerocopy(skip_fields)
        return dict(reversed(d.items())) if isinstance(skip_fields, (list, tuple)) else d


def test_each_kind_of_skip_fields_leaves_keys_enough_to_show_their_order():
    # (An outside tester: each kind but a set named the first and the last key, which leaves one of three.)
    assert list(ReversesASequence().asdict_zerocopy(["a"])) == ["c", "b"]
    with pytest.raises(AssertionError, match=r"has keys \['c', 'b'\], expected \['b', 'c'\]: the order differs"):
        assert_zerocopy_class(ReversesASequence)


@dataclass
class WrapperSetLater(metakit.ZeroCopy):
    num_tokens: int
    wrapper: object = field(init=False, metadata=metakit.OMIT)  # a kernel wrapper, set later


@dataclass
class SetsItsWrapper(WrapperSetLater):
    def asdict_zerocopy(self, skip_fields=None):
        self.wrapper = object()
        return super().asdict_zerocopy(skip_fields)


def test_an_omit_field_not_set_yet_is_no_field_the_reference_reads():
    # (An outside tester: assert_zerocopy failed a correct instance, reading its unset OMIT field.)
    assert_zerocopy(WrapperSetLater(3))
    with pytest.raises(AssertionError, match=r"changed the instance's field 'wrapper'"):
        assert_zerocopy(SetsItsWrapper(3))


@dataclass
class LeavesOutAnUnsetField(metakit.ZeroCopy):
    num_tokens: int
    slot_mapping: list = field(init=False)

    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy({"slot_mapping", *(skip_fields or ())})


@dataclass
class LeavesOutAFieldPostInitSets(LeavesOutAnUnsetField):
    def __post_init__(self):
        self.slot_mapping = []


def test_an_override_may_leave_out_an_init_false_field_only_where_the_rebuilt_record_gets_it():
    with pytest.raises(AssertionError, match=r"leaves out \['slot_mapping'\], init=False fields with no default"):
        assert_zerocopy_class(LeavesOutAnUnsetField)
    obj = LeavesOutAnUnsetField(4)
    obj.slot_mapping = [0, 1]
    with pytest.raises(AssertionError, match=r"leaves out \['slot_mapping'\]"):
        assert_zerocopy(obj)
    assert_zerocopy_class(LeavesOutAFieldPostInitSets)


@dataclass
class CachesAProperty(metakit.ZeroCopy):
    num_prefills: int
    slot_mapping: list

    @property
    def prefill_metadata(self):
        self._cached_prefill_metadata = CachesAProperty(self.num_prefills, self.slot_mapping[:1])
        return self._cached_prefill_metadata

    def asdict_zerocopy(self, skip_fields=None):
        return {k: v for k, v in vars(self).items() if k not in set(skip_fields or ())}


def test_an_override_returning_its_instance_dict_fails_with_no_post_init():
    # It passed: only where __init__ refused the sentinels did the bare instance hold an attribute that is
    # not a field, and a caching property (vLLM's prefill_metadata) sets one later.
    with pytest.raises(AssertionError, match=r"unexpected \['_metakit_set_in_post_init'\], which are not fields"):
        assert_zerocopy_class(CachesAProperty)


@dataclass
class AppendsToTheCallersList(metakit.ZeroCopy):
    n: int
    wrapper: Any = None

    def asdict_zerocopy(self, skip_fields: Optional[List[str]] = None) -> Dict[str, Any]:  # noqa: UP006, UP045
        if skip_fields is not None:
            skip_fields.append("wrapper")
        return super().asdict_zerocopy(skip_fields)


def test_a_name_added_twice_to_the_callers_skip_fields_is_reported_as_added():
    # The message said "it reordered it".
    with pytest.raises(AssertionError, match=r"changed the skip_fields it was given: it added \['wrapper'\];"):
        assert_zerocopy_class(AppendsToTheCallersList)


def test_an_override_annotated_with_a_name_only_type_checkers_see_is_checked():
    # On 3.14 and 3.15 the helpers evaluated the override's deferred annotations, and raised NameError
    # (found by an outside tester). Written unquoted there, as a user would; quoted before.
    deferred = sys.version_info >= (3, 14)
    annotation, result = ("Optional[AbstractSet[str]]", "MetadataDict") if deferred else ('"AbstractSet"', '"Dict"')
    source = textwrap.dedent(f"""
        @dataclass
        class DeclaresASetOnlyTypeCheckersSee(ZeroCopy):
            num_prefills: int
            decode_wrapper: object = None

            def asdict_zerocopy(self, skip_fields: {annotation} = None) -> {result}:
                return super().asdict_zerocopy({{"decode_wrapper", *(skip_fields or ())}})
    """)
    namespace = {"dataclass": dataclass, "ZeroCopy": ZeroCopy, "Optional": Optional, "__name__": __name__}
    exec(compile(source, "<override>", "exec", dont_inherit=True), namespace)  # no __future__ import
    cls = namespace["DeclaresASetOnlyTypeCheckersSee"]
    assert_zerocopy(cls(2, object()))
    assert_zerocopy_class(cls)


def test_a_class_whose_new_needs_arguments_is_told_to_check_an_instance():
    @dataclass
    class Interned(ZeroCopy):
        a: int
        b: int

        def __new__(cls, a, b):
            return super().__new__(cls)

    assert_zerocopy(Interned(1, 2))
    with pytest.raises(AssertionError, match=r"__new__\(Interned\) raised TypeError.*Check an instance with assert_"):
        assert_zerocopy_class(Interned)
