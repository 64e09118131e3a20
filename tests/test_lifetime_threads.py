"""DESIGN "Generated code": lifetime, threads and bounds, observed from outside.

A ``linecache`` entry lives exactly as long as a class using it (identical sources share one);
tracebacks and ``inspect`` show the generated lines; ``zerocopy_classes()`` holds classes weakly;
no cache keeps a class alive; classes can be created and methods called from many threads and
``linecache.checkcache()`` never fails meanwhile; ever new shapes keep memory bounded.
"""

import abc
import dataclasses
import gc
import inspect
import linecache
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field, make_dataclass

import pytest

import metakit
import metakit.testing
import metakit.testing as mt
from metakit import OMIT, SkipFieldsError, ZeroCopy, ZeroCopyFields
from tests import records
from tests.records import (
    NASTY_NAME,
    REPO,
    ABCZeroCopyFields,
    AbstractBackendMeta,
    AbstractBackendMeta2,
    AttnMeta,
    FlashInferMeta,
    FlashInferUndecorated,
    FlashMeta,
    FrozenPostInit,
    PlainPoint,
    PlainRec,
    Rec,
    Three,
    UndecoratedConcrete,
    _filenames,
    _fresh_chain,
    _make_override,
    _sweep,
    fresh,
)


def test_many_identical_classes_share_one_linecache_entry():
    # DESIGN: "Identical sources share an entry."
    import linecache

    classes = [make_dataclass("Same", [("p", int), ("q", int)], bases=(ZeroCopy,)) for _ in range(50)]
    names = {c.asdict_zerocopy.__code__.co_filename for c in classes}
    assert len(names) == 1
    assert len([k for k in linecache.cache.copy() if k.startswith("<metakit") and k.endswith(".Same>")]) == 1
    assert len({id(c.asdict_zerocopy) for c in classes}) == 50


def metakit_entries(fragment):
    return [k for k in list(linecache.cache) if k.startswith("<metakit") and fragment in k]


def test_linecache_registration_inspect_getsource():
    # DESIGN: "The source is registered in linecache under a unique, readable filename ... Then inspect.getsource,
    # tracebacks and debuggers show it."
    C = fresh(("first", "second"), name="Readable")
    src = metakit.generated_source(C)
    for meth in (C.asdict_zerocopy, C.astuple_zerocopy, C.__replace__):
        fn = meth.__code__.co_filename
        assert fn.startswith("<")
        assert "Readable" in fn
        assert fn in linecache.cache
        got = inspect.getsource(meth)
        assert got.startswith("def " + meth.__name__)
        assert got.strip() in src
        line = linecache.getline(fn, meth.__code__.co_firstlineno)
        assert line.startswith("def " + meth.__name__)


def test_entry_survives_while_a_sharing_class_lives():
    # DESIGN: "An entry goes away when its class is garbage-collected" (not before: the other class still uses it)
    A = fresh(("m", "n"), name="Survive")
    B = fresh(("m", "n"), name="Survive")
    fn = B.asdict_zerocopy.__code__.co_filename
    del A
    gc.collect()
    assert fn in linecache.cache
    assert inspect.getsource(B.asdict_zerocopy).startswith("def asdict_zerocopy")
    linecache.checkcache()
    linecache.checkcache(fn)
    assert fn in linecache.cache
    del B
    gc.collect()
    assert fn not in linecache.cache


def test_class_collected_entry_gone_and_not_listed():
    # DESIGN: "An entry goes away when its class is garbage-collected, and no cache keeps a class alive."
    # zerocopy_classes(): "the live classes made by ZeroCopyFields (weakly held)"
    C = fresh(("u", "v"), name="Collectable")
    o = C(1, 2)
    o.asdict_zerocopy({"u"})
    o.astuple_zerocopy()
    metakit.replace(o, u=3)
    metakit.asdict_zerocopy(o)
    metakit.generated_source(C)
    fn = C.asdict_zerocopy.__code__.co_filename
    assert C in metakit.zerocopy_classes()
    wr = weakref.ref(C)
    del C, o
    gc.collect()
    assert wr() is None
    assert fn not in linecache.cache
    assert all(c.__name__ != "Collectable" for c in metakit.zerocopy_classes())


def test_plain_dataclass_not_kept_alive_by_function_forms():
    # README: "Any other dataclass gets the code on its first metakit.replace, kept in a cache keyed
    # weakly by the class"
    # DESIGN: "no cache keeps a class alive"
    P = make_dataclass("PlainCollect", [("a", int, field(default=0))])
    p = P()
    metakit.asdict_zerocopy(p)
    metakit.astuple_zerocopy(p)
    metakit.replace(p, a=1)
    metakit.generated_source(P)
    wr = weakref.ref(P)
    del P, p
    gc.collect()
    assert wr() is None
    assert not metakit_entries("PlainCollect")


def test_override_classes_collected():
    # no cache keeps a class alive, also for classes whose generated method super() reaches
    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    @dataclass
    class Ov(Base):
        b: int = 2

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy(skip_fields)

    assert Ov().asdict_zerocopy() == {"a": 1, "b": 2}
    wrs = [weakref.ref(Base), weakref.ref(Ov)]
    del Base, Ov
    gc.collect()
    assert [w() for w in wrs] == [None, None]


def test_zerocopy_classes_order_and_slots_discarded_class():
    # README: "The live classes made by ZeroCopyFields, oldest first (held weakly)"; brief: slots=True's discarded
    # class is not listed
    @dataclass(slots=True)
    class SlotA(ZeroCopy):
        a: int = 1

    @dataclass
    class After(ZeroCopy):
        b: int = 1

    listed = metakit.zerocopy_classes()
    mine = [c for c in listed if c.__qualname__.endswith(("SlotA", "After")) and c.__module__ == __name__]
    assert mine == [SlotA, After]
    assert listed.index(SlotA) < listed.index(After)
    assert True  # the base itself may be listed
    assert isinstance(listed, list)


def test_zerocopy_classes_slots_discarded_after_collect():
    @dataclass(slots=True, frozen=True)
    class SlotB(ZeroCopy):
        a: int = 1

    gc.collect()
    mine = [c for c in metakit.zerocopy_classes() if c.__qualname__.endswith("SlotB")]
    assert mine == [SlotB]


def test_class_name_with_newline_linecache_lines_well_formed():
    # DESIGN: "The source is registered in linecache ... Then inspect.getsource, tracebacks and debuggers show it."
    # linecache entries are lists of single lines; each generated line must be one line, and the line numbers of
    # the code objects must point at their def lines in the registered text as split by lines.
    C = make_dataclass(NASTY_NAME, [("a", int, field(default=0))], bases=(ZeroCopy,))
    fn = C.astuple_zerocopy.__code__.co_filename
    lines = linecache.getlines(fn)
    assert all(line.count("\n") == 1 and line.endswith("\n") for line in lines)
    text_lines = "".join(lines).splitlines()
    assert text_lines[C.astuple_zerocopy.__code__.co_firstlineno - 1].startswith("def astuple_zerocopy")


def _metakit_entries() -> set[str]:
    return {k for k in linecache.cache.copy() if k.startswith("<metakit")}


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
    # A name no other test uses: the numbers count the live classes of that name.
    def make(names):
        return make_dataclass("NumberedFactory", names, bases=(ZeroCopy,))

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
    # DESIGN: tracebacks show the generated source, named after the class, from every form.
    @dataclass
    class Shows(ZeroCopy):
        first: int = 1
        second: list = field(default_factory=list)

    obj = Shows()
    object.__delattr__(obj, "second")
    for call, line in (
        (obj.asdict_zerocopy, "'second': self.second,"),
        (obj.astuple_zerocopy, "self.second,"),
        (lambda: metakit.asdict_zerocopy(obj), "'second': self.second,"),
        (lambda: metakit.replace(obj), "self.second"),
    ):
        with pytest.raises(AttributeError) as info:
            call()
        text = "".join(traceback.format_exception(info.type, info.value, info.tb))
        assert "<metakit" in text
        assert "Shows" in text
        assert line in text
    # An instance made without __init__ (a frozen class with __post_init__) fails the same way.
    bare = FrozenPostInit.__new__(FrozenPostInit)
    with pytest.raises(AttributeError) as info:
        bare.asdict_zerocopy()
    assert any(str(f.path).startswith("<metakit") for f in info.traceback)


def test_traceback_of_skip_fields_error_passes_through_generated_code():
    with pytest.raises(ValueError, match="which is not a field of") as info:
        Rec(1).asdict_zerocopy({"nope"})
    frames = [f.filename for f in traceback.extract_tb(info.tb)]
    assert any(name.startswith("<metakit") for name in frames)


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
        for it in range(100):
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
    _Root, Mid, Leaf = _fresh_chain()
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
    _Root, Mid, _Leaf = _fresh_chain()
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


def _race(maker, started, assign):
    """Run *maker* in a thread, switching threads as often as Python allows, and *assign* once it has started."""
    thread = threading.Thread(target=maker)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        thread.start()
        started.wait()
        assign()
        thread.join(60)
    finally:
        sys.setswitchinterval(old)


def test_threads_subclass_created_while_base_override_assigned():
    wrong = []
    for _ in range(120):
        _Root, Mid, _Leaf = _fresh_chain()
        made = []
        started = threading.Event()

        def maker(Mid=Mid, made=made, started=started):
            started.set()
            for i in range(25):
                made.append(make_dataclass(f"C{i}", [(f"c{i}", int, field(default=i))], bases=(Mid,)))

        _race(maker, started, lambda Mid=Mid: setattr(Mid, "asdict_zerocopy", _make_override(Mid, "d")))
        for cls in made:
            obj = cls()
            own = {f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)}
            if obj.asdict_zerocopy() != {"Mid": own}:
                wrong.append(cls.__name__)
    assert not wrong


def test_threads_subclass_created_while_base_new_assigned():
    wrong = []
    for _ in range(120):
        _Root, Mid, _Leaf = _fresh_chain()
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

        _race(maker, started, lambda Mid=Mid, new=__new__: setattr(Mid, "__new__", new))
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


def _subclass_during_override_setup(attr, make_value, check_obj):
    def setup():
        _Root, Mid, _Leaf = _fresh_chain()
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
        _Root, Mid, _Leaf = _fresh_chain()
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
        _Root, Mid, _Leaf = _fresh_chain()
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
        Root, Mid, _Leaf = _fresh_chain()
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


def test_zerocopy_classes_weak_and_ordered():
    def make():
        @dataclass(slots=True)
        class Ephemeral(ZeroCopy):
            a: int = 0

        @dataclass
        class Ephemeral2(Ephemeral):
            b: int = 0

        return Ephemeral, Ephemeral2

    E1, E2 = make()
    live = metakit.zerocopy_classes()
    assert E1 in live
    assert E2 in live
    assert live.index(E1) < live.index(E2)
    assert AttnMeta in live
    assert live.index(AttnMeta) < live.index(E1)
    r1, r2 = weakref.ref(E1), weakref.ref(E2)
    del E1, E2, live
    gc.collect()
    assert r1() is None
    assert r2() is None
    assert not [c for c in metakit.zerocopy_classes() if c.__name__ in {"Ephemeral", "Ephemeral2"}]


def test_zerocopy_classes_exclude_plain_dataclasses():
    @dataclass
    class PlainOne:
        a: int = 0

    metakit.asdict_zerocopy(PlainOne())
    assert PlainOne not in metakit.zerocopy_classes()


def _lifetime_shapes():
    out = {}

    @dataclass(slots=True)
    class LifeSlots(ZeroCopy):
        a: int = 0

    @dataclass
    class LifeBase(ZeroCopy):
        a: int = 0

    @dataclass
    class LifeOver(LifeBase):
        b: int = 0

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy(skip_fields)

    @dataclass
    class LifeABC(metaclass=ABCZeroCopyFields):
        a: int = 0

    @dataclass
    class LifePlain:
        a: int = 0

    out.update(slots=LifeSlots, base=LifeBase, over=LifeOver, abc=LifeABC, plain=LifePlain)
    out["md"] = dataclasses.make_dataclass(
        "LifeMD", [("a", int, field(default=0))], bases=(ZeroCopy,), slots=True, frozen=True
    )
    return out


def test_no_shape_is_kept_alive_and_linecache_entries_go():
    shapes = _lifetime_shapes()
    files = set()
    for C in shapes.values():
        o = C()
        metakit.asdict_zerocopy(o)
        metakit.astuple_zerocopy(o)
        metakit.replace(o, a=1)
        if isinstance(C, ZeroCopyFields):
            o.asdict_zerocopy()
            C.__replace__(o, a=2)
            files.add(C.astuple_zerocopy.__code__.co_filename)
        mt.assert_zerocopy(o)
        mt.assert_zerocopy_class(C)
        metakit.generated_source(C)
    refs = [weakref.ref(C) for C in shapes.values()]
    del shapes, C, o
    gc.collect()
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert not files & set(linecache.cache)


def test_zerocopy_classes_in_this_module_excludes_abstract():
    found = mt.zerocopy_classes_in(records)
    assert AbstractBackendMeta not in found
    assert AbstractBackendMeta2 not in found
    assert ZeroCopy not in found
    assert found.index(AttnMeta) < found.index(FlashMeta) < found.index(FlashInferMeta)
    assert UndecoratedConcrete in found
    assert FlashInferUndecorated in found
    assert mt.class_id(FlashInferMeta) == "FlashInferMeta"


def test_zerocopy_classes_while_classes_are_collected_in_another_thread():
    # DESIGN: thread-safe; zerocopy_classes() lists live classes (weakly held)
    import gc
    import threading
    from dataclasses import make_dataclass

    stop = threading.Event()

    def churn():
        i = 0
        while not stop.is_set():
            C = make_dataclass(f"Churn{i % 20}", [f"x{i % 7}"], bases=(ZeroCopy,))
            del C
            i += 1
            if i % 10 == 0:
                gc.collect()

    t = threading.Thread(target=churn)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    t.start()
    try:
        for _ in range(500):
            listed = metakit.zerocopy_classes()
            assert all(isinstance(c, type) for c in listed)
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)


def _metakit_entries_rework() -> set[str]:
    return {k for k in linecache.cache.copy() if isinstance(k, str) and k.startswith("<metakit")}


def test_linecache_entry_goes_with_last_class_and_stays_while_one_lives():
    # DESIGN: "Identical sources share an entry. An entry goes away when its class is garbage-collected, and no
    # cache keeps a class alive."
    def make():
        return make_dataclass("SharedEntry", [("a", int), ("b", int)], bases=(ZeroCopy,))

    before = _metakit_entries_rework()
    one, two = make(), make()
    (filename,) = _filenames(one)
    assert _filenames(two) == {filename}
    assert filename in _metakit_entries_rework() - before
    del one
    gc.collect()
    assert filename in linecache.cache
    assert "a" in inspect.getsource(two.asdict_zerocopy)
    del two
    gc.collect()
    assert filename not in linecache.cache
    assert _metakit_entries_rework() <= before


def test_checkcache_keeps_entries_and_is_wrapped_where_needed():
    # README: "Up to 3.13, linecache.checkcache() raises KeyError when an entry leaves the cache while it runs ... So
    # metakit wraps linecache.checkcache once, on those versions ...; the wrapper keeps the original as __wrapped__."
    @dataclass
    class Kept(ZeroCopy):
        a: int = 1

    linecache.checkcache()
    (filename,) = _filenames(Kept)
    linecache.checkcache(filename)
    assert filename in linecache.cache
    assert "'a'" in inspect.getsource(Kept.asdict_zerocopy)
    if sys.version_info < (3, 14):
        assert callable(getattr(linecache.checkcache, "__wrapped__", None))
        assert not hasattr(linecache.checkcache.__wrapped__, "__wrapped__")


def test_checkcache_from_other_threads_while_classes_come_and_go():
    # DESIGN: "linecache.checkcache() in any thread never fails while metakit classes come and go."
    stop = threading.Event()
    errors: list = []

    def checker():
        try:
            while not stop.is_set():
                linecache.checkcache()
        except BaseException as e:
            errors.append(e)

    def churner(t):
        try:
            for i in range(300):
                K = make_dataclass(
                    f"Churn{t}", [(f"c{j}", int, field(default=j)) for j in range(i % 9)], bases=(ZeroCopy,)
                )
                K().asdict_zerocopy()
                del K
                if i % 10 == 0:
                    gc.collect()
        except BaseException as e:
            errors.append(e)

    checkers = [threading.Thread(target=checker) for _ in range(3)]
    churners = [threading.Thread(target=churner, args=(t,)) for t in range(3)]
    for th in checkers + churners:
        th.start()
    for th in churners:
        th.join()
    stop.set()
    for th in checkers:
        th.join()
    assert not errors, errors


def test_traceback_shows_the_generated_line_for_template_copies():
    # DESIGN: "The source is registered in linecache ... Then inspect.getsource, tracebacks and debuggers show it."
    # README: "A template's positions are kept by line and without columns ...: tracebacks show the line"
    for copy_index in range(4):  # one shape, new names: the later ones are template copies
        K = make_dataclass(f"Tb{copy_index}", [f"t{copy_index}_{j}" for j in range(5)], bases=(ZeroCopy,))
        for missing in range(5):
            obj = K(*range(5))
            name = f"t{copy_index}_{missing}"
            delattr(obj, name)
            for call in (obj.asdict_zerocopy, obj.astuple_zerocopy, obj.__replace__):
                with pytest.raises(AttributeError) as info:
                    call()
                last = traceback.extract_tb(info.value.__traceback__)[-1]
                assert last.filename == K.asdict_zerocopy.__code__.co_filename
                assert f"self.{name}" in last.line, (call, last.line)
            other = f"t{copy_index}_{(missing + 1) % 5}"
            with pytest.raises(AttributeError) as info:
                obj.__replace__(**{other: 0})
            last = traceback.extract_tb(info.value.__traceback__)[-1]
            assert f"self.{name}" in last.line, last.line


def test_zerocopy_classes_holds_classes_weakly():
    # DESIGN: "metakit.zerocopy_classes()              # the live classes made by ZeroCopyFields (weakly held)"
    @dataclass
    class Temporary(ZeroCopy):
        a: int = 1

    assert Temporary in metakit.zerocopy_classes()
    name = Temporary.__qualname__
    del Temporary
    gc.collect()
    assert name not in {c.__qualname__ for c in metakit.zerocopy_classes()}


def test_threads_override_while_calling():
    # README: "Overrides behave the same however and whenever they appear" + DESIGN "Thread-safe":
    # a call made while another thread assigns or deletes an override gets either behaviour,
    # never other fields and never an error.
    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    @dataclass
    class Sub(Base):
        b: int = 2

    def ov(self, skip_fields=None):
        return super(Sub, self).asdict_zerocopy(skip_fields) | {"ov": True}

    errors = []
    stop = threading.Event()
    obj = Sub()

    def caller():
        try:
            while not stop.is_set():
                d = obj.asdict_zerocopy()
                assert d in ({"a": 1, "b": 2}, {"a": 1, "b": 2, "ov": True}), d
                assert obj.astuple_zerocopy() == (1, 2)
                assert metakit.asdict_zerocopy(obj) == {"a": 1, "b": 2}
        except BaseException as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for _ in range(300):
        Sub.asdict_zerocopy = ov
        del Sub.asdict_zerocopy
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert obj.asdict_zerocopy() == {"a": 1, "b": 2}


def test_linecache_entry_lives_and_dies_with_its_class():
    # DESIGN: "An entry goes away when its class is garbage-collected, and no cache keeps a class
    # alive." / "Identical sources share an entry."
    def make():
        return make_dataclass("BbLifetimeRecord", [("only_here_q", int, field(default=0))], bases=(ZeroCopy,))

    first, second = make(), make()
    name = first.asdict_zerocopy.__code__.co_filename
    assert name.startswith("<metakit")
    assert "BbLifetimeRecord" in name
    assert second.asdict_zerocopy.__code__.co_filename == name
    ref = weakref.ref(first)
    del first
    gc.collect()
    assert ref() is None
    assert inspect.getsource(second.asdict_zerocopy).startswith("def asdict_zerocopy")
    other = make_dataclass("BbLifetimeRecord", [("x", int, field(default=0)), ("y", int, 0)], bases=(ZeroCopy,))
    other_name = other.asdict_zerocopy.__code__.co_filename
    assert other_name != name
    assert other_name.startswith(name[:-1] + "-")
    ref2, ref3 = weakref.ref(second), weakref.ref(other)
    del second, other
    gc.collect()
    assert ref2() is None
    assert ref3() is None
    assert name not in linecache.cache
    assert other_name not in linecache.cache
    assert all(c.__name__ != "BbLifetimeRecord" for c in metakit.zerocopy_classes())


def test_tracebacks_show_generated_lines():
    # DESIGN: "Then `inspect.getsource`, tracebacks and debuggers show it."
    import traceback

    @dataclass
    class Traced(ZeroCopy):
        only: int = 0

    try:
        Traced().asdict_zerocopy(skip_fields=["nope"])
    except ValueError:
        text = traceback.format_exc()
    assert "<metakit " in text
    assert "Traced" in text
    # the generated frame shows its source line, as any frame does
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if "<metakit " in ln)
    shown = lines[at + 1].strip()
    assert shown, lines[at : at + 2]
    assert shown in metakit.generated_source(Traced), lines[at : at + 2]


def test_zerocopy_classes_is_weak_and_ordered():
    # README: "`metakit.zerocopy_classes()` The live classes made by `ZeroCopyFields`, oldest first
    # (held weakly)."
    made = [make_dataclass(f"Ordered{i}", [("v", int, 0)], bases=(ZeroCopy,)) for i in range(5)]
    live = metakit.zerocopy_classes()
    positions = [live.index(c) for c in made]
    assert positions == sorted(positions)
    refs = [weakref.ref(c) for c in made]
    del made, live, positions
    gc.collect()
    assert all(r() is None for r in refs)


def test_zerocopy_classes_in_a_package(tmp_path, monkeypatch):
    # README: "`zerocopy_classes_in` takes a module or a package ... returns the dataclasses made by
    # `ZeroCopyFields` that it defines, nested classes included, in definition order. It leaves out
    # abstract classes and classes a module only imports, and raises `LookupError` when it finds none"
    pkg = tmp_path / "bbpkg_stateful"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "alpha.py").write_text(
        textwrap.dedent(
            """
            import abc
            from dataclasses import dataclass
            from metakit import ZeroCopy, ZeroCopyFields

            class ABCZ(ZeroCopyFields, abc.ABCMeta):
                pass

            @dataclass
            class First(ZeroCopy):
                a: int = 0

            @dataclass
            class Abstract(ZeroCopy, metaclass=ABCZ):
                a: int = 0
                @abc.abstractmethod
                def f(self): ...

            class Outer:
                @dataclass
                class Inner(ZeroCopy):
                    b: int = 0

            @dataclass
            class Last(First):
                c: int = 0

            class NotADataclass(ZeroCopy):
                pass
            """
        )
    )
    (pkg / "beta.py").write_text("from bbpkg_stateful.alpha import First as Imported\n")
    (pkg / "empty.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = metakit.testing.zerocopy_classes_in("bbpkg_stateful.alpha")
    assert [c.__qualname__ for c in found] == ["First", "Outer.Inner", "Last"]
    assert [metakit.testing.class_id(c) for c in found] == ["First", "Outer.Inner", "Last"]
    whole = metakit.testing.zerocopy_classes_in("bbpkg_stateful")
    assert [c.__qualname__ for c in whole] == ["First", "Outer.Inner", "Last"]
    with pytest.raises(LookupError):
        metakit.testing.zerocopy_classes_in("bbpkg_stateful.empty")
    with pytest.raises(LookupError):
        metakit.testing.zerocopy_classes_in("bbpkg_stateful.beta")
    for cls in found:
        metakit.testing.assert_zerocopy_class(cls)
    for name in list(sys.modules):
        if name.startswith("bbpkg_stateful"):
            del sys.modules[name]


def test_checkcache_entry_vanishes_mid_iteration(monkeypatch):
    # Deterministic form of the race: a metakit entry leaves linecache while checkcache() iterates.
    fake = os.path.abspath("__metakit_fake_trigger__.py")
    linecache.cache[fake] = (1, 1.0, ["x\n"], fake)
    holder = [make_dataclass("VanishMid", [("a", int, field(default=0))], bases=(ZeroCopy,))]
    fn = holder[0].asdict_zerocopy.__code__.co_filename
    assert fn in linecache.cache
    real_stat = os.stat

    def stat(path, *a, **k):
        if path == fake:
            holder.clear()
            gc.collect()
            raise OSError("gone")
        return real_stat(path, *a, **k)

    monkeypatch.setattr(os, "stat", stat)
    try:
        linecache.checkcache()  # must not raise KeyError
    finally:
        monkeypatch.undo()
        linecache.cache.pop(fake, None)
    assert fn not in linecache.cache


def test_checkcache_single_filename_after_collect():
    C = make_dataclass("VanishOne", [("a", int, field(default=0))], bases=(ZeroCopy,))
    fn = C.asdict_zerocopy.__code__.co_filename
    del C
    gc.collect()
    linecache.checkcache(fn)
    linecache.checkcache()


def test_threads_call_same_class_methods():
    @dataclasses.dataclass
    class Shared(ZeroCopy):
        a: object = None
        b: object = None

    objs = [Shared(object(), object()) for _ in range(8)]
    errors = []

    def run(o):
        try:
            for _ in range(2000):
                d = o.asdict_zerocopy()
                assert d["a"] is o.a
                assert d["b"] is o.b
                assert o.astuple_zerocopy() == (o.a, o.b)
        except Exception as e:
            errors.append(repr(e))

    ths = [threading.Thread(target=run, args=(o,)) for o in objs]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert errors == []


_SCRIPT = r"""
import dataclasses, gc, os, sys, time
from dataclasses import make_dataclass
import metakit
from metakit import ZeroCopy
zc = sys.argv[1] == "z"
base = (ZeroCopy,) if zc else ()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def run(tag, rng):
    for n in rng:
        for r in range(2):
            specs = [(f"{tag}{r}f{j}", int, dataclasses.field(default=j)) for j in range(n)]
            C = make_dataclass(f"S{n}", specs, bases=base)
            o = C()
            metakit.asdict_zerocopy(o)
            metakit.replace(o)
            if zc:
                o.asdict_zerocopy(); o.astuple_zerocopy()
            del C, o
    gc.collect()
run("w", range(1, 10))
m0 = rss(); t0 = time.perf_counter()
run("a", range(1, 71))
m1 = rss(); t1 = time.perf_counter()
run("b", range(71, 141))
m2 = rss()
n_live = len([c for c in metakit.zerocopy_classes() if c.__name__.startswith("S")])
n_lc = len([k for k in __import__("linecache").cache if k.startswith("<metakit")])
print(m1 - m0, m2 - m1, n_live, n_lc)
"""


def test_memory_bounded_vs_plain_dataclasses():
    # 280 classes of 140 distinct field counts and 280 distinct layouts (past the 64 templates / 256 layouts that the
    # README says are kept): memory growth must track plain dataclasses', and nothing stays alive.
    procs = {k: subprocess.Popen([sys.executable, "-c", _SCRIPT, k], stdout=subprocess.PIPE, text=True) for k in "pz"}
    out = {}
    for kind, proc in procs.items():
        stdout, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        out[kind] = [int(x) for x in stdout.split()]
    p, z = out["p"], out["z"]
    mb = 1 << 20
    assert z[2] == 0, "classes stayed alive"
    assert z[3] <= 2, f"{z[3]} linecache entries stayed"
    assert z[0] <= p[0] * 1.5 + 4 * mb, (p, z)
    assert z[1] <= p[1] * 1.5 + 4 * mb, (p, z)


def test_thousands_of_distinct_classes_nothing_retained_time_linear():
    # DESIGN: "Bounded: creating classes of ever new shapes ... keeps memory bounded and time linear; no cache grows
    # without limit." and linecache entries go away with their classes.

    gc.collect()
    before_entries = {k for k in linecache.cache.copy() if k.startswith("<metakit")}
    before_classes = len(metakit.zerocopy_classes())
    times = []
    for batch in range(3):
        t0 = time.process_time()
        for i in range(300):  # 900 layouts in all, past the 256 the README says are kept
            n = i % 24 + 1
            C = make_dataclass(
                f"Many{batch}_{i}", [(f"b{batch}i{i}f{j}", int, field(default=j)) for j in range(n)], bases=(ZeroCopy,)
            )
            o = C()
            o.asdict_zerocopy()
            o.astuple_zerocopy()
            metakit.replace(o)
            del C, o
            if i % 100 == 99:
                gc.collect()
        gc.collect()
        times.append(time.process_time() - t0)
    after_entries = {k for k in linecache.cache.copy() if k.startswith("<metakit")}
    assert not [k for k in after_entries - before_entries if "Many" in k]
    assert len(metakit.zerocopy_classes()) <= before_classes
    assert times[2] < times[0] * 4 + 0.5, times


def test_deleting_override_on_base_never_gives_subclass_instances_base_fields_meanwhile():
    # DESIGN: "Thread-safe: classes can be created and methods called from many threads"; keys are "exactly the names
    # in dataclasses.fields(type(obj))"; "After del Cls.asdict_zerocopy the class gets its own generated method
    # back, never a base's." While one thread assigns and deletes an override on Q, a call on an instance of the
    # subclass R must return R's fields (from the generated code or through the override), never Q's alone.
    @dataclasses.dataclass
    class P(ZeroCopy):
        a: int = 1

    @dataclasses.dataclass
    class Q(P):
        b: int = 2

    @dataclasses.dataclass
    class R(Q):
        c: int = 3

    def ov(self, skip_fields=None):
        return {**super(Q, self).asdict_zerocopy(skip_fields), "ov": 1}

    def ovt(self):
        return (*super(Q, self).astuple_zerocopy(), "ov")

    stop = threading.Event()
    bad: list = []

    def toggler():
        while not stop.is_set():
            Q.asdict_zerocopy = ov
            Q.astuple_zerocopy = ovt
            del Q.asdict_zerocopy
            del Q.astuple_zerocopy

    def caller():
        r = R()
        while not stop.is_set():
            d = r.asdict_zerocopy()
            t = r.astuple_zerocopy()
            if list(d)[:3] != ["a", "b", "c"] or t[:3] != (1, 2, 3):
                bad.append((d, t))
                stop.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    threads = [threading.Thread(target=toggler), threading.Thread(target=caller)]
    try:
        for th in threads:
            th.start()
        stop.wait(1.5)
    finally:
        stop.set()
        for th in threads:
            th.join()
        sys.setswitchinterval(old)
    assert bad == [], f"R's instance got {bad[0]!r}"
    assert R().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}


def test_zero_copy_classes_lists_live_classes_oldest_first():
    @dataclass
    class First(ZeroCopy):
        a: int = 0

    class Second(First):
        pass

    classes = metakit.zerocopy_classes()
    assert classes.index(First) < classes.index(Second)
    assert Three in classes
    assert ZeroCopy in classes
    assert PlainPoint not in classes


def test_zero_copy_classes_drops_collected_classes():
    def make() -> weakref.ref[type]:
        @dataclass
        class Temporary(ZeroCopy):
            a: int = 0

        assert Temporary in metakit.zerocopy_classes()
        return weakref.ref(Temporary)

    ref = make()
    gc.collect()
    assert ref() is None
    assert all(cls.__name__ != "Temporary" for cls in metakit.zerocopy_classes())
