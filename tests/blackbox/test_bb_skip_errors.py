"""skip_fields and error messages (DESIGN "Semantics"; README "What is in the dict", "Errors")."""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import ClassVar

import pytest

import metakit
from metakit import OMIT, ZeroCopy


@dataclass
class Rec(ZeroCopy):
    a: int = 1
    b: int = 2
    c: int = 3
    w: object = field(default=None, metadata=OMIT)
    cv: ClassVar[int] = 0
    iv: InitVar[int] = 0

    def __post_init__(self, iv):
        self.post = 1


@dataclass
class PlainRec:
    a: int = 1
    b: int = 2
    c: int = 3
    w: object = field(default=None, metadata=OMIT)
    cv: ClassVar[int] = 0
    iv: InitVar[int] = 0

    def __post_init__(self, iv):
        self.post = 1


def calls(obj):
    # DESIGN: "given by keyword or by position"; function form: "any dataclass instance"
    out = [
        ("kw", lambda sf: metakit.asdict_zerocopy(obj, skip_fields=sf)),
        ("pos", lambda sf: metakit.asdict_zerocopy(obj, sf)),
    ]
    if isinstance(obj, ZeroCopy):
        out += [
            ("meth-kw", lambda sf: obj.asdict_zerocopy(skip_fields=sf)),
            ("meth-pos", lambda sf: obj.asdict_zerocopy(sf)),
        ]
    return out


OBJS = [Rec(), PlainRec()]


def iterables():
    # DESIGN: "skip_fields is any iterable of names (set, frozenset, tuple, list, keys view)"; README adds generator
    return [
        ("set", lambda: {"a", "c"}),
        ("frozenset", lambda: frozenset({"a", "c"})),
        ("tuple", lambda: ("a", "c")),
        ("list", lambda: ["a", "c"]),
        ("keys", lambda: {"a": 0, "c": 0}.keys()),
        ("dict", lambda: {"a": 0, "c": 0}),
        ("generator", lambda: (n for n in ["a", "c"])),
        ("iterator", lambda: iter(["c", "a"])),
        ("dup", lambda: ["a", "a", "c", "c"]),
        ("str-subclass-items", lambda: [type("S", (str,), {})("a"), "c"]),
        ("with-omit", lambda: ["a", "c", "w"]),
    ]


@pytest.mark.parametrize("obj", OBJS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("kind", iterables(), ids=lambda k: k[0])
def test_skip_fields_every_iterable(obj, kind):
    # DESIGN: skip_fields iterable kinds; "A skipped OMIT field is fine"; README "or a name twice, is fine"
    for _label, call in calls(obj):
        assert call(kind[1]()) == {"b": 2}


@pytest.mark.parametrize("obj", OBJS, ids=lambda o: type(o).__name__)
def test_skip_fields_none_and_empty(obj):
    for _label, call in calls(obj):
        assert call(None) == {"a": 1, "b": 2, "c": 3}
        assert call(()) == {"a": 1, "b": 2, "c": 3}
        assert call(set()) == {"a": 1, "b": 2, "c": 3}


@pytest.mark.parametrize("obj", OBJS, ids=lambda o: type(o).__name__)
def test_skip_fields_never_changed(obj):
    # DESIGN: "It is never changed."
    for _label, call in calls(obj):
        s, lst, fs, dct = {"a"}, ["a", "b"], frozenset({"c"}), {"a": 1}
        call(s), call(lst), call(fs), call(dct)
        assert s == {"a"} and lst == ["a", "b"] and fs == frozenset({"c"}) and dct == {"a": 1}
        bad = {"a", "nope"}
        with pytest.raises(ValueError):
            call(bad)
        assert bad == {"a", "nope"}


@pytest.mark.parametrize("obj", OBJS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("name", ["nope", "cv", "iv", "post", "__init__", "asdict_zerocopy", ""])
def test_unknown_name_value_error(obj, name):
    # DESIGN: "A name that is not a field of the class raises ValueError naming it and the class."
    # ClassVar / InitVar pseudo-fields and post-init attributes are not fields.
    for _label, call in calls(obj):
        with pytest.raises(ValueError) as ei:
            call({name})
        msg = str(ei.value)
        assert repr(name) in msg or name in msg
        assert type(obj).__name__ in msg
        assert not isinstance(ei.value, TypeError)


def test_unknown_name_message_exact():
    # README Errors: "skip_fields names 'slot_mappin', which is not a field of InputMetadata"
    with pytest.raises(ValueError, match=r"^skip_fields names 'nope', which is not a field of Rec$"):
        Rec().asdict_zerocopy(skip_fields={"nope"})


def test_unknown_name_after_valid_names():
    with pytest.raises(ValueError, match="nope"):
        Rec().asdict_zerocopy(["a", "b", "nope"])


class StrSub(str):
    pass


class BytesSub(bytes):
    pass


BAD = [
    ("int", lambda: 5),
    ("bool", lambda: True),
    ("float", lambda: 1.5),
    ("object", lambda: object()),
    ("str", lambda: "a"),
    ("bytes", lambda: b"ab"),
    ("str-sub", lambda: StrSub("a")),
    ("bytes-sub", lambda: BytesSub(b"a")),
    ("empty-str", lambda: ""),
    ("item-list", lambda: [["a"]]),
    ("item-int", lambda: [1]),
    ("item-int-after-valid", lambda: ["a", 1]),
    ("item-bytes", lambda: [b"a"]),
    ("item-set", lambda: [{"a"}]),
    ("item-none", lambda: [None]),
    ("bytearray", lambda: bytearray(b"a")),
    ("values-view", lambda: {"x": 1}.values()),
]


@pytest.mark.parametrize("obj", OBJS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("kind", BAD, ids=lambda k: k[0])
def test_bad_skip_fields_type_error_names_skip_fields(obj, kind):
    # DESIGN: "skip_fields that is not an iterable of str gets a TypeError that names skip_fields (5, True,
    # b"ab", an item that is a list or an int); a str or bytes is refused."
    for _label, call in calls(obj):
        with pytest.raises(TypeError, match="skip_fields"):
            call(kind[1]())


def test_str_message_suggests_set():
    # README: "TypeError: skip_fields must be an iterable of field names, not the str 'wrapper'; write skip_fields={'wrapper'}"
    with pytest.raises(TypeError) as ei:
        Rec().asdict_zerocopy(skip_fields="a")
    assert str(ei.value) == "skip_fields must be an iterable of field names, not the str 'a'; write skip_fields={'a'}"
    with pytest.raises(TypeError) as ei:
        Rec().asdict_zerocopy(skip_fields=5)
    assert str(ei.value) == "skip_fields must be an iterable of field names, not int 5"
    with pytest.raises(TypeError) as ei:
        Rec().asdict_zerocopy(skip_fields=[["w"]])
    assert str(ei.value) == "skip_fields must hold field names (str), not list ['w']"


def test_str_that_is_also_valid_field_refused():
    # DESIGN: "a str or bytes is refused" even when every letter is a field name
    @dataclass
    class L(ZeroCopy):
        a: int = 1
        b: int = 2

    with pytest.raises(TypeError, match="skip_fields"):
        L().asdict_zerocopy("ab")
    with pytest.raises(TypeError, match="skip_fields"):
        metakit.asdict_zerocopy(L(), "a")


def test_keyword_name_is_skip_fields():
    # DESIGN: obj.asdict_zerocopy(skip_fields=None)
    with pytest.raises(TypeError):
        Rec().asdict_zerocopy(skip=["a"])
    with pytest.raises(TypeError):
        Rec().asdict_zerocopy(["a"], skip_fields=["a"])
    with pytest.raises(TypeError):
        Rec().astuple_zerocopy(["a"])


class NotDC(ZeroCopy):
    pass


@pytest.mark.parametrize("value", [3, None, "s", object(), [1], {"a": 1}, NotDC()], ids=repr)
def test_function_forms_non_dataclass(value):
    # DESIGN: "Non-dataclasses get a TypeError with a clear message, whether the method or the function form is used."
    for fn in (metakit.asdict_zerocopy, metakit.astuple_zerocopy):
        with pytest.raises(TypeError, match="not a dataclass"):
            fn(value)


def test_function_form_messages_exact():
    # README Errors
    with pytest.raises(TypeError) as ei:
        metakit.asdict_zerocopy(3)
    assert str(ei.value) == "asdict_zerocopy() takes a dataclass instance, but int is not a dataclass"
    with pytest.raises(TypeError) as ei:
        metakit.asdict_zerocopy(Rec)
    assert str(ei.value) == "asdict_zerocopy() takes a dataclass instance, but got the class Rec itself"
    with pytest.raises(TypeError) as ei:
        NotDC().asdict_zerocopy()
    assert str(ei.value) == "asdict_zerocopy() takes a dataclass instance, but NotDC is not a dataclass"
    with pytest.raises(TypeError) as ei:
        metakit.generated_source(3)
    assert str(ei.value) == "expected a dataclass, but got 3, an instance of int, which is not a dataclass"


@pytest.mark.parametrize("cls", [Rec, PlainRec, NotDC, int])
def test_classes_where_instances_belong(cls):
    # DESIGN: "So do classes passed where instances belong."
    for fn in (metakit.asdict_zerocopy, metakit.astuple_zerocopy):
        with pytest.raises(TypeError):
            fn(cls)
    with pytest.raises(TypeError):
        metakit.asdict_zerocopy(cls, skip_fields={"a"})


def test_non_dataclass_methods_raise():
    # README API: "on a class that is not a dataclass they raise TypeError"
    with pytest.raises(TypeError, match="NotDC"):
        NotDC().asdict_zerocopy()
    with pytest.raises(TypeError, match="NotDC"):
        NotDC().astuple_zerocopy()
    with pytest.raises(TypeError, match="NotDC"):
        NotDC().asdict_zerocopy(skip_fields={"a"})


def test_generic_alias_refused_by_function_form():
    import typing

    T = typing.TypeVar("T")

    @dataclass
    class G(ZeroCopy, typing.Generic[T]):
        v: int = 0

    with pytest.raises(TypeError):
        metakit.asdict_zerocopy(G[int])
    with pytest.raises(TypeError):
        metakit.astuple_zerocopy(G[int])


def test_function_form_plain_dataclass_semantics():
    # DESIGN: "metakit.asdict_zerocopy(obj) function form: any dataclass instance, no base needed"
    p = PlainRec(a=[1])
    d = metakit.asdict_zerocopy(p)
    assert d == {"a": [1], "b": 2, "c": 3} and d["a"] is p.a
    assert metakit.astuple_zerocopy(p) == ([1], 2, 3)
    assert metakit.astuple_zerocopy(p)[0] is p.a
    assert not hasattr(PlainRec, "asdict_zerocopy")  # metakit changes nothing on a plain dataclass
    assert type(PlainRec) is type
