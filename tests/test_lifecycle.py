"""Classes come and go: nothing metakit keeps holds a class alive, their
``linecache`` entries go with them, and many threads may create and use them."""

import gc
import inspect
import linecache
import sys
import threading
import traceback
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any

import pytest

import metakit
from metakit import OMIT, ZeroCopy

NAMES = [f"Meta{i}" for i in range(20)]
FIELD_LISTS = [
    (),
    ("a",),
    ("a", "b"),
    ("b", "a"),
    ("a", "b", "c", "d", "e", "f", "g"),
    tuple(f"x{i}" for i in range(20)),
]


def make_class(i: int) -> type:
    """The *i*-th class of a varied family: names and fields repeat, ways of making them vary."""
    name = NAMES[i % len(NAMES)]
    names = FIELD_LISTS[i % len(FIELD_LISTS)]
    kind = i % 5
    if kind == 0:
        return make_dataclass(name, names, bases=(ZeroCopy,))
    if kind == 1:
        return make_dataclass(name, names, bases=(ZeroCopy,), slots=True, frozen=True)
    if kind == 2:  # an undecorated subclass
        return type(name, (make_dataclass(name, names, bases=(ZeroCopy,)),), {})
    if kind == 3:  # an override calling super() puts dispatchers on its bases
        base = make_dataclass(name, names[:1], bases=(ZeroCopy,))

        def asdict_zerocopy(self: Any, skip_fields: Any = None) -> Any:
            return super(cls, self).asdict_zerocopy(skip_fields)

        cls = make_dataclass(name, names[1:], bases=(base,), namespace={"asdict_zerocopy": asdict_zerocopy})
        return cls
    return make_dataclass(name, names)  # plain: the function forms serve it


def check(cls: type) -> None:
    obj = cls(*(object() for _ in fields(cls)))
    expected = {f.name: getattr(obj, f.name) for f in fields(obj)}
    got = metakit.asdict_zerocopy(obj)
    assert list(got) == list(expected)
    assert all(got[name] is value for name, value in expected.items())
    assert metakit.astuple_zerocopy(obj) == tuple(expected.values())
    if isinstance(cls, metakit.ZeroCopyFields):
        assert obj.asdict_zerocopy() == expected
        assert obj.astuple_zerocopy() == tuple(expected.values())
        assert metakit.generated_source(cls)


def metakit_entries() -> set[str]:
    return {name for name in linecache.cache.copy() if name.startswith("<metakit")}


def test_thousands_of_dropped_classes_are_collected_with_their_linecache_entries():
    gc.collect()
    cache_before = set(linecache.cache.copy())
    live_before = len(metakit.zerocopy_classes())

    classes = [make_class(i) for i in range(3000)]
    for i in range(100):
        check(classes[i])
    refs = [weakref.ref(cls) for cls in classes]
    assert len(metakit_entries() - cache_before) > len(NAMES)
    assert len(metakit.zerocopy_classes()) > live_before + 2000

    del classes
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []
    assert set(linecache.cache.copy()) == cache_before
    assert len(linecache.cache) == len(cache_before)
    assert len(metakit.zerocopy_classes()) == live_before


def test_classes_made_and_dropped_one_at_a_time_leave_linecache_as_it_was():
    gc.collect()
    cache_before = set(linecache.cache.copy())
    refs = []
    for i in range(500):
        cls = make_class(i)
        check(cls)
        refs.append(weakref.ref(cls))
        del cls
    gc.collect()
    assert all(ref() is None for ref in refs)
    assert set(linecache.cache.copy()) == cache_before


def test_memory_stays_flat_while_classes_of_new_names_come_and_go():
    # Nothing kept for a class outlives it: after thousands of classes of new
    # names, each collected, as many blocks are allocated as after the first
    # few hundred.  (Their fields come from a few names: from 3.12 on, every
    # new field name is interned for good, with or without metakit.)
    def churn(start: int, stop: int) -> int:
        for i in range(start, stop):
            cls = make_dataclass(f"Passing{i}", [f"passing_{j}" for j in range(i % 7)], bases=(ZeroCopy,))
            assert cls(*range(i % 7)).asdict_zerocopy() == {f"passing_{j}": j for j in range(i % 7)}
            del cls
            gc.collect(0)
        gc.collect()
        return sys.getallocatedblocks()

    cache_before = set(linecache.cache.copy())
    churn(0, 600)  # the caches fill
    warm = churn(600, 1200)
    assert churn(1200, 4200) - warm < 1000  # a leak of one object per class would show as 3000
    assert set(linecache.cache.copy()) == cache_before


def test_linecache_entry_outlives_one_class_while_another_shares_it():
    def define() -> type:
        @dataclass
        class Shared(ZeroCopy):
            a: int = 0

        return Shared

    first, second = define(), define()
    filename = first.asdict_zerocopy.__code__.co_filename
    assert second.asdict_zerocopy.__code__.co_filename == filename
    del first
    gc.collect()
    assert filename in linecache.cache
    assert second().asdict_zerocopy() == {"a": 0}
    del second
    gc.collect()
    assert filename not in linecache.cache


def test_live_classes_of_one_name_with_different_fields_each_get_a_file_of_their_own():
    # A factory's classes share a qualified name.  Each new one searches on
    # from the last suffix taken, not from the start: regression test for a
    # search that cost O(number alive) per class.
    gc.collect()
    classes = [make_dataclass("MadeForSuffixes", [f"f{i}"], bases=(ZeroCopy,)) for i in range(300)]
    owner = f"{classes[0].__module__}.MadeForSuffixes"
    filenames = [cls.asdict_zerocopy.__code__.co_filename for cls in classes]
    assert filenames == [f"<metakit {owner}>", *[f"<metakit {owner}-{i}>" for i in range(2, 301)]]
    for cls, filename in zip(classes, filenames, strict=True):
        assert "".join(linecache.getlines(filename)) == metakit.generated_source(cls)
    del classes[1], cls
    gc.collect()
    assert filenames[1] not in linecache.cache
    later = make_dataclass("MadeForSuffixes", ["g"], bases=(ZeroCopy,))
    assert later.asdict_zerocopy.__code__.co_filename == f"<metakit {owner}-301>"
    del classes, later
    gc.collect()
    assert not any(filename in linecache.cache for filename in [*filenames, f"<metakit {owner}-301>"])


def test_a_class_whose_traceback_was_formatted_is_still_collected():
    def define() -> weakref.ref[type]:
        @dataclass
        class Unset(ZeroCopy):
            b: int = field(init=False)
            w: object = field(default=None, metadata=OMIT)

        with pytest.raises(AttributeError) as error:
            Unset().asdict_zerocopy()
        assert "'b': self.b," in "".join(traceback.format_exception(error.type, error.value, error.tb))
        return weakref.ref(Unset)

    ref = define()
    gc.collect()
    assert ref() is None


# --- threads ----------------------------------------------------------------

THREADS = 8


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter allows, to interleave them finely."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


@pytest.mark.usefixtures("fast_switching")
def test_classes_created_and_used_from_eight_threads_at_once():
    shared = [make_class(i) for i in range(10)]
    barrier = threading.Barrier(THREADS, timeout=120)
    errors: list[BaseException] = []
    made: list[list[type]] = [[] for _ in range(THREADS)]

    def work(index: int) -> None:
        try:
            barrier.wait()
            for round_ in range(40):
                # Every thread makes the same names and fields at the same time,
                # and some of its own.
                for cls in (make_class(round_), make_class(round_ * THREADS + index), shared[round_ % len(shared)]):
                    check(cls)
                    made[index].append(cls)
                if index == 0 and round_ % 10 == 0:
                    gc.collect()
        except BaseException as error:  # reported by the main thread
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert [len(classes) for classes in made] == [120] * THREADS
    for cls in {cls for classes in made for cls in classes if isinstance(cls, metakit.ZeroCopyFields)}:
        filename = cls.astuple_zerocopy.__code__.co_filename
        assert "".join(linecache.getlines(filename)) == metakit.generated_source(cls)


def test_a_class_that_shares_live_code_after_linecache_was_cleared_shows_its_source_again():
    first = make_dataclass("ClearedThenShared", [("m", int)], bases=(ZeroCopy,))
    saved = linecache.cache.copy()
    linecache.clearcache()
    try:
        second = make_dataclass("ClearedThenShared", [("m", int)], bases=(ZeroCopy,))
    finally:
        for filename, entry in saved.items():  # the other tests' entries back
            linecache.cache.setdefault(filename, entry)
    filename = second.asdict_zerocopy.__code__.co_filename
    assert first.asdict_zerocopy.__code__.co_filename == filename  # the same source: one entry
    assert "".join(linecache.getlines(filename)) == metakit.generated_source(second)
    assert "'m'" in inspect.getsource(second.asdict_zerocopy)
    del first, second
    gc.collect()
    assert filename not in linecache.cache  # and it still goes with the last class


def test_code_under_a_suffixed_file_name_is_shared_even_when_the_own_name_is_free():
    # Code under its label's own file name is found by that name; code under
    # a suffixed name only by its key.  A class made again must find either.
    def define(*names: str) -> type:
        return make_dataclass("SharedBySuffix", list(names), bases=(ZeroCopy,))

    first = define("a")
    second = define("b")
    own = first.asdict_zerocopy.__code__.co_filename
    suffixed = second.asdict_zerocopy.__code__.co_filename
    assert suffixed == own[:-1] + "-2>"
    assert define("b").asdict_zerocopy.__code__.co_filename == suffixed  # found by key
    assert define("a").asdict_zerocopy.__code__.co_filename == own  # found by its own name
    del first
    gc.collect()
    assert own not in linecache.cache
    third = define("b")  # the own name is free now, and the code of "b" still lives
    assert third.asdict_zerocopy.__code__.co_filename == suffixed
    assert "".join(linecache.getlines(suffixed)) == metakit.generated_source(third)
    fourth = define("a")  # new code for "a", under the free own name
    assert fourth.asdict_zerocopy.__code__.co_filename == own
    del second, third, fourth
    gc.collect()
    assert own not in linecache.cache
    assert suffixed not in linecache.cache


def test_a_class_made_again_runs_the_code_of_its_own_fields():
    # Classes of one layout share their code while they live, and a class
    # made again after its twin was collected gets code as it would anew.
    @dataclass
    class Swapped(ZeroCopy):
        p: int
        q: int

        def __init__(self, q: int, p: int) -> None:
            self.p, self.q = p, q

    for _ in range(3):
        by_position = make_dataclass("ByValue", ["p", "q"], bases=(ZeroCopy,))
        assert metakit.replace(by_position(1, 2), q=5).asdict_zerocopy() == {"p": 1, "q": 5}
        assert metakit.replace(Swapped(q=2, p=1), q=5).asdict_zerocopy() == {"p": 1, "q": 5}
        del by_position
        gc.collect()


# --- issue 24: a class made in a loop is freed, through every public entry point, on every version ---

# On 3.14 and later, a dataclass's ``__init__`` holds its class through its
# ``__annotate__``, and a field annotated with its own class holds it
# through a forward reference's owner: the classes are made from source
# compiled without ``from __future__ import annotations`` (as most modules
# are), so that each version makes them as it makes them for users.
_LOOPED_SOURCE = """
from dataclasses import dataclass, field, make_dataclass
from metakit import OMIT, ZeroCopy, ZeroCopyFields

def decorated(plain):
    @dataclass
    class Node(*(() if plain else (ZeroCopy,))):
        value: int
        parent: {node} = None
        wrapper: object = field(default=None, metadata=OMIT)

        def __post_init__(self):
            super().__init__()  # a method that holds the class in its __class__ cell
    return Node

def slotted():
    @dataclass(slots=True, frozen=True, kw_only=True)
    class Node(ZeroCopy):
        value: int
        parent: {node} = None
    return Node

def by_metaclass():
    @dataclass
    class Node(metaclass=ZeroCopyFields):
        value: int
        parent: {node} = None
    return Node

def undecorated():
    @dataclass
    class Node(ZeroCopy):
        value: int
        parent: {node} = None
    class Leaf(Node):
        pass
    return Leaf

def made():
    return make_dataclass("Node", [("value", int), ("parent", object, None)], bases=(ZeroCopy,))
"""


def _looped_makers() -> dict[str, Any]:
    node = "Node | None" if sys.version_info >= (3, 14) else "'Node | None'"  # deferred from 3.14 on: never evaluated
    namespace: dict[str, Any] = {"__name__": __name__}  # (a module dataclasses can find, for string annotations)
    exec(compile(_LOOPED_SOURCE.format(node=node), "<looped>", "exec", dont_inherit=True), namespace)
    return {
        "@dataclass on ZeroCopy": lambda: namespace["decorated"](False),
        "@dataclass(slots=True, frozen=True, kw_only=True)": namespace["slotted"],
        "metaclass=ZeroCopyFields": namespace["by_metaclass"],
        "an undecorated subclass": namespace["undecorated"],
        "make_dataclass": namespace["made"],
        "a plain @dataclass": lambda: namespace["decorated"](True),
    }


def _use_every_entry_point(cls: type) -> None:
    """Each public way in: the methods, the function forms, replace, the source, metakit.testing, the registry."""
    obj = cls(value=1)
    metakit.asdict_zerocopy(obj, skip_fields={"value"})
    metakit.astuple_zerocopy(obj)
    metakit.replace(obj, value=2)
    if sys.version_info >= (3, 13):
        import copy

        copy.replace(obj, value=3)
    metakit.generated_source(cls)
    metakit.testing.assert_zerocopy(obj)
    metakit.testing.assert_zerocopy_class(cls)
    if isinstance(cls, metakit.ZeroCopyFields):
        obj.asdict_zerocopy()
        obj.astuple_zerocopy()
        obj.__replace__(value=4)
        assert cls in metakit.zerocopy_classes()
    try:
        metakit.asdict_zerocopy(obj, skip_fields={"no such field"})
    except ValueError:
        traceback.format_exc()  # a traceback through the generated code, its lines read from linecache
    if isinstance(cls, metakit.ZeroCopyFields):
        inspect.getsource(cls.astuple_zerocopy)


@pytest.mark.parametrize("way", list(_looped_makers()))
def test_a_class_made_in_a_loop_is_freed_through_every_public_entry_point(way):
    make = _looped_makers()[way]
    before = metakit_entries()
    refs = []
    for _ in range(30):
        cls = make()
        _use_every_entry_point(cls)
        refs.append(weakref.ref(cls))
        del cls
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []
    assert metakit_entries() <= before  # their linecache entries went with them


def test_a_method_that_outlives_its_class_keeps_its_source_while_another_class_takes_the_name():
    # Issue 24: the linecache entry went with the class while a method held
    # elsewhere (a closure, a callback) still ran its code, so the next class
    # of that name took the file name, and the old code showed the new source.
    cls = make_dataclass("Outlived", ["a", "b"], bases=(ZeroCopy,))
    held, gone = cls.asdict_zerocopy, weakref.ref(cls)
    del cls
    gc.collect()
    assert gone() is None
    other = make_dataclass("Outlived", ["x", "y", "z"], bases=(ZeroCopy,))
    assert held.__code__.co_filename != other.asdict_zerocopy.__code__.co_filename
    assert "'a': self.a," in inspect.getsource(held)
    assert "'x': self.x," in inspect.getsource(other.asdict_zerocopy)
    try:
        held(object())
    except AttributeError:
        assert "'a': self.a," in traceback.format_exc()  # the line of the held code, not the new class's
    filename = held.__code__.co_filename
    del held
    gc.collect()
    assert filename not in linecache.cache  # it goes with the last function that holds it
