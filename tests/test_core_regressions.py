"""Regression tests for the core's edges (issue: "Core: correct at every edge"),
each named after the defect it pins down."""

from __future__ import annotations

import abc
import dataclasses
import functools
import gc
import linecache
import subprocess
import sys
import threading
import types
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, make_dataclass
from typing import Any

import pytest

import metakit
from metakit import ZeroCopy, ZeroCopyFields
from metakit._functions import is_generated, methods_of

# --- 1. metaclass composition: every __setattr__ runs, in MRO order ------------


def recording(label: str, log: list[tuple[str, str]]) -> type:
    def __setattr__(cls: type, name: str, value: Any) -> None:
        log.append((label, name))
        super(meta, cls).__setattr__(name, value)  # type: ignore[misc]

    meta = type(label, (type,), {"__setattr__": __setattr__})
    return meta


def test_own_setattr_of_a_combined_metaclass_runs_before_the_others():
    log: list[tuple[str, str]] = []
    Watch = recording("Watch", log)

    class M(ZeroCopyFields, Watch):  # type: ignore[misc, valid-type]
        def __setattr__(cls, name: str, value: Any) -> None:
            log.append(("M", name))
            super().__setattr__(name, value)

    @dataclass
    class C(metaclass=M):
        x: int

    assert C(1).asdict_zerocopy() == {"x": 1}  # type: ignore[attr-defined]
    fields_set = [label for label, name in log if name == "__dataclass_fields__"]
    assert fields_set == ["M", "Watch"]
    C.later = 1  # type: ignore[attr-defined]
    assert [label for label, name in log if name == "later"] == ["M", "Watch"]


def test_setattr_of_a_metaclass_before_zero_copy_fields_in_the_mro_runs():
    log: list[tuple[str, str]] = []
    A, B = recording("A", log), recording("B", log)

    class M(A, ZeroCopyFields, B):  # type: ignore[misc, valid-type]
        pass

    @dataclass
    class C(metaclass=M):
        x: int

    assert [label for label, name in log if name == "__dataclass_fields__"] == ["A", "B"]
    assert C(1).asdict_zerocopy() == {"x": 1}  # type: ignore[attr-defined]


@pytest.mark.parametrize("order", ["metakit first", "abc first"])
def test_combination_with_abc_meta_in_either_order_still_sees_fields(order):
    bases = (ZeroCopyFields, abc.ABCMeta) if order == "metakit first" else (abc.ABCMeta, ZeroCopyFields)
    Meta = type("Meta", bases, {})

    @dataclass
    class C(metaclass=Meta):
        x: int

    assert C(1).asdict_zerocopy() == {"x": 1}  # type: ignore[attr-defined]
    assert metakit.replace(C(1), x=2).x == 2


def test_delattr_of_every_metaclass_in_a_combination_runs():
    log: list[str] = []

    class Watch(type):
        def __delattr__(cls, name: str) -> None:
            log.append(name)
            super().__delattr__(name)

    class M(ZeroCopyFields, Watch):
        pass

    @dataclass
    class C(metaclass=M):
        x: int

        def asdict_zerocopy(self, skip_fields: Any = None) -> Any:
            return {}

    del C.asdict_zerocopy
    assert log == ["asdict_zerocopy"]
    assert C(1).asdict_zerocopy() == {"x": 1}  # type: ignore[attr-defined]


# --- 2 and 3. overrides that appear late, and super() inside them --------------


@dataclass
class Base(ZeroCopy):
    a: int


def make_sub() -> type:
    @dataclass
    class Sub(Base):
        b: int

    return Sub


def test_override_assigned_after_class_creation_reaches_the_instances_fields_through_super():
    Sub = make_sub()

    def override(self: Any, skip_fields: Any = None) -> dict[str, Any]:
        return {**super(Sub, self).asdict_zerocopy(skip_fields), "extra": 0}

    Sub.asdict_zerocopy = override  # type: ignore[attr-defined]
    assert Sub(1, 2).asdict_zerocopy() == {"a": 1, "b": 2, "extra": 0}
    assert Base(1).asdict_zerocopy() == {"a": 1}


def test_del_of_a_late_override_gives_the_class_its_own_generated_method_back():
    Sub = make_sub()
    Sub.asdict_zerocopy = lambda self, skip_fields=None: {}  # type: ignore[attr-defined]
    del Sub.asdict_zerocopy
    assert Sub(1, 2).asdict_zerocopy() == {"a": 1, "b": 2}
    assert Sub.asdict_zerocopy is methods_of(Sub).asdict  # its own, never the base's


def test_del_of_a_generated_method_gives_it_back_at_once():
    Sub = make_sub()
    del Sub.astuple_zerocopy
    assert Sub(1, 2).astuple_zerocopy() == (1, 2)
    assert Sub.astuple_zerocopy is methods_of(Sub).astuple


def test_base_method_patched_after_a_subclass_exists_is_inherited_like_one_in_the_body():
    @dataclass
    class Root(ZeroCopy):
        a: int

    @dataclass
    class Leaf(Root):
        b: int

    def patched(self: Any, skip_fields: Any = None) -> dict[str, Any]:
        return {"patched": True, **ZeroCopy.asdict_zerocopy(self, skip_fields)}

    Root.asdict_zerocopy = patched  # type: ignore[method-assign]
    assert Leaf(1, 2).asdict_zerocopy() == {"patched": True, "a": 1, "b": 2}
    assert Root(1).asdict_zerocopy() == {"patched": True, "a": 1}
    del Root.asdict_zerocopy
    assert Leaf(1, 2).asdict_zerocopy() == {"a": 1, "b": 2}
    assert Root(1).asdict_zerocopy() == {"a": 1}


def test_super_astuple_inside_an_asdict_override_serves_the_instances_class():
    @dataclass
    class Mid(Base):
        b: int

        def asdict_zerocopy(self, skip_fields: Any = None) -> Any:
            return {"tuple": super().astuple_zerocopy(), "dict": super().asdict_zerocopy(skip_fields)}

    @dataclass
    class Bottom(Mid):
        c: int

    assert Mid(1, 2).asdict_zerocopy() == {"tuple": (1, 2), "dict": {"a": 1, "b": 2}}
    assert Bottom(1, 2, 3).asdict_zerocopy() == {"tuple": (1, 2, 3), "dict": {"a": 1, "b": 2, "c": 3}}


def test_super_replace_inside_a_replace_override_serves_the_instances_class():
    @dataclass
    class WithReplace(Base):
        b: int
        calls: int = 0

        def __replace__(self, /, **changes: Any) -> Any:
            return super().__replace__(calls=self.calls + 1, **changes)

    replaced = metakit.replace(WithReplace(1, 2), b=3)
    assert replaced == WithReplace(1, 3, 0)  # the function form runs the generated code
    if sys.version_info >= (3, 13):
        import copy

        assert copy.replace(WithReplace(1, 2), b=3) == WithReplace(1, 3, 1)


# --- 4. an override above an undecorated class that holds a generated function --


def test_override_above_an_undecorated_class_holding_a_generated_function_does_not_crash():
    @dataclass
    class A(ZeroCopy):
        x: int

    generated_for_a = A.asdict_zerocopy

    class B(A):
        asdict_zerocopy = generated_for_a

    @dataclass
    class C(B):
        y: int

        def asdict_zerocopy(self, skip_fields: Any = None) -> Any:
            return super().asdict_zerocopy(skip_fields)

    # B's method is the user's (issue 24: a method written in a class body is
    # never replaced, whatever it is): C's super() reaches it, and it runs as
    # written, A's generated code, which returns A's fields.
    assert B.__dict__["asdict_zerocopy"] is generated_for_a
    assert C(1, 2).asdict_zerocopy() == {"x": 1}
    assert B(1).asdict_zerocopy() == {"x": 1}


def test_override_above_a_plain_mixin_holding_a_generated_function_serves_the_instance():
    @dataclass
    class A(ZeroCopy):
        x: int

    class Mixin:
        asdict_zerocopy = A.asdict_zerocopy

    @dataclass
    class C(A):
        y: int

        def asdict_zerocopy(self, skip_fields: Any = None) -> Any:
            return super().asdict_zerocopy(skip_fields)

    @dataclass
    class D(C, Mixin):
        z: int

    assert D(1, 2, 3).asdict_zerocopy() == {"x": 1, "y": 2, "z": 3}


# --- 5. linecache.checkcache in another thread while classes are collected ----


def test_linecache_checkcache_never_raises_while_classes_are_collected_in_another_thread():
    errors: list[BaseException] = []
    stop = threading.Event()

    def check() -> None:
        try:
            while not stop.is_set():
                linecache.checkcache()
        except BaseException as error:  # reported below
            errors.append(error)

    checker = threading.Thread(target=check)
    checker.start()
    try:
        for round_ in range(300):
            classes = [make_dataclass(f"Gone{round_}_{i}", [f"f{i}"], bases=(ZeroCopy,)) for i in range(5)]
            del classes
            gc.collect()
    finally:
        stop.set()
        checker.join(30)
    assert not errors


def test_linecache_checkcache_never_raises_when_a_collection_runs_inside_it():
    # The collection runs in checkcache's own thread, in the middle of its loop.
    for _ in range(50):
        classes = [make_dataclass(f"Cycle{i}", [f"f{i}"], bases=(ZeroCopy,)) for i in range(20)]
        del classes
        gc.set_threshold(1)
        try:
            linecache.checkcache()
        finally:
            gc.set_threshold(700)
            gc.collect()


# --- 6. bounded caches, linear time -----------------------------------------


MEMORY_PROGRAM = """
import gc, tracemalloc
from dataclasses import make_dataclass
from metakit import ZeroCopy

def make_all(batch):
    for count in range(200):
        names = [f"{batch}_{i}" for i in range(count % 50)]
        make_dataclass(f"Shape{count}", names, bases=(ZeroCopy,), slots=count % 2 == 0)
        make_dataclass(f"Shape{count}", [f"{n}_again" for n in names], bases=(ZeroCopy,))  # a template's
    gc.collect()

make_all("untraced")
tracemalloc.start()  # what later batches free is traced too
make_all("first")  # 400 new layouts: every cache now holds only traced entries
before = tracemalloc.get_traced_memory()[0]
make_all("fourth")
print(tracemalloc.get_traced_memory()[0] - before)
"""


def test_classes_of_ever_new_shapes_keep_memory_bounded():
    # Regression: one template per field count was kept forever (600 counts
    # took 562 MB).  Every batch makes 400 classes of shapes never seen
    # before; once the caches are full, a batch leaves next to nothing behind
    # (dead weak references wait for their pruning: a few hundred KB).  In a
    # fresh interpreter, so that no other test's classes count.
    run = subprocess.run([sys.executable, "-c", MEMORY_PROGRAM], capture_output=True, text=True, check=True)
    assert int(run.stdout) < 1_000_000, run.stdout


# --- 8. each class has its own function objects -------------------------------


def test_function_objects_are_not_shared_between_class_incarnations():
    def make() -> type:
        @dataclass
        class Again(ZeroCopy):
            x: int

        return Again

    first = make()
    first.asdict_zerocopy.marker = True  # type: ignore[attr-defined]
    del first
    gc.collect()
    second = make()
    assert not hasattr(second.asdict_zerocopy, "marker")
    third = make()
    assert third.asdict_zerocopy is not second.asdict_zerocopy
    assert third.asdict_zerocopy.__code__ is second.asdict_zerocopy.__code__  # the code is shared


# --- 9. slots=True on a nested class ------------------------------------------


def test_slots_on_a_nested_class_names_its_functions_and_file_by_its_qualified_name():
    class Outer:
        @dataclass(slots=True)
        class Inner(ZeroCopy):
            x: int

    qualname = Outer.Inner.__qualname__
    assert qualname.endswith("Outer.Inner")
    for method in (Outer.Inner.asdict_zerocopy, Outer.Inner.astuple_zerocopy, Outer.Inner.__replace__):
        assert method.__qualname__ == f"{qualname}.{method.__name__}"
        assert method.__code__.co_filename == f"<metakit {__name__}.{qualname}>"


def test_zerocopy_classes_leaves_out_the_class_that_slots_discarded():
    @dataclass(slots=True)
    class Slotted(ZeroCopy):
        x: int

    listed = [cls for cls in metakit.zerocopy_classes() if cls.__qualname__ == Slotted.__qualname__]
    assert listed == [Slotted]


def test_two_local_classes_of_one_qualified_name_with_other_fields_get_two_files():
    def outer(fields: list[str]) -> type:
        class Outer:
            Inner = dataclass(slots=True)(type("Inner", (ZeroCopy,), {"__annotations__": dict.fromkeys(fields, int)}))

        return Outer.Inner

    first, second = outer(["a"]), outer(["b"])
    assert first.asdict_zerocopy.__code__.co_filename != second.asdict_zerocopy.__code__.co_filename


# --- 10. internal state never collides with a field ----------------------------


@pytest.mark.parametrize("name", ["__metakit__", "STATE", "_metakit", "metakit"])
def test_a_field_with_a_name_like_metakits_state_works_with_the_function_forms(name):
    Plain = make_dataclass("Plain", [(name, int, field(default=5))])
    obj = Plain()
    assert metakit.asdict_zerocopy(obj) == {name: 5}
    assert metakit.astuple_zerocopy(obj) == (5,)
    assert metakit.replace(obj, **{name: 6}) == Plain(6)
    Ours = make_dataclass("Ours", [(name, int, field(default=5))], bases=(ZeroCopy,))
    assert Ours().asdict_zerocopy() == {name: 5}
    assert metakit.asdict_zerocopy(Ours()) == {name: 5}


# --- 11. bad skip_fields -------------------------------------------------------


@dataclass
class Two(ZeroCopy):
    a: int = 1
    b: int = 2


@pytest.mark.parametrize(
    ("skip", "message"),
    [
        (5, r"skip_fields must be an iterable of field names, not int 5"),
        (True, r"skip_fields must be an iterable of field names, not bool True"),
        ([["a"]], r"skip_fields must hold field names \(str\), not list \['a'\]"),
        ([1], r"skip_fields must hold field names \(str\), not int 1"),
        (b"a", r"skip_fields must be an iterable of field names, not the bytes b'a'"),
        (bytearray(b"a"), r"skip_fields must hold field names \(str\), not int 97"),
        ("ab", r"not the str 'ab'; write skip_fields=\{'ab'\}"),
        ({"a": 1}.items(), r"skip_fields must hold field names \(str\), not tuple \('a', 1\)"),
    ],
    ids=["int", "bool", "list item", "int item", "bytes", "bytearray", "str", "items view"],
)
def test_bad_skip_fields_get_a_type_error_that_names_skip_fields(skip, message):
    for call in (Two().asdict_zerocopy, lambda s: metakit.asdict_zerocopy(Two(), s)):
        with pytest.raises(TypeError, match=message):
            call(skip)


def test_an_iterable_that_raises_type_error_itself_keeps_its_own_error():
    def names() -> Any:
        yield "a"
        raise TypeError("the iterable's own problem")

    with pytest.raises(TypeError, match="the iterable's own problem"):
        Two().asdict_zerocopy(names())


def test_good_skip_fields_of_every_kind_still_work():
    for skip in ({"a"}, frozenset({"a"}), ("a",), ["a"], {"a": 0}.keys(), iter(["a"]), (n for n in ["a"])):
        assert Two().asdict_zerocopy(skip) == {"b": 2}


# --- 12. what generated_source says for what is not a dataclass -----------------


def test_generated_source_of_a_non_dataclass_value_says_what_it_is():
    with pytest.raises(TypeError, match=r"got 3, an instance of int, which is not a dataclass"):
        metakit.generated_source(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got an instance of Two; pass its class, Two"):
        metakit.generated_source(Two())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"dict is not a dataclass"):
        metakit.generated_source(dict)


# --- 13. names with zero-width joiners ----------------------------------------


@pytest.mark.parametrize("name", ["a\u200cb", "x\u200d", "\u0915\u094d\u200d\u0937"])
def test_names_with_zero_width_joiners_run_the_code_of_the_source_shown(name):
    from metakit._source import writable_name

    if not name.isidentifier():  # before Unicode 15.1 (3.13): refused as any non-identifier is
        assert not writable_name(name)
        return
    from tests.test_codegen import assert_installed_code_is_its_compiled_source, made_twice

    cls = made_twice([name, "plain"], "Joiner")
    assert_installed_code_is_its_compiled_source(cls)
    assert cls(1, 2).asdict_zerocopy() == {name: 1, "plain": 2}


# --- a user's value under a method name is only ever compared by identity -----


class _Hostile:
    """A callable class attribute that refuses to be compared."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("metakit compared a user's value with ==")

    __hash__ = object.__hash__

    def __call__(self, *args: object) -> str:
        return "the user's"


def test_a_users_value_that_refuses_comparison_is_inherited_untouched():
    class Base(ZeroCopy):
        asdict_zerocopy = _Hostile()

    @dataclass
    class Record(Base):
        x: int

    assert "asdict_zerocopy" not in Record.__dict__  # rule 1: the inherited user's value stays in front
    assert Record(1).asdict_zerocopy() == "the user's"
    assert Record(1).astuple_zerocopy() == (1,)
    assert metakit.asdict_zerocopy(Record(1)) == {"x": 1}


# --- a plain dataclass decorated again is seen by the function forms ------------


def test_function_forms_on_an_undecorated_subclass_follow_it_when_it_becomes_a_dataclass():
    @dataclass
    class Plain:
        a: int = 1

    class Sub(Plain):
        b: int = 2  # annotated, but not a field until the decorator runs

    before = Sub()
    assert metakit.asdict_zerocopy(before) == {"a": 1}
    assert metakit.astuple_zerocopy(before) == (1,)
    assert "'b'" not in metakit.generated_source(Sub)

    dataclass(Sub)  # decorates the class in place: new fields, no new class

    after = Sub(5, 6)
    assert metakit.asdict_zerocopy(after) == {"a": 5, "b": 6}
    assert metakit.astuple_zerocopy(after) == (5, 6)
    assert metakit.replace(after, b=7) == Sub(5, 7)
    assert "'b'" in metakit.generated_source(Sub)
    metakit.testing.assert_zerocopy(after)


def test_function_forms_of_a_plain_dataclass_are_made_once_while_it_stays_the_same():
    @dataclass
    class Plain:
        a: int

    metakit.asdict_zerocopy(Plain(1))
    assert methods_of(Plain) is methods_of(Plain)  # one look at its fields per call, no new code


# --- a one-shot skip_fields that yields an unhashable name ------------------------


def _yields(*items: object) -> Any:
    yield from items


@pytest.mark.parametrize(
    "make",
    [lambda: iter([["a"]]), lambda: _yields("a", ["b"]), lambda: map(list, ["a"])],
    ids=["iterator", "generator", "map"],
)
@pytest.mark.parametrize("form", ["method", "function"])
def test_a_one_shot_skip_fields_with_an_unhashable_name_gets_an_error_naming_skip_fields(make, form):
    @dataclass
    class Record(ZeroCopy):
        a: int
        b: int

    record = Record(1, 2)
    call = record.asdict_zerocopy if form == "method" else functools.partial(metakit.asdict_zerocopy, record)
    with pytest.raises(metakit.SkipFieldsError, match=r"^skip_fields must hold field names \(str\), not list \["):
        call(make())


# --- a class made from inside another class's code generation, in one thread -------

_MADE_INSIDE = r"""
import gc, inspect, linecache
from dataclasses import make_dataclass
from metakit import ZeroCopy, generated_source

made, busy = [], [False]

def make_inner(phase, info):
    # As a finalizer that a collection runs, or a signal handler, would: at
    # any moment of another class's creation, in the same thread.
    if phase == "start" and not busy[0] and len(made) < 200:
        busy[0] = True
        try:
            made.append(make_dataclass("Inner", [f"q{len(made) % 3}"], bases=(ZeroCopy,)))
        finally:
            busy[0] = False

gc.callbacks.append(make_inner)
gc.set_threshold(1)  # a collection at nearly every allocation
outer = [make_dataclass("Outer", [f"a{i % 4}", "b"], bases=(ZeroCopy,)) for i in range(100)]
gc.callbacks.remove(make_inner)
gc.set_threshold(700)
assert len(made) > 100, len(made)
for cls in outer + made:
    names = [f.name for f in cls.__dataclass_fields__.values()]
    assert cls(*names).asdict_zerocopy() == dict(zip(names, names))
    filename = cls.asdict_zerocopy.__code__.co_filename
    assert "".join(linecache.getlines(filename)) == generated_source(cls)
    assert inspect.getsource(cls.asdict_zerocopy).startswith("def asdict_zerocopy(self, skip_fields=None):")
print(len({cls.asdict_zerocopy.__code__.co_filename for cls in outer + made}))
"""


def test_classes_made_while_this_thread_generates_another_classes_code_get_their_own_source():
    # A finalizer that the garbage collector runs inside metakit's lock, and
    # that makes a class, once waited for that lock for ever; and such a
    # class could take the file name that the class being made had chosen.
    result = subprocess.run(
        [sys.executable, "-c", _MADE_INSIDE], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) <= 7  # the classes of one name and fields share one file


# --- metaclasses derived from ZeroCopyFields are collected ---------------------------


class _Watch(type):
    def __setattr__(cls, name: str, value: object) -> None:
        super().__setattr__(name, value)

    def __delattr__(cls, name: str) -> None:
        super().__delattr__(name)


@pytest.mark.parametrize(
    "bases",
    [(ZeroCopyFields,), (ZeroCopyFields, abc.ABCMeta), (abc.ABCMeta, ZeroCopyFields), (ZeroCopyFields, _Watch)],
    ids=["alone", "then ABCMeta", "after ABCMeta", "then a __setattr__"],
)
def test_a_metaclass_derived_from_zero_copy_fields_is_collected_with_its_classes(bases):
    def make() -> weakref.ref[type]:
        meta = type("Meta", bases, {})

        @dataclass
        class Record(metaclass=meta):
            x: int = 1

        Record.asdict_zerocopy = lambda self, skip_fields=None: {}
        del Record.asdict_zerocopy  # both hooks ran
        assert Record().asdict_zerocopy() == {"x": 1}
        assert metakit.replace(Record(), x=2).x == 2
        return weakref.ref(meta)

    meta = make()
    gc.collect()
    assert meta() is None


# --- a late override and a subclass made in another thread, at once -----------------


def test_an_override_assigned_while_another_thread_places_a_subclasss_methods_reaches_it(monkeypatch):
    @dataclass
    class Mid(ZeroCopy):
        a: int = 1

    class Reaching(Mid):  # makes Mid's methods ZeroCopy's (rule 2), so that Sub takes the one-step path
        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy(skip_fields)

    deciding, assigned = threading.Event(), threading.Event()
    real = metakit._meta.generate

    def generate(module: str, qualname: str, layout: Any) -> Any:
        if qualname.endswith("Sub"):  # deciding Sub's methods: let the other thread in
            deciding.set()
            assigned.wait(timeout=1)  # it cannot, while this thread holds the lock
        return real(module, qualname, layout)

    monkeypatch.setattr(metakit._meta, "generate", generate)

    def assign() -> None:
        deciding.wait(timeout=10)
        Mid.asdict_zerocopy = lambda self, skip_fields=None: {"the user's": True}
        assigned.set()

    other = threading.Thread(target=assign)
    other.start()

    @dataclass
    class Sub(Mid):
        b: int = 2

    other.join()
    assert "asdict_zerocopy" not in Sub.__dict__  # rule 1: it inherits the user's method
    assert Sub().asdict_zerocopy() == {"the user's": True}
    assert metakit.asdict_zerocopy(Sub()) == {"a": 1, "b": 2}


# --- 3.13's generic __replace__, replaced in one step on a new leaf dataclass ---------


def _generated_replace(cls: type) -> object:
    return methods_of(cls).replace


def test_a_new_dataclass_holds_its_generated_replace():
    @dataclass
    class Leaf(ZeroCopy):
        a: int
        b: int = 2

    assert Leaf.__dict__["__replace__"] is _generated_replace(Leaf)
    assert metakit.replace(Leaf(1), b=5) == Leaf(1, 5)


def test_a_class_decorated_after_it_has_a_subclass_gets_the_rules_for_its_family():
    # Not a leaf when dataclasses gives it __replace__: the one-step path is
    # not taken, and rule 2 holds for the subclass's override.
    class Late(ZeroCopy):
        a: int

    class Below(Late):
        def __replace__(self, /, **changes: Any) -> Any:
            return ("below's own", super().__replace__(**changes))

    dataclass(Late)
    # Below's override reaches Late's method through super(): it serves the instance's own class.
    assert Late.__dict__["__replace__"] is ZeroCopy.__dict__["__replace__"]
    assert Late(1).__replace__(a=3) == Late(3)
    assert metakit.replace(Late(1), a=3) == Late(3)
    own, made = Below(1).__replace__(a=2)
    assert own == "below's own"
    assert type(made) is Below
    assert made.a == 2
    assert metakit.replace(Below(1), a=2).a == 2  # the function form never calls an override


def test_a_replace_written_in_the_class_body_is_kept():
    @dataclass
    class Own(ZeroCopy):
        a: int

        def __replace__(self, /, **changes: Any) -> Any:
            return "own"

    assert Own(1).__replace__() == "own"
    assert metakit.replace(Own(1), a=2) == Own(2)


def test_the_generic_replace_of_dataclasses_is_replaced_whenever_it_is_assigned():
    import copy
    import dataclasses

    @dataclass(frozen=True)
    class Frozen(ZeroCopy):
        a: int
        b: int = 0

    assert Frozen(1).__replace__(b=4) == Frozen(1, 4)
    generic = getattr(dataclasses, "_replace", None)
    if generic is not None:  # 3.13 on: what dataclasses gives every dataclass, and copy.replace calls
        assert copy.replace(Frozen(1), b=4) == Frozen(1, 4)
        Frozen.__replace__ = generic  # type: ignore[method-assign]
        assert Frozen.__dict__["__replace__"] is _generated_replace(Frozen)
        assert copy.replace(Frozen(1), a=7) == Frozen(7, 0)


# --- a user's method on ZeroCopy itself ------------------------------------------------


@pytest.mark.parametrize("name", ["asdict_zerocopy", "astuple_zerocopy", "__replace__"])
def test_a_users_method_on_zerocopy_itself_is_inherited_until_it_goes(name):
    # The usual class (whose only base is ZeroCopy) is placed from what
    # metakit noted of ZeroCopy's methods: a user's there must be seen.
    dispatcher = ZeroCopy.__dict__[name]

    def users(self: Any, *args: Any, **kwargs: Any) -> str:
        return "the user's"

    setattr(ZeroCopy, name, users)
    try:

        @dataclass
        class Made(ZeroCopy):
            a: int

        if name == "__replace__" and sys.version_info >= (3, 13):
            # dataclasses gives every dataclass a __replace__ of its own: so does metakit (rule 1).
            assert is_generated(Made.__dict__[name])
            assert Made(1).__replace__(a=2) == Made(2)
        else:
            assert name not in Made.__dict__
            assert getattr(Made(1), name)() == "the user's"
        if name != "asdict_zerocopy":
            assert Made(1).asdict_zerocopy() == {"a": 1}  # the other names: generated
        delattr(ZeroCopy, name)

        @dataclass
        class Bare(ZeroCopy):
            a: int

        assert is_generated(Bare.__dict__[name])  # nothing above: its own generated method
    finally:
        setattr(ZeroCopy, name, dispatcher)

    @dataclass
    class After(ZeroCopy):
        a: int

    assert is_generated(After.__dict__[name])
    assert After(1).asdict_zerocopy() == {"a": 1}
    assert After(1).astuple_zerocopy() == (1,)
    assert After(1).__replace__(a=2) == After(2)
    assert Made(1).asdict_zerocopy() == {"a": 1}  # ZeroCopy's method back: Made's own came back too (rule 3)


# --- issue 24: exactly @dataclass's behaviour, on 3.10 to 3.15 -----------------


class OnlyGetitem:
    """Field metadata as CPython's test_field_metadata_custom_mapping writes it: no ``get``."""

    def __init__(self, **entries: object) -> None:
        self.__dict__.update(entries)

    def __getitem__(self, key: str) -> object:
        return getattr(self, key)  # an AttributeError, not a KeyError, for a key it lacks

    def __len__(self) -> int:
        return len(self.__dict__)


@pytest.mark.parametrize("base", [(), (ZeroCopy,)], ids=["plain", "ZeroCopy"])
def test_field_metadata_with_only_getitem_is_accepted(base):
    C = make_dataclass("C", [("x", int, field(metadata=OnlyGetitem(doc="x")))], bases=base)
    c = C(1)
    assert metakit.asdict_zerocopy(c) == {"x": 1}
    assert metakit.astuple_zerocopy(c) == (1,)
    assert metakit.replace(c, x=2) == C(2)
    assert dataclasses.fields(C)[0].metadata["doc"] == "x"


class RaisingMapping(Mapping[str, object]):
    """A Mapping whose ``__getitem__`` raises a ``ValueError`` for a key it lacks."""

    def __getitem__(self, key: str) -> object:
        if key == "doc":
            return "d"
        raise ValueError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(["doc"])

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize("base", [(), (ZeroCopy,)], ids=["plain", "ZeroCopy"])
def test_a_metadata_mapping_that_raises_other_than_keyerror_is_accepted(base):
    C = make_dataclass("C", [("x", int, field(metadata=RaisingMapping())), "y"], bases=base)
    assert metakit.asdict_zerocopy(C(1, 2)) == {"x": 1, "y": 2}
    assert metakit.testing.assert_zerocopy(C(1, 2)) is None


def test_a_dataclass_subclassing_genericalias_is_refused_by_the_function_forms_as_dataclasses_refuses_it():
    @dataclass
    class Alias(types.GenericAlias):
        origin: type
        args: type

    alias = Alias(list, int)
    with pytest.raises(TypeError, match="must be called with a dataclass type or instance"):
        dataclasses.asdict(alias)
    with pytest.raises(TypeError, match=r"asdict_zerocopy\(\) takes a dataclass instance"):
        metakit.asdict_zerocopy(alias)
    with pytest.raises(TypeError, match=r"astuple_zerocopy\(\) takes a dataclass instance"):
        metakit.astuple_zerocopy(alias)
    with pytest.raises(Exception) as theirs:  # noqa: PT011  # what this Python's dataclasses.replace raises
        dataclasses.replace(alias)
    with pytest.raises(theirs.type) as ours:
        metakit.replace(alias)
    assert str(ours.value) == str(theirs.value)


def test_a_generated_method_written_in_a_subclass_body_is_the_users_and_kept():
    @dataclass
    class Base(ZeroCopy):
        x: int

    generated_for_base = Base.asdict_zerocopy

    @dataclass
    class Sub(Base):
        y: int
        asdict_zerocopy = generated_for_base  # type: ignore[assignment]

    assert Sub.__dict__["asdict_zerocopy"] is generated_for_base
    assert Sub(1, 2).asdict_zerocopy() == {"x": 1}  # the user's choice, run as written
    assert Sub(1, 2).astuple_zerocopy() == (1, 2)  # the other names: Sub's own generated methods
    assert metakit.asdict_zerocopy(Sub(1, 2)) == {"x": 1, "y": 2}  # the function form: always the fields


def test_a_generated_method_assigned_to_another_class_is_the_users_and_kept():
    @dataclass
    class Base(ZeroCopy):
        x: int

    @dataclass
    class Sub(Base):
        y: int

    generated_for_base = vars(Base)["astuple_zerocopy"]
    Sub.astuple_zerocopy = generated_for_base  # type: ignore[method-assign]
    assert Sub.__dict__["astuple_zerocopy"] is generated_for_base
    assert Sub(1, 2).astuple_zerocopy() == (1,)
    del Sub.astuple_zerocopy
    assert Sub(1, 2).astuple_zerocopy() == (1, 2)  # its own generated method back (rule 3)


def test_copy_replace_runs_the_generated_replace():
    import copy

    @dataclass(frozen=True)
    class Point(ZeroCopy):
        x: int
        y: int

    generated = Point.__dict__["__replace__"]
    assert is_generated(generated)
    replace = getattr(copy, "replace", lambda obj, /, **changes: type(obj).__replace__(obj, **changes))  # 3.13+
    ran = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is generated.__code__:
            ran.append(frame.f_code)

    sys.setprofile(profile)
    try:
        assert replace(Point(1, 2), y=3) == Point(1, 3)
    finally:
        sys.setprofile(None)
    assert ran == [generated.__code__]


_DEFERRED_SOURCE = """
from dataclasses import dataclass, field
from metakit import OMIT, ZeroCopy

@dataclass
class Deferred(ZeroCopy):
    first: counted() = 0
    defined_later: Later = None
    omitted: counted() = field(default=None, metadata=OMIT)

class Later:
    pass
"""


def test_no_entry_point_evaluates_a_classs_annotations():
    # DESIGN: classes never have their annotations evaluated.  The source has
    # no ``from __future__ import annotations``: before 3.14 the class body
    # evaluates ``counted()`` itself and ``Later`` must be defined before it;
    # from 3.14 on (PEP 649/749) only dataclasses reads the annotations, once,
    # the way it reads them, and metakit never reads them again.
    evaluations = []
    namespace: dict[str, Any] = {"__name__": __name__, "counted": lambda: evaluations.append(1) or int}
    source = _DEFERRED_SOURCE
    if sys.version_info < (3, 14):
        source = source.replace("defined_later: Later", "defined_later: object")
    exec(compile(source, "<deferred>", "exec", dont_inherit=True), namespace)
    Deferred = namespace["Deferred"]
    after_creation = len(evaluations)
    assert after_creation >= 1  # the annotations were read by someone: the counter works
    obj = Deferred()
    assert obj.asdict_zerocopy() == {"first": 0, "defined_later": None}
    assert metakit.asdict_zerocopy(obj) == {"first": 0, "defined_later": None}
    assert obj.astuple_zerocopy() == (0, None)
    assert metakit.replace(obj, first=1).first == 1
    assert "'first': self.first," in metakit.generated_source(Deferred)
    metakit.testing.assert_zerocopy(obj)
    metakit.testing.assert_zerocopy_class(Deferred)
    assert len(evaluations) == after_creation
