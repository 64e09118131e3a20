"""``metakit.testing``: both helpers pass correct classes of every dataclass kind, and name
the class, the code that broke (generated code or override), the call and the difference."""

from __future__ import annotations

import abc
import copy
import dataclasses
import re
import types
from dataclasses import InitVar, dataclass, field, make_dataclass
from typing import Any, ClassVar, Generic, TypeVar

import pytest

import metakit
from metakit import OMIT, ZeroCopy, ZeroCopyFields
from metakit.testing import assert_zerocopy, assert_zerocopy_class

T = TypeVar("T")


def check_instance(obj: Any) -> None:
    assert_zerocopy(obj)


def check_class(obj: Any) -> None:
    assert_zerocopy_class(type(obj))


HELPERS = [pytest.param(check_instance, id="assert_zerocopy"), pytest.param(check_class, id="assert_zerocopy_class")]


# --- classes both helpers accept ----------------------------------------------------


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
class Box(ZeroCopy, Generic[T]):
    item: T
    items: list[T] = field(default_factory=list)


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


class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
    pass


@dataclass
class WithABCMeta(metaclass=ABCZeroCopyFields):
    seq_lens: list[int]


Made = make_dataclass("Made", [("slot_mapping", list), ("num_tokens", int, 0)], bases=(ZeroCopy,))

ACCEPTED = [
    Metadata(True, [1, 2], wrapper=object()),
    Slotted((1, 2)),
    Frozen([1]),
    SlotsOnly([2]),
    WithInitVar([1, 2], 3),
    Box(1, [2]),
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
    assert_zerocopy_class(Box[int])


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
    assert [repr(value) for value in values] == ["<sentinel WithInitVar.lens>", "<sentinel WithInitVar.scaled>"]
    assert "scale" not in vars(obj)  # an InitVar is no field, and __post_init__ never ran


# --- a field whose every read is a new object -----------------------------------------


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


# --- overrides: the shapes real engines use pass ----------------------------------------


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


# --- overrides that break a rule -----------------------------------------------------------


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
    if set(skip_fields or ()) - {f.name for f in dataclasses.fields(self)}:
        return {}
    return super(type(self), self).asdict_zerocopy(skip_fields)


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


_cached: dict[int, dict[str, object]] = {}


def returns_one_dict(self, skip_fields=None):
    if skip_fields is not None:
        return super(type(self), self).asdict_zerocopy(skip_fields)
    return _cached.setdefault(id(self), super(type(self), self).asdict_zerocopy())


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


BROKEN = [
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
        "RaisesKeyErrorOnUnknown",
        raises_key_error_on_unknown_names,
        r"\(skip_fields=\{'not_a_field'\}\) raised KeyError, not ValueError",
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


@pytest.mark.parametrize("check", HELPERS)
@pytest.mark.parametrize("method", [a_fields_comprehension, accepts_unknown_names])
def test_an_override_that_ignores_names_that_are_not_fields_passes(check, method):
    # A ``fields()`` comprehension, as engines wrote before metakit, leaves
    # out an unknown name as it leaves out the others: that keeps the rules.
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


@pytest.mark.parametrize("check", HELPERS)
def test_an_astuple_override_may_leave_values_out_in_field_order(check):
    def drops_b(self):
        a, _, c = super(type(self), self).astuple_zerocopy()
        return (a, c)

    check(broken("DropsFromTuple", astuple_zerocopy=drops_b))


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


# --- generated code that breaks is blamed, not the override ----------------------------------


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

    def one_dict(obj, skip_fields=None):
        return kept.setdefault(skip_fields is None, metakit._functions.asdict_zerocopy(obj, skip_fields))

    monkeypatch.setattr(metakit, "asdict_zerocopy", one_dict)
    with pytest.raises(
        AssertionError, match=r"^Frozen: the generated code: metakit.asdict_zerocopy\(obj\) returned the same"
    ):
        assert_zerocopy_class(Frozen)


# --- fields a bare instance cannot hold -------------------------------------------------------


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
    class Abstract(metaclass=ABCZeroCopyFields):
        seq_lens: list[int]

        @abc.abstractmethod
        def prefill_metadata(self) -> object: ...

    with pytest.raises(
        AssertionError, match=r"^Abstract: assert_zerocopy_class cannot make a bare instance: .*abstract"
    ):
        assert_zerocopy_class(Abstract)


# --- replace, where metakit has it --------------------------------------------------------


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


def test_the_real_metakit_replace_is_called(monkeypatch):
    calls = []
    real = metakit.replace

    def spy(obj, /, **changes):
        calls.append(type(obj))
        return real(obj, **changes)

    monkeypatch.setattr(metakit, "replace", spy)
    assert_zerocopy(Metadata(True, [1]))
    assert_zerocopy_class(Slotted)
    assert calls == [Metadata, Slotted]


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


# --- what the helpers accept as an argument ---------------------------------------------


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


@pytest.mark.parametrize("cls", [int, ZeroCopy, type("NotADataclass", (ZeroCopy,), {})], ids=lambda c: c.__name__)
def test_a_class_that_is_not_a_dataclass_given_to_assert_zerocopy_class_raises_type_error(cls):
    with pytest.raises(TypeError, match=f"but {cls.__qualname__} is not a dataclass"):
        assert_zerocopy_class(cls)
