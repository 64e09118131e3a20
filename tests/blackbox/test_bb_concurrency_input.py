"""Black-box tests: concurrency, lifetime, metaclass composition, bad input, late overrides.

Written from DESIGN.md and README.md only.  Some tests replay an interleaving
deterministically: a ``sys.setprofile`` hook runs a second action at the k-th call/return
event of the first, for every k.  Where metakit takes no lock, that is what a thread switch at
that point does; where it holds its (re-entrant) lock, it is what a finalizer that the garbage
collector runs there, a signal handler or a profiler does in the same thread.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import enum
import functools
import gc
import inspect
import linecache
import os
import random
import subprocess
import sys
import textwrap
import threading
import traceback
import typing
import weakref
from dataclasses import InitVar, dataclass, field, make_dataclass
from pathlib import Path
from typing import ClassVar

import pytest

import metakit
import metakit.testing
from metakit import OMIT, SkipFieldsError, ZeroCopy, ZeroCopyFields

REPO = Path(__file__).resolve().parents[2]
PY313 = sys.version_info >= (3, 13)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _metakit_entries() -> set[str]:
    return {k for k in linecache.cache.copy() if k.startswith("<metakit")}


def _fresh_chain():
    @dataclass
    class Root(ZeroCopy):
        a: int = 1

    @dataclass
    class Mid(Root):
        b: int = 2

    @dataclass
    class Leaf(Mid):
        c: int = 3

    return Root, Mid, Leaf


def _run_threads(targets, timeout=120):
    errors: list[str] = []

    def wrap(fn, *args):
        def inner():
            try:
                fn(*args)
            except BaseException:
                errors.append(traceback.format_exc())

        return inner

    threads = [threading.Thread(target=wrap(fn, *args)) for fn, *args in targets]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


def _profile_hook(state, k, action):
    def prof(frame, event, arg):
        if state["fired"]:
            return
        state["n"] += 1
        if state["n"] >= k:
            state["fired"] = True
            sys.setprofile(None)
            try:
                action()
            finally:
                sys.setprofile(prof)

    return prof


def _sweep(setup, stride=1, limit=20000):
    """Run ``during()`` with ``action()`` injected at the k-th profile event, for k = 1, 1+stride, ...

    ``setup()`` returns ``(during, action, check)``; ``check(result)`` returns None when right.
    Returns the list of (k, what was wrong)."""
    wrong = []
    for k in range(1, limit, stride):
        during, action, check = setup()
        state = {"n": 0, "fired": False}

        prof = _profile_hook(state, k, action)

        old = sys.getprofile()
        sys.setprofile(prof)
        try:
            try:
                result = during()
            except Exception as error:  # a wrong exception is a wrong result
                result = error
        finally:
            sys.setprofile(old)
        if not state["fired"]:
            assert k > 1, "the action never ran"
            return wrong
        problem = check(result)
        if problem is not None:
            wrong.append((k, problem))
    raise AssertionError("sweep did not end")


def _cli(*args, cwd=None, extra_path=None, timeout=120):
    env = dict(os.environ)
    paths = [str(extra_path)] if extra_path else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "metakit", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=env,
        timeout=timeout,
        check=False,
    )


@dataclass
class Rec(ZeroCopy):
    x: int
    y: list = field(default_factory=list)
    w: object = field(default=None, metadata=OMIT)
    n: int = field(default=0, init=False)
    cv: ClassVar[int] = 5
    iv: InitVar[int] = 0

    def __post_init__(self, iv):
        self.extra = iv


@dataclass
class PlainRec:
    x: int
    y: list = field(default_factory=list)


REC_FULL_KEYS = ["x", "y", "n"]


# --------------------------------------------------------------------------------------------
# bad input: skip_fields
# --------------------------------------------------------------------------------------------


def _gen(*items):
    return (i for i in items)


BAD_SKIP = {
    "int": lambda: 5,
    "bool-true": lambda: True,
    "bool-false": lambda: False,
    "float": lambda: 1.5,
    "str": lambda: "x",
    "empty-str": lambda: "",
    "str-subclass": lambda: type("S", (str,), {})("x"),
    "bytes": lambda: b"ab",
    "empty-bytes": lambda: b"",
    "bytes-subclass": lambda: type("B", (bytes,), {})(b"x"),
    "bytearray": lambda: bytearray(b"x"),
    "memoryview": lambda: memoryview(b"x"),
    "none-item": lambda: [None],
    "none-after-valid": lambda: ["x", None],
    "nested-list": lambda: [["x"]],
    "nested-tuple": lambda: [("x",)],
    "int-item": lambda: [1],
    "set-of-int": lambda: {1, 2},
    "frozenset-of-bytes": lambda: frozenset({b"x"}),
    "range": lambda: range(3),
    "object": lambda: object(),
    "ellipsis": lambda: ...,
    "iter-raises-typeerror": lambda: type("It", (), {"__iter__": lambda self: (_ for _ in ()).throw(TypeError("x"))})(),
    "generator-of-int": lambda: _gen(1),
    "generator-valid-then-int": lambda: _gen("x", 2),
    "iterator-of-int": lambda: iter([3]),
}


@pytest.mark.parametrize("form", ["method", "function"])
@pytest.mark.parametrize("name", sorted(BAD_SKIP))
def test_bad_skip_fields_raise_skipfieldserror(name, form):
    rec = Rec(1)
    value = BAD_SKIP[name]()
    if form == "method":
        call = functools.partial(rec.asdict_zerocopy, skip_fields=value)
    else:
        call = functools.partial(metakit.asdict_zerocopy, rec, value)
    with pytest.raises(SkipFieldsError) as info:
        call()
    assert isinstance(info.value, TypeError)
    assert "skip_fields" in str(info.value)


ONE_SHOT_UNHASHABLE = {
    "generator": lambda: _gen(["y"]),
    "generator-after-valid": lambda: _gen("x", ["y"]),
    "list-iterator": lambda: iter([["y"]]),
    "map": lambda: map(set, [["y"]]),
}


@pytest.mark.parametrize("form", ["method", "function"])
@pytest.mark.parametrize("name", sorted(ONE_SHOT_UNHASHABLE))
def test_one_shot_iterable_with_unhashable_item(name, form):
    rec = Rec(1)
    value = ONE_SHOT_UNHASHABLE[name]()
    if form == "method":
        call = functools.partial(rec.asdict_zerocopy, value)
    else:
        call = functools.partial(metakit.asdict_zerocopy, rec, skip_fields=value)
    with pytest.raises(SkipFieldsError, match="skip_fields"):
        call()


def test_str_skip_fields_message_suggests_set():
    with pytest.raises(SkipFieldsError, match=r"write skip_fields=\{'x'\}"):
        Rec(1).asdict_zerocopy("x")


GOOD_SKIP = {
    "set": lambda: {"x"},
    "frozenset": lambda: frozenset({"x"}),
    "tuple": lambda: ("x",),
    "list": lambda: ["x"],
    "list-dup": lambda: ["x", "x"],
    "keys-view": lambda: {"x": 0}.keys(),
    "dict": lambda: {"x": 0},
    "values-view": lambda: {"q": "x"}.values(),
    "generator": lambda: _gen("x"),
    "iterator": lambda: iter(["x"]),
    "str-subclass-item": lambda: [type("S", (str,), {})("x")],
    "with-omit": lambda: {"x", "w"},
    "deque": lambda: collections.deque(["x"]),
}


@pytest.mark.parametrize("form", ["method-kw", "method-pos", "function-kw", "function-pos"])
@pytest.mark.parametrize("name", sorted(GOOD_SKIP))
def test_good_skip_fields(name, form):
    rec = Rec(1, [2])
    value = GOOD_SKIP[name]()
    if form == "method-kw":
        d = rec.asdict_zerocopy(skip_fields=value)
    elif form == "method-pos":
        d = rec.asdict_zerocopy(value)
    elif form == "function-kw":
        d = metakit.asdict_zerocopy(rec, skip_fields=value)
    else:
        d = metakit.asdict_zerocopy(rec, value)
    assert list(d) == ["y", "n"]
    assert d["y"] is rec.y


@pytest.mark.parametrize("value", [["x", "y"], {"x"}, ("y",), {"x": 1}])
def test_skip_fields_never_changed(value):
    snapshot = type(value)(value) if not isinstance(value, dict) else dict(value)
    Rec(1).asdict_zerocopy(value)
    metakit.asdict_zerocopy(Rec(1), value)
    assert value == snapshot


@pytest.mark.parametrize("name", ["cv", "iv", "extra", "", "a b", "asdict_zerocopy", "__dict__", "X"])
@pytest.mark.parametrize("form", ["method", "function"])
def test_unknown_skip_name_valueerror_names_it_and_class(name, form):
    rec = Rec(1)
    if form == "method":
        call = functools.partial(rec.asdict_zerocopy, {name})
    else:
        call = functools.partial(metakit.asdict_zerocopy, rec, [name])
    with pytest.raises(ValueError) as info:
        call()
    assert not isinstance(info.value, TypeError)
    assert repr(name) in str(info.value)
    assert "Rec" in str(info.value)


def test_unknown_skip_name_in_generator_valueerror():
    with pytest.raises(ValueError, match="'zz'"):
        Rec(1).asdict_zerocopy(_gen("x", "zz"))


def test_user_generator_raising_typeerror_stays_a_typeerror():
    def gen():
        yield "x"
        raise TypeError("from the user's generator")

    with pytest.raises(TypeError):
        Rec(1).asdict_zerocopy(gen())


def test_skip_fields_plain_dataclass_function_form_bad_input():
    with pytest.raises(SkipFieldsError, match="skip_fields"):
        metakit.asdict_zerocopy(PlainRec(1), 7)
    with pytest.raises(ValueError, match=r"'nope'.*PlainRec"):
        metakit.asdict_zerocopy(PlainRec(1), {"nope"})


# --------------------------------------------------------------------------------------------
# bad input: non-dataclasses, classes where instances belong
# --------------------------------------------------------------------------------------------


class NotDC(ZeroCopy):
    pass


class PlainNotDC:
    pass


NON_DATACLASS_OBJECTS = {
    "int": 3,
    "none": None,
    "str": "text",
    "object": object(),
    "plain-instance": PlainNotDC(),
    "zerocopy-non-dc": NotDC(),
    "list": [1],
}


@pytest.mark.parametrize("fn", ["asdict_zerocopy", "astuple_zerocopy"])
@pytest.mark.parametrize("name", sorted(NON_DATACLASS_OBJECTS))
def test_function_forms_on_non_dataclass(fn, name):
    obj = NON_DATACLASS_OBJECTS[name]
    with pytest.raises(TypeError) as info:
        getattr(metakit, fn)(obj)
    assert not isinstance(info.value, SkipFieldsError)
    assert "dataclass" in str(info.value)
    assert type(obj).__name__ in str(info.value)


@pytest.mark.parametrize("name", sorted(NON_DATACLASS_OBJECTS))
def test_replace_on_non_dataclass_like_dataclasses(name):
    obj = NON_DATACLASS_OBJECTS[name]
    with pytest.raises(TypeError) as ours:
        metakit.replace(obj)
    with pytest.raises(TypeError) as theirs:
        dataclasses.replace(obj)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("cls", [Rec, PlainRec, NotDC, int, type])
@pytest.mark.parametrize("fn", ["asdict_zerocopy", "astuple_zerocopy"])
def test_function_forms_on_classes(cls, fn):
    with pytest.raises(TypeError) as info:
        getattr(metakit, fn)(cls)
    assert cls.__name__ in str(info.value)
    if dataclasses.is_dataclass(cls):
        assert "class" in str(info.value)


@pytest.mark.parametrize("cls", [Rec, PlainRec])
def test_replace_on_dataclass_class(cls):
    with pytest.raises(TypeError) as ours:
        metakit.replace(cls, x=1)
    with pytest.raises(TypeError) as theirs:
        dataclasses.replace(cls, x=1)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("method", ["asdict_zerocopy", "astuple_zerocopy", "__replace__"])
def test_methods_on_zerocopy_non_dataclass(method):
    with pytest.raises(TypeError, match="NotDC is not a dataclass"):
        getattr(NotDC(), method)()


def test_methods_on_zerocopy_non_dataclass_with_skip_fields():
    with pytest.raises(TypeError, match="NotDC"):
        NotDC().asdict_zerocopy({"x"})


GENSRC_BAD = {
    "int": 3,
    "none": None,
    "str": "Rec",
    "function": len,
    "module": dataclasses,
    "plain-class": PlainNotDC,
    "zerocopy": ZeroCopy,
    "zerocopy-non-dc": NotDC,
    "type": type,
}


@pytest.mark.parametrize("name", sorted(GENSRC_BAD))
def test_generated_source_of_non_dataclass(name):
    with pytest.raises(TypeError) as info:
        metakit.generated_source(GENSRC_BAD[name])
    assert "dataclass" in str(info.value)


@pytest.mark.parametrize("obj", [Rec(1), PlainRec(1)])
def test_generated_source_of_instance_names_its_class(obj):
    with pytest.raises(TypeError, match=type(obj).__name__):
        metakit.generated_source(obj)


def test_generated_source_plain_dataclass_and_zerocopy():
    for cls in (Rec, PlainRec):
        src = metakit.generated_source(cls)
        assert "def asdict_zerocopy" in src
        assert "'x': self.x" in src
        conversions = src.split("def __replace__")[0]
        assert "'w'" not in conversions  # an OMIT field is in no conversion
        assert "self.w" not in conversions


# --------------------------------------------------------------------------------------------
# replace errors: exactly dataclasses.replace's
# --------------------------------------------------------------------------------------------


@dataclass
class WithInitVar(ZeroCopy):
    x: int
    iv: InitVar[int]

    def __post_init__(self, iv):
        self.seen = iv


@dataclass
class PlainWithInitVar:
    x: int
    iv: InitVar[int]

    def __post_init__(self, iv):
        self.seen = iv


REPLACE_CASES = {
    "unknown": (lambda: Rec(1), {"nope": 1}),
    "init-false": (lambda: Rec(1), {"n": 2}),
    "init-false-and-unknown": (lambda: Rec(1), {"n": 2, "nope": 3}),
    "initvar-missing": (lambda: WithInitVar(1, 2), {"x": 3}),
    "initvar-missing-nochange": (lambda: WithInitVar(1, 2), {}),
    "plain-unknown": (lambda: PlainRec(1), {"nope": 1}),
    "plain-initvar-missing": (lambda: PlainWithInitVar(1, 2), {"x": 3}),
    "classvar": (lambda: Rec(1), {"cv": 3}),
}


@pytest.mark.parametrize("via", ["metakit.replace", "__replace__"])
@pytest.mark.parametrize("name", sorted(REPLACE_CASES))
def test_replace_errors_match_dataclasses(name, via):
    make, changes = REPLACE_CASES[name]
    obj = make()
    with pytest.raises(Exception) as theirs:
        dataclasses.replace(obj, **changes)
    if via == "__replace__" and not hasattr(type(obj), "__replace__"):
        fn = metakit.replace  # plain dataclass below 3.13 has no __replace__
    else:
        fn = metakit.replace if via == "metakit.replace" else type(obj).__replace__
    with pytest.raises(Exception) as ours:
        fn(obj, **changes)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_replace_extra_positional_argument_refused():
    with pytest.raises(TypeError):
        metakit.replace(Rec(1), Rec(2))


# --------------------------------------------------------------------------------------------
# metaclass composition
# --------------------------------------------------------------------------------------------


def _logging_meta(tag, log):
    def __setattr__(cls, key, value):
        log.append((tag, "set", key))
        super(M, cls).__setattr__(key, value)

    def __delattr__(cls, key):
        log.append((tag, "del", key))
        super(M, cls).__delattr__(key)

    M = type(f"Log{tag}", (type,), {"__setattr__": __setattr__, "__delattr__": __delattr__})
    return M


def _combined(order, log):
    parts = {"Z": ZeroCopyFields, "L1": _logging_meta("L1", log), "L2": _logging_meta("L2", log)}
    bases = tuple(parts[p] for p in order)

    def __setattr__(cls, key, value):
        log.append(("own", "set", key))
        super(Combined, cls).__setattr__(key, value)

    def __delattr__(cls, key):
        log.append(("own", "del", key))
        super(Combined, cls).__delattr__(key)

    Combined = type("Combined", bases, {"__setattr__": __setattr__, "__delattr__": __delattr__})
    expected = ["own"] + [c.__name__[3:] for c in Combined.__mro__ if c.__name__.startswith("Log")]
    return Combined, expected


ORDERS = [("Z", "L1"), ("L1", "Z"), ("Z", "L1", "L2"), ("L1", "Z", "L2"), ("L1", "L2", "Z"), ("L2", "Z", "L1")]


@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_composed_setattr_delattr_all_run_in_mro_order(order):
    log: list = []
    M, expected = _combined(order, log)

    @dataclass
    class K(metaclass=M):
        x: int = 1
        y: int = 2

    # the class still gets its methods
    assert K().asdict_zerocopy() == {"x": 1, "y": 2}
    assert metakit.replace(K(), y=5) == K(1, 5)
    # dataclasses' writes went through every __setattr__, in MRO order
    for key in ("__dataclass_fields__", "__init__", "__repr__"):
        assert [t for t, op, k in log if k == key and op == "set"] == expected, key

    def override(self, skip_fields=None):
        return {"ov": True}

    for key, value in (("plain_attr", 1), ("asdict_zerocopy", override)):
        log.clear()
        setattr(K, key, value)
        assert [t for t, op, k in log] == expected
        log.clear()
        delattr(K, key)
        assert [t for t, op, k in log] == expected
    # override semantics held through the combination
    K.asdict_zerocopy = override
    assert K().asdict_zerocopy() == {"ov": True}
    assert metakit.asdict_zerocopy(K()) == {"x": 1, "y": 2}
    del K.asdict_zerocopy
    assert K().asdict_zerocopy() == {"x": 1, "y": 2}


@pytest.mark.parametrize("order", ["ZA", "AZ", "ZLA", "LAZ"])
def test_abcmeta_combination(order):
    log: list = []
    parts = {"Z": ZeroCopyFields, "A": abc.ABCMeta, "L": _logging_meta("L", log)}
    M = type("M", tuple(parts[c] for c in order), {})

    @dataclass
    class Base(metaclass=M):
        x: int = 1

        @abc.abstractmethod
        def step(self): ...

    with pytest.raises(TypeError, match="abstract"):
        Base()

    @dataclass
    class Impl(Base):
        y: int = 2

        def step(self):
            return 1

    assert Impl().asdict_zerocopy() == {"x": 1, "y": 2}
    assert Impl().astuple_zerocopy() == (1, 2)
    assert isinstance(Impl(), Base)
    assert metakit.replace(Impl(), y=4) == Impl(1, 4)
    if "L" in order:
        assert ("L", "set", "__init__") in log


@pytest.mark.parametrize("first", [True, False])
def test_protocol_metaclass_combination(first):
    pmeta = type(typing.Protocol)
    M = type("PM", (ZeroCopyFields, pmeta) if first else (pmeta, ZeroCopyFields), {})

    @typing.runtime_checkable
    class HasX(typing.Protocol, metaclass=M):
        x: int

    @dataclass
    class Impl(HasX):
        x: int = 1
        y: int = 2

    obj = Impl()
    assert obj.asdict_zerocopy() == {"x": 1, "y": 2}
    assert isinstance(obj, HasX)
    assert metakit.replace(obj, y=3) == Impl(1, 3)

    class Duck:
        x = 0

    assert isinstance(Duck(), HasX)


@pytest.mark.parametrize("first", [True, False])
def test_enummeta_combination_keeps_enum_behaviour(first):
    M = type("EM", (ZeroCopyFields, enum.EnumMeta) if first else (enum.EnumMeta, ZeroCopyFields), {})

    class Color(enum.Enum, metaclass=M):
        RED = 1
        GREEN = 2

    assert list(Color) == [Color.RED, Color.GREEN]
    assert Color(2) is Color.GREEN
    with pytest.raises(AttributeError):
        Color.RED = 5
    with pytest.raises(AttributeError):
        del Color.RED
    with pytest.raises(TypeError, match="not a dataclass"):
        metakit.asdict_zerocopy(Color.RED)

    @dataclass(frozen=True)
    class Pt:
        x: int
        y: int

    class Corner(Pt, enum.Enum, metaclass=M):
        TL = (0, 1)
        BR = (2, 3)

    assert Corner.BR.asdict_zerocopy() == {"x": 2, "y": 3}
    assert metakit.astuple_zerocopy(Corner.TL) == (0, 1)


def test_metaclass_keyword_arguments_reach_new_and_init():
    seen = []

    class KM(ZeroCopyFields):
        def __new__(mcls, name, bases, ns, flag=None, **kw):
            cls = super().__new__(mcls, name, bases, ns, **kw)
            seen.append(("new", name, flag))
            return cls

        def __init__(cls, name, bases, ns, flag=None, **kw):
            super().__init__(name, bases, ns, **kw)
            seen.append(("init", name, flag))

    @dataclass
    class K(metaclass=KM, flag=7):
        a: int = 1

    assert ("new", "K", 7) in seen
    assert ("init", "K", 7) in seen
    assert K().asdict_zerocopy() == {"a": 1}


def test_init_subclass_keyword_arguments():
    @dataclass
    class Base(ZeroCopy):
        x: int = 0

        def __init_subclass__(cls, tag=None, **kw):
            super().__init_subclass__(**kw)
            cls.tag = tag

    @dataclass
    class Sub(Base, tag="hello"):
        y: int = 1

    class Undecorated(Sub, tag="t2"):
        pass

    assert Sub.tag == "hello"
    assert Undecorated.tag == "t2"
    assert Sub().asdict_zerocopy() == {"x": 0, "y": 1}
    assert Undecorated().asdict_zerocopy() == {"x": 0, "y": 1}


def test_unexpected_class_keyword_is_a_typeerror_like_type():
    with pytest.raises(TypeError) as ours:
        type("X", (ZeroCopy,), {}, bogus=1)
    with pytest.raises(TypeError) as theirs:
        type("X", (), {}, bogus=1)
    assert str(ours.value) == str(theirs.value)


def test_prepare_returning_custom_mapping():
    class PM(ZeroCopyFields):
        @classmethod
        def __prepare__(mcls, name, bases, **kw):
            return collections.OrderedDict()

    @dataclass
    class P(metaclass=PM):
        b: int = 1
        a: int = 2

    assert list(P().asdict_zerocopy()) == ["b", "a"]


@pytest.mark.parametrize("where", ["own-body", "base-first", "base-last"])
def test_metaclass_call_is_honoured_by_replace(where):
    calls = []

    class CallMeta(type):
        def __call__(cls, *args, **kwargs):
            calls.append((args, dict(kwargs)))
            if args:
                raise TypeError("positional arguments reached __call__")
            return super().__call__(**kwargs)

    if where == "own-body":

        def __call__(cls, *args, **kwargs):
            calls.append((args, dict(kwargs)))
            if args:
                raise TypeError("positional arguments reached __call__")
            return type.__call__(cls, **kwargs)

        M = type("M", (ZeroCopyFields,), {"__call__": __call__})
    elif where == "base-first":
        M = type("M", (CallMeta, ZeroCopyFields), {})
    else:
        M = type("M", (ZeroCopyFields, CallMeta), {})

    @dataclass
    class K(metaclass=M):
        x: int = 0
        y: int = 0

    k = K(x=1, y=2)
    calls.clear()
    assert metakit.replace(k, y=3) == K(x=1, y=3)
    assert k.__replace__(x=9) == K(x=9, y=2)
    assert metakit.replace(k) == k
    assert all(not args for args, _ in calls)


def test_metaclass_init_assigning_override_before_dataclass():
    def override(self, skip_fields=None):
        return {"mine": 1}

    class SetsOverride(ZeroCopyFields):
        def __init__(cls, name, bases, ns, **kw):
            super().__init__(name, bases, ns, **kw)
            cls.asdict_zerocopy = override

    @dataclass
    class K(metaclass=SetsOverride):
        x: int = 1

    assert K().asdict_zerocopy() == {"mine": 1}
    assert metakit.asdict_zerocopy(K()) == {"x": 1}
    assert K().astuple_zerocopy() == (1,)


def test_init_subclass_assigning_override_is_kept():
    def override(self):
        return ("mine",)

    @dataclass
    class Base(ZeroCopy):
        x: int = 1

        def __init_subclass__(cls, **kw):
            super().__init_subclass__(**kw)
            cls.astuple_zerocopy = override

    @dataclass
    class Sub(Base):
        y: int = 2

    assert Sub().astuple_zerocopy() == ("mine",)
    assert metakit.astuple_zerocopy(Sub()) == (1, 2)
    assert Sub().asdict_zerocopy() == {"x": 1, "y": 2}


@pytest.mark.parametrize("first", [True, False])
def test_refusing_metaclass_setattr_leaves_class_consistent(first):
    class Refuser(type):
        def __setattr__(cls, key, value):
            if cls.__dict__.get("_locked") and key in {"asdict_zerocopy", "astuple_zerocopy", "__replace__"}:
                raise AttributeError(f"locked: {key}")
            super().__setattr__(key, value)

        def __delattr__(cls, key):
            if cls.__dict__.get("_locked"):
                raise AttributeError(f"locked: {key}")
            super().__delattr__(key)

    M = type("M", (ZeroCopyFields, Refuser) if first else (Refuser, ZeroCopyFields), {})

    @dataclass
    class A(metaclass=M):
        a: int = 1

    @dataclass
    class B(A):
        b: int = 2

    type.__setattr__(B, "_locked", True)

    def override(self, skip_fields=None):
        return {"ov": super(B, self).asdict_zerocopy(skip_fields)}

    with pytest.raises(AttributeError, match="locked"):
        B.asdict_zerocopy = override
    assert B().asdict_zerocopy() == {"a": 1, "b": 2}
    with pytest.raises(AttributeError, match="locked"):
        del B.asdict_zerocopy
    assert B().asdict_zerocopy() == {"a": 1, "b": 2}
    type.__setattr__(B, "_locked", False)
    B.asdict_zerocopy = override
    type.__setattr__(B, "_locked", True)
    with pytest.raises(AttributeError, match="locked"):
        del B.asdict_zerocopy
    assert B().asdict_zerocopy() == {"ov": {"a": 1, "b": 2}}


METACLASS_BASES = {
    "ZeroCopyFields": (ZeroCopyFields,),
    "ZeroCopyFields+ABCMeta": (ZeroCopyFields, abc.ABCMeta),
    "ABCMeta+ZeroCopyFields": (abc.ABCMeta, ZeroCopyFields),
}


@pytest.mark.parametrize("name", sorted(METACLASS_BASES))
def test_derived_metaclass_is_collected(name):
    def make():
        M = type("Derived", METACLASS_BASES[name], {})

        @dataclass
        class K(metaclass=M):
            x: int = 1

        K().asdict_zerocopy()
        metakit.replace(K(), x=2)
        return weakref.ref(M), weakref.ref(K)

    meta_ref, cls_ref = make()
    gc.collect()
    gc.collect()
    assert cls_ref() is None
    assert meta_ref() is None


def test_plain_abcmeta_derived_metaclass_is_collected_control():
    # the same scenario without ZeroCopyFields: Python itself frees the metaclass
    def make():
        M = type("Derived", (abc.ABCMeta,), {})

        @dataclass
        class K(metaclass=M):
            x: int = 1

        metakit.replace(K(), x=2)
        metakit.asdict_zerocopy(K())
        return weakref.ref(M)

    ref = make()
    gc.collect()
    assert ref() is None


def test_slots_rebuild_with_metaclass_kwargs_like_plain():
    def build(base_meta):
        seen = []

        class KM(base_meta):
            def __new__(mcls, name, bases, ns, flag="default", **kw):
                seen.append(flag)
                return super().__new__(mcls, name, bases, ns, **kw)

            def __init__(cls, name, bases, ns, flag="default", **kw):
                super().__init__(name, bases, ns, **kw)

        @dataclass(slots=True)
        class K(metaclass=KM, flag="given"):
            a: int = 1

        return K, seen

    ours, seen_ours = build(ZeroCopyFields)
    theirs, seen_theirs = build(type)
    assert seen_ours == seen_theirs
    assert ours.__slots__ == theirs.__slots__
    assert ours().asdict_zerocopy() == {"a": 1}
    assert ours in metakit.zerocopy_classes()


# --------------------------------------------------------------------------------------------
# late overrides and super()
# --------------------------------------------------------------------------------------------


def _make_override(level, kind):
    if kind == "d":

        def asdict_zerocopy(self, skip_fields=None):
            return {level.__name__: super(level, self).asdict_zerocopy(skip_fields)}

        return asdict_zerocopy

    def astuple_zerocopy(self):
        return (level.__name__, *super(level, self).astuple_zerocopy())

    return astuple_zerocopy


@pytest.mark.parametrize("seed", range(12))
def test_late_overrides_model(seed):
    rnd = random.Random(seed)
    for _ in range(15):
        classes = list(_fresh_chain())
        state = {(c, k): False for c in classes for k in "dt"}
        for _step in range(8):
            c = rnd.choice(classes)
            k = rnd.choice("dt")
            name = "asdict_zerocopy" if k == "d" else "astuple_zerocopy"
            if state[(c, k)] and rnd.random() < 0.6:
                delattr(c, name)
                state[(c, k)] = False
            else:
                setattr(c, name, _make_override(c, k))
                state[(c, k)] = True
            for cls in classes:
                obj = cls()
                own = {f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)}
                rest = {name: value for name, value in own.items() if name != "a"}
                exp_d, exp_skip, exp_t = dict(own), rest, tuple(own.values())
                for level in reversed(cls.__mro__):
                    if level in classes and state[(level, "d")]:
                        exp_d = {level.__name__: exp_d}
                        exp_skip = {level.__name__: exp_skip}
                    if level in classes and state[(level, "t")]:
                        exp_t = (level.__name__, *exp_t)
                assert obj.asdict_zerocopy() == exp_d
                assert obj.asdict_zerocopy({"a"}) == exp_skip
                assert obj.astuple_zerocopy() == exp_t
                assert metakit.asdict_zerocopy(obj) == own
                assert metakit.asdict_zerocopy(obj, ["a"]) == rest
                assert metakit.astuple_zerocopy(obj) == tuple(own.values())


def test_override_on_base_after_subclasses_exist_with_super():
    Root, Mid, Leaf = _fresh_chain()
    leaf, mid = Leaf(), Mid()

    def on_root(self, skip_fields=None):
        d = super(Root, self).asdict_zerocopy(skip_fields)
        d["root"] = True
        return d

    Root.asdict_zerocopy = on_root
    assert leaf.asdict_zerocopy() == {"a": 1, "b": 2, "c": 3, "root": True}
    assert mid.asdict_zerocopy() == {"a": 1, "b": 2, "root": True}
    del Root.asdict_zerocopy
    assert leaf.asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
    assert Root().asdict_zerocopy() == {"a": 1}


def test_del_gives_own_generated_back_never_a_base():
    Root, Mid, Leaf = _fresh_chain()

    def ov(self, skip_fields=None):
        return {"ov": 1}

    Leaf.asdict_zerocopy = ov
    del Leaf.asdict_zerocopy
    # its own generated method: Leaf's fields, not Mid's or Root's
    assert Leaf().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
    assert Leaf().astuple_zerocopy() == (1, 2, 3)
    Mid.asdict_zerocopy = ov
    Leaf.asdict_zerocopy = ov
    del Leaf.asdict_zerocopy
    # Leaf inherits Mid's override again, as if it had been written in Mid's body
    assert Leaf().asdict_zerocopy() == {"ov": 1}
    del Mid.asdict_zerocopy
    assert Mid().asdict_zerocopy() == {"a": 1, "b": 2}
    assert Leaf().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
    # deleting again (nothing of the user's left) keeps the generated method
    del Leaf.asdict_zerocopy
    assert Leaf().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}


def test_override_in_body_is_not_replaced_and_super_serves_own_class():
    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    @dataclass
    class WithOverride(Base):
        wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"wrapper", *(skip_fields or ())})

        def astuple_zerocopy(self):
            return tuple(self.asdict_zerocopy().values())

    @dataclass
    class Deeper(WithOverride):
        z: int = 9

    assert WithOverride(2, object()).asdict_zerocopy() == {"a": 2}
    assert WithOverride(2).astuple_zerocopy() == (2,)
    # Deeper inherits the override; super() inside it serves Deeper's own fields
    assert Deeper().asdict_zerocopy() == {"a": 1, "z": 9}
    assert Deeper().astuple_zerocopy() == (1, 9)
    assert metakit.asdict_zerocopy(Deeper()) == {"a": 1, "wrapper": None, "z": 9}


def test_decorated_override_calling_super():
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            return fn(*a, **k)

        return wrapper

    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    @dataclass
    class Mid(Base):
        b: int = 2

        @deco
        def asdict_zerocopy(self, skip_fields=None):
            return {"mid": super().asdict_zerocopy(skip_fields)}

    @dataclass
    class Leaf(Mid):
        c: int = 3

    assert Leaf().asdict_zerocopy() == {"mid": {"a": 1, "b": 2, "c": 3}}


def test_override_on_plain_mixin_in_body():
    class Mixin:
        def asdict_zerocopy(self, skip_fields=None):
            return {"mixin": super().asdict_zerocopy(skip_fields)}

    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    @dataclass
    class K(Mixin, Base):
        k: int = 2

    @dataclass
    class KK(K):
        kk: int = 3

    assert K().asdict_zerocopy() == {"mixin": {"a": 1, "k": 2}}
    assert KK().asdict_zerocopy() == {"mixin": {"a": 1, "k": 2, "kk": 3}}


NON_FUNCTION_OVERRIDES = {
    "none": lambda: None,
    "staticmethod": lambda: staticmethod(lambda skip_fields=None: {"static": 1}),
    "classmethod": lambda: classmethod(lambda cls, skip_fields=None: {"cm": cls.__name__}),
    "property": lambda: property(lambda self: lambda skip_fields=None: {"prop": 1}),
    "partialmethod": lambda: functools.partialmethod(lambda self, tag, skip_fields=None: {"pm": tag}, "T"),
    "callable-object": lambda: type("Callable", (), {"__call__": lambda self, *a, **k: {"obj": 1}})(),
    "int": lambda: 5,
}


@pytest.mark.parametrize("when", ["late", "body"])
@pytest.mark.parametrize("name", sorted(NON_FUNCTION_OVERRIDES))
def test_non_function_overrides(name, when):
    value = NON_FUNCTION_OVERRIDES[name]()

    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    if when == "late":

        @dataclass
        class K(Base):
            b: int = 2

        K.asdict_zerocopy = value
    else:

        @dataclass
        class K(Base):
            b: int = 2
            asdict_zerocopy = value

    plain = dataclasses.make_dataclass("K", [("b", int, 2)], bases=(type("Base", (), {}),))
    plain.asdict_zerocopy = value
    try:
        expected = plain().asdict_zerocopy()
    except TypeError as error:
        with pytest.raises(TypeError, match=str(error).split("'")[1]):
            K().asdict_zerocopy()
    else:
        assert K().asdict_zerocopy() == expected
    assert metakit.asdict_zerocopy(K()) == {"a": 1, "b": 2}
    assert K().astuple_zerocopy() == (1, 2)
    if when == "late":
        del K.asdict_zerocopy
        assert K().asdict_zerocopy() == {"a": 1, "b": 2}


def _replace_chain(in_body):
    @dataclass
    class Root(ZeroCopy):
        a: int = 1

    if in_body:

        @dataclass
        class Mid(Root):
            b: int = 2

            def __replace__(self, /, **changes):
                return ("mine", changes)

    else:

        @dataclass
        class Mid(Root):
            b: int = 2

    @dataclass
    class Leaf(Mid):
        c: int = 3

    if not in_body:

        def __replace__(self, /, **changes):
            return ("mine", changes)

        Mid.__replace__ = __replace__
    return Root, Mid, Leaf


def _plain_leaf_inherits_replace():
    # what the standard library does: from 3.13 dataclasses writes a __replace__ on every dataclass
    @dataclass
    class PMid:
        b: int = 2

        def __replace__(self, /, **changes):
            return ("mine", changes)

    @dataclass
    class PLeaf(PMid):
        c: int = 3

    return PLeaf.__replace__ is PMid.__replace__


@pytest.mark.parametrize("in_body", [True, False], ids=["body", "late"])
def test_replace_override_same_in_body_and_late(in_body):
    Root, Mid, Leaf = _replace_chain(in_body)
    assert Mid().__replace__(a=5) == ("mine", {"a": 5})
    leaf_result = Leaf().__replace__(a=5)
    if _plain_leaf_inherits_replace():
        assert leaf_result == ("mine", {"a": 5})
    else:
        assert leaf_result == Leaf(5)
    # the function form always runs the generated code
    assert metakit.replace(Leaf(), a=5) == Leaf(5)
    assert metakit.replace(Mid(), a=5) == Mid(5)
    if PY313:
        import copy

        assert copy.replace(Mid(), a=5) == ("mine", {"a": 5})


def test_replace_override_deleted_gives_generated_back():
    Root, Mid, Leaf = _replace_chain(in_body=False)
    del Mid.__replace__
    assert Leaf().__replace__(a=6) == Leaf(6)
    assert Mid().__replace__(b=7) == Mid(1, 7)
    assert type(Mid().__replace__(b=7)) is Mid


def test_super_replace_inside_override_serves_own_class():
    Root, Mid, Leaf = _fresh_chain()

    def my_replace(self, /, **changes):
        new = super(Mid, self).__replace__(**changes)
        new.touched = True
        return new

    Mid.__replace__ = my_replace
    r = my_replace(Leaf(), c=30)  # the override, run for a subclass instance
    assert type(r) is Leaf
    assert (r.a, r.b, r.c, r.touched) == (1, 2, 30, True)
    r = Mid().__replace__(b=20)
    assert type(r) is Mid
    assert (r.a, r.b, r.touched) == (1, 20, True)


def test_override_on_undecorated_zerocopy_intermediate():
    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    class Inter(Base):
        pass

    @dataclass
    class Leaf(Inter):
        z: int = 7

    def ov(self, skip_fields=None):
        return {"inter": super(Inter, self).asdict_zerocopy(skip_fields)}

    Inter.asdict_zerocopy = ov
    assert Leaf().asdict_zerocopy() == {"inter": {"a": 1, "z": 7}}
    assert Inter().asdict_zerocopy() == {"inter": {"a": 1}}
    del Inter.asdict_zerocopy
    assert Leaf().asdict_zerocopy() == {"a": 1, "z": 7}
    assert Inter().asdict_zerocopy() == {"a": 1}


# late __init__ / __new__


def _swapped_init(cls):
    orig = cls.__init__

    def __init__(self, y=0, x=0):
        orig(self, x, y)

    return __init__


@pytest.mark.parametrize("target", ["class", "base", "grandbase"])
def test_late_new_on_ancestors_switches_replace_to_keywords(target):
    @dataclass
    class G(ZeroCopy):
        x: int = 0

    @dataclass
    class P(G):
        y: int = 0

    class Q(P):
        pass

    seen = []

    def __new__(cls, *args, **kwargs):
        seen.append((args, sorted(kwargs)))
        return object.__new__(cls)

    owner = {"class": Q, "base": P, "grandbase": G}[target]
    owner.__new__ = __new__
    q = Q(x=1, y=2)
    seen.clear()
    ours = metakit.replace(q, y=5)
    got = list(seen)
    seen.clear()
    theirs = dataclasses.replace(q, y=5)
    assert ours == theirs
    assert got == seen


@pytest.mark.parametrize("plain", [False, True])
def test_late_init_swapped_order(plain):
    if plain:

        @dataclass
        class A:
            x: int
            y: int = 0

    else:

        @dataclass
        class A(ZeroCopy):
            x: int
            y: int = 0

    a = A(1, 2)
    assert metakit.replace(a, y=3) == A(1, 3)
    A.__init__ = _swapped_init(A)
    r = metakit.replace(a, y=5)
    assert (r.x, r.y) == (1, 5)
    assert dataclasses.replace(a, y=5).__dict__ == r.__dict__
    if not plain:
        r = a.__replace__(x=7)
        assert (r.x, r.y) == (7, 2)


def test_late_init_on_base_seen_by_undecorated_subclass():
    @dataclass
    class P(ZeroCopy):
        x: int
        y: int = 0

    class Q(P):
        pass

    def init(self, y=0, x=0):
        self.x, self.y = x, y

    P.__init__ = init
    q = Q(x=1, y=2)
    r = metakit.replace(q, y=5)
    assert (type(r), r.x, r.y) == (Q, 1, 5)


def test_plain_metaclass_call_assigned_later_seen_by_replace():
    class PM(type):
        pass

    @dataclass
    class P(metaclass=PM):
        x: int
        y: int = 0

    p = P(1, 2)
    assert metakit.replace(p, y=3) == P(1, 3)
    seen = []

    def __call__(cls, *args, **kwargs):
        seen.append(args)
        return type.__call__(cls, *args, **kwargs)

    PM.__call__ = __call__
    expected = P(1, 4)
    seen.clear()
    assert metakit.replace(p, y=4) == expected
    assert seen == [()]


# --------------------------------------------------------------------------------------------
# lifetime
# --------------------------------------------------------------------------------------------


def _scenario(kind):  # noqa: PLR0911, PLR0912, PLR0915 - one scenario per kind
    if kind == "plain-function-forms":

        @dataclass
        class P:
            x: int = 1

        metakit.asdict_zerocopy(P())
        metakit.astuple_zerocopy(P())
        metakit.replace(P(), x=2)
        metakit.generated_source(P)
        return P
    if kind == "slots":

        @dataclass(slots=True)
        class S(ZeroCopy):
            x: int = 1

        S().asdict_zerocopy()
        metakit.replace(S(), x=2)
        return S
    if kind == "frozen":

        @dataclass(frozen=True)
        class F(ZeroCopy):
            x: int = 1

        metakit.replace(F(), x=2)
        hash(F())
        return F
    if kind == "testing-helpers":

        @dataclass
        class T(ZeroCopy):
            x: int = 1
            w: object = field(default=None, metadata=OMIT)

        metakit.testing.assert_zerocopy_class(T)
        metakit.testing.assert_zerocopy(T())
        return T
    if kind == "errors-raised":

        @dataclass
        class E(ZeroCopy):
            x: int = 1

        for bad in (["nope"], 5, [["x"]]):
            with pytest.raises((ValueError, TypeError)):
                E().asdict_zerocopy(bad)
        with pytest.raises(TypeError):
            metakit.replace(E(), nope=1)
        return E
    if kind == "overrides":
        Root, Mid, Leaf = _fresh_chain()
        Mid.asdict_zerocopy = _make_override(Mid, "d")
        Leaf().asdict_zerocopy()
        del Mid.asdict_zerocopy
        return Root
    if kind == "late-init":

        @dataclass
        class L(ZeroCopy):
            x: int = 1

        original = L.__init__

        def init(self, x=1):
            original(self, x)

        L.__init__ = init
        metakit.replace(L(), x=3)
        return L
    if kind == "plain-late-init":

        @dataclass
        class PL:
            x: int = 1

        metakit.replace(PL(), x=2)
        original = PL.__init__

        def init(self, x=1):
            original(self, x)

        PL.__init__ = init
        metakit.replace(PL(), x=3)
        return PL
    if kind == "make_dataclass":
        C = make_dataclass("MD", ["a", ("b", int, field(default=2))], bases=(ZeroCopy,))
        C(1).asdict_zerocopy()
        return C
    if kind == "traceback-formatted":

        @dataclass
        class TB(ZeroCopy):
            x: list = field(default_factory=list)

        obj = TB()
        object.__delattr__(obj, "x")
        try:
            obj.astuple_zerocopy()
        except AttributeError:
            traceback.format_exc()
        return TB
    if kind == "inspect-getsource":

        @dataclass
        class IS(ZeroCopy):
            x: int = 1

        inspect.getsource(IS.asdict_zerocopy)
        inspect.getsource(IS.__replace__)
        return IS
    raise AssertionError(kind)


LIFETIME_KINDS = [
    "plain-function-forms",
    "slots",
    "frozen",
    "testing-helpers",
    "errors-raised",
    "overrides",
    "late-init",
    "plain-late-init",
    "make_dataclass",
    "traceback-formatted",
    "inspect-getsource",
]


@pytest.mark.parametrize("kind", LIFETIME_KINDS)
def test_classes_die_when_unreferenced(kind):
    gc.collect()
    before_entries = _metakit_entries()
    ref = weakref.ref(_scenario(kind))
    gc.collect()
    gc.collect()
    assert ref() is None
    assert all(c is not None for c in metakit.zerocopy_classes())
    assert _metakit_entries() <= before_entries


def test_zerocopy_classes_lists_live_classes_oldest_first_and_drops_dead():
    gc.collect()
    start = metakit.zerocopy_classes()

    class First(ZeroCopy):
        pass

    @dataclass
    class Second(ZeroCopy):
        x: int = 0

    Third = make_dataclass("Third", ["t"], bases=(ZeroCopy,))
    now = metakit.zerocopy_classes()
    assert now[: len(start)] == start
    assert now[len(start) :] == [First, Second, Third]
    now.clear()  # a copy: the registry is not changed
    assert metakit.zerocopy_classes()[-3:] == [First, Second, Third]
    ref = weakref.ref(Second)
    del Second, now
    gc.collect()
    assert ref() is None
    assert metakit.zerocopy_classes()[-2:] == [First, Third]
    assert PlainRec not in metakit.zerocopy_classes()


def test_zerocopy_classes_does_not_list_slots_replaced_class():
    made = []

    class Capture(ZeroCopyFields):
        def __new__(mcls, *args, **kwargs):
            cls = super().__new__(mcls, *args, **kwargs)
            made.append(cls)
            return cls

    @dataclass(slots=True)
    class S(metaclass=Capture):
        x: int = 0

    old = [c for c in made if c is not S]
    assert old
    listed = metakit.zerocopy_classes()
    assert S in listed
    assert not any(c in listed for c in old)


def test_linecache_entry_shared_then_removed_with_last_class():
    def make():
        return make_dataclass("SharedEntry", ["a", "b"], bases=(ZeroCopy,))

    one, two = make(), make()
    name = one.asdict_zerocopy.__code__.co_filename
    assert two.asdict_zerocopy.__code__.co_filename == name
    assert one.asdict_zerocopy is not two.asdict_zerocopy
    assert name in linecache.cache
    del one
    gc.collect()
    assert name in linecache.cache
    assert "'a': self.a" in "".join(linecache.getlines(name))
    del two
    gc.collect()
    assert name not in linecache.cache


def test_same_name_other_fields_get_numbered_entries_and_right_tracebacks():
    def make(names):
        return make_dataclass("Factory", names, bases=(ZeroCopy,))

    def failing_line(cls, missing):
        obj = cls(*range(len(dataclasses.fields(cls))))
        object.__delattr__(obj, missing)
        try:
            obj.astuple_zerocopy()
        except AttributeError as error:
            return traceback.format_exception(type(error), error, error.__traceback__)[-2]
        raise AssertionError("no error")

    one = make(["a", "b"])
    two = make(["x", "y", "z"])
    three = make(["q"])
    names = [c.asdict_zerocopy.__code__.co_filename for c in (one, two, three)]
    assert len(set(names)) == 3
    assert names[1].endswith("-2>")
    assert "self.b," in failing_line(one, "b")
    assert "self.z," in failing_line(two, "z")
    assert "self.q," in failing_line(three, "q")
    # a class made again with an old layout, after its name was taken by another layout
    del one
    gc.collect()
    four = make(["m", "n", "o", "p"])
    again = make(["a", "b"])
    assert "self.b," in failing_line(again, "b")
    assert "self.o," in failing_line(four, "o")
    assert "self.a," in inspect.getsource(again.astuple_zerocopy)


def test_recreated_class_gets_fresh_function_objects():
    def make():
        @dataclass
        class Again(ZeroCopy):
            a: int = 1
            b: int = 2

        return Again

    first = make()
    for fn in (first.asdict_zerocopy, first.astuple_zerocopy, first.__replace__):
        fn.marker = "old"
    first.asdict_zerocopy.__defaults__ = (["a"],)
    first.astuple_zerocopy.__code__ = (lambda self: ("hacked",)).__code__
    second = make()  # while the first lives
    assert not hasattr(second.asdict_zerocopy, "marker")
    assert second().asdict_zerocopy() == {"a": 1, "b": 2}
    assert second().astuple_zerocopy() == (1, 2)
    assert first().asdict_zerocopy() == {"b": 2}
    del first, second
    gc.collect()
    third = make()  # after both died
    for fn in (third.asdict_zerocopy, third.astuple_zerocopy, third.__replace__):
        assert not hasattr(fn, "marker")
    assert third.asdict_zerocopy.__defaults__ == (None,)
    assert third().asdict_zerocopy() == {"a": 1, "b": 2}
    assert third().astuple_zerocopy() == (1, 2)


def test_traceback_shows_generated_lines_while_class_lives():
    @dataclass
    class Shows(ZeroCopy):
        first: int = 1
        second: list = field(default_factory=list)

    obj = Shows()
    object.__delattr__(obj, "second")
    for call, line in (
        (lambda: obj.asdict_zerocopy(), "'second': self.second,"),
        (lambda: obj.astuple_zerocopy(), "self.second,"),
        (lambda: metakit.asdict_zerocopy(obj), "'second': self.second,"),
        (lambda: metakit.replace(obj), "self.second"),
    ):
        with pytest.raises(AttributeError) as info:
            call()
        text = "".join(traceback.format_exception(info.type, info.value, info.tb))
        assert "<metakit" in text
        assert line in text


def test_traceback_of_skip_fields_error_passes_through_generated_code():
    with pytest.raises(ValueError) as info:
        Rec(1).asdict_zerocopy({"nope"})
    frames = [f.filename for f in traceback.extract_tb(info.tb)]
    assert any(name.startswith("<metakit") for name in frames)


def test_clearcache_then_class_death_raises_nothing(monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    def make():
        @dataclass
        class Cleared(ZeroCopy):
            a: int = 1

        return Cleared

    cls = make()
    name = cls.asdict_zerocopy.__code__.co_filename
    saved = {k: v for k, v in linecache.cache.copy().items() if k != name}
    try:
        linecache.clearcache()
        del cls
        gc.collect()
        assert not unraisable
        again = make()
        assert again().asdict_zerocopy() == {"a": 1}
        assert again.asdict_zerocopy.__code__.co_filename in linecache.cache
        del again
        gc.collect()
        assert not unraisable
    finally:
        for key, value in saved.items():
            linecache.cache.setdefault(key, value)


def test_checkcache_keeps_live_entries():
    @dataclass
    class Kept(ZeroCopy):
        a: int = 1

    name = Kept.asdict_zerocopy.__code__.co_filename
    linecache.checkcache()
    linecache.checkcache(name)
    assert "'a': self.a" in "".join(linecache.getlines(name))
    assert "self.a" in inspect.getsource(Kept.astuple_zerocopy)


def test_checkcache_wrapper_before_314():
    if sys.version_info < (3, 14):
        assert hasattr(linecache.checkcache, "__wrapped__")
        assert linecache.checkcache.__wrapped__ is not linecache.checkcache
    linecache.checkcache()
    linecache.checkcache("<metakit no such entry>")
    linecache.checkcache(__file__)


def test_checkcache_never_fails_when_entries_leave_during_it():
    def setup():
        gc.collect()
        live = [make_dataclass(f"Keep{i}", [f"k{i}"], bases=(ZeroCopy,)) for i in range(4)]
        dying = [make_dataclass(f"Die{i}", [f"d{i}"], bases=(ZeroCopy,)) for i in range(6)]
        linecache.getlines(dataclasses.__file__)
        del dying

        def check(result):
            if isinstance(result, Exception):
                return repr(result)
            lost = [c for c in live if not linecache.getlines(c.asdict_zerocopy.__code__.co_filename)]
            return lost or None

        return linecache.checkcache, gc.collect, check

    assert _sweep(setup) == []


def _blocks_after(base, lo, hi, width):
    for uid in range(lo, hi):
        n = 1 + uid % width
        cls = make_dataclass(f"Mem{uid}", [f"m{uid}_{i}" for i in range(n)], bases=base)
        if base:
            cls(*range(n)).asdict_zerocopy()
        del cls
        if uid % 100 == 0:
            gc.collect()
    gc.collect()
    return sys.getallocatedblocks()


def test_memory_bounded_fresh_names_compared_with_plain():
    growth = {}
    for label, base in (("plain", ()), ("metakit", (ZeroCopy,))):
        start = _blocks_after(base, 0, 400, 8)
        end = _blocks_after(base, 400, 1900, 8)
        growth[label] = end - start
    # 1500 more dead classes: an unbounded cache would hold thousands of code objects
    assert growth["metakit"] - growth["plain"] < 15000, growth
    assert not [k for k in _metakit_entries() if k.startswith("<metakit") and "Mem" in k]


def test_memory_bounded_ever_new_shapes():
    def cycle(base, c, count=100):
        for n in range(1, count + 1):
            cls = make_dataclass(f"Shape{c}_{n}", [f"s{c}_{n}_{i}" for i in range(n)], bases=base)
            del cls
            if n % 25 == 0:
                gc.collect()
        gc.collect()
        return sys.getallocatedblocks()

    marks = {}
    for label, base in (("plain", ()), ("metakit", (ZeroCopy,))):
        marks[label] = [cycle(base, c) for c in range(6)]
    extra = [m - p for m, p in zip(marks["metakit"], marks["plain"])]
    # after the caches are full (two cycles), more cycles of new shapes add nothing lasting
    assert max(extra[3:]) - extra[2] < 50000, extra


def test_many_classes_leave_no_linecache_entries_and_registry_returns():
    gc.collect()
    base_entries = _metakit_entries()
    base_count = len(metakit.zerocopy_classes())
    for i in range(600):
        cls = make_dataclass("Churn", [f"c{i % 7}", "z"], bases=(ZeroCopy,))
        cls(1, 2).asdict_zerocopy()
        del cls
    gc.collect()
    assert _metakit_entries() == base_entries
    assert len(metakit.zerocopy_classes()) == base_count


# --------------------------------------------------------------------------------------------
# threads
# --------------------------------------------------------------------------------------------


def _mixed_worker(tid, iterations=60):
    rnd = random.Random(tid)
    for it in range(iterations):
        n = rnd.randint(0, 9)
        name = rnd.choice(["Same", f"T{tid}", f"R{it}"])
        names = [f"{rnd.choice('abc')}{i}" for i in range(n)]
        spec = [(nm, int, field(default=i)) for i, nm in enumerate(names)]
        cls = make_dataclass(name, spec, bases=(ZeroCopy,))
        obj = cls()
        d = obj.asdict_zerocopy()
        assert list(d) == names
        assert obj.astuple_zerocopy() == tuple(range(n))
        assert metakit.asdict_zerocopy(obj) == d
        src = metakit.generated_source(cls)
        assert all(f"self.{nm}" in src for nm in names)
        plain = make_dataclass(name, spec)
        assert metakit.asdict_zerocopy(plain()) == d
        assert metakit.astuple_zerocopy(plain()) == tuple(range(n))
        if n:
            assert getattr(metakit.replace(obj, **{names[0]: 99}), names[0]) == 99
            assert getattr(metakit.replace(plain(), **{names[-1]: 98}), names[-1]) == 98
            assert obj.__replace__(**{names[-1]: 7}) == cls(*range(n - 1), 7)
            rest = obj.asdict_zerocopy({names[0]})
            assert rest == {k: v for k, v in d.items() if k != names[0]}
            with pytest.raises(ValueError, match="nope") as info:
                obj.asdict_zerocopy(["nope"])
            "".join(traceback.format_exception(info.type, info.value, info.tb))
            with pytest.raises(SkipFieldsError):
                obj.asdict_zerocopy(5)
        for c in metakit.zerocopy_classes():
            assert isinstance(c, ZeroCopyFields)
        linecache.checkcache()
        if it % 40 == 0:
            gc.collect()


@pytest.mark.parametrize("run", range(3))
def test_threads_mixed_workload(run):
    errors = _run_threads([(_mixed_worker, run * 100 + i) for i in range(6)])
    assert not errors, errors[0]


def test_threads_create_die_traceback_checkcache_gc():
    stop = threading.Event()
    remaining = [4]
    lock = threading.Lock()

    def creator(tid):
        rnd = random.Random(tid)
        try:
            for _ in range(40):
                n = rnd.randint(1, 6)
                names = [f"{rnd.choice('xyz')}{i}" for i in range(n)]
                cls = make_dataclass("Shared", names, bases=(ZeroCopy,))
                obj = cls(*range(n))
                object.__delattr__(obj, names[-1])
                with pytest.raises(AttributeError) as info:
                    obj.asdict_zerocopy()
                text = "".join(traceback.format_exception(info.type, info.value, info.tb))
                assert f"'{names[-1]}': self.{names[-1]}," in text
                assert all(f"self.{nm}" in inspect.getsource(cls.astuple_zerocopy) for nm in names)
        finally:
            with lock:
                remaining[0] -= 1
                if not remaining[0]:
                    stop.set()

    def checker():
        while not stop.is_set():
            linecache.checkcache()
            metakit.zerocopy_classes()

    def collector():
        while not stop.is_set():
            gc.collect()
            stop.wait(0.001)

    errors = _run_threads([(creator, i) for i in range(4)] + [(checker,), (collector,)])
    stop.set()
    assert not errors, errors[0]


def test_threads_same_name_same_shape_share_entry_safely():
    def creator(tid):
        for it in range(200):
            cls = make_dataclass("SameShape", ["a", "b"], bases=(ZeroCopy,))
            name = cls.asdict_zerocopy.__code__.co_filename
            lines = "".join(linecache.getlines(name))
            assert "'a': self.a" in lines, (name, it)
            assert cls(1, 2).asdict_zerocopy() == {"a": 1, "b": 2}
            if it % 9 == tid % 9:
                gc.collect()

    errors = _run_threads([(creator, i) for i in range(6)])
    assert not errors, errors[0]
    gc.collect()
    assert not [k for k in _metakit_entries() if "SameShape" in k]


def test_threads_overrides_assigned_and_deleted_while_called():
    Root, Mid, Leaf = _fresh_chain()
    full = {"a": 1, "b": 2, "c": 3}
    done = threading.Event()
    ov_d = _make_override(Mid, "d")
    ov_t = _make_override(Mid, "t")

    def mutator():
        try:
            for _ in range(1500):
                Mid.asdict_zerocopy = ov_d
                Mid.astuple_zerocopy = ov_t
                del Mid.asdict_zerocopy
                del Mid.astuple_zerocopy
        finally:
            done.set()

    def caller():
        leaf, mid = Leaf(), Mid()
        while not done.is_set():
            assert leaf.asdict_zerocopy() in (full, {"Mid": full})
            assert leaf.astuple_zerocopy() in ((1, 2, 3), ("Mid", 1, 2, 3))
            assert mid.asdict_zerocopy() in ({"a": 1, "b": 2}, {"Mid": {"a": 1, "b": 2}})
            assert metakit.asdict_zerocopy(leaf) == full
            assert metakit.astuple_zerocopy(leaf) == (1, 2, 3)
            assert metakit.replace(leaf, a=9) == Leaf(9)

    errors = _run_threads([(mutator,)] + [(caller,)] * 3)
    assert not errors, errors[0]
    assert Leaf().asdict_zerocopy() == full
    assert Leaf().astuple_zerocopy() == (1, 2, 3)


def test_threads_plain_dataclass_function_forms_first_use():
    def worker(tid):
        for i in range(150):

            @dataclass
            class P:
                a: int = tid
                b: list = field(default_factory=list)

            p = P()
            assert metakit.asdict_zerocopy(p) == {"a": tid, "b": []}
            assert metakit.asdict_zerocopy(p)["b"] is p.b
            assert metakit.astuple_zerocopy(p)[1] is p.b
            assert metakit.replace(p, a=i).a == i
            assert metakit.replace(p).b is p.b
            if i % 50 == 0:
                gc.collect()

    errors = _run_threads([(worker, i) for i in range(8)])
    assert not errors, errors[0]


def test_threads_subclasses_created_while_base_overrides_change():
    Root, Mid, Leaf = _fresh_chain()
    makers_done = threading.Event()
    ov = _make_override(Mid, "d")
    remaining = [2]
    lock = threading.Lock()

    def mutator():
        for _ in range(5000):
            Mid.asdict_zerocopy = ov
            del Mid.asdict_zerocopy
            if makers_done.is_set():
                break

    made = []

    def maker(tid):
        try:
            for i in range(80):
                made.append(make_dataclass(f"Sub{tid}_{i}", [(f"s{i}", int, field(default=i))], bases=(Mid,)))
        finally:
            with lock:
                remaining[0] -= 1
                if not remaining[0]:
                    makers_done.set()

    errors = _run_threads([(mutator,), (maker, 0), (maker, 1)])
    assert not errors, errors[0]
    # the override is gone now: every subclass uses its own generated code
    for cls in made:
        obj = cls()
        own = {f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)}
        assert obj.asdict_zerocopy() == own


def test_threads_subclass_created_while_base_override_assigned():
    wrong = []
    for _ in range(250):
        Root, Mid, Leaf = _fresh_chain()
        made = []
        started = threading.Event()

        def maker(Mid=Mid, made=made, started=started):
            started.set()
            for i in range(25):
                made.append(make_dataclass(f"C{i}", [(f"c{i}", int, field(default=i))], bases=(Mid,)))

        thread = threading.Thread(target=maker)
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            thread.start()
            started.wait()
            Mid.asdict_zerocopy = _make_override(Mid, "d")
            thread.join(60)
        finally:
            sys.setswitchinterval(old)
        for cls in made:
            obj = cls()
            own = {f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)}
            if obj.asdict_zerocopy() != {"Mid": own}:
                wrong.append(cls.__name__)
    assert not wrong


def test_threads_subclass_created_while_base_new_assigned():
    wrong = []
    for _ in range(120):
        Root, Mid, Leaf = _fresh_chain()
        made = []
        started = threading.Event()
        seen = []

        def __new__(cls, *args, seen=seen, **kwargs):
            seen.append((args, sorted(kwargs)))
            return object.__new__(cls)

        def maker(Mid=Mid, made=made, started=started):
            started.set()
            for i in range(15):
                made.append(make_dataclass(f"N{i}", [(f"n{i}", int, field(default=i))], bases=(Mid,)))

        thread = threading.Thread(target=maker)
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            thread.start()
            started.wait()
            Mid.__new__ = __new__
            thread.join(60)
        finally:
            sys.setswitchinterval(old)
        for cls in made:
            obj = cls()
            seen.clear()
            metakit.replace(obj, a=5)
            ours = list(seen)
            seen.clear()
            dataclasses.replace(obj, a=5)
            if ours != seen:
                wrong.append((cls.__name__, ours, list(seen)))
    assert not wrong, wrong[:3]


# deterministic interleavings ---------------------------------------------------------------


def _subclass_during_override_setup(attr, make_value, check_obj):
    def setup():
        Root, Mid, Leaf = _fresh_chain()
        value = make_value(Mid)

        def during():
            @dataclass
            class Sub(Mid):
                s: int = 4

            return Sub

        def action():
            setattr(Mid, attr, value)

        def check(sub):
            if isinstance(sub, Exception):
                return repr(sub)
            return check_obj(sub)

        return during, action, check

    return setup


def _check_dict(sub):
    got = sub().asdict_zerocopy()
    return None if got == {"Mid": {"a": 1, "b": 2, "s": 4}} else got


def _check_tuple(sub):
    got = sub().astuple_zerocopy()
    return None if got == ("Mid", 1, 2, 4) else got


def _check_replace(sub):
    got = sub().__replace__(a=5)
    return None if got == ("mine", {"a": 5}) else got


def _mine_replace(level):
    def __replace__(self, /, **changes):
        return ("mine", changes)

    return __replace__


@pytest.mark.xfail(
    strict=True,
    reason="DEFECT: an override assigned to a base from code that runs inside a subclass's creation "
    "(a finalizer, a profiler: same thread) is never seen by that subclass (DESIGN: overrides behave "
    "the same whenever they appear; README Limits now list it)",
)
@pytest.mark.parametrize(
    "attr",
    ["asdict_zerocopy", "astuple_zerocopy", "__replace__"],
)
def test_interleaved_override_assignment_during_subclass_creation(attr):
    make, check = {
        "asdict_zerocopy": (lambda m: _make_override(m, "d"), _check_dict),
        "astuple_zerocopy": (lambda m: _make_override(m, "t"), _check_tuple),
        "__replace__": (_mine_replace, _check_replace),
    }[attr]
    assert _sweep(_subclass_during_override_setup(attr, make, check), stride=3) == []


def test_interleaved_override_deletion_during_subclass_creation():
    def setup():
        Root, Mid, Leaf = _fresh_chain()
        Mid.asdict_zerocopy = _make_override(Mid, "d")

        def during():
            @dataclass
            class Sub(Mid):
                s: int = 4

            return Sub

        def action():
            del Mid.asdict_zerocopy

        def check(sub):
            if isinstance(sub, Exception):
                return repr(sub)
            got = sub().asdict_zerocopy()
            return None if got == {"a": 1, "b": 2, "s": 4} else got

        return during, action, check

    assert _sweep(setup, stride=3) == []


@pytest.mark.xfail(
    strict=True,
    reason="DEFECT: a __new__ assigned to a base from code that runs inside a subclass's creation "
    "(same thread) leaves the subclass's replace passing arguments by position to it",
)
def test_interleaved_new_assignment_during_subclass_creation():
    def setup():
        Root, Mid, Leaf = _fresh_chain()
        seen = []

        def __new__(cls, *args, **kwargs):
            seen.append((args, sorted(kwargs)))
            return object.__new__(cls)

        def during():
            @dataclass
            class Sub(Mid):
                s: int = 4

            return Sub

        def action():
            Mid.__new__ = __new__

        def check(sub):
            if isinstance(sub, Exception):
                return repr(sub)
            obj = sub()
            seen.clear()
            metakit.replace(obj, a=5)
            ours = list(seen)
            seen.clear()
            dataclasses.replace(obj, a=5)
            return None if ours == seen else (ours, list(seen))

        return during, action, check

    assert _sweep(setup, stride=3) == []


@pytest.mark.xfail(
    strict=True,
    reason="DEFECT: an __init__ assigned while a replace is running (another thread) gets the "
    "positional arguments meant for the old __init__: fields silently swapped (README Limits now list it)",
)
@pytest.mark.parametrize("via", ["metakit.replace", "__replace__", "plain-dataclass"])
def test_interleaved_init_assignment_during_replace(via):
    def setup():
        if via == "plain-dataclass":

            @dataclass
            class A:
                x: int
                y: int = 0

        else:

            @dataclass
            class A(ZeroCopy):
                x: int
                y: int = 0

        swapped = _swapped_init(A)
        a = A(1, 2)
        metakit.replace(a)  # warm any cache

        def during():
            if via == "__replace__":
                return a.__replace__(y=5)
            return metakit.replace(a, y=5)

        def action():
            A.__init__ = swapped

        def check(r):
            return None if isinstance(r, A) and (r.x, r.y) == (1, 5) else r

        return during, action, check

    assert _sweep(setup) == []


@pytest.mark.parametrize(
    ("start", "mutation"),
    [
        ((), ("set", "Mid")),
        (("Mid",), ("del", "Mid")),
        (("Root",), ("set", "Mid")),
        (("Root", "Mid"), ("del", "Root")),
        (("Mid", "Leaf"), ("del", "Leaf")),
        (("Mid",), ("set", "Root")),
    ],
    ids=str,
)
def test_interleaved_single_override_change_during_call(start, mutation):
    def setup():
        Root, Mid, Leaf = _fresh_chain()
        levels = {"Root": Root, "Mid": Mid, "Leaf": Leaf}
        for n in start:
            levels[n].asdict_zerocopy = _make_override(levels[n], "d")
        op, target = mutation
        after = set(start) ^ {target}

        def expect(active):
            d = {"a": 1, "b": 2, "c": 3}
            for n in ("Root", "Mid", "Leaf"):
                if n in active:
                    d = {n: d}
            return d

        leaf = Leaf()

        def action():
            if op == "set":
                levels[target].asdict_zerocopy = _make_override(levels[target], "d")
            else:
                delattr(levels[target], "asdict_zerocopy")

        def check(r):
            return None if r in (expect(set(start)), expect(after)) else r

        return leaf.asdict_zerocopy, action, check

    assert _sweep(setup) == []


@pytest.mark.xfail(
    strict=True,
    reason="DEFECT: an override already running when another thread deletes it and the base's override "
    "reaches, through super(), the base's generated method and returns the base's fields "
    "(DESIGN: super() inside an override serves the instance's own class; README Limits now list it)",
)
def test_interleaved_two_deletions_during_override_call():
    def setup():
        Root, Mid, Leaf = _fresh_chain()
        Root.asdict_zerocopy = _make_override(Root, "d")
        Mid.asdict_zerocopy = _make_override(Mid, "d")
        mid = Mid()
        fields = {"a": 1, "b": 2}

        def action():
            del Mid.asdict_zerocopy
            del Root.asdict_zerocopy

        def check(result):
            allowed = ({"Mid": {"Root": fields}}, {"Mid": fields}, fields)
            return None if result in allowed else result

        return mid.asdict_zerocopy, action, check

    assert _sweep(setup) == []


def test_interleaved_two_deletions_then_fresh_call_is_right():
    Root, Mid, Leaf = _fresh_chain()
    Root.asdict_zerocopy = _make_override(Root, "d")
    Mid.asdict_zerocopy = _make_override(Mid, "d")
    del Mid.asdict_zerocopy
    del Root.asdict_zerocopy
    assert Mid().asdict_zerocopy() == {"a": 1, "b": 2}
    assert Leaf().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}


_DEADLOCK_SCRIPT = textwrap.dedent(
    """
    import dataclasses, faulthandler, gc, sys
    from metakit import ZeroCopy

    made = []

    class Finalized:
        # an object in a reference cycle whose finalizer makes a record class, as logging or
        # caching code may; the garbage collector runs it wherever an allocation triggers it
        def __init__(self):
            self.cycle = self

        def __del__(self):
            made.append(dataclasses.make_dataclass(f"FromDel{len(made)}", ["q"], bases=(ZeroCopy,)))

    def collect_garbage():
        gc.collect()

    k = 1
    while True:
        faulthandler.dump_traceback_later(10, exit=True)
        gc.disable()
        Finalized()
        state = {"n": 0, "fired": False}

        def prof(frame, event, arg):
            if state["fired"]:
                return
            state["n"] += 1
            if state["n"] >= k:
                state["fired"] = True
                sys.setprofile(None)
                collect_garbage()
                sys.setprofile(prof)

        sys.setprofile(prof)
        cls = dataclasses.make_dataclass(f"Main{k}", ["m", "z"], bases=(ZeroCopy,))
        sys.setprofile(None)
        gc.enable()
        assert cls(1, 2).asdict_zerocopy() == {"m": 1, "z": 2}
        if not state["fired"]:
            break
        k += 1
        made.clear()
    faulthandler.cancel_dump_traceback_later()
    print("ok", k)
    """
)


def test_class_created_by_gc_finalizer_during_class_creation_does_not_deadlock(tmp_path):
    script = tmp_path / "reentrant.py"
    script.write_text(_DEADLOCK_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok")


def test_class_created_by_gc_finalizer_outside_metakit_is_fine():
    made = []

    class Finalized:
        def __init__(self):
            self.cycle = self

        def __del__(self):
            made.append(make_dataclass(f"Fin{len(made)}", ["q"], bases=(ZeroCopy,)))

    for _ in range(5):
        Finalized()
    gc.collect()
    assert len(made) == 5
    assert [c(1).asdict_zerocopy() for c in made] == [{"q": 1}] * 5


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


@pytest.fixture
def modules(tmp_path):
    (tmp_path / "bb_raiser.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "bb_syntax.py").write_text("def (:\n")
    (tmp_path / "bb_exits.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "bb_good.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass
            from metakit import ZeroCopy

            @dataclass
            class Outer(ZeroCopy):
                x: int = 0

                @dataclass
                class Inner(ZeroCopy):
                    y: int = 0

            @dataclass
            class Plain:
                z: int = 0

            class NotDC:
                pass

            def func():
                pass

            value = 3
            """
        )
    )
    return tmp_path


def _one_error_line(proc):
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines, "no message"
    assert "error" in lines[-1]
    assert "Traceback" not in proc.stderr
    return lines[-1]


CLI_BAD = {
    "unknown-command": (["frobnicate"], "frobnicate"),
    "show-no-arg": (["show"], "MODULE:CLASS"),
    "show-no-colon": (["show", "bb_good"], "bb_good"),
    "show-empty-class": (["show", "bb_good:"], "bb_good:"),
    "show-empty-module": (["show", ":Outer"], ":Outer"),
    "show-missing-module": (["show", "bb_no_such_module:X"], "bb_no_such_module"),
    "show-raising-module": (["show", "bb_raiser:X"], "boom at import"),
    "show-syntax-error": (["show", "bb_syntax:X"], "bb_syntax"),
    "show-no-such-class": (["show", "bb_good:Nope"], "Nope"),
    "show-no-such-nested": (["show", "bb_good:Outer.Nope"], "Outer.Nope"),
    "show-not-a-class": (["show", "bb_good:func"], "func"),
    "show-a-value": (["show", "bb_good:value"], "value"),
    "show-not-a-dataclass": (["show", "bb_good:NotDC"], "NotDC is not a dataclass"),
    "show-extra-arg": (["show", "bb_good:Outer", "extra"], "extra"),
    "show-unknown-option": (["show", "--bogus", "bb_good:Outer"], "--bogus"),
    "stubgen-no-arg": (["stubgen"], "MODULE"),
    "stubgen-missing-module": (["stubgen", "bb_no_such_module"], "bb_no_such_module"),
    "stubgen-raising-module": (["stubgen", "bb_raiser"], "boom at import"),
    "stubgen-missing-parent": (["stubgen", "bb_good", "-o", "{tmp}/no/such/dir"], "no/such"),
    "stubgen-out-is-file": (["stubgen", "bb_good", "-o", "{tmp}/bb_good.py"], "not a directory"),
    "bench-unknown-option": (["bench", "--bogus"], "--bogus"),
    "bench-json-missing-dir": (["bench", "--json", "{tmp}/missing/out.json"], "missing"),
    "bench-json-is-dir": (["bench", "--json", "{tmp}"], "directory"),
    "bench-json-under-file": (["bench", "--json", "{tmp}/bb_good.py/out.json"], "not a directory"),
    "bench-plot-missing-dir": (["bench", "--plot", "{tmp}/missing/out.png"], "missing"),
}


@pytest.mark.parametrize("name", sorted(CLI_BAD))
def test_cli_bad_arguments_exit_2_with_one_line(name, modules):
    args, needle = CLI_BAD[name]
    args = [a.replace("{tmp}", str(modules)) for a in args]
    proc = _cli(*args, extra_path=modules, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    line = _one_error_line(proc)
    if needle:
        assert needle in proc.stderr
    assert proc.stdout == ""
    del line


def test_cli_module_exiting_at_import(modules):
    proc = _cli("show", "bb_exits:X", extra_path=modules, timeout=60)
    assert proc.returncode == 2
    assert "bb_exits" in _one_error_line(proc)


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_cli_bench_unwritable_directory_refused_before_work(option):
    target = "/proc/metakit-bb-out.json"
    with pytest.raises(OSError):
        open(target, "w").close()  # the precondition: nothing can be made there
    proc = subprocess.Popen(
        [sys.executable, "-m", "metakit", "bench", "--quick", option, target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        first = proc.stderr.readline()
    finally:
        proc.kill()
        proc.communicate()
    assert "error" in first, first


def test_cli_show_prints_generated_source_exactly(modules):
    sys.path.insert(0, str(modules))
    try:
        import bb_good  # type: ignore[import-not-found]

        for name, cls in (("Outer", bb_good.Outer), ("Outer.Inner", bb_good.Outer.Inner), ("Plain", bb_good.Plain)):
            proc = _cli("show", f"bb_good:{name}", extra_path=modules, timeout=60)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.rstrip("\n") == metakit.generated_source(cls).rstrip("\n")
            if name == "Plain":
                assert "plain dataclass" in proc.stderr
    finally:
        sys.path.remove(str(modules))
        sys.modules.pop("bb_good", None)


def test_cli_stubgen_makes_missing_last_directory(modules):
    out = modules / "newstubs"
    proc = _cli("stubgen", "bb_good", "-o", str(out), extra_path=modules, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stub = (out / "bb_good.pyi").read_text()
    assert "OuterDict" in stub


def test_cli_no_command_exits_2_with_usage():
    proc = _cli()
    assert proc.returncode == 2
    assert "usage" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_version():
    proc = _cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("metakit ")
