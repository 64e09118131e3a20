"""Every case of DESIGN's "Semantics": what ``asdict_zerocopy`` returns, for every
way of making a dataclass, and what metakit leaves exactly as it was."""

import abc
import copy
import dataclasses
import gc
import inspect
import pickle
import re
import subprocess
import sys
import typing
import weakref
from dataclasses import KW_ONLY, InitVar, dataclass, field, fields, make_dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import pytest

import metakit
from metakit import OMIT, ZeroCopy, ZeroCopyFields

if TYPE_CHECKING:
    from fractions import Fraction  # a name that exists only for type checkers


def is_omitted(f: dataclasses.Field[Any]) -> bool:
    return OMIT.items() <= f.metadata.items()


def reference(obj: Any) -> dict[str, Any]:
    """What ``asdict_zerocopy`` must return: DESIGN's reference, less ``OMIT`` fields."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if not is_omitted(f)}


def assert_same_objects(got: Any, expected: dict[str, Any]) -> None:
    """*got* is a dict with *expected*'s keys, in order, holding the very same objects."""
    assert type(got) is dict
    assert list(got) == list(expected)
    assert all(got[name] is value for name, value in expected.items())


def assert_converts(obj: Any) -> None:
    """The method and the function forms all return the reference, by identity."""
    expected = reference(obj)
    assert_same_objects(obj.asdict_zerocopy(), expected)
    assert_same_objects(metakit.asdict_zerocopy(obj), expected)
    for astuple in (obj.astuple_zerocopy(), metakit.astuple_zerocopy(obj)):
        assert type(astuple) is tuple
        assert len(astuple) == len(expected)
        assert all(a is b for a, b in zip(astuple, expected.values(), strict=True))


# --- the base ------------------------------------------------------------------


def test_zero_copy_is_an_empty_slotted_base_made_by_the_metaclass():
    assert issubclass(ZeroCopyFields, type)
    assert type(ZeroCopy) is ZeroCopyFields
    assert ZeroCopy.__slots__ == ()
    assert not dataclasses.is_dataclass(ZeroCopy)
    assert ZeroCopy.asdict_zerocopy.__doc__
    assert ZeroCopy.astuple_zerocopy.__doc__


# --- the plain @dataclass decorator, in all its forms ------------------------


def test_bare_decorator_generates_both_methods():
    @dataclass
    class Step(ZeroCopy):
        is_prompt: bool
        slot_mapping: list[int]

    step = Step(True, [0, 1])
    assert step.asdict_zerocopy() == {"is_prompt": True, "slot_mapping": [0, 1]}
    assert step.astuple_zerocopy() == (True, [0, 1])
    assert_converts(step)


def test_decorator_with_empty_parentheses_generates_both_methods():
    @dataclass()
    class Step(ZeroCopy):
        is_prompt: bool

    assert Step(False).asdict_zerocopy() == {"is_prompt": False}
    assert Step(False).astuple_zerocopy() == (False,)


def test_dataclass_called_as_a_function_generates_both_methods():
    class Step(ZeroCopy):
        is_prompt: bool
        tokens: int = 0

    frozen = dataclass(frozen=True)(Step)
    assert frozen(True, 3).asdict_zerocopy() == {"is_prompt": True, "tokens": 3}
    assert_converts(frozen(True, 3))


DECORATOR_OPTIONS: list[dict[str, Any]] = [
    {"init": False},
    {"repr": False},
    {"eq": False},
    {"order": True},
    {"unsafe_hash": True},
    {"frozen": True},
    {"match_args": False},
    {"kw_only": True},
    {"slots": True},
    {"frozen": True, "slots": True},
    {"frozen": True, "eq": True, "order": True, "kw_only": True, "slots": True},
    *([{"slots": True, "weakref_slot": True}] if sys.version_info >= (3, 11) else []),
]


@pytest.mark.parametrize("options", DECORATOR_OPTIONS, ids=str)
def test_every_decorator_option_keeps_the_fields_in_order(options):
    @dataclass(**options)
    class Step(ZeroCopy):
        a: object = None
        b: object = None
        c: list[int] = field(default_factory=list)

    step = Step()
    if not options.get("frozen"):
        step.a, step.b, step.c = object(), object(), [1]
    assert list(step.asdict_zerocopy()) == ["a", "b", "c"]
    assert_converts(step)


def test_slots_true_rebuilds_the_class_and_it_gets_its_own_methods():
    class Step(ZeroCopy):
        x: object
        y: object

    rebuilt = dataclass(slots=True)(Step)
    assert rebuilt is not Step
    assert rebuilt.__slots__ == ("x", "y")
    step = rebuilt(object(), object())
    assert not hasattr(step, "__dict__")
    assert_converts(step)
    assert rebuilt in metakit.zerocopy_classes()


def test_frozen_instance_converts_and_stays_frozen():
    @dataclass(frozen=True)
    class Step(ZeroCopy):
        slot_mapping: tuple[int, ...]
        wrapper: object = field(default=None, metadata=OMIT)

    step = Step((1, 2), wrapper=object())
    assert_converts(step)
    assert step.asdict_zerocopy() == {"slot_mapping": (1, 2)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.slot_mapping = ()


def test_kw_only_fields_keep_their_declaration_order():
    @dataclass
    class Base(ZeroCopy):
        a: object

    @dataclass(kw_only=True)
    class Step(Base):
        b: object = None
        c: object

    step = Step(object(), c=object())
    assert list(step.asdict_zerocopy()) == ["a", "b", "c"]
    assert_converts(step)


def test_kw_only_marker_is_not_a_key():
    @dataclass
    class Step(ZeroCopy):
        a: object
        _: KW_ONLY
        b: object
        c: object = None

    step = Step(object(), b=object())
    assert list(step.asdict_zerocopy()) == ["a", "b", "c"]
    assert step.astuple_zerocopy() == (step.a, step.b, None)
    assert_converts(step)


def test_init_var_is_not_a_key():
    @dataclass
    class Step(ZeroCopy):
        a: object
        scale: InitVar[int]
        b: int = 0

        def __post_init__(self, scale: int) -> None:
            self.b = scale * 2

    step = Step(object(), 3)
    assert step.asdict_zerocopy() == {"a": step.a, "b": 6}
    assert_converts(step)


def test_class_var_is_not_a_key():
    @dataclass
    class Step(ZeroCopy):
        backend: ClassVar[str] = "flash"
        a: object = None

    assert Step().asdict_zerocopy() == {"a": None}
    assert Step().astuple_zerocopy() == (None,)


def test_init_false_fields_are_keys():
    @dataclass
    class Step(ZeroCopy):
        a: object
        with_default: int = field(default=7, init=False)
        from_factory: list[int] = field(default_factory=list, init=False)
        from_post_init: object = field(init=False)

        def __post_init__(self) -> None:
            self.from_post_init = object()

    step = Step(object())
    assert list(step.asdict_zerocopy()) == ["a", "with_default", "from_factory", "from_post_init"]
    assert_converts(step)


def test_default_factory_values_are_the_objects_the_instance_holds():
    @dataclass
    class Step(ZeroCopy):
        seq_lens: list[int] = field(default_factory=list)
        extra: dict[str, int] = field(default_factory=dict)

    step = Step()
    d = step.asdict_zerocopy()
    assert d["seq_lens"] is step.seq_lens
    assert d["extra"] is step.extra
    assert Step().asdict_zerocopy()["seq_lens"] is not step.seq_lens


def test_make_dataclass_with_the_zero_copy_base():
    Step = make_dataclass(
        "Step",
        ["a", ("b", int), ("c", list, field(default_factory=list)), ("w", object, field(default=None, metadata=OMIT))],
        bases=(ZeroCopy,),
    )
    step = Step(object(), 2)
    assert list(step.asdict_zerocopy()) == ["a", "b", "c"]
    assert_converts(step)


T = TypeVar("T")


@dataclass
class Box(ZeroCopy, Generic[T]):
    item: T
    label: str = ""


def test_generic_dataclass_and_its_parametrized_subclasses():
    @dataclass
    class IntBox(Box[int]):
        count: int = 0

    class UndecoratedIntBox(Box[int]):
        pass

    assert_converts(Box(object()))
    assert IntBox(1, "one", 2).asdict_zerocopy() == {"item": 1, "label": "one", "count": 2}
    assert_converts(IntBox(1))
    assert UndecoratedIntBox(5).asdict_zerocopy() == {"item": 5, "label": ""}
    assert_converts(UndecoratedIntBox(object()))


def test_generic_slotted_dataclass_and_an_alias_call():
    @dataclass(slots=True)
    class SlottedBox(ZeroCopy, Generic[T]):
        item: T

    @dataclass(slots=True)
    class SlottedIntBox(SlottedBox[int]):
        count: int = 0

    assert_converts(SlottedBox[int](object()))  # made through the alias SlottedBox[int]
    assert SlottedIntBox(1, 2).asdict_zerocopy() == {"item": 1, "count": 2}


def test_undecorated_subclass_converts_the_fields_it_inherits():
    @dataclass
    class Base(ZeroCopy):
        a: object
        b: object = None

    class Sub(Base):
        not_a_field: int = 3  # annotated, but no decorator makes it a field

        def describe(self) -> str:
            return "sub"

    sub = Sub(object(), object())
    assert list(sub.asdict_zerocopy()) == ["a", "b"]
    assert_converts(sub)


def test_undecorated_zero_copy_subclass_of_a_plain_dataclass_gets_the_methods():
    @dataclass
    class Plain:
        a: object
        b: object = None

    class ZeroCopyFirst(ZeroCopy, Plain):
        pass

    class PlainFirst(Plain, ZeroCopy):
        pass

    for cls in (ZeroCopyFirst, PlainFirst):
        obj = cls(object(), object())
        assert list(obj.asdict_zerocopy()) == ["a", "b"]
        assert_converts(obj)


def test_redefined_field_keeps_the_base_position():
    @dataclass
    class Base(ZeroCopy):
        a: object = None
        b: object = None

    @dataclass
    class Sub(Base):
        c: object = None
        a: object = "redefined"

    sub = Sub()
    assert list(sub.asdict_zerocopy()) == ["a", "b", "c"]
    assert sub.asdict_zerocopy()["a"] == "redefined"
    assert_converts(Sub(object(), object(), object()))


# --- OMIT ------------------------------------------------------------------


@dataclass
class WithWrappers(ZeroCopy):
    is_prompt: bool
    prefill_wrapper: object = field(default=None, metadata=OMIT)
    decode_wrapper: object = field(default=None, metadata={**OMIT, "doc": "the decode kernel"})
    seq_len: int = 0


def test_omit_fields_never_appear_plain_or_merged():
    obj = WithWrappers(True, object(), object(), 5)
    assert obj.asdict_zerocopy() == {"is_prompt": True, "seq_len": 5}
    assert obj.astuple_zerocopy() == (True, 5)
    assert metakit.asdict_zerocopy(obj) == {"is_prompt": True, "seq_len": 5}
    assert metakit.astuple_zerocopy(obj) == (True, 5)


def test_omit_fields_stay_fields_in_init_repr_eq_and_fields():
    wrapper = object()
    obj = WithWrappers(True, prefill_wrapper=wrapper)
    assert [f.name for f in fields(obj)] == ["is_prompt", "prefill_wrapper", "decode_wrapper", "seq_len"]
    assert obj.prefill_wrapper is wrapper
    assert f"prefill_wrapper={wrapper!r}" in repr(obj)
    assert obj != WithWrappers(True, prefill_wrapper=object())
    assert obj == WithWrappers(True, prefill_wrapper=wrapper)


def test_merged_omit_metadata_keeps_the_other_entries():
    decode_wrapper = fields(WithWrappers)[2]
    assert decode_wrapper.metadata["doc"] == "the decode kernel"


def test_omit_is_read_only():
    with pytest.raises(TypeError):
        OMIT["metakit.omit"] = False


# --- user methods and super() -----------------------------------------------


@dataclass
class Layer0(ZeroCopy):
    a: object


@dataclass
class Layer1(Layer0):
    b: object = None

    def asdict_zerocopy(self, skip_fields=None):
        return {"via": "Layer1", **super().asdict_zerocopy(skip_fields)}

    def astuple_zerocopy(self):
        return ("via Layer1", *super().astuple_zerocopy())


@dataclass
class Layer2(Layer1):
    c: object = None


def test_override_calling_super_gets_the_instances_own_fields():
    obj = Layer1(object(), object())
    assert obj.asdict_zerocopy() == {"via": "Layer1", "a": obj.a, "b": obj.b}
    assert obj.astuple_zerocopy() == ("via Layer1", obj.a, obj.b)


def test_override_calling_super_two_levels_down_gets_the_instances_own_fields():
    obj = Layer2(object(), object(), object())
    assert obj.asdict_zerocopy() == {"via": "Layer1", "a": obj.a, "b": obj.b, "c": obj.c}
    assert obj.asdict_zerocopy({"b"}) == {"via": "Layer1", "a": obj.a, "c": obj.c}
    assert obj.astuple_zerocopy() == ("via Layer1", obj.a, obj.b, obj.c)


def test_base_under_an_override_still_converts_its_own_instances():
    assert_converts(Layer0(object()))


def test_override_that_skips_a_field_through_super():
    @dataclass
    class FlashInfer(ZeroCopy):
        is_prompt: bool
        decode_wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"decode_wrapper", *(skip_fields or ())})

    @dataclass
    class Subclass(FlashInfer):
        seq_len: int = 0

    assert FlashInfer(True, object()).asdict_zerocopy() == {"is_prompt": True}
    assert Subclass(True, object(), 4).asdict_zerocopy() == {"is_prompt": True, "seq_len": 4}
    assert Subclass(True, object(), 4).asdict_zerocopy(["seq_len"]) == {"is_prompt": True}


def test_function_form_never_calls_a_user_override():
    obj = Layer2(object(), object(), object())
    assert_same_objects(metakit.asdict_zerocopy(obj), reference(obj))
    assert metakit.astuple_zerocopy(obj) == (obj.a, obj.b, obj.c)


def user_asdict(self, skip_fields=None):
    return {"written_by": "user"}


def user_astuple(self):
    return ("written by user",)


def assert_user_methods_run(obj: Any) -> None:
    assert obj.asdict_zerocopy() == {"written_by": "user"}
    assert obj.astuple_zerocopy() == ("written by user",)
    assert metakit.asdict_zerocopy(obj) == reference(obj)


@dataclass
class WithUserMethods(ZeroCopy):
    a: object = None
    asdict_zerocopy = user_asdict
    astuple_zerocopy = user_astuple


def test_method_in_the_class_body_is_not_replaced():
    assert WithUserMethods.__dict__["asdict_zerocopy"] is user_asdict
    assert WithUserMethods.__dict__["astuple_zerocopy"] is user_astuple
    assert_user_methods_run(WithUserMethods())


def test_method_inherited_from_a_user_dataclass_is_not_replaced():
    @dataclass
    class Sub(WithUserMethods):
        b: object = None

    assert "asdict_zerocopy" not in Sub.__dict__
    assert "astuple_zerocopy" not in Sub.__dict__
    assert_user_methods_run(Sub(object(), object()))


def test_method_inherited_from_a_mixin_is_not_replaced():
    class Mixin:
        asdict_zerocopy = user_asdict
        astuple_zerocopy = user_astuple

    @dataclass
    class Step(Mixin, ZeroCopy):
        a: object = None

    @dataclass
    class PlainFirst(Mixin):
        a: object = None

    class Undecorated(PlainFirst, ZeroCopy):
        pass

    assert_user_methods_run(Step(object()))
    assert_user_methods_run(Undecorated(object()))


def test_mixin_override_above_a_generated_base_calls_through_to_the_fields():
    class Tagged(ZeroCopy):
        def asdict_zerocopy(self, skip_fields=None):
            return {"tag": 1, **super().asdict_zerocopy(skip_fields)}

    @dataclass
    class Base(ZeroCopy):
        a: object = None

    @dataclass
    class Step(Tagged, Base):
        b: object = None

    step = Step(object(), object())
    assert step.asdict_zerocopy() == {"tag": 1, "a": step.a, "b": step.b}
    assert_converts(Base(object()))


# --- metaclasses -------------------------------------------------------------


def test_metaclass_without_the_zero_copy_base():
    @dataclass
    class Step(metaclass=ZeroCopyFields):
        a: object
        b: object = None

    assert ZeroCopy not in Step.__mro__
    assert_converts(Step(object(), object()))


class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
    pass


def test_metaclass_combined_with_abc_meta_still_enforces_abstract_methods():
    @dataclass
    class Backend(metaclass=ABCZeroCopyFields):
        a: object

        @abc.abstractmethod
        def forward(self) -> None: ...

    @dataclass
    class Flash(Backend):
        b: object = None

        def forward(self) -> None:
            pass

    with pytest.raises(TypeError, match="abstract"):
        Backend(1)
    assert isinstance(Flash(1), Backend)
    assert_converts(Flash(object(), object()))


def test_metaclass_combined_with_abc_meta_on_the_zero_copy_base():
    @dataclass
    class Backend(ZeroCopy, metaclass=ABCZeroCopyFields):
        a: object

        @abc.abstractmethod
        def forward(self) -> None: ...

    @dataclass
    class Flash(Backend):
        def forward(self) -> None:
            pass

    with pytest.raises(TypeError, match="abstract"):
        Backend(1)
    assert_converts(Flash(object()))


def test_metaclass_combined_with_one_that_watches_setattr_still_sees_every_attribute():
    seen: list[str] = []

    class Watching(type):
        def __setattr__(cls, name: str, value: object) -> None:
            seen.append(name)
            super().__setattr__(name, value)

    class WatchingZeroCopyFields(ZeroCopyFields, Watching):
        pass

    @dataclass
    class Step(metaclass=WatchingZeroCopyFields):
        a: object

    assert {"__dataclass_fields__", "__init__", "__repr__", "__eq__"} <= set(seen)
    assert_converts(Step(object()))


def test_metaclass_combined_with_abc_meta_keeps_the_direct_setattr():
    # ABCMeta has no __setattr__ of its own: nothing to cooperate with.
    assert ABCZeroCopyFields.__setattr__ is ZeroCopyFields.__setattr__


# --- annotations are never evaluated ----------------------------------------


def test_unresolvable_string_annotations_are_never_evaluated():
    evaluated: list[str] = []

    @dataclass
    class Step(ZeroCopy):
        a: "DoesNotExist"  # noqa: F821
        b: "Fraction"
        c: "evaluated.append('c')" = None

    with pytest.raises(NameError):
        typing.get_type_hints(Step)
    step = Step(object(), object())
    assert_converts(step)
    Made = make_dataclass("Made", [("x", "evaluated.append('x')")], bases=(ZeroCopy,))
    assert_converts(Made(object()))
    assert evaluated == []


# --- field names that collide with the generated code's own names -------------

COLLIDING_NAMES = [
    "self",
    "skip_fields",
    "dict",
    "d",
    "name",
    "type",
    "str",
    "cls",
    "__d",
    "_check_skipped",
    "_skip_fields_str",
    "KeyError",
    "__builtins__",
    "asdict_zerocopy_",
    "_0",
    "_1",
]


def test_field_names_that_collide_with_internal_names():
    Step = make_dataclass("Step", COLLIDING_NAMES, bases=(ZeroCopy,))
    step = Step(*(object() for _ in COLLIDING_NAMES))
    assert list(step.asdict_zerocopy()) == COLLIDING_NAMES
    assert_converts(step)
    skipped = step.asdict_zerocopy(skip_fields=["self", "skip_fields", "d", "name", "KeyError"])
    assert list(skipped) == [n for n in COLLIDING_NAMES if n not in {"self", "skip_fields", "d", "name", "KeyError"}]
    with pytest.raises(ValueError, match="'nope'"):
        step.asdict_zerocopy(skip_fields=["self", "nope"])


def test_field_named_self_in_a_class_body():
    @dataclass
    class Step(ZeroCopy):
        self: object
        skip_fields: object = None
        dict: object = None

        __private: object = None  # the field is named _Step__private

    step = Step(object(), object(), object(), object())
    assert list(step.asdict_zerocopy()) == ["self", "skip_fields", "dict", "_Step__private"]
    assert_converts(step)


# --- skip_fields -------------------------------------------------------------


@dataclass
class Three(ZeroCopy):
    a: object
    b: object
    c: object
    wrapper: object = field(default=None, metadata=OMIT)


def three() -> Three:
    return Three(object(), object(), object(), object())


SKIP_FORMS = {
    "set": lambda: {"b"},
    "frozenset": lambda: frozenset({"b"}),
    "tuple": lambda: ("b",),
    "list": lambda: ["b"],
    "keys view": {"b": 0}.keys,
    "dict": lambda: {"b": 0},
    "generator": lambda: (name for name in ["b"]),
    "iterator": lambda: iter(["b"]),
}


@pytest.mark.parametrize("form", SKIP_FORMS.values(), ids=SKIP_FORMS.keys())
@pytest.mark.parametrize("convert", ["method", "function"])
@pytest.mark.parametrize("by", ["keyword", "position"])
def test_skip_fields_accepts_any_iterable_of_names(form, convert, by):
    obj = three()
    asdict = obj.asdict_zerocopy if convert == "method" else lambda *a, **kw: metakit.asdict_zerocopy(obj, *a, **kw)
    got = asdict(skip_fields=form()) if by == "keyword" else asdict(form())
    assert_same_objects(got, {"a": obj.a, "c": obj.c})


@pytest.mark.parametrize("skip", [["a", "c"], {"a", "c"}, ("c", "a")], ids=["list", "set", "tuple"])
def test_skip_fields_is_never_changed(skip):
    before = copy.copy(skip)
    obj = three()
    assert obj.asdict_zerocopy(skip_fields=skip) == {"b": obj.b}
    assert metakit.asdict_zerocopy(obj, skip) == {"b": obj.b}
    assert skip == before
    assert type(skip) is type(before)


def test_skip_fields_may_name_a_field_twice():
    obj = three()
    assert obj.asdict_zerocopy(["b", "b", "a", "b"]) == {"c": obj.c}


def test_skip_fields_may_name_omit_fields():
    obj = three()
    assert obj.asdict_zerocopy({"wrapper"}) == {"a": obj.a, "b": obj.b, "c": obj.c}
    assert obj.asdict_zerocopy(["wrapper", "a", "wrapper"]) == {"b": obj.b, "c": obj.c}


def test_skip_fields_none_empty_or_every_field():
    obj = three()
    assert_same_objects(obj.asdict_zerocopy(None), reference(obj))
    assert_same_objects(obj.asdict_zerocopy(skip_fields=None), reference(obj))
    assert_same_objects(obj.asdict_zerocopy(()), reference(obj))
    assert obj.asdict_zerocopy(["a", "b", "c", "wrapper"]) == {}


@pytest.mark.parametrize("convert", ["method", "function"])
def test_unknown_skip_fields_name_raises_value_error_naming_it_and_the_class(convert):
    obj = three()
    asdict = obj.asdict_zerocopy if convert == "method" else lambda skip: metakit.asdict_zerocopy(obj, skip)
    with pytest.raises(ValueError, match=r"'slot_mappin'.*Three"):
        asdict(["a", "slot_mappin"])
    with pytest.raises(ValueError, match="'astuple_zerocopy'"):
        asdict({"astuple_zerocopy"})  # an attribute, not a field


def test_unknown_skip_fields_name_is_an_error_even_after_the_fields_are_gone():
    obj = three()
    with pytest.raises(ValueError, match="'d'"):
        obj.asdict_zerocopy(["a", "b", "c", "wrapper", "d"])


@dataclass
class WithPostInit(ZeroCopy):
    a: object = None

    def __post_init__(self) -> None:
        self.attn_bias = None
        self.is_profile_run = False


def test_post_init_attribute_in_skip_fields_is_unknown():
    with pytest.raises(ValueError, match="'attn_bias'"):
        WithPostInit().asdict_zerocopy({"attn_bias"})


@pytest.mark.parametrize("text", ["b", "", "abc"])
@pytest.mark.parametrize("convert", ["method", "function"])
def test_skip_fields_given_as_a_str_raises_type_error(text, convert):
    obj = three()
    asdict = obj.asdict_zerocopy if convert == "method" else lambda skip: metakit.asdict_zerocopy(obj, skip)
    with pytest.raises(TypeError, match="skip_fields"):
        asdict(text)


def test_str_subclass_is_refused_even_when_each_of_its_letters_is_a_field():
    # Regression: only ``type(skip_fields) is str`` was checked up front, so
    # a str subclass whose letters were all fields dropped them silently.
    class Name(str):
        pass

    obj = three()
    with pytest.raises(TypeError, match=r"skip_fields must be an iterable of field names, not the .*Name 'ab'"):
        obj.asdict_zerocopy(Name("ab"))


# --- errors for what is not a dataclass instance -----------------------------


class NotADataclass(ZeroCopy):
    pass


def test_method_on_a_zero_copy_class_that_is_not_a_dataclass_raises_type_error():
    with pytest.raises(TypeError, match="NotADataclass is not a dataclass"):
        NotADataclass().asdict_zerocopy()
    with pytest.raises(TypeError, match="NotADataclass is not a dataclass"):
        NotADataclass().astuple_zerocopy()


@pytest.mark.parametrize("value", [3, "text", object(), NotADataclass(), [1, 2]], ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("function", [metakit.asdict_zerocopy, metakit.astuple_zerocopy])
def test_function_forms_on_a_non_dataclass_raise_type_error(value, function):
    with pytest.raises(TypeError, match=f"{function.__name__}.*{type(value).__qualname__} is not a dataclass"):
        function(value)


@dataclass
class PlainPoint:
    x: int = 0


@pytest.mark.parametrize("cls", [Three, PlainPoint, NotADataclass])
@pytest.mark.parametrize("function", [metakit.asdict_zerocopy, metakit.astuple_zerocopy])
def test_function_forms_on_a_class_raise_type_error(cls, function):
    with pytest.raises(TypeError, match=f"got the class {cls.__qualname__} itself"):
        function(cls)


def test_base_method_called_with_a_class_raises_type_error():
    with pytest.raises(TypeError, match="got the class Three itself"):
        ZeroCopy.asdict_zerocopy(Three)


@pytest.mark.parametrize(
    "value",
    [NotADataclass, int, 3, PlainPoint(), three()],
    ids=["non-dataclass class", "int class", "int", "plain dataclass instance", "zero-copy instance"],
)
def test_generated_source_of_anything_but_a_dataclass_raises_type_error(value):
    shown = value if isinstance(value, type) else type(value)
    with pytest.raises(TypeError, match=rf"\b{shown.__qualname__}\b"):
        metakit.generated_source(value)


def test_generated_source_of_dataclasses_with_and_without_the_base():
    assert "'a': self.a," in metakit.generated_source(Three)
    assert "'x': self.x," in metakit.generated_source(PlainPoint)


# --- exactly as without metakit -----------------------------------------------


def define_point(*bases: type, **options: Any) -> type:
    """The same class twice: with metakit (``bases=(ZeroCopy,)``) and without."""

    @dataclass(**options)
    class Point(*bases):
        x: int
        y: list[int] = field(default_factory=list)
        note: str = field(default="", compare=False)
        wrapper: object = field(default=None, metadata=OMIT)

    return Point


TWIN_OPTIONS: list[dict[str, Any]] = [
    {},
    {"frozen": True},
    {"slots": True},
    {"frozen": True, "slots": True},
    {"unsafe_hash": True},
    {"eq": False},
    {"order": True},
    {"repr": False},
    {"match_args": False},
    {"kw_only": True},
]


def twins(options: dict[str, Any]) -> tuple[Any, Any]:
    """An instance of each twin class, with equal values."""
    values = {"x": 1, "y": [2, 3], "note": "n", "wrapper": "w"}
    return define_point(ZeroCopy, **options)(**values), define_point(**options)(**values)


def shown(obj: Any) -> str:
    """*obj*'s repr without addresses, which differ between any two objects."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(obj))


def weakly_referable(obj: Any) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True


def reduction(obj: Any, protocol: int) -> object:
    """How pickle reduces *obj*, with its class replaced by a marker, or the error raised."""
    try:
        reduced = obj.__reduce_ex__(protocol)
    except TypeError as error:
        return type(error)

    def unclass(value: object) -> object:
        if value is type(obj):
            return "<class>"
        return tuple(map(unclass, value)) if type(value) is tuple else value

    return unclass(reduced)


@pytest.mark.parametrize("options", TWIN_OPTIONS, ids=str)
def test_pickle_reduction_is_as_without_metakit(options):
    ours, theirs = twins(options)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert reduction(ours, protocol) == reduction(theirs, protocol)


def hash_behaviour(obj: Any) -> object:
    """None if *obj* is unhashable, "identity" if hashed by identity, else its hash."""
    if type(obj).__hash__ is None:
        return None
    if type(obj).__hash__ is object.__hash__:
        return "identity"
    return hash(obj)


@pytest.mark.parametrize("options", TWIN_OPTIONS, ids=str)
def test_repr_eq_and_hash_are_as_without_metakit(options):
    ours, theirs = twins(options)
    assert shown(ours) == shown(theirs)
    assert (ours == copy.copy(ours)) == (theirs == copy.copy(theirs))
    assert (ours == dataclasses.replace(ours, x=5)) == (theirs == dataclasses.replace(theirs, x=5))
    hashable_ours, hashable_theirs = dataclasses.replace(ours, y=(2, 3)), dataclasses.replace(theirs, y=(2, 3))
    assert hash_behaviour(hashable_ours) == hash_behaviour(hashable_theirs)


@pytest.mark.parametrize("options", TWIN_OPTIONS, ids=str)
def test_class_attributes_are_as_without_metakit(options):
    ours, theirs = twins(options)
    Ours, Theirs = type(ours), type(theirs)
    assert Ours.__dict__.get("__slots__") == Theirs.__dict__.get("__slots__")
    assert hasattr(ours, "__dict__") == hasattr(theirs, "__dict__")
    assert weakly_referable(ours) == weakly_referable(theirs)
    assert getattr(Ours, "__match_args__", None) == getattr(Theirs, "__match_args__", None)
    assert Ours.__doc__ == Theirs.__doc__
    assert inspect.signature(Ours) == inspect.signature(Theirs)
    assert inspect.getsource(Ours) == inspect.getsource(Theirs)
    assert [(f.name, f.type, f.default, f.init, f.kw_only) for f in fields(Ours)] == [
        (f.name, f.type, f.default, f.init, f.kw_only) for f in fields(Theirs)
    ]


@pytest.mark.parametrize("options", TWIN_OPTIONS, ids=str)
def test_class_namespace_gains_only_the_generated_methods_and_their_state(options):
    ours, theirs = twins(options)
    added = set(vars(type(ours))) - set(vars(type(theirs)))
    if sys.version_info >= (3, 13):  # dataclasses gives every class a __replace__: ours takes its place
        assert vars(type(theirs))["__replace__"] is not vars(type(ours))["__replace__"]
        assert added == {"asdict_zerocopy", "astuple_zerocopy", "<metakit>"}
    else:
        assert added == {"asdict_zerocopy", "astuple_zerocopy", "__replace__", "<metakit>"}
    assert set(vars(type(theirs))) <= set(vars(type(ours)))


@pytest.mark.parametrize("options", TWIN_OPTIONS, ids=str)
def test_copy_and_deepcopy_are_as_without_metakit(options):
    ours, theirs = twins(options)
    for clone in (copy.copy, copy.deepcopy):
        ours_clone, theirs_clone = clone(ours), clone(theirs)
        assert type(ours_clone) is type(ours)
        assert shown(ours_clone) == shown(theirs_clone)
        assert (ours_clone.y is ours.y) == (theirs_clone.y is theirs.y)
        assert_converts(ours_clone)


def test_match_statement_reads_positional_fields():
    Point = define_point(ZeroCopy)
    match Point(1, [2, 3]):
        case Point(1, [2, y]):
            matched = y
        case _:
            matched = None
    assert matched == 3


@dataclass
class Pickled(ZeroCopy):
    x: int
    y: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PickledFrozenSlots(ZeroCopy):
    x: int
    y: tuple[int, ...] = ()


PickledByCall = dataclass(type("PickledByCall", (ZeroCopy,), {"__annotations__": {"x": int}}))
PlainPickledByCall = dataclass(type("PlainPickledByCall", (), {"__annotations__": {"x": int}}))


@pytest.mark.parametrize("obj", [Pickled(1, [2]), PickledFrozenSlots(1, (2,))], ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip(obj, protocol):
    loaded = pickle.loads(pickle.dumps(obj, protocol))
    assert type(loaded) is type(obj)
    assert loaded == obj
    assert loaded.asdict_zerocopy() == obj.asdict_zerocopy()


def test_class_made_by_calling_type_keeps_the_callers_module_and_pickles():
    # ``type(name, bases, ns)`` takes ``__module__`` from the calling frame.
    # Without metakit that frame is this module's; the metaclass must not
    # put its own module there instead.
    assert PickledByCall.__module__ == PlainPickledByCall.__module__ == __name__
    assert pickle.loads(pickle.dumps(PlainPickledByCall(1))) == PlainPickledByCall(1)
    assert pickle.loads(pickle.dumps(PickledByCall(1))) == PickledByCall(1)


def test_class_keyword_arguments_reach_init_subclass():
    class Flagged(ZeroCopy):
        def __init_subclass__(cls, flag: bool = False, **kwargs: Any) -> None:
            super().__init_subclass__(**kwargs)
            cls.flag = flag

    @dataclass
    class Step(Flagged, flag=True):
        a: object = None

    assert Step.flag is True
    assert_converts(Step(object()))


# --- values: never copied, never more than the fields ------------------------


def test_post_init_attributes_never_appear():
    step = WithPostInit(object())
    step.set_later = object()
    assert list(vars(step)) == ["a", "attn_bias", "is_profile_run", "set_later"]
    assert step.asdict_zerocopy() == {"a": step.a}
    assert step.astuple_zerocopy() == (step.a,)
    assert metakit.asdict_zerocopy(step) == {"a": step.a}


def test_values_are_the_same_objects_and_nested_values_are_not_recursed():
    @dataclass
    class Inner(ZeroCopy):
        values: list[int]

    @dataclass
    class Outer(ZeroCopy):
        inner: Inner
        tables: list[list[int]]
        lookup: dict[str, list[int]]

    outer = Outer(Inner([1]), [[1, 2]], {"k": [3]})
    d = outer.asdict_zerocopy()
    assert d["inner"] is outer.inner
    assert type(d["inner"]) is Inner
    assert d["tables"] is outer.tables
    assert d["lookup"] is outer.lookup
    assert_converts(outer)


def test_each_call_returns_a_fresh_dict():
    obj = three()
    first, second = obj.asdict_zerocopy(), obj.asdict_zerocopy()
    assert first is not second
    first["a"] = "changed"
    del first["b"]
    assert_same_objects(second, reference(obj))
    assert_same_objects(obj.asdict_zerocopy(), reference(obj))
    assert metakit.asdict_zerocopy(obj) is not metakit.asdict_zerocopy(obj)


def test_function_forms_work_on_plain_dataclasses():
    @dataclass
    class Plain:
        a: object
        b: object = field(default=None, metadata=OMIT)
        c: list[int] = field(default_factory=list)

        def __post_init__(self) -> None:
            self.attn_bias = None

    @dataclass(slots=True, frozen=True)
    class PlainSlots:
        a: object

    plain = Plain(object(), object())
    assert_same_objects(metakit.asdict_zerocopy(plain), {"a": plain.a, "c": plain.c})
    assert metakit.astuple_zerocopy(plain) == (plain.a, plain.c)
    assert metakit.asdict_zerocopy(plain, ["c"]) == {"a": plain.a}
    with pytest.raises(ValueError, match=r"'attn_bias'.*Plain"):
        metakit.asdict_zerocopy(plain, ["attn_bias"])
    slotted = PlainSlots(object())
    assert_same_objects(metakit.asdict_zerocopy(slotted), {"a": slotted.a})
    assert not hasattr(Plain, "asdict_zerocopy")


# --- the registry of classes, and what importing metakit costs ---------------


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


def test_import_metakit_imports_neither_torch_nor_mypy():
    code = "import sys, metakit; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mypy')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_metakit_testing_is_reachable_after_import_metakit():
    code = "import metakit; print(metakit.testing.assert_zerocopy.__name__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "assert_zerocopy"
