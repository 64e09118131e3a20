"""Regression tests for the core's edges (issue: "Core: correct at every edge"),
each named after the defect it pins down.  Those of lifetime and threads are in
``test_lifetime_threads.py``, those of replace in ``test_replace.py``."""

from __future__ import annotations

import dataclasses
import functools
import sys
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
