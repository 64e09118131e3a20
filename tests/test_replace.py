"""``metakit.replace`` and ``__replace__`` against ``dataclasses.replace``, to the letter."""

from __future__ import annotations

import copy
import dataclasses
import sys
from dataclasses import KW_ONLY, InitVar, dataclass, field, make_dataclass
from typing import Any, ClassVar, Generic, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metakit
from metakit import OMIT, ZeroCopy
from metakit._functions import methods_of

POST_INIT_CALLS: list[tuple[Any, ...]] = []


def outcome(call: Any) -> tuple[str, Any, list[tuple[Any, ...]]]:
    """What *call* gives: its result, or its exception's type and message; and the ``__post_init__`` calls."""
    POST_INIT_CALLS.clear()
    try:
        return "result", call(), list(POST_INIT_CALLS)
    except Exception as error:  # compared below
        return type(error).__name__, str(error), list(POST_INIT_CALLS)


def assert_replaces_as_dataclasses_does(obj: Any, /, **changes: Any) -> None:
    theirs = outcome(lambda: dataclasses.replace(obj, **changes))
    generated = methods_of(type(obj)).replace
    for ours in (lambda: metakit.replace(obj, **changes), lambda: generated(obj, **changes)):
        got = outcome(ours)
        assert got[0] == theirs[0], (got, theirs)
        assert got[2] == theirs[2]  # __post_init__ ran with the same InitVars
        if got[0] == "result":
            assert type(got[1]) is type(theirs[1])
            assert state(got[1]) == state(theirs[1])
        else:
            assert got[1] == theirs[1]


def state(obj: Any) -> list[tuple[str, Any]]:
    """Every field and instance attribute of *obj*, by identity (an unset one as ``unset``)."""
    names = [f.name for f in dataclasses.fields(obj)] + sorted(getattr(obj, "__dict__", {}))
    return [(name, id(getattr(obj, name, "unset"))) for name in names]


T = TypeVar("T")


@dataclass
class Everything(ZeroCopy):
    plain: int
    listed: list[int] = field(default_factory=list)
    derived: int = field(init=False, default=0)
    wrapper: object = field(default=None, metadata=OMIT)
    scale: InitVar[int] = 2
    counter: ClassVar[int] = 0
    _: KW_ONLY
    keyword: str = "k"

    def __post_init__(self, scale: int) -> None:
        self.derived = self.plain * scale
        self.post_init_attribute = "set"


@dataclass
class NeedsInitVar(ZeroCopy):
    a: int
    required: InitVar[int]

    def __post_init__(self, required: int) -> None:
        self.seen = required


@dataclass(frozen=True, slots=True)
class FrozenSlots(ZeroCopy):
    a: int
    b: tuple[int, ...] = ()


@dataclass(kw_only=True)
class KeywordOnly(ZeroCopy):
    a: int
    b: int = 1


@dataclass
class Names(ZeroCopy):
    self: int = 1
    obj: int = 2
    changes: int = 3
    skip_fields: int = 4
    cls: int = 5


@dataclass
class Generic1(ZeroCopy, Generic[T]):
    value: T


@dataclass(init=False)
class OwnInit(ZeroCopy):
    a: int

    def __init__(self, a: int, extra: str = "own") -> None:
        self.a = a
        self.extra = extra


CASES: list[tuple[Any, dict[str, Any]]] = [
    (Everything(1), {}),
    (Everything(1), {"plain": 5}),
    (Everything(1), {"scale": 10}),
    (Everything(1), {"keyword": "x", "listed": [1]}),
    (Everything(1), {"derived": 3}),
    (Everything(1), {"nope": 3}),
    (Everything(1), {"derived": 3, "nope": 1}),
    (Everything(1), {"counter": 1}),
    (Everything(1), {"post_init_attribute": 1}),
    (NeedsInitVar(1, 2), {}),
    (NeedsInitVar(1, 2), {"a": 2}),
    (NeedsInitVar(1, 2), {"required": 7}),
    (FrozenSlots(1), {"a": 2}),
    (FrozenSlots(1), {}),
    (KeywordOnly(a=1), {"b": 3}),
    (Names(), {"self": 10, "obj": 20, "changes": 30, "skip_fields": 40, "cls": 50}),
    (Names(), {"changes": 0}),
    (Generic1[int](3), {"value": 4}),
    (OwnInit(1), {}),
    (OwnInit(1), {"a": 2}),
]


@pytest.mark.parametrize(("obj", "changes"), CASES, ids=[f"{type(o).__name__}-{sorted(c)}" for o, c in CASES])
def test_replace_gives_what_dataclasses_replace_gives(obj, changes):
    assert_replaces_as_dataclasses_does(obj, **changes)


def test_replace_never_copies_values():
    listed = [1, 2]
    obj = Everything(1, listed)
    assert metakit.replace(obj).listed is listed
    assert metakit.replace(obj, plain=3).listed is listed
    new = [3]
    assert metakit.replace(obj, listed=new).listed is new


def test_replace_runs_post_init_and_makes_init_false_fields_again():
    obj = Everything(2)
    obj.derived = 99
    replaced = metakit.replace(obj, scale=5)
    assert replaced.derived == 10
    assert replaced.post_init_attribute == "set"


def test_omit_fields_are_carried_like_any_field():
    wrapper = object()
    assert metakit.replace(Everything(1, wrapper=wrapper)).wrapper is wrapper


def test_every_class_gets_the_generated_replace_as_dunder_replace_for_copy_replace():
    assert Everything.__replace__ is methods_of(Everything).replace
    assert FrozenSlots.__replace__ is methods_of(FrozenSlots).replace
    if sys.version_info >= (3, 13):  # copy.replace is new in 3.13
        obj = Everything(1)
        assert copy.replace(obj, plain=4) == dataclasses.replace(obj, plain=4)


def test_a_users_own_replace_and_dunder_replace_are_never_touched():
    def own(self: Any, /, **changes: Any) -> str:
        return "own"

    @dataclass
    class Own(ZeroCopy):
        a: int
        __replace__ = own

        def replace(self, **changes: Any) -> Any:
            return dataclasses.replace(self, **changes)

    assert Own.__dict__["__replace__"] is own
    assert Own(1).replace(a=2) == Own(2)
    assert metakit.replace(Own(1), a=2) == Own(2)  # the function form runs the generated code


def test_replace_on_what_is_not_a_dataclass_instance_raises_as_dataclasses_does():
    for value in (3, Everything, object()):
        with pytest.raises(TypeError, match=r"replace\(\) should be called on dataclass instances"):
            metakit.replace(value)
        with pytest.raises(TypeError, match=r"replace\(\) should be called on dataclass instances"):
            dataclasses.replace(value)


def test_replace_on_plain_dataclasses_is_generated_on_first_use():
    Plain = make_dataclass("Plain", ["a", ("b", int, field(default=2))])
    assert_replaces_as_dataclasses_does(Plain(1), b=3)
    assert "def __replace__" in metakit.generated_source(Plain)


def test_generated_replace_source_names_each_field():
    source = metakit.generated_source(NeedsInitVar)
    assert "if 'required' not in changes:" in source
    assert "return _replace_by_dataclasses(self, changes)" in source
    assert "changes.pop('a') if 'a' in changes else self.a," in source


# --- the property: random hierarchies, every field kind ----------------------


def record_post_init(self: Any, *initvars: Any) -> None:
    POST_INIT_CALLS.append(initvars)


KINDS = ["plain", "default", "factory", "init_false", "omit", "initvar", "initvar_default", "classvar"]


def spec(name: str, kind: str) -> tuple[str, Any, Any]:
    return {
        "plain": (name, int, field()),
        "default": (name, int, field(default=7)),
        "factory": (name, list, field(default_factory=list)),
        "init_false": (name, int, field(init=False, default=0)),
        "omit": (name, object, field(default=None, metadata=OMIT)),
        "initvar": (name, InitVar[int], field()),
        "initvar_default": (name, InitVar[int], field(default=3)),
        "classvar": (name, ClassVar[int], field(default=1)),
    }[kind]


@st.composite
def hierarchies(draw: st.DrawFn) -> list[tuple[list[tuple[str, str]], dict[str, bool]]]:
    levels = []
    for depth in range(draw(st.integers(1, 3))):
        kinds = draw(st.lists(st.sampled_from(KINDS), max_size=5))
        options = {"frozen": draw(st.booleans()), "slots": draw(st.booleans()), "kw_only": draw(st.booleans())}
        levels.append(([(f"f{depth}_{i}", kind) for i, kind in enumerate(kinds)], options))
    frozen = levels[0][1]["frozen"]
    for _, options in levels:
        options["frozen"] = frozen  # a frozen class cannot inherit from a non-frozen one
    return levels


@settings(max_examples=200, deadline=None)
@given(levels=hierarchies(), data=st.data())
def test_random_hierarchies_replace_as_dataclasses_does(levels, data):
    cls: type = ZeroCopy
    initvars: list[str] = []
    for depth, (entries, options) in enumerate(levels):
        names = [name for name, _ in entries]
        namespace = {"__post_init__": record_post_init}
        try:
            cls = make_dataclass(
                f"Level{depth}", [spec(n, k) for n, k in entries], bases=(cls,), namespace=namespace, **options
            )
        except TypeError:  # defaults before non-defaults: not a valid hierarchy
            return
        initvars += [n for n, k in entries if k.startswith("initvar")]
        del names
    init_fields = [f for f in dataclasses.fields(cls) if f.init]
    arguments = {f.name: object() for f in init_fields}
    arguments |= {n: object() for n in initvars}
    try:
        obj = cls(**arguments)
    except TypeError:
        return
    every = [*arguments, "not_a_field"] + [f.name for f in dataclasses.fields(cls) if not f.init]
    changes = {name: object() for name in data.draw(st.lists(st.sampled_from(every), unique=True))}
    assert_replaces_as_dataclasses_does(obj, **changes)


# --- by position or by keyword: the same binding ------------------------------


def by_position(cls: type) -> bool:
    return methods_of(cls).layout.by_position


def test_a_dataclass_init_takes_its_arguments_by_position():
    assert by_position(Everything) is False  # KW_ONLY: by keyword
    assert all(map(by_position, [NeedsInitVar, FrozenSlots, Names]))
    assert by_position(KeywordOnly) is False


def test_an_own_init_with_other_parameters_is_called_by_keyword():
    @dataclass
    class Swapped(ZeroCopy):
        a: int
        b: int

        def __init__(self, b: int, a: int) -> None:  # the same names, another order
            self.a, self.b = a, b

    assert not by_position(Swapped)
    assert_replaces_as_dataclasses_does(Swapped(b=2, a=1), a=5)
    assert metakit.replace(Swapped(b=2, a=1), a=5) == Swapped(b=2, a=5)


def test_an_init_or_new_assigned_later_turns_the_call_to_keywords():
    @dataclass
    class Later(ZeroCopy):
        a: int
        b: int = 0

    assert by_position(Later)

    def init(self: Any, b: int = 0, a: int = 0) -> None:
        self.a, self.b = a, b

    Later.__init__ = init  # type: ignore[method-assign]
    assert not by_position(Later)
    assert_replaces_as_dataclasses_does(Later(a=1, b=2), b=3)

    @dataclass
    class New(ZeroCopy):
        a: int

    seen: list[Any] = []

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return object.__new__(cls)

    New.__new__ = new  # type: ignore[method-assign]
    assert not by_position(New)
    metakit.replace(New(1), a=2)
    assert seen[-1] == ((), {"a": 2})  # as dataclasses.replace passes them


def test_a_metaclass_with_its_own_call_gets_keywords():
    class Calls(metakit.ZeroCopyFields):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            assert not args, "replace passes keywords, as dataclasses.replace does"
            return super().__call__(*args, **kwargs)

    @dataclass
    class Called(metaclass=Calls):
        a: int

    assert not by_position(Called)
    assert metakit.replace(Called(a=1), a=2) == Called(a=2)


def test_unknown_names_with_a_positional_call_raise_as_dataclasses_replace_does():
    assert by_position(FrozenSlots)
    assert_replaces_as_dataclasses_does(FrozenSlots(1), a=2, zz=3, yy=4)
    assert_replaces_as_dataclasses_does(FrozenSlots(1), self=2)


def test_an_init_assigned_later_to_a_base_that_is_no_dataclass_is_seen_below():
    class Base(ZeroCopy):
        def __init__(self, a: int = 0, b: int = 0) -> None:
            self.a, self.b = a, b

    @dataclass(init=False)
    class Sub(Base):
        a: int = 0
        b: int = 0

    def init(self: Any, b: int = 0, a: int = 0) -> None:  # the same names, swapped
        self.a, self.b = a, b

    assert by_position(Sub)
    Base.__init__ = init  # type: ignore[method-assign]
    assert not by_position(Sub)
    obj = Sub()
    obj.a, obj.b = 1, 2
    assert metakit.replace(obj, a=5) == dataclasses.replace(obj, a=5)
    assert (metakit.replace(obj, a=5).a, metakit.replace(obj, a=5).b) == (5, 2)
