"""``metakit.testing.assert_zerocopy``: passes on correct classes, and names the
class and the difference on a class whose own methods get it wrong."""

import re
import types
from dataclasses import dataclass, field

import pytest

from metakit import OMIT, ZeroCopy
from metakit.testing import assert_zerocopy

# --- classes it accepts -------------------------------------------------------


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


@pytest.mark.parametrize(
    "obj",
    [
        Metadata(True, [1, 2], wrapper=object()),
        Slotted((1, 2)),
        PlainMetadata(False, [3]),
        TransparentOverride(True, [4], extra=object()),
        Undecorated(False, [5]),
        Empty(),
    ],
    ids=lambda obj: type(obj).__name__,
)
def test_passes_on_correct_classes(obj):
    assert_zerocopy(obj)


# --- classes it rejects -----------------------------------------------------------


@dataclass
class Base(ZeroCopy):
    a: object = None
    b: list[int] = field(default_factory=list)
    c: object = None


def broken(name: str, **methods: object) -> Base:
    """An instance of a subclass of ``Base`` whose *methods* replace the generated ones."""
    cls = dataclass(types.new_class(name, (Base,), exec_body=lambda ns: ns.update(methods)))
    return cls(object(), [1], object())


def adds_a_key(self, skip_fields=None):
    return {**super(type(self), self).asdict_zerocopy(skip_fields), "attn_bias": None}


def drops_a_key(self, skip_fields=None):
    return super(type(self), self).asdict_zerocopy({"b", *(skip_fields or ())})


def reorders_keys(self, skip_fields=None):
    return dict(reversed(super(type(self), self).asdict_zerocopy(skip_fields).items()))


def copies_a_value(self, skip_fields=None):
    d = super(type(self), self).asdict_zerocopy(skip_fields)
    if "b" in d:
        d["b"] = list(d["b"])
    return d


def ignores_skip_fields(self, skip_fields=None):
    return super(type(self), self).asdict_zerocopy()


def accepts_unknown_names(self, skip_fields=None):
    skip = set(skip_fields or ())
    return {k: v for k, v in super(type(self), self).asdict_zerocopy().items() if k not in skip}


def changes_skip_fields(self, skip_fields=None):
    d = super(type(self), self).asdict_zerocopy(skip_fields)
    if isinstance(skip_fields, set):
        skip_fields.discard("a")
    return d


_cached: dict[int, dict[str, object]] = {}


def returns_one_dict(self, skip_fields=None):
    if skip_fields is not None:
        return super(type(self), self).asdict_zerocopy(skip_fields)
    return _cached.setdefault(id(self), super(type(self), self).asdict_zerocopy())


def returns_a_mapping_proxy(self, skip_fields=None):
    return types.MappingProxyType(super(type(self), self).asdict_zerocopy(skip_fields))


def reorders_the_tuple(self):
    return tuple(reversed(super(type(self), self).astuple_zerocopy()))


def returns_a_list(self):
    return list(super(type(self), self).astuple_zerocopy())


BROKEN = [
    ("AddsKey", {"asdict_zerocopy": adds_a_key}, r"unexpected \['attn_bias'\]"),
    ("DropsKey", {"asdict_zerocopy": drops_a_key}, r"missing \['b'\]"),
    ("ReordersKeys", {"asdict_zerocopy": reorders_keys}, "the order differs"),
    ("CopiesValue", {"asdict_zerocopy": copies_a_value}, r"\['b'\] is not the object the instance holds"),
    ("IgnoresSkip", {"asdict_zerocopy": ignores_skip_fields}, "with skip_fields="),
    ("AcceptsUnknown", {"asdict_zerocopy": accepts_unknown_names}, "accepted skip_fields="),
    ("ChangesSkip", {"asdict_zerocopy": changes_skip_fields}, "changed the skip_fields"),
    ("OneDict", {"asdict_zerocopy": returns_one_dict}, "same dict twice"),
    ("Proxy", {"asdict_zerocopy": returns_a_mapping_proxy}, "returned mappingproxy, not dict"),
    ("ReordersTuple", {"astuple_zerocopy": reorders_the_tuple}, "astuple_zerocopy.*in order"),
    ("ListTuple", {"astuple_zerocopy": returns_a_list}, "returned list, not tuple"),
]


@pytest.mark.parametrize(("name", "methods", "difference"), BROKEN, ids=[case[0] for case in BROKEN])
def test_fails_naming_the_class_and_the_difference(name, methods, difference):
    obj = broken(name, **methods)
    with pytest.raises(AssertionError, match=difference) as error:
        assert_zerocopy(obj)
    assert str(error.value).startswith(f"{type(obj).__qualname__}: ")


def test_a_faithful_override_made_the_same_way_passes():
    # A class made by ``broken`` with a faithful override passes, so each
    # failure above comes from its method's one defect.
    def correct(self, skip_fields=None):
        return super(type(self), self).asdict_zerocopy(skip_fields)

    assert_zerocopy(broken("Correct", asdict_zerocopy=correct))


# --- what it accepts as an argument -----------------------------------------------


@pytest.mark.parametrize("cls", [Metadata, PlainMetadata])
def test_a_class_instead_of_an_instance_raises_type_error(cls):
    with pytest.raises(TypeError, match=f"got the class {re.escape(cls.__qualname__)} itself"):
        assert_zerocopy(cls)


@pytest.mark.parametrize("value", [3, "text", object(), [Metadata(True, [])]], ids=lambda v: type(v).__name__)
def test_a_non_dataclass_raises_type_error(value):
    with pytest.raises(TypeError, match=f"{type(value).__qualname__} is not a dataclass"):
        assert_zerocopy(value)
