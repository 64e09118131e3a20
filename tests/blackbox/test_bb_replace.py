"""metakit.replace vs dataclasses.replace (DESIGN "Public API": "exactly as dataclasses.replace does (the same errors
for unknown names, init=False fields and missing InitVars; __post_init__ runs; frozen and slots classes work)";
README "Replacing fields": "raises exactly its exception with exactly its message, on each Python")."""

from __future__ import annotations

import copy
import dataclasses
import sys
import typing
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import ClassVar

import pytest

import metakit
from metakit import OMIT, ZeroCopy

T = typing.TypeVar("T")


def outcome(fn, obj, changes, /):
    try:
        r = fn(obj, **changes)
    except Exception as e:
        return ("raise", type(e), str(e))
    state = dict(vars(r)) if hasattr(r, "__dict__") else {s: getattr(r, s) for s in type(r).__slots__ if hasattr(r, s)}
    return ("ok", type(r), state)


def compare(obj, /, **changes):
    exp = outcome(dataclasses.replace, obj, changes)
    got = [outcome(metakit.replace, obj, changes)]
    if isinstance(obj, ZeroCopy):
        got.append(outcome(type(obj).__replace__, obj, changes))
        if sys.version_info >= (3, 13):
            got.append(outcome(copy.replace, obj, changes))
    for g in got:
        assert g == exp, (changes, g, exp)
    return exp


def make_classes(base):
    bases = (base,) if base else ()
    post_calls = []

    @dataclass
    class Full(*bases):
        x: object
        y: list = field(default_factory=list)
        w: object = field(default=None, metadata=OMIT)
        z: object = field(default=0, init=False)
        zf: list = field(default_factory=list, init=False)
        cv: ClassVar[int] = 5
        iv: InitVar[int] = 0
        ivn: InitVar[int] = field(default=7)

        def __post_init__(self, iv, ivn):
            post_calls.append(1)
            self.z = (iv, ivn)
            self.derived = [self.x]

    @dataclass
    class NeedsIV(*bases):
        x: int
        iv: InitVar[int]

        def __post_init__(self, iv):
            self.seen = iv

    @dataclass(frozen=True, slots=True)
    class FS(*bases):
        obj: int
        changes: int = 0
        self: int = 1
        z: int = field(default=0, init=False)

        def __post_init__(self):
            object.__setattr__(self, "z", self.obj * 10)

    @dataclass(kw_only=True)
    class KW(*bases):
        a: int
        b: int = 2

    @dataclass
    class KWS(*bases):
        a: int = 0
        _: KW_ONLY
        k: int = 1
        z: int = field(default=0, init=False)

    @dataclass
    class Gen(*bases, typing.Generic[T]):
        v: T
        w: int = 0

    @dataclass(frozen=True)
    class Fro(*bases):
        a: int = 0
        b: int = 0

    @dataclass
    class NoDefaultInitFalse(*bases):
        a: int = 0
        late: int = field(init=False)

    return post_calls, dict(Full=Full, NeedsIV=NeedsIV, FS=FS, KW=KW, KWS=KWS, Gen=Gen, Fro=Fro, NIF=NoDefaultInitFalse)


CHANGES = {
    "Full": [
        {},
        {"x": 2},
        {"y": [1]},
        {"w": "ww"},
        {"z": 4},
        {"zf": []},
        {"q": 1},
        {"cv": 1},
        {"iv": 5},
        {"ivn": 6},
        {"iv": 1, "ivn": 2, "x": 3},
        {"z": 1, "q": 2},
        {"q": 2, "z": 1},
        {"derived": 1},
    ],
    "NeedsIV": [{}, {"x": 3}, {"iv": 3}, {"x": 3, "iv": 4}, {"nope": 1}],
    "FS": [{}, {"obj": 3}, {"changes": 9, "self": 4}, {"z": 1}, {"obj": 1, "changes": 2, "self": 3}],
    "KW": [{}, {"a": 5}, {"b": 1}, {"c": 1}],
    "KWS": [{}, {"k": 3}, {"z": 3}, {"a": 1, "k": 2}],
    "Gen": [{}, {"v": "s"}, {"w": 1}],
    "Fro": [{}, {"a": 1}, {"b": 2, "a": 3}],
    "NIF": [{}, {"a": 1}, {"late": 1}],
}


def instances(cls_map):
    nif = cls_map["NIF"]()
    nif.late = 5
    return {
        "Full": cls_map["Full"]([1], iv=2),
        "NeedsIV": cls_map["NeedsIV"](1, 2),
        "FS": cls_map["FS"](1),
        "KW": cls_map["KW"](a=1),
        "KWS": cls_map["KWS"](k=5),
        "Gen": cls_map["Gen"][int](1),
        "Fro": cls_map["Fro"](),
        "NIF": nif,
    }


@pytest.mark.parametrize("base", [ZeroCopy, None], ids=["zerocopy", "plain"])
@pytest.mark.parametrize("name", list(CHANGES))
def test_replace_matches_dataclasses(base, name):
    # DESIGN/README: same results, same exception types and messages, on each Python
    _, cls_map = make_classes(base)
    obj = instances(cls_map)[name]
    for ch in CHANGES[name]:
        compare(obj, **ch)


def test_post_init_runs_and_init_false_remade():
    # README: "so __post_init__ runs and init=False fields are made again rather than copied"
    post_calls, cls_map = make_classes(ZeroCopy)
    o = cls_map["Full"]([1], iv=2)
    o.zf.append("old")
    n0 = len(post_calls)
    r = metakit.replace(o, x=[2])
    assert len(post_calls) == n0 + 1
    assert r.zf == [] and r.zf is not o.zf
    assert r.z == dataclasses.replace(o, x=[2]).z == (0, 7)  # InitVar default read as dataclasses does
    assert r.derived == [[2]]
    # values are never copied
    r2 = metakit.replace(o)
    assert r2.x is o.x and r2.y is o.y and r2.w is o.w


def test_replace_values_not_copied_omit_carried():
    # README: "OMIT fields are carried like any field: they are fields. Values are never copied."
    _, cls_map = make_classes(ZeroCopy)
    w = object()
    o = cls_map["Full"]([1], w=w)
    assert metakit.replace(o, x=2).w is w
    assert metakit.replace(o, x=2).y is o.y


def test_replace_positional_only_obj():
    # DESIGN: metakit.replace(obj, /, **changes): a field named obj works
    _, cls_map = make_classes(ZeroCopy)
    fs = cls_map["FS"](1)
    assert metakit.replace(fs, obj=5).obj == 5
    with pytest.raises(TypeError):
        metakit.replace(fs, 5)
    with pytest.raises(TypeError):
        metakit.replace()


@pytest.mark.parametrize("value", [3, None, "s", object()], ids=repr)
def test_replace_non_dataclass_same_error(value):
    # DESIGN: same errors as dataclasses.replace
    with pytest.raises(TypeError) as exp:
        dataclasses.replace(value)
    with pytest.raises(TypeError) as got:
        metakit.replace(value)
    assert str(got.value) == str(exp.value)


def test_replace_class_instead_of_instance_same_error():
    _, cls_map = make_classes(ZeroCopy)
    cls = cls_map["Fro"]
    with pytest.raises(TypeError) as exp:
        dataclasses.replace(cls)
    with pytest.raises(TypeError) as got:
        metakit.replace(cls)
    assert str(got.value) == str(exp.value)


def test_replace_subclass_with_custom_init():
    # dataclasses.replace calls obj.__class__(**changes); so must metakit
    @dataclass
    class A(ZeroCopy):
        x: int = 0
        y: int = 0

    class Sub(A):
        def __init__(self, x=0, y=0):
            super().__init__(x, y)
            self.sub = True

    s = Sub(1, 2)
    compare(s)
    compare(s, x=5)
    assert metakit.replace(s, x=5).sub


def test_replace_missing_attribute_same_error():
    @dataclass
    class A(ZeroCopy):
        x: int

    a = A(1)
    del a.x
    compare(a)
    compare(a, x=2)


def test_replace_does_not_mutate_callers_mapping():
    _, cls_map = make_classes(ZeroCopy)
    o = cls_map["Fro"]()
    ch = {"a": 4}
    metakit.replace(o, **ch)
    type(o).__replace__(o, **ch)
    assert ch == {"a": 4}


def test_replace_odd_names_match():
    # README: "fields named self, obj or changes work"
    C = dataclasses.make_dataclass(
        "OddR",
        [
            (n, int, field(default=i))
            for i, n in enumerate(["self", "obj", "changes", "cls", "d", "name", "error", "_replace_by_dataclasses"])
        ],
        bases=(ZeroCopy,),
    )
    o = C()
    for ch in ({}, {"self": 9}, {"changes": 1, "obj": 2}, {"_replace_by_dataclasses": 3}, {"nope": 1}):
        compare(o, **ch)


@pytest.mark.parametrize("base", [ZeroCopy, None], ids=["zerocopy", "plain"])
def test_replace_post_init_raising_and_custom_init(base):
    bases = (base,) if base else ()

    @dataclass
    class Checked(*bases):
        x: int = 0

        def __post_init__(self):
            if self.x < 0:
                raise ValueError(f"bad x {self.x}")

    compare(Checked(), x=-1)
    compare(Checked(), x=1)

    @dataclass(init=False)
    class OwnInit(*bases):
        a: int = 0
        b: int = 0

        def __init__(self, a=0, b=0, extra=None):
            self.a, self.b, self.extra = a, b * 2, extra

    o = OwnInit(1, 2)
    compare(o)
    compare(o, a=5)
    compare(o, extra=1)


def test_replace_plain_dataclass_with_own_dunder_replace_runs_generated():
    # README: "metakit.replace(obj) runs the generated code all the same, as the other function forms do"
    @dataclass
    class P:
        a: int = 0

        def __replace__(self, /, **kw):
            return "mine"

    r = metakit.replace(P(), a=3)
    assert r == P(3) and type(r) is P
