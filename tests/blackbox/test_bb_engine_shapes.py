"""Black-box tests of metakit on the class shapes real inference engines write.

Written from DESIGN.md and README.md only.  Every check compares metakit against
``dataclasses``' own behaviour (``fields()``, ``dataclasses.replace``, a plain twin
class) or against an explicit expectation taken from the documents.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import dataclasses
import gc
import inspect
import linecache
import os
import pickle
import subprocess
import sys
import textwrap
import types
import typing
import weakref
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import pytest

import metakit
import metakit.testing as mt
from metakit import OMIT, ZeroCopy, ZeroCopyFields

try:
    from hypothesis import HealthCheck, event, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - every venv here has hypothesis
    given = None

PY313 = sys.version_info >= (3, 13)
PY311 = sys.version_info >= (3, 11)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------------------
# reference helpers
# ---------------------------------------------------------------------------


def is_omit(f: dataclasses.Field) -> bool:
    return any(f.metadata.get(k, object()) == v for k, v in OMIT.items())


def ref_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if not is_omit(f)]


def ref_dict(obj: Any) -> dict:
    return {n: getattr(obj, n) for n in ref_names(type(obj))}


def check_dict(d: Any, obj: Any, names: list[str]) -> None:
    assert type(d) is dict
    assert list(d) == names
    for n in names:
        assert d[n] is getattr(obj, n), n


def check_tuple(t: Any, obj: Any, names: list[str]) -> None:
    assert type(t) is tuple
    assert len(t) == len(names)
    for v, n in zip(t, names):
        assert v is getattr(obj, n), n


def check_generated(obj: Any, *, method: bool = True) -> None:
    """Every promise of the conversions, against fields()."""
    names = ref_names(type(obj))
    d1 = metakit.asdict_zerocopy(obj)
    d2 = metakit.asdict_zerocopy(obj)
    check_dict(d1, obj, names)
    assert d1 is not d2
    check_tuple(metakit.astuple_zerocopy(obj), obj, names)
    if method:
        check_dict(obj.asdict_zerocopy(), obj, names)
        assert obj.asdict_zerocopy() is not obj.asdict_zerocopy()
        check_tuple(obj.astuple_zerocopy(), obj, names)
    all_field_names = [f.name for f in dataclasses.fields(obj)]
    for n in all_field_names:
        skip = {n}
        want = [m for m in names if m != n]
        check_dict(metakit.asdict_zerocopy(obj, skip), obj, want)
        if method:
            check_dict(obj.asdict_zerocopy(skip_fields=skip), obj, want)
        assert skip == {n}
    every = list(all_field_names)
    check_dict(metakit.asdict_zerocopy(obj, skip_fields=tuple(every)), obj, [])
    if method:
        check_dict(obj.asdict_zerocopy(every), obj, [])
    assert every == all_field_names


def outcome(fn, /, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:
        return ("err", type(e), str(e))


def state(obj: Any, orig: Any, changes: dict) -> tuple:
    """The observable state of a replace result, with identity tokens."""
    out = [type(obj)]
    for f in dataclasses.fields(obj):
        try:
            v = getattr(obj, f.name)
        except AttributeError:
            out.append((f.name, "missing"))
            continue
        if f.name in changes and v is changes[f.name]:
            out.append((f.name, "change"))
        elif v is getattr(orig, f.name, object()):
            out.append((f.name, "orig"))
        else:
            out.append((f.name, "new", repr(v)))
    extra = getattr(obj, "__dict__", None)
    if extra is not None:
        field_names = {f.name for f in dataclasses.fields(obj)}
        out.append(sorted((k, repr(v)) for k, v in extra.items() if k not in field_names))
    return tuple(out)


def replace_outcomes(obj: Any, /, **changes) -> list:
    """Outcomes of dataclasses.replace, metakit.replace, __replace__ and copy.replace."""
    fns = [dataclasses.replace, metakit.replace]
    gen = type(obj).__dict__.get("__replace__") if isinstance(type(obj), ZeroCopyFields) else None
    if gen is not None:
        fns.append(lambda o, **c: type(o).__replace__(o, **c))
    if PY313 and isinstance(type(obj), ZeroCopyFields):
        fns.append(copy.replace)
    res = []
    for fn in fns:
        r = outcome(fn, obj, **changes)
        if r[0] == "ok":
            r = ("ok", state(r[1], obj, changes))
        res.append(r)
    return res


def assert_replace_like_dataclasses(obj: Any, /, **changes) -> None:
    res = replace_outcomes(obj, **changes)
    for r in res[1:]:
        assert r == res[0], (res[0], r)


# ---------------------------------------------------------------------------
# engine-like classes (module level, so that pickle finds them)
# ---------------------------------------------------------------------------


@dataclass
class AttnMeta(ZeroCopy):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Any
    seq_lens: list | None = None
    max_seq_len: int = field(init=False, default=0)
    block_size: ClassVar[int] = 16

    def __post_init__(self) -> None:
        self.attn_bias = None
        self.max_seq_len = max(self.seq_lens) if self.seq_lens else 0


@dataclass
class FlashMeta(AttnMeta):
    query_start_loc: Any = None
    context_lens: list = field(default_factory=list)
    use_cuda_graph: bool = False
    wrapper: object = field(default=None, metadata=OMIT)
    doc_wrapper: object = field(default=None, metadata={**OMIT, "doc": "a kernel"})

    def __post_init__(self) -> None:
        super().__post_init__()
        self._cached_prefill = None


@dataclass
class FlashInferMeta(FlashMeta):
    decode_wrapper: object = None
    page_size: int = 16

    def asdict_zerocopy(self, skip_fields=None):
        skip = {*(skip_fields or ()), "decode_wrapper"}
        return super().asdict_zerocopy(skip)


class FlashInferUndecorated(FlashInferMeta):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class FrozenSlotsMeta(ZeroCopy):
    input_tokens: Any
    input_positions: Any
    seq_lens: tuple = ()
    is_prompt: bool = True


@dataclass(frozen=True)
class FrozenPostInit(ZeroCopy):
    tokens: list
    n: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", len(self.tokens))
        object.__setattr__(self, "cache", {})


@dataclass
class KwOnlyInitVar(ZeroCopy):
    a: int
    scale: InitVar[float]
    _: KW_ONLY
    b: int = 2
    tag: str = "x"
    c: int = field(default=3, kw_only=False)
    derived: float = field(init=False, default=0.0)

    def __post_init__(self, scale: float) -> None:
        self.derived = self.a * scale
        self.seen_scale = scale


@dataclass(eq=False)
class EqFalseMeta(ZeroCopy):
    a: list = field(default_factory=list)
    b: int = 0


@dataclass(order=True, unsafe_hash=True)
class OrderedMeta(ZeroCopy):
    a: int = 0
    b: int = 0


@dataclass
class ManualSlots(ZeroCopy):
    __slots__ = ("a", "b")
    a: int
    b: list


@dataclass(slots=True)
class SlotsMeta(ZeroCopy):
    a: int = 0
    b: list = field(default_factory=list)
    c: object = field(default=None, metadata=OMIT)


@dataclass
class ModelInput(ZeroCopy):
    input_tokens: Any = None
    async_callback: Any = None
    virtual_engine: int = 0

    def __getstate__(self):
        s = dict(self.__dict__)
        s["async_callback"] = None
        return s

    def __setstate__(self, s):
        self.__dict__.update(s)
        self.restored = True


@dataclass(frozen=True, slots=True)
class FrozenSlotsGetstate(ZeroCopy):
    a: int = 0
    cb: Any = None

    def __getstate__(self):
        return (self.a,)

    def __setstate__(self, s):
        object.__setattr__(self, "a", s[0])
        object.__setattr__(self, "cb", None)


@dataclass(frozen=True, slots=True)
class PlainFrozenSlotsGetstate:
    a: int = 0
    cb: Any = None

    def __getstate__(self):
        return (self.a,)

    def __setstate__(self, s):
        object.__setattr__(self, "a", s[0])
        object.__setattr__(self, "cb", None)


T = TypeVar("T")


@dataclass
class Box(ZeroCopy, Generic[T]):
    item: T
    count: int = 0


@dataclass
class IntBox(Box[int]):
    extra: int = 1


class UBox(Box[str]):
    pass


class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
    pass


class ZeroCopyFieldsABC(abc.ABCMeta, ZeroCopyFields):
    pass


@dataclass
class AbstractBackendMeta(metaclass=ABCZeroCopyFields):
    block_size: int = 16

    @abc.abstractmethod
    def kind(self) -> str: ...


@dataclass
class ConcreteBackendMeta(AbstractBackendMeta):
    num_blocks: int = 4

    def kind(self) -> str:
        return "c"


class UndecoratedConcrete(AbstractBackendMeta):
    def kind(self) -> str:
        return "u"


@dataclass
class AbstractBackendMeta2(ZeroCopy, abc.ABC, metaclass=ZeroCopyFieldsABC):
    block_size: int = 16

    @abc.abstractmethod
    def kind(self) -> str: ...


@dataclass
class ConcreteBackendMeta2(AbstractBackendMeta2):
    num_blocks: int = 4

    def kind(self) -> str:
        return "c2"


@runtime_checkable
class HasSlotMapping(Protocol):
    slot_mapping: Any


class ProtoZ(ZeroCopyFields, type(Protocol)):
    pass


class ZProto(type(Protocol), ZeroCopyFields):
    pass


@dataclass
class ProtoMeta(HasSlotMapping, metaclass=ProtoZ):
    slot_mapping: Any = None
    n: int = 0


@dataclass
class ProtoMeta2(HasSlotMapping, metaclass=ZProto):
    slot_mapping: Any = None
    m: int = 0


class PlainMixin:
    def helper(self) -> int:
        return 42


class OverrideMixin:
    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy({"scratch", *(skip_fields or ())})


@dataclass
class MixedMeta(PlainMixin, ZeroCopy):
    a: int = 0
    b: list = field(default_factory=list)


@dataclass
class MixinOverrideMeta(OverrideMixin, ZeroCopy):
    a: int = 0
    scratch: object = None


@dataclass
class MixinOverrideSub(MixinOverrideMeta):
    c: int = 5


MDMeta = dataclasses.make_dataclass(
    "MDMeta",
    [("x", int), ("y", list, field(default_factory=list)), ("w", object, field(default=None, metadata=OMIT))],
    bases=(ZeroCopy,),
)
MDMeta.__module__ = __name__

MDFrozenSlots = dataclasses.make_dataclass(
    "MDFrozenSlots", [("x", int), ("y", int, field(default=0))], bases=(ZeroCopy,), frozen=True, slots=True
)
MDFrozenSlots.__module__ = __name__


@dataclass
class MangledMeta(ZeroCopy):
    __secret: int = 1
    public: int = 2

    def peek(self) -> int:
        return self.__secret


@dataclass
class BuiltinNamesMeta(ZeroCopy):
    self: int = 1
    type: str = "t"
    dict: Any = None
    skip_fields: Any = None
    changes: Any = None
    cls: Any = None
    obj: Any = None
    d: Any = None
    name: Any = None
    error: Any = None
    __d: Any = None


@dataclass
class MethodNamesMeta(ZeroCopy):
    asdict_zerocopy: int
    astuple_zerocopy: int
    replace: int = 0


# A deep hierarchy: 24 levels, each decorated level adds a field, every third level is
# an undecorated subclass that adds nothing.
_DEEP_SRC = []
_prev = "ZeroCopy"
for _i in range(24):
    if _i % 3 == 2:
        _DEEP_SRC.append(f"class Deep{_i}({_prev}):\n    pass\n")
    else:
        _DEEP_SRC.append(f"@dataclass\nclass Deep{_i}({_prev}):\n    f{_i}: list = field(default_factory=list)\n")
    _prev = f"Deep{_i}"
exec("\n".join(_DEEP_SRC), globals())
DEEP = [globals()[f"Deep{i}"] for i in range(24)]

WIDE_NAMES = [f"field_{i:03d}" for i in range(300)]
WideMeta = dataclasses.make_dataclass("WideMeta", [(n, int) for n in WIDE_NAMES], bases=(ZeroCopy,))
WideMeta.__module__ = __name__


def _instances() -> dict[str, Any]:
    return {
        "AttnMeta": AttnMeta(1, 8, 0, [0, 1, 2], seq_lens=[3, 5]),
        "FlashMeta": FlashMeta(1, 8, 2, [0, 1], [4], query_start_loc=[0, 4], wrapper=["kernel"]),
        "FlashInferMeta": FlashInferMeta(0, 0, 4, [7], decode_wrapper=["dw"]),
        "FlashInferUndecorated": FlashInferUndecorated(0, 0, 4, [7], decode_wrapper=["dw"]),
        "FrozenSlotsMeta": FrozenSlotsMeta(input_tokens=[1], input_positions=[0], seq_lens=(1,)),
        "FrozenPostInit": FrozenPostInit([1, 2, 3]),
        "KwOnlyInitVar": KwOnlyInitVar(2, 0.5, 9, b=4),
        "EqFalseMeta": EqFalseMeta([1], 2),
        "OrderedMeta": OrderedMeta(1, 2),
        "ManualSlots": ManualSlots(1, [2]),
        "SlotsMeta": SlotsMeta(1, [2], ["omitted"]),
        "ModelInput": ModelInput([1], print, 1),
        "FrozenSlotsGetstate": FrozenSlotsGetstate(3, print),
        "Box": Box([1], 2),
        "BoxAlias": Box[int](5),
        "IntBox": IntBox(3, 1, 2),
        "UBox": UBox("s"),
        "ConcreteBackendMeta": ConcreteBackendMeta(8, 2),
        "UndecoratedConcrete": UndecoratedConcrete(32),
        "ConcreteBackendMeta2": ConcreteBackendMeta2(8, 3),
        "ProtoMeta": ProtoMeta([1], 2),
        "ProtoMeta2": ProtoMeta2([1], 3),
        "MixedMeta": MixedMeta(1, [2]),
        "MixinOverrideMeta": MixinOverrideMeta(1, ["scratch"]),
        "MixinOverrideSub": MixinOverrideSub(1, ["scratch"], 3),
        "MDMeta": MDMeta(1, [2], ["w"]),
        "MDFrozenSlots": MDFrozenSlots(1, 2),
        "MangledMeta": MangledMeta(),
        "BuiltinNamesMeta": BuiltinNamesMeta(*[[i] for i in range(11)]),
        "MethodNamesMeta": MethodNamesMeta(1, 2, 3),
        "Deep23": DEEP[23](*[[i] for i in range(len(dataclasses.fields(DEEP[23])))]),
        "Deep11": DEEP[11](),
        "WideMeta": WideMeta(*range(300)),
    }


INSTANCE_IDS = list(_instances())
# classes whose own asdict_zerocopy is a user override (the method form differs)
OVERRIDDEN = {"FlashInferMeta", "FlashInferUndecorated", "MixinOverrideMeta", "MixinOverrideSub"}
# field names MethodNamesMeta shadows
METHOD_SHADOWED = {"MethodNamesMeta"}


def inst(name: str) -> Any:
    return _instances()[name]


# ---------------------------------------------------------------------------
# A. conversions on every shape
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_conversions_match_fields_reference(name):
    obj = inst(name)
    check_generated(obj, method=name not in OVERRIDDEN | METHOD_SHADOWED)


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_non_field_attributes_never_appear(name):
    obj = inst(name)
    if hasattr(obj, "__dict__"):
        object.__setattr__(obj, "late_attribute", 1)
        obj.__dict__["another_late"] = 2
    d = metakit.asdict_zerocopy(obj)
    assert "late_attribute" not in d and "another_late" not in d
    assert "attn_bias" not in d and "__orig_class__" not in d and "seen_scale" not in d
    assert list(d) == ref_names(type(obj))
    assert len(metakit.astuple_zerocopy(obj)) == len(ref_names(type(obj)))


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_skip_non_field_names_raise_value_error(name):
    obj = inst(name)
    cls = type(obj)
    for bad in ("not_a_field_xyz", "attn_bias", "block_size", "scale", "__orig_class__"):
        if bad in {f.name for f in dataclasses.fields(cls)}:
            continue
        with pytest.raises(ValueError) as ei:
            metakit.asdict_zerocopy(obj, skip_fields={bad})
        assert repr(bad) in str(ei.value) or bad in str(ei.value)
        assert cls.__name__ in str(ei.value)


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_assert_zerocopy_passes_on_correct_classes(name):
    if name in METHOD_SHADOWED:
        # a field named asdict_zerocopy shadows the method on the instance
        check_generated(inst(name), method=False)
    else:
        mt.assert_zerocopy(inst(name))


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_assert_zerocopy_class_passes_on_correct_classes(name):
    obj = inst(name)
    target = Box[int] if name == "BoxAlias" else type(obj)
    if name in METHOD_SHADOWED:
        check_generated(obj, method=False)
    else:
        mt.assert_zerocopy_class(target)


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_pickle_roundtrip(name):
    obj = inst(name)
    for proto in (2, pickle.HIGHEST_PROTOCOL):
        back = pickle.loads(pickle.dumps(obj, protocol=proto))
        assert type(back) is type(obj)
        if name == "ModelInput":
            assert back.async_callback is None and back.restored and back.input_tokens == [1]
        elif name == "FrozenSlotsGetstate":
            twin = pickle.loads(pickle.dumps(PlainFrozenSlotsGetstate(3, print), protocol=proto))
            assert (back.a, back.cb) == (twin.a, twin.cb)
        elif name == "EqFalseMeta":
            assert back.asdict_zerocopy() == obj.asdict_zerocopy()
        else:
            assert back == obj
        assert list(metakit.asdict_zerocopy(back)) == ref_names(type(obj))


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_copy_and_deepcopy(name):
    obj = inst(name)
    c = copy.copy(obj)
    dc = copy.deepcopy(obj)
    assert type(c) is type(obj) and type(dc) is type(obj)
    for n in ref_names(type(obj)):
        if name not in {"ModelInput", "FrozenSlotsGetstate"}:
            assert getattr(c, n) is getattr(obj, n)
    check_generated(c, method=name not in OVERRIDDEN | METHOD_SHADOWED)
    check_generated(dc, method=name not in OVERRIDDEN | METHOD_SHADOWED)


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_replace_without_changes_like_dataclasses(name):
    assert_replace_like_dataclasses(inst(name))


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_replace_each_init_field_like_dataclasses(name):
    obj = inst(name)
    for f in dataclasses.fields(obj):
        if f.init:
            assert_replace_like_dataclasses(obj, **{f.name: ["new", f.name]})


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_replace_errors_like_dataclasses(name):
    obj = inst(name)
    assert_replace_like_dataclasses(obj, no_such_field_abc=1)
    for f in dataclasses.fields(obj):
        if not f.init:
            res = replace_outcomes(obj, **{f.name: 1})
            assert res[0][0] == "err"
            assert f.name in res[0][2] or "InitVar" in res[0][2]
            assert all(r == res[0] for r in res)


# ---------------------------------------------------------------------------
# B. twins: a plain class of the same body behaves the same
# ---------------------------------------------------------------------------

TWIN_OPTIONS = [
    {},
    {"frozen": True},
    {"slots": True},
    {"frozen": True, "slots": True},
    {"eq": False},
    {"order": True},
    {"unsafe_hash": True},
    {"kw_only": True},
    {"repr": False},
    {"match_args": False},
    {"frozen": True, "kw_only": True, "slots": True},
]


def make_twin(base: type | None, options: dict):
    bases = (base,) if base is not None else ()

    class Twin(*bases):
        a: int
        b: list = field(default_factory=list)
        c: int = field(default=3, init=False)
        w: object = field(default=None, metadata=OMIT)
        cv: ClassVar[int] = 9

    Twin.__qualname__ = "Twin"
    return dataclass(**options)(Twin)


@pytest.mark.parametrize("options", TWIN_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_twin_behaviour_unchanged(options):
    Z = make_twin(ZeroCopy, options)
    P = make_twin(None, options)
    kw = options.get("kw_only", False)
    mk = (lambda C, a, b: C(a=a, b=b)) if kw else (lambda C, a, b: C(a, b))
    z1, z2, p1 = mk(Z, 1, [2]), mk(Z, 1, [2]), mk(P, 1, [2])
    assert repr(z1).replace(hex(id(z1)), "ADDR") == repr(p1).replace(hex(id(p1)), "ADDR")
    assert (z1 == z2) == (mk(P, 1, [2]) == p1)
    assert Z.__match_args__ == P.__match_args__ if hasattr(P, "__match_args__") else not hasattr(Z, "__match_args__")
    assert ("__match_args__" in Z.__dict__) == ("__match_args__" in P.__dict__)
    assert getattr(Z, "__slots__", None) == getattr(P, "__slots__", None) or (
        not options.get("slots") and "__slots__" not in Z.__dict__ and "__slots__" not in P.__dict__
    )
    assert hasattr(z1, "__dict__") == hasattr(p1, "__dict__")
    assert (Z.__hash__ is None) == (P.__hash__ is None)
    if Z.__hash__ is not None and options.get("eq", True) and (options.get("frozen") or options.get("unsafe_hash")):
        z3, p3 = mk(Z, 1, (2,)), mk(P, 1, (2,))
        assert hash(z3) == hash(p3)
    if options.get("order"):
        assert (mk(Z, 1, [2]) < mk(Z, 2, [2])) == (mk(P, 1, [2]) < mk(P, 2, [2]))
    assert [f.name for f in dataclasses.fields(Z)] == [f.name for f in dataclasses.fields(P)]
    assert str(inspect.signature(Z.__init__)) == str(inspect.signature(P.__init__))
    assert Z.__init__.__qualname__ == P.__init__.__qualname__
    if options.get("frozen"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            z1.a = 5
    check_generated(z1)
    assert list(z1.asdict_zerocopy()) == ["a", "b", "c"]


def test_twin_pickle_bytes_identical_shape():
    # module-level twins: pickling each gives the same reduce shape
    z = AttnMeta(1, 2, 3, [4])
    red = z.__reduce_ex__(2)
    assert red[0].__name__ in {"__newobj__", "__reduce_ex__"} or callable(red[0])
    back = pickle.loads(pickle.dumps(z))
    assert back == z and back.attn_bias is None


# ---------------------------------------------------------------------------
# C. overrides
# ---------------------------------------------------------------------------


@dataclass
class OvBase(ZeroCopy):
    a: list = field(default_factory=list)
    b: list = field(default_factory=list)
    w: object = None


@dataclass
class OvPositional(OvBase):
    c: int = 0

    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy({"w", *(skip_fields or ())})

    def astuple_zerocopy(self):
        return tuple(self.asdict_zerocopy().values())


@dataclass
class OvKeyword(OvBase):
    c: int = 0

    def asdict_zerocopy(self, skip_fields=None):
        skip = set(skip_fields) if skip_fields is not None else set()
        skip.add("w")
        return super().asdict_zerocopy(skip_fields=skip)


@dataclass
class OvNoSkip(OvBase):
    def asdict_zerocopy(self, skip_fields=None):
        d = super().asdict_zerocopy(skip_fields)
        return d

    def astuple_zerocopy(self):
        return super().astuple_zerocopy()


@dataclass
class OvLeaf(OvNoSkip):
    z: list = field(default_factory=list)


@dataclass
class OvLeafLeaf(OvLeaf):
    zz: int = 0


class OvUndecorated(OvLeafLeaf):
    pass


@dataclass(frozen=True, slots=True)
class OvFrozenSlots(ZeroCopy):
    a: int = 0
    wrapper: object = None

    def asdict_zerocopy(self, skip_fields=None):
        return ZeroCopy.asdict_zerocopy(self, {"wrapper", *(skip_fields or ())})


@dataclass
class OvReplace(OvBase):
    c: int = 0

    def __replace__(self, /, **changes):
        new = super().__replace__(**changes)
        new.__dict__["via_override"] = True
        return new


@dataclass
class OvReplaceSub(OvReplace):
    d: int = 1


def test_override_positional_skip_semantics():
    o = OvPositional([1], [2], object(), 3)
    assert list(o.asdict_zerocopy()) == ["a", "b", "c"]
    assert o.asdict_zerocopy({"a"}) == {"b": [2], "c": 3}
    assert o.astuple_zerocopy() == ([1], [2], 3)
    assert list(metakit.asdict_zerocopy(o)) == ["a", "b", "w", "c"]
    assert OvPositional(**o.asdict_zerocopy()).a == [1]


def test_override_keyword_super():
    o = OvKeyword([1], [2], object(), 3)
    skip = frozenset({"b"})
    assert o.asdict_zerocopy(skip) == {"a": [1], "c": 3}
    assert skip == {"b"}
    assert o.asdict_zerocopy()["a"] is o.a


@pytest.mark.parametrize("cls", [OvNoSkip, OvLeaf, OvLeafLeaf, OvUndecorated])
def test_super_in_base_override_serves_instance_class(cls):
    o = cls()
    names = ref_names(cls)
    check_dict(o.asdict_zerocopy(), o, names)
    check_tuple(o.astuple_zerocopy(), o, names)
    assert tuple(o.asdict_zerocopy().values()) == o.astuple_zerocopy()
    check_dict(o.asdict_zerocopy(("a",)), o, names[1:])


@pytest.mark.parametrize(
    "cls",
    [OvPositional, OvKeyword, OvNoSkip, OvLeaf, OvLeafLeaf, OvUndecorated, OvFrozenSlots, OvReplace, OvReplaceSub],
)
def test_correct_overrides_pass_both_helpers(cls):
    mt.assert_zerocopy_class(cls)
    mt.assert_zerocopy(cls())


@pytest.mark.parametrize("cls", [OvPositional, OvKeyword, OvNoSkip, OvLeafLeaf, OvFrozenSlots, OvReplace])
def test_function_forms_never_call_override(cls):
    o = cls()
    check_dict(metakit.asdict_zerocopy(o), o, ref_names(cls))
    check_tuple(metakit.astuple_zerocopy(o), o, ref_names(cls))


def test_replace_override_super_serves_own_class():
    o = OvReplaceSub([1], [2], None, 3, 4)
    r = o.__replace__(d=9)
    assert type(r) is OvReplaceSub and r.d == 9 and r.a is o.a
    # on 3.13 dataclasses itself gives every subclass its own __replace__; before, the
    # base's override is inherited.  metakit must do what plain dataclasses do.
    assert r.__dict__.get("via_override", False) == (not PY313)
    assert OvReplace([1]).__replace__(c=2).__dict__["via_override"]
    r2 = metakit.replace(o, d=8)
    assert type(r2) is OvReplaceSub and "via_override" not in r2.__dict__
    if PY313:
        r3 = copy.replace(o, c=7)
        assert r3.c == 7 and r3.d == 4


def test_mixin_override_inherited_not_replaced():
    o = MixinOverrideSub(1, object(), 3)
    assert o.asdict_zerocopy() == {"a": 1, "c": 3}
    assert list(metakit.asdict_zerocopy(o)) == ["a", "scratch", "c"]
    assert "asdict_zerocopy" in OverrideMixin.__dict__
    assert MixedMeta(1).helper() == 42


def test_make_dataclass_namespace_override_kept():
    def asdict_zerocopy(self, skip_fields=None):
        return {"custom": True}

    C = dataclasses.make_dataclass(
        "NsOv", [("a", int)], bases=(ZeroCopy,), namespace={"asdict_zerocopy": asdict_zerocopy}
    )
    assert C(1).asdict_zerocopy() == {"custom": True}
    assert metakit.asdict_zerocopy(C(1)) == {"a": 1}


def _fresh_pair():
    @dataclass
    class Base(ZeroCopy):
        a: int = 0
        w: object = None

    @dataclass
    class Sub(Base):
        b: int = 1

    class USub(Sub):
        pass

    return Base, Sub, USub


def test_override_assigned_later_on_base_reaches_subclasses():
    Base, Sub, USub = _fresh_pair()
    assert Sub().asdict_zerocopy() == {"a": 0, "w": None, "b": 1}

    def ov(self, skip_fields=None):
        return super(Base, self).asdict_zerocopy({"w", *(skip_fields or ())})

    Base.asdict_zerocopy = ov
    assert Base().asdict_zerocopy() == {"a": 0}
    assert Sub().asdict_zerocopy() == {"a": 0, "b": 1}
    assert USub().asdict_zerocopy() == {"a": 0, "b": 1}
    mt.assert_zerocopy_class(Sub)
    del Base.asdict_zerocopy
    assert Base().asdict_zerocopy() == {"a": 0, "w": None}
    assert Sub().asdict_zerocopy() == {"a": 0, "w": None, "b": 1}
    assert USub().asdict_zerocopy() == {"a": 0, "w": None, "b": 1}


def test_override_assigned_then_deleted_on_subclass_gets_own_fields_back():
    Base, Sub, USub = _fresh_pair()
    Sub.asdict_zerocopy = lambda self, skip_fields=None: {"x": 1}
    Sub.astuple_zerocopy = lambda self: ("x",)
    assert Sub().asdict_zerocopy() == {"x": 1} and USub().astuple_zerocopy() == ("x",)
    del Sub.asdict_zerocopy
    del Sub.astuple_zerocopy
    assert Sub().asdict_zerocopy() == {"a": 0, "w": None, "b": 1}
    assert Sub().astuple_zerocopy() == (0, None, 1)
    assert USub().asdict_zerocopy() == {"a": 0, "w": None, "b": 1}


def test_replace_override_assigned_later_and_deleted():
    Base, Sub, USub = _fresh_pair()
    Sub.__replace__ = lambda self, /, **ch: "custom"
    assert Sub().__replace__(b=2) == "custom"
    assert metakit.replace(Sub(), b=2) == Sub(0, None, 2)
    if PY313:
        assert copy.replace(Sub(), b=2) == "custom"
    del Sub.__replace__
    r = Sub().__replace__(b=3)
    assert type(r) is Sub and r == Sub(0, None, 3)


def test_override_in_body_sees_super_both_methods_agree():
    @dataclass
    class B(ZeroCopy):
        a: int = 0

    seen = {}

    @dataclass
    class M(B):
        b: int = 1

        def asdict_zerocopy(self, skip_fields=None):
            seen["d"] = super().asdict_zerocopy()
            seen["t"] = super().astuple_zerocopy()
            return super().asdict_zerocopy(skip_fields)

    @dataclass
    class L(M):
        c: int = 2

    L().asdict_zerocopy()
    assert list(seen["d"]) == ["a", "b", "c"]
    assert tuple(seen["d"].values()) == seen["t"]


# --- wrong overrides must be caught, naming the class and "override" ---


def _wrong(name: str, body: str):
    ns: dict = {}
    exec(
        textwrap.dedent(body),
        {"super": super, "dataclasses": dataclasses, "copy": copy, "types": types, "OvBase": OvBase},
        ns,
    )
    cls = type(name, (OvBase,), ns)
    cls.__module__ = __name__
    return dataclass(cls)


WRONG_OVERRIDES = {
    "MutatesSkip": """
        def asdict_zerocopy(self, skip_fields=None):
            if skip_fields is None:
                skip_fields = set()
            skip_fields.add("w")
            return super(OvBase, self).asdict_zerocopy(skip_fields)
    """,
    "DeepCopies": """
        def asdict_zerocopy(self, skip_fields=None):
            return dataclasses.asdict(self)
    """,
    "Reorders": """
        def asdict_zerocopy(self, skip_fields=None):
            return dict(reversed(list(super(OvBase, self).asdict_zerocopy(skip_fields).items())))
    """,
    "AddsKey": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy(skip_fields)
            d["attn_bias"] = None
            return d
    """,
    "SameDict": """
        def asdict_zerocopy(self, skip_fields=None):
            c = self.__dict__.setdefault("_c", super(OvBase, self).asdict_zerocopy(skip_fields))
            return c
    """,
    "IgnoresSkip": """
        def asdict_zerocopy(self, skip_fields=None):
            return super(OvBase, self).asdict_zerocopy()
    """,
    "OnlyFirstSkip": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy()
            if skip_fields:
                d.pop(next(iter(skip_fields)))
            return d
    """,
    "Proxy": """
        def asdict_zerocopy(self, skip_fields=None):
            return types.MappingProxyType(super(OvBase, self).asdict_zerocopy(skip_fields))
    """,
    "SwapsValues": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy(skip_fields)
            if "a" in d and "b" in d:
                d["a"], d["b"] = d["b"], d["a"]
            return d
    """,
    "CopiesOnSkip": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy(skip_fields)
            return {k: copy.copy(v) for k, v in d.items()} if skip_fields else d
    """,
    "SkipsMore": """
        def asdict_zerocopy(self, skip_fields=None):
            d = super(OvBase, self).asdict_zerocopy(skip_fields)
            if skip_fields:
                d.pop("w", None)
            return d
    """,
    "TupleReversed": """
        def astuple_zerocopy(self):
            return tuple(reversed(super(OvBase, self).astuple_zerocopy()))
    """,
    "TupleIsList": """
        def astuple_zerocopy(self):
            return list(super(OvBase, self).astuple_zerocopy())
    """,
    "TupleCopies": """
        def astuple_zerocopy(self):
            return tuple(copy.copy(v) for v in super(OvBase, self).astuple_zerocopy())
    """,
    "TupleExtra": """
        def astuple_zerocopy(self):
            return super(OvBase, self).astuple_zerocopy() + (self.a,)
    """,
}


@pytest.mark.parametrize("name", list(WRONG_OVERRIDES))
def test_wrong_override_caught_by_assert_zerocopy_class(name):
    cls = _wrong(name, WRONG_OVERRIDES[name])
    with pytest.raises(AssertionError) as ei:
        mt.assert_zerocopy_class(cls)
    msg = str(ei.value)
    assert name in msg and "override" in msg


@pytest.mark.parametrize("name", list(WRONG_OVERRIDES))
def test_wrong_override_caught_by_assert_zerocopy(name):
    cls = _wrong(name, WRONG_OVERRIDES[name])
    with pytest.raises(AssertionError) as ei:
        mt.assert_zerocopy(cls([1], [2], [3]))
    assert name in str(ei.value) and "override" in str(ei.value)


def test_wrong_override_dropping_required_field_caught():
    @dataclass
    class Req(ZeroCopy):
        must: int
        opt: int = 0

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"must", *(skip_fields or ())})

    with pytest.raises(AssertionError, match="Req"):
        mt.assert_zerocopy_class(Req)


def test_override_dropping_defaulted_field_passes():
    @dataclass
    class Opt(ZeroCopy):
        must: int
        opt: object = None
        later: int = field(init=False, default=0)

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"opt", *(skip_fields or ())})

    mt.assert_zerocopy_class(Opt)
    mt.assert_zerocopy(Opt(1, object()))


def test_fields_comprehension_override_is_a_correct_override():
    # vLLM's own asdict_zerocopy, as an override: new dict, fields in order, the very
    # objects, skip_fields honoured and never changed.
    @dataclass
    class VllmStyle(OvBase):
        def asdict_zerocopy(self, skip_fields=None):
            if skip_fields is None:
                skip_fields = set()
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip_fields}

    mt.assert_zerocopy_class(VllmStyle)


def test_helpers_refuse_wrong_kinds():
    with pytest.raises(TypeError):
        mt.assert_zerocopy(AttnMeta)
    with pytest.raises(TypeError):
        mt.assert_zerocopy(3)
    with pytest.raises(TypeError):
        mt.assert_zerocopy_class(AttnMeta(1, 2, 3, []))
    with pytest.raises(TypeError):
        mt.assert_zerocopy_class(int)


def test_helpers_on_plain_dataclass():
    @dataclass
    class PlainRec:
        a: int = 0
        w: object = field(default=None, metadata=OMIT)

    mt.assert_zerocopy(PlainRec())
    mt.assert_zerocopy_class(PlainRec)
    assert metakit.asdict_zerocopy(PlainRec(1, object())) == {"a": 1}


def test_helper_class_with_post_init_arithmetic():
    @dataclass
    class Arith(ZeroCopy):
        n: int
        doubled: int = field(init=False, default=0)

        def __post_init__(self):
            self.doubled = self.n * 2

    mt.assert_zerocopy_class(Arith)
    mt.assert_zerocopy(Arith(3))


# ---------------------------------------------------------------------------
# D. metaclass composition
# ---------------------------------------------------------------------------


def test_abc_both_orders_enforce_abstract_methods():
    with pytest.raises(TypeError):
        AbstractBackendMeta()
    with pytest.raises(TypeError):
        AbstractBackendMeta2()
    assert ConcreteBackendMeta(8, 2).asdict_zerocopy() == {"block_size": 8, "num_blocks": 2}
    assert ConcreteBackendMeta2().asdict_zerocopy() == {"block_size": 16, "num_blocks": 4}
    assert UndecoratedConcrete(4).asdict_zerocopy() == {"block_size": 4}
    assert isinstance(ConcreteBackendMeta(), AbstractBackendMeta)
    assert metakit.replace(UndecoratedConcrete(4), block_size=5).kind() == "u"


def test_abc_register_still_works():
    class Virtual:
        pass

    AbstractBackendMeta.register(Virtual)
    assert isinstance(Virtual(), AbstractBackendMeta)
    assert issubclass(ABCZeroCopyFields, ZeroCopyFields) and issubclass(ZeroCopyFieldsABC, abc.ABCMeta)


@pytest.mark.parametrize("order", ["mk_first", "other_first"])
def test_metaclass_setattr_delattr_hooks_run_like_plain(order):
    log: list = []

    class Logging(type):
        def __setattr__(cls, k, v):
            log.append(("L", k))
            super().__setattr__(k, v)

        def __delattr__(cls, k):
            log.append(("Ldel", k))
            super().__delattr__(k)

    bases = (ZeroCopyFields, Logging) if order == "mk_first" else (Logging, ZeroCopyFields)

    def own(cls, k, v):
        log.append(("own", k))
        super(Combined, cls).__setattr__(k, v)

    Combined = type("Combined", bases, {"__setattr__": own})
    PlainCombined = type(
        "PlainCombined",
        (Logging,),
        {"__setattr__": lambda cls, k, v: (log.append(("own", k)), super(PlainCombined, cls).__setattr__(k, v))[1]},
    )

    def run(meta):
        log.clear()

        class K(metaclass=meta):
            a: int = 0
            b: list = field(default_factory=list)

        K = dataclass(K)
        K.extra = 1
        del K.extra
        return list(log), K

    plain_log, _ = run(PlainCombined)
    mk_log, K = run(Combined)
    assert mk_log == plain_log
    assert K().asdict_zerocopy() == {"a": 0, "b": []}


def test_metaclass_call_in_body_is_honoured_by_replace():
    calls = []

    class Counting(ZeroCopyFields):
        def __call__(cls, *a, **k):
            calls.append((a, k))
            return super().__call__(*a, **k)

    @dataclass
    class C(metaclass=Counting):
        a: int
        b: int = 0

    o = C(1)
    calls.clear()
    dataclasses.replace(o, a=2)
    ref = list(calls)
    calls.clear()
    metakit.replace(o, a=2)
    assert calls == ref


def test_protocol_metaclass_both_orders():
    for cls, extra in ((ProtoMeta, "n"), (ProtoMeta2, "m")):
        o = cls([1], 5)
        assert isinstance(o, HasSlotMapping)
        assert o.asdict_zerocopy() == {"slot_mapping": [1], extra: 5}
        assert metakit.replace(o, **{extra: 6}) == cls([1], 6)


def test_metaclass_without_zerocopy_base_gets_methods():
    class Root(metaclass=ZeroCopyFields):
        pass

    @dataclass
    class R(Root):
        a: int = 0
        b: list = field(default_factory=list)

    o = R(1, [2])
    check_generated(o)
    assert metakit.replace(o, a=3) == R(3, [2])
    mt.assert_zerocopy_class(R)


def test_init_subclass_keywords_pass_through():
    @dataclass
    class Tagged(ZeroCopy):
        a: int = 0

        def __init_subclass__(cls, tag=None, **kw):
            super().__init_subclass__(**kw)
            cls.tag = tag

    @dataclass
    class TSub(Tagged, tag="decode"):
        b: int = 1

    assert TSub.tag == "decode"
    assert TSub().asdict_zerocopy() == {"a": 0, "b": 1}


def test_zerocopy_has_empty_slots_and_is_metaclass_instance():
    assert ZeroCopy.__slots__ == ()
    assert type(ZeroCopy) is ZeroCopyFields and issubclass(ZeroCopyFields, type)


def test_non_dataclass_zerocopy_methods_raise_type_error():
    class NotDC(ZeroCopy):
        pass

    for call in (
        lambda: NotDC().asdict_zerocopy(),
        lambda: NotDC().astuple_zerocopy(),
        lambda: metakit.asdict_zerocopy(NotDC()),
        lambda: metakit.astuple_zerocopy(NotDC()),
    ):
        with pytest.raises(TypeError, match="NotDC"):
            call()
    with pytest.raises(TypeError):
        metakit.replace(NotDC())


def test_class_becoming_dataclass_later_gets_methods():
    class Later(ZeroCopy):
        a: int = 1
        b: list = field(default_factory=list)

    Later.note = "x"
    dataclass(Later)
    check_generated(Later())
    assert metakit.replace(Later(), a=2) == Later(2)


def test_undecorated_subclass_becoming_dataclass_later():
    @dataclass
    class P(ZeroCopy):
        a: int = 1

    class Q(P):
        b: int = 2

    assert Q().asdict_zerocopy() == {"a": 1}
    assert metakit.asdict_zerocopy(Q()) == {"a": 1}
    dataclass(Q)
    check_generated(Q())
    assert metakit.replace(Q(), b=5) == dataclasses.replace(Q(), b=5)


# ---------------------------------------------------------------------------
# E. odd field names
# ---------------------------------------------------------------------------

ODD_NAMES = [
    "self",
    "type",
    "dict",
    "skip_fields",
    "changes",
    "d",
    "name",
    "error",
    "cls",
    "obj",
    "__d",
    "arguments",
    "isinstance",
    "KeyError",
    "TypeError",
    "tuple",
    "object",
    "super",
    "len",
    "print",
    "__builtins__",
    "__x__",
    "__weakref__",
    "_",
    "__",
    "match",
    "case",
    "ß",
    "Ω",
    "日本語",
    "naïve",
    "_NAME_COLLECTIONS",
    "_check_skipped",
    "_skip_fields_text",
    "_skip_fields_failed",
    "x" * 400,
    "None_",
    "async_",
    "__dataclass_fields_x",
    "replace",
    "asdict_zerocopy",
    "astuple_zerocopy",
]


@pytest.mark.parametrize("nm", ODD_NAMES, ids=lambda n: n if len(n) < 20 else f"long{len(n)}")
@pytest.mark.parametrize("opts", [{}, {"slots": True, "frozen": True}], ids=["plain", "frozen_slots"])
def test_odd_field_names(nm, opts):
    spec = [(nm, Any), ("other", Any, field(default=None))]
    val, oth = [nm], ["other"]
    plain = outcome(lambda: dataclasses.make_dataclass("Odd", spec, **opts)(val, oth))
    if plain[0] == "err":
        # dataclasses itself cannot make or fill such a class: metakit fails the same way
        mine = outcome(lambda: dataclasses.make_dataclass("Odd", spec, bases=(ZeroCopy,), **opts)(val, oth))
        assert mine[0] == "err" and mine[1] is plain[1]
        return
    C = dataclasses.make_dataclass("Odd", spec, bases=(ZeroCopy,), **opts)
    o = C(val, oth)
    d = metakit.asdict_zerocopy(o)
    assert list(d) == [nm, "other"] and d[nm] is val and d["other"] is oth
    assert metakit.astuple_zerocopy(o) == (val, oth) and metakit.astuple_zerocopy(o)[0] is val
    assert metakit.asdict_zerocopy(o, skip_fields={nm}) == {"other": oth}
    if nm not in {"asdict_zerocopy", "astuple_zerocopy"}:
        check_dict(o.asdict_zerocopy(), o, [nm, "other"])
        check_tuple(o.astuple_zerocopy(), o, [nm, "other"])
    assert_replace_like_dataclasses(o, **{nm: 5})
    assert_replace_like_dataclasses(o, other=6)
    assert_replace_like_dataclasses(o)
    if nm not in {"asdict_zerocopy", "astuple_zerocopy"}:
        mt.assert_zerocopy(o)
        mt.assert_zerocopy_class(C)
    assert repr(nm) in metakit.generated_source(C)


def test_nfkc_names_in_class_body():
    ns = {"dataclass": dataclass, "ZeroCopy": ZeroCopy}
    exec("@dataclass\nclass U(ZeroCopy):\n    \ufb01eld: int = 1\n    \u210cx: int = 2\n", ns)
    U = ns["U"]
    names = [f.name for f in dataclasses.fields(U)]
    assert U().asdict_zerocopy() == dict(zip(names, (1, 2)))
    assert metakit.replace(U(), **{names[1]: 5}) == U(1, 5)


def test_mangled_and_builtin_named_fields():
    o = MangledMeta(5, 6)
    assert o.asdict_zerocopy() == {"_MangledMeta__secret": 5, "public": 6}
    assert metakit.replace(o, _MangledMeta__secret=9).peek() == 9
    b = BuiltinNamesMeta(*[[i] for i in range(11)])
    names = [f.name for f in dataclasses.fields(BuiltinNamesMeta)]
    assert "_BuiltinNamesMeta__d" in names
    r = metakit.replace(b, self=["s"], skip_fields=["k"], changes=["c"])
    assert r == dataclasses.replace(b, self=["s"], skip_fields=["k"], changes=["c"])
    assert b.asdict_zerocopy(skip_fields={"skip_fields", "self"}) == {
        n: getattr(b, n) for n in names if n not in {"skip_fields", "self"}
    }


def test_field_named_like_methods_function_forms():
    o = MethodNamesMeta(1, 2, 3)
    assert metakit.asdict_zerocopy(o) == {"asdict_zerocopy": 1, "astuple_zerocopy": 2, "replace": 3}
    assert metakit.astuple_zerocopy(o) == (1, 2, 3)
    assert metakit.replace(o, replace=4) == MethodNamesMeta(1, 2, 4)


def test_hundreds_of_fields():
    o = WideMeta(*range(300))
    assert list(o.asdict_zerocopy()) == WIDE_NAMES
    assert o.astuple_zerocopy() == tuple(range(300))
    for n in (WIDE_NAMES[0], WIDE_NAMES[150], WIDE_NAMES[-1]):
        assert_replace_like_dataclasses(o, **{n: -1})
    assert o.asdict_zerocopy(WIDE_NAMES[::2]) == {n: i for i, n in enumerate(WIDE_NAMES) if i % 2}


def test_very_long_names_many_fields():
    names = [("q" * 200) + str(i) for i in range(60)]
    C = dataclasses.make_dataclass(
        "LongNames", [(n, int, field(default=i)) for i, n in enumerate(names)], bases=(ZeroCopy,)
    )
    o = C()
    assert list(o.asdict_zerocopy()) == names
    assert_replace_like_dataclasses(o, **{names[-1]: 0})


def test_deep_hierarchy_each_level():
    for i, cls in enumerate(DEEP):
        o = cls()
        want = [f"f{j}" for j in range(i + 1) if j % 3 != 2]
        assert ref_names(cls) == want
        check_generated(o)
        assert_replace_like_dataclasses(o, f0=["x"])
    mt.assert_zerocopy_class(DEEP[-1])


def test_redefined_field_keeps_base_position_and_omit_follows_own_class():
    @dataclass
    class B(ZeroCopy):
        a: int = 0
        w: object = field(default=None, metadata=OMIT)
        c: int = 1

    @dataclass
    class S(B):
        a: int = 5
        w: object = None  # no longer omitted
        c: int = field(default=2, metadata=OMIT)  # now omitted
        d: int = 3

    assert list(S().asdict_zerocopy()) == ["a", "w", "d"]
    assert list(B().asdict_zerocopy()) == ["a", "c"]
    check_generated(S())
    mt.assert_zerocopy_class(S)


def test_field_redefined_as_classvar_or_initvar_in_subclass():
    @dataclass
    class B(ZeroCopy):
        x: int = 1
        y: int = 2

    @dataclass
    class CV(B):
        x: ClassVar[int] = 5

    @dataclass
    class IV(B):
        x: InitVar[int] = 7

        def __post_init__(self, x):
            self.seen = x

    for cls in (CV, IV):
        assert ref_names(cls) == ["y"]
        check_generated(cls())
        assert_replace_like_dataclasses(cls(), y=3)
    assert_replace_like_dataclasses(IV(), x=9)


# ---------------------------------------------------------------------------
# F. replace semantics
# ---------------------------------------------------------------------------


def test_replace_init_false_field_error_exact():
    o = AttnMeta(1, 2, 3, [4], [1, 2])
    res = replace_outcomes(o, max_seq_len=4)
    assert res[0][0] == "err"
    assert res[0][1] is (TypeError if PY313 else ValueError)
    assert "max_seq_len" in res[0][2] and "init=False" in res[0][2]
    assert all(r == res[0] for r in res)


def test_replace_initvar_missing_error_exact():
    o = KwOnlyInitVar(2, 0.5, 9)
    res = replace_outcomes(o, a=3)
    assert res[0][0] == "err" and "scale" in res[0][2]
    assert res[0][1] is (TypeError if PY313 else ValueError)
    assert all(r == res[0] for r in res)
    assert_replace_like_dataclasses(o, scale=2.0)
    assert_replace_like_dataclasses(o, scale=2.0, b=5, c=1, tag="y")


def test_replace_initvar_with_default_uses_default_like_dataclasses():
    @dataclass
    class IVD(ZeroCopy):
        a: int
        scale: InitVar[int] = 3

        def __post_init__(self, scale):
            self.seen = scale

    o = IVD(1, 9)
    assert dataclasses.replace(o).seen == metakit.replace(o).seen == 3
    assert metakit.replace(o, scale=4).seen == 4
    assert_replace_like_dataclasses(o, a=2)


def test_replace_unknown_name_error_exact():
    for o, extra in (
        (AttnMeta(1, 2, 3, []), {}),
        (FrozenSlotsMeta(input_tokens=1, input_positions=2), {}),
        (KwOnlyInitVar(1, 1.0), {"scale": 2.0}),
    ):
        res = replace_outcomes(o, bogus=1, **extra)
        assert res[0][0] == "err" and res[0][1] is TypeError and "bogus" in res[0][2]
        assert all(r == res[0] for r in res)


def test_replace_combined_errors_first_field_wins_like_dataclasses():
    o = KwOnlyInitVar(2, 0.5, 9)
    assert_replace_like_dataclasses(o, derived=1.0)
    assert_replace_like_dataclasses(o, derived=1.0, bogus=2)
    assert_replace_like_dataclasses(o, scale=1.0, bogus=2)


def test_replace_runs_post_init_once():
    count = []

    @dataclass
    class PI(ZeroCopy):
        a: int = 0

        def __post_init__(self):
            count.append(self.a)

    o = PI()
    count.clear()
    dataclasses.replace(o, a=1)
    ref = list(count)
    count.clear()
    metakit.replace(o, a=1)
    assert count == ref == [1]
    count.clear()
    o.__replace__(a=2)
    assert count == [2]


def test_replace_frozen_post_init_recomputes_init_false():
    o = FrozenPostInit([1, 2, 3])
    r = metakit.replace(o, tokens=[1])
    assert r.n == 1 and r.cache == {} and r.cache is not o.cache
    assert_replace_like_dataclasses(o, tokens=[1])


def test_replace_default_factory_init_false_regenerated():
    @dataclass
    class DF(ZeroCopy):
        a: int = 0
        buf: list = field(init=False, default_factory=list)

    o = DF()
    o.buf.append(1)
    r = metakit.replace(o, a=1)
    assert r.buf == [] and r.buf is not o.buf
    assert_replace_like_dataclasses(o, a=1)


def test_replace_keeps_values_identical():
    o = FlashMeta(1, 8, 2, [0, 1], [4], query_start_loc=[0, 4], wrapper=object())
    r = metakit.replace(o, num_prefills=5)
    for f in dataclasses.fields(o):
        if f.init and f.name != "num_prefills":
            assert getattr(r, f.name) is getattr(o, f.name)
    assert r.wrapper is o.wrapper
    assert r.attn_bias is None and r._cached_prefill is None


def test_replace_eq_false_returns_new_object():
    o = EqFalseMeta([1], 2)
    r = metakit.replace(o)
    assert r is not o and r != o and r.a is o.a


def test_replace_user_init_with_other_order():
    @dataclass(init=False)
    class UI(ZeroCopy):
        a: int
        b: int

        def __init__(self, b, a):
            self.a, self.b = a, b

    assert_replace_like_dataclasses(UI(2, 1), a=5)
    assert metakit.replace(UI(2, 1), a=5).a == 5


def test_replace_undecorated_subclass_with_own_init():
    @dataclass
    class P(ZeroCopy):
        a: int
        b: int

    class S(P):
        def __init__(self, b, a):
            super().__init__(a, b)

    o = S(b=2, a=1)
    assert_replace_like_dataclasses(o, a=5)
    r = metakit.replace(o, a=5)
    assert (r.a, r.b) == (5, 2)


def test_replace_init_assigned_later():
    @dataclass
    class LI(ZeroCopy):
        a: int
        b: int

    o = LI(1, 2)
    metakit.replace(o, a=3)

    def init(self, b, a):
        self.a, self.b = a, b

    LI.__init__ = init
    assert_replace_like_dataclasses(o, a=5)
    assert (metakit.replace(o, a=5).a, metakit.replace(o, a=5).b) == (5, 2)


def test_replace_new_in_body_and_assigned_later_on_base():
    rec = []

    @dataclass
    class N(ZeroCopy):
        a: int
        b: int = 0

        def __new__(cls, *args, **kw):
            rec.append((args, kw))
            return super().__new__(cls)

    o = N(1)
    rec.clear()
    dataclasses.replace(o, a=2)
    ref = list(rec)
    rec.clear()
    metakit.replace(o, a=2)
    assert rec == ref

    @dataclass
    class NB(ZeroCopy):
        a: int
        b: int = 0

    @dataclass
    class NS(NB):
        c: int = 0

    o = NS(1, 2, 3)
    metakit.replace(o, a=1)

    def new(cls, *args, **kw):
        rec.append((args, kw))
        return object.__new__(cls)

    NB.__new__ = staticmethod(new)
    rec.clear()
    dataclasses.replace(o, a=2)
    ref = list(rec)
    rec.clear()
    metakit.replace(o, a=2)
    assert rec == ref


def test_replace_kw_only_and_slots_frozen():
    o = FrozenSlotsMeta(input_tokens=[1], input_positions=[0])
    for ch in ({}, {"is_prompt": False}, {"input_tokens": [2], "seq_lens": (1, 2)}):
        assert_replace_like_dataclasses(o, **ch)
    r = metakit.replace(o, is_prompt=False)
    assert r.input_tokens is o.input_tokens and not r.is_prompt
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.is_prompt = True


def test_replace_generic_instances():
    for o in (Box([1]), Box[int](3), IntBox(1, 2, 3), UBox("s")):
        assert_replace_like_dataclasses(o, count=7)
        r = metakit.replace(o, count=7)
        assert type(r) is type(o) and "__orig_class__" not in getattr(r, "__dict__", {})


def test_replace_refuses_non_instances_like_dataclasses():
    for bad in (AttnMeta, 3, None, "s", [1]):
        a = outcome(dataclasses.replace, bad)
        b = outcome(metakit.replace, bad)
        assert a[0] == b[0] == "err" and a[1] is b[1] is TypeError


def test_replace_obj_keyword_is_a_change():
    @dataclass
    class O(ZeroCopy):
        obj: int = 0
        self: int = 0

    assert metakit.replace(O(), obj=1, self=2) == O(1, 2)


def test_dunder_replace_on_every_version_and_copy_replace_on_313():
    o = AttnMeta(1, 2, 3, [4])
    r = AttnMeta.__replace__(o, num_prefills=9)
    assert r.num_prefills == 9 and r.slot_mapping is o.slot_mapping
    if PY313:
        r2 = copy.replace(o, num_prefills=8)
        assert r2.num_prefills == 8 and r2.slot_mapping is o.slot_mapping
    else:
        assert not hasattr(copy, "replace")


def test_plain_dataclass_replace_function_form():
    @dataclass(frozen=True)
    class PF:
        a: int
        b: list = field(default_factory=list)
        c: int = field(init=False, default=0)

    o = PF(1, [2])
    for ch in ({}, {"a": 2}, {"c": 1}, {"z": 1}):
        a = outcome(dataclasses.replace, o, **ch)
        b = outcome(metakit.replace, o, **ch)
        if a[0] == "ok":
            assert b[0] == "ok" and state(a[1], o, ch) == state(b[1], o, ch)
        else:
            assert a == b


# ---------------------------------------------------------------------------
# G. generated source, linecache, zerocopy_classes
# ---------------------------------------------------------------------------


def test_generated_source_names_fields_and_no_defaults():
    secret = "SECRET-DEFAULT-VALUE-1234"

    @dataclass
    class Src(ZeroCopy):
        alpha: str = secret
        beta: list = field(default_factory=lambda: [secret])
        gamma: object = field(default=secret, metadata=OMIT)

    src = metakit.generated_source(Src)
    assert secret not in src
    assert src.index("'alpha'") < src.index("'beta'")
    assert "def asdict_zerocopy" in src and "def astuple_zerocopy" in src and "def __replace__" in src
    asdict_part = src[src.index("def asdict_zerocopy") : src.index("def astuple_zerocopy")]
    assert "gamma" not in asdict_part
    for m in ("asdict_zerocopy", "astuple_zerocopy", "__replace__"):
        fn = getattr(Src, m)
        assert inspect.getsource(fn) in src
        assert fn.__code__.co_filename.startswith("<metakit ")
        assert "Src" in fn.__code__.co_filename
        assert linecache.getlines(fn.__code__.co_filename)


@pytest.mark.parametrize(
    "cls", [SlotsMeta, FrozenSlotsMeta, MDMeta, MDFrozenSlots, IntBox, ConcreteBackendMeta, ProtoMeta, DEEP[-1]]
)
def test_generated_source_for_shapes(cls):
    src = metakit.generated_source(cls)
    for n in ref_names(cls):
        assert repr(n) in src
    if "__replace__" in cls.__dict__:
        assert inspect.getsource(cls.__replace__) in src
    owner = next(k for k in cls.__mro__ if "asdict_zerocopy" in k.__dict__)
    fn = owner.__dict__["asdict_zerocopy"]
    assert fn.__qualname__ == owner.__qualname__ + ".asdict_zerocopy"
    assert owner.__qualname__ in fn.__code__.co_filename


def test_generated_source_for_override_class_is_generated_code():
    src = metakit.generated_source(FlashInferMeta)
    assert "'decode_wrapper'" in src and "'wrapper'" in src.split("def astuple_zerocopy")[1]
    assert "skip = {" not in src


def test_generated_source_refuses_non_dataclasses():
    for bad in (3, int, AttnMeta(1, 2, 3, [])):
        if dataclasses.is_dataclass(bad) and not isinstance(bad, type):
            # an instance: documented as "expected a dataclass" for non-dataclasses only
            continue
        with pytest.raises(TypeError):
            metakit.generated_source(bad)


def test_traceback_shows_generated_line():
    o = AttnMeta(1, 2, 3, [])
    del o.__dict__["seq_lens"]
    # seq_lens now resolves to the class default (None) -> no error; remove the class attr path too
    o2 = FrozenPostInit.__new__(FrozenPostInit)
    with pytest.raises(AttributeError) as ei:
        o2.asdict_zerocopy()
    frames = [f for f in ei.traceback if str(f.path).startswith("<metakit")]
    assert frames


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
    assert E1 in live and E2 in live and live.index(E1) < live.index(E2)
    assert AttnMeta in live and live.index(AttnMeta) < live.index(E1)
    r1, r2 = weakref.ref(E1), weakref.ref(E2)
    del E1, E2, live
    gc.collect()
    assert r1() is None and r2() is None
    assert not [c for c in metakit.zerocopy_classes() if c.__name__ in {"Ephemeral", "Ephemeral2"}]


def test_zerocopy_classes_exclude_plain_dataclasses():
    @dataclass
    class PlainOne:
        a: int = 0

    metakit.asdict_zerocopy(PlainOne())
    assert PlainOne not in metakit.zerocopy_classes()


# ---------------------------------------------------------------------------
# H. python -m metakit show
# ---------------------------------------------------------------------------

SHOW_MODULE = """
from dataclasses import dataclass, field
from metakit import ZeroCopy, OMIT

@dataclass
class Meta(ZeroCopy):
    a: int = 0
    w: object = field(default=None, metadata=OMIT)

@dataclass
class Over(Meta):
    b: int = 1
    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy(skip_fields)

@dataclass
class Lone(ZeroCopy):
    q: int = 0

@dataclass
class Plain:
    x: int = 0

class Outer:
    @dataclass(slots=True)
    class Inner(ZeroCopy):
        z: int = 0

class NotDC:
    pass

@dataclass
class RParent(ZeroCopy):
    a: int = 0

@dataclass
class RChild(RParent):
    b: int = 0
    def __replace__(self, /, **changes):
        return super().__replace__(**changes)

@dataclass
class Deleted(ZeroCopy):
    a: int = 0

Deleted.asdict_zerocopy = lambda self, skip_fields=None: {}
del Deleted.asdict_zerocopy

@dataclass
class LaterTuple(ZeroCopy):
    a: int = 0

LaterTuple.astuple_zerocopy = lambda self: (self.a,)
"""


@pytest.fixture(scope="module")
def show_module(tmp_path_factory):
    d = tmp_path_factory.mktemp("showmod")
    (d / "bb_show_mod.py").write_text(SHOW_MODULE)
    sys.path.insert(0, str(d))
    try:
        import bb_show_mod

        results = {}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(d), os.environ.get("PYTHONPATH", "")]))
        for target in (
            "Meta",
            "Over",
            "Lone",
            "Plain",
            "Outer.Inner",
            "NotDC",
            "Missing",
            "RParent",
            "RChild",
            "Deleted",
            "LaterTuple",
        ):
            p = subprocess.run(
                [sys.executable, "-m", "metakit", "show", f"bb_show_mod:{target}"],
                capture_output=True,
                text=True,
                env=env,
                cwd=REPO,
                timeout=60,
                check=False,
            )
            results[target] = p
        yield bb_show_mod, results
    finally:
        sys.path.remove(str(d))
        sys.modules.pop("bb_show_mod", None)


@pytest.mark.parametrize(
    "target", ["Meta", "Over", "Lone", "Plain", "Outer.Inner", "RParent", "RChild", "Deleted", "LaterTuple"]
)
def test_show_prints_generated_source(show_module, target):
    mod, res = show_module
    cls = mod
    for part in target.split("."):
        cls = getattr(cls, part)
    p = res[target]
    assert p.returncode == 0, p.stderr
    assert p.stdout == metakit.generated_source(cls)


def test_show_notes_override_and_plain(show_module):
    _, res = show_module
    assert "Over.asdict_zerocopy" in res["Over"].stderr and "own" in res["Over"].stderr
    assert "astuple_zerocopy" not in res["Over"].stderr
    assert "plain dataclass" in res["Plain"].stderr
    assert res["Lone"].stderr == ""
    assert res["Outer.Inner"].stderr == ""
    assert res["Deleted"].stderr == ""
    assert "LaterTuple.astuple_zerocopy" in res["LaterTuple"].stderr
    assert "asdict_zerocopy" not in res["LaterTuple"].stderr
    assert "RChild.__replace__" in res["RChild"].stderr and "asdict" not in res["RChild"].stderr


def test_show_no_false_override_note_on_base(show_module):
    _, res = show_module
    # Meta defines no asdict_zerocopy/astuple_zerocopy/__replace__ of its own; only its
    # subclass Over overrides asdict_zerocopy.  Likewise RParent: only RChild has a __replace__.
    assert res["Meta"].stderr == ""
    assert res["RParent"].stderr == ""


def test_show_errors_exit_2(show_module):
    _, res = show_module
    for t in ("NotDC", "Missing"):
        assert res[t].returncode == 2 and res[t].stdout == ""
        assert res[t].stderr.count("\n") == 1 and "error" in res[t].stderr


# ---------------------------------------------------------------------------
# I. plain dataclasses through the function forms
# ---------------------------------------------------------------------------


def test_plain_function_forms_follow_fields_after_class_becomes_dataclass():
    @dataclass
    class P:
        a: int = 1

    class Q(P):
        b: int = 2

    assert metakit.asdict_zerocopy(Q()) == {"a": 1}
    dataclass(Q)
    assert [f.name for f in dataclasses.fields(Q)] == ["a", "b"]
    assert metakit.asdict_zerocopy(Q()) == {"a": 1, "b": 2}
    assert metakit.astuple_zerocopy(Q()) == (1, 2)


def test_plain_helper_after_class_becomes_dataclass():
    @dataclass
    class P:
        a: int = 1

    class Q(P):
        b: int = 2

    metakit.asdict_zerocopy(Q())
    dataclass(Q)
    mt.assert_zerocopy(Q())


def test_plain_dataclass_classes_of_one_name_never_mixed():
    for i in range(60):
        names = [f"v{i % 4}_{j}" for j in range(i % 5 + 1)]
        C = dataclasses.make_dataclass("SameName", [(n, int, field(default=j)) for j, n in enumerate(names)])
        o = C()
        assert list(metakit.asdict_zerocopy(o)) == names
        assert metakit.replace(o, **{names[0]: 9}) == dataclasses.replace(o, **{names[0]: 9})
        del C, o
        if i % 5 == 0:
            gc.collect()


def test_plain_slots_and_omit_function_form():
    @dataclass(slots=True, frozen=True)
    class PS:
        a: Any = None
        w: Any = field(default=None, metadata=OMIT)
        b: Any = None

    o = PS([1], object(), [2])
    check_generated(o, method=False)
    assert metakit.replace(o, b=3).w is o.w


# ---------------------------------------------------------------------------
# J. hypothesis: random record shapes
# ---------------------------------------------------------------------------

NAME_POOL = [
    "a",
    "b",
    "c",
    "self",
    "skip_fields",
    "changes",
    "d",
    "name",
    "error",
    "cls",
    "obj",
    "dict",
    "type",
    "x_1",
    "ß",
    "日本",
    "_d",
    "arguments",
    "tuple",
    "KeyError",
]
KINDS = ["req", "def", "fac", "nif", "niffac", "omit", "cv", "ivr", "ivd", "kwr", "kwd", "nifnod"]


def _build(spec, base, options):  # noqa: PLR0912 - one branch per field kind
    positional_required = [s for s in spec if s[1] in ("req", "ivr")]
    rest = [s for s in spec if s[1] not in ("req", "ivr")]
    ordered = spec if options.get("kw_only") else positional_required + rest
    fields_ = []
    initvars = []
    for name, kind in ordered:
        if kind == "req":
            fields_.append((name, Any))
        elif kind == "def":
            fields_.append((name, Any, field(default=name)))
        elif kind == "fac":
            fields_.append((name, Any, field(default_factory=list)))
        elif kind == "nif":
            fields_.append((name, Any, field(default=0, init=False)))
        elif kind == "niffac":
            fields_.append((name, Any, field(default_factory=dict, init=False)))
        elif kind == "nifnod":
            fields_.append((name, Any, field(init=False)))
        elif kind == "omit":
            fields_.append((name, Any, field(default=None, metadata=OMIT)))
        elif kind == "cv":
            fields_.append((name, ClassVar[int], 3))
        elif kind == "ivr":
            fields_.append((name, InitVar[int]))
            initvars.append(name)
        elif kind == "ivd":
            fields_.append((name, InitVar[int], field(default=4)))
            initvars.append(name)
        elif kind == "kwr":
            fields_.append((name, Any, field(kw_only=True)))
        elif kind == "kwd":
            fields_.append((name, Any, field(default=1, kw_only=True)))
    nifnod = [n for n, k in ordered if k == "nifnod"]
    slots = options.get("slots", False)

    def __post_init__(*args):
        obj = args[0]
        for n in nifnod:
            object.__setattr__(obj, n, ("post", args[1:]))
        if not slots:
            object.__setattr__(obj, "_post_extra", len(args))

    ns = {"__post_init__": __post_init__}
    bases = (base,) if base is not None else ()
    return dataclasses.make_dataclass("Rec", fields_, bases=bases, namespace=ns, **options), ordered


def _construct(cls, ordered, options):
    args, kwargs = [], {}
    for name, kind in ordered:
        if kind in ("cv", "nif", "niffac", "nifnod", "omit", "def", "fac", "ivd", "kwd"):
            continue
        val = ["v", name]
        if kind == "ivr":
            val = 7
        if kind in ("kwr",) or options.get("kw_only"):
            kwargs[name] = val
        else:
            args.append(val)
    return cls(*args, **kwargs)


if given is not None:
    spec_strategy = st.lists(
        st.tuples(st.sampled_from(NAME_POOL), st.sampled_from(KINDS)),
        min_size=0,
        max_size=8,
        unique_by=lambda t: t[0],
    )
    option_strategy = st.fixed_dictionaries(
        {}, optional={"frozen": st.booleans(), "slots": st.booleans(), "eq": st.booleans(), "kw_only": st.booleans()}
    )

    @settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
    @given(spec=spec_strategy, options=option_strategy, data=st.data())
    def test_random_shapes_conversions_and_helpers(spec, options, data):
        cls, ordered = _build(spec, ZeroCopy, options)
        obj = _construct(cls, ordered, options)
        check_generated(obj)
        mt.assert_zerocopy(obj)
        mt.assert_zerocopy_class(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        skip = data.draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
        container = data.draw(
            st.sampled_from([set, frozenset, tuple, list, lambda x: dict.fromkeys(x).keys(), lambda x: iter(list(x))])
        )
        want = [n for n in ref_names(cls) if n not in skip]
        check_dict(obj.asdict_zerocopy(container(skip)), obj, want)
        check_dict(metakit.asdict_zerocopy(obj, skip_fields=container(skip)), obj, want)
        for pseudo, kind in ordered:
            if kind in ("cv", "ivr", "ivd"):
                with pytest.raises(ValueError, match="Rec"):
                    obj.asdict_zerocopy({pseudo})

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(spec=spec_strategy, options=option_strategy, data=st.data())
    def test_random_shapes_replace_like_dataclasses(spec, options, data):
        cls, ordered = _build(spec, ZeroCopy, options)
        obj = _construct(cls, ordered, options)
        changes = {}
        for name, kind in ordered:
            if kind == "cv":
                continue
            if data.draw(st.booleans()):
                changes[name] = ["changed", name] if kind not in ("ivr", "ivd") else 11
            elif kind == "ivr" and data.draw(st.booleans()):
                changes[name] = 12
        if data.draw(st.booleans()):
            changes["zz_unknown"] = 1
        assert_replace_like_dataclasses(obj, **changes)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(spec=spec_strategy, options=option_strategy)
    def test_random_shapes_twins_unchanged(spec, options):
        Z, ordered = _build(spec, ZeroCopy, options)
        P, _ = _build(spec, None, options)
        z, p = _construct(Z, ordered, options), _construct(P, ordered, options)
        z2 = _construct(Z, ordered, options)
        try:
            rp = repr(p)
        except AttributeError:
            rp = "missing"
        try:
            rz = repr(z)
        except AttributeError:
            rz = "missing"
        assert rz == rp
        assert getattr(Z, "__match_args__", None) == getattr(P, "__match_args__", None)
        assert ("__slots__" in Z.__dict__) == ("__slots__" in P.__dict__)
        assert getattr(Z, "__slots__", ()) == getattr(P, "__slots__", ())
        assert (Z.__hash__ is None) == (P.__hash__ is None)
        assert str(inspect.signature(Z.__init__)) == str(inspect.signature(P.__init__))
        if options.get("eq", True):
            with contextlib.suppress(AttributeError):
                assert (z == z2) == (p == _construct(P, ordered, options))
        else:
            assert z != z2

    def _build_hierarchy(base_spec, sub_spec, options, sub_mode, root):
        Base, base_ordered = _build(base_spec, root, options)
        if sub_mode == "undecorated":
            Sub = type("Sub", (Base,), {})
            return Base, Sub, base_ordered
        sub_fields = []
        for name, kind in sub_spec:
            if kind == "def":
                sub_fields.append((name, Any, field(default=("sub", name))))
            elif kind == "omit":
                sub_fields.append((name, Any, field(default=None, metadata=OMIT)))
            elif kind == "kwd":
                sub_fields.append((name, Any, field(default=2, kw_only=True)))
            elif kind == "nif":
                sub_fields.append((name, Any, field(default=5, init=False)))
            elif kind == "cv":
                sub_fields.append((name, ClassVar[int], 1))
        Sub = dataclasses.make_dataclass("Sub", sub_fields, bases=(Base,), **options)
        # the order of __init__ parameters after redefinition: rebuild from fields()
        ordered = []
        kinds = dict(base_ordered)
        kinds.update({n: k for n, k in sub_spec if k in ("def", "omit", "kwd", "nif", "cv")})
        for f in dataclasses.fields(Sub):
            ordered.append((f.name, kinds.get(f.name, "def")))
        for n, k in base_ordered:
            if k in ("ivr", "ivd", "cv") and n not in {f.name for f in dataclasses.fields(Sub)} and kinds.get(n) == k:
                ordered.append((n, k))
        return Base, Sub, ordered

    sub_spec_strategy = st.lists(
        st.tuples(st.sampled_from(NAME_POOL), st.sampled_from(["def", "omit", "kwd", "nif", "cv"])),
        max_size=4,
        unique_by=lambda t: t[0],
    )

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        base_spec=spec_strategy,
        sub_spec=sub_spec_strategy,
        options=option_strategy,
        sub_mode=st.sampled_from(["decorated", "undecorated"]),
        data=st.data(),
    )
    def test_random_hierarchies_like_dataclasses(base_spec, sub_spec, options, sub_mode, data):
        plain = outcome(_build_hierarchy, base_spec, sub_spec, options, sub_mode, None)
        mine = outcome(_build_hierarchy, base_spec, sub_spec, options, sub_mode, ZeroCopy)
        if plain[0] == "err":
            event("dataclasses refuses the shape")
            assert mine[0] == "err" and mine[1] is plain[1], (plain, mine)
            return
        event(f"built {sub_mode}")
        assert mine[0] == "ok", mine
        _, Sub, ordered = mine[1]
        _, PSub, _ = plain[1]
        assert [f.name for f in dataclasses.fields(Sub)] == [f.name for f in dataclasses.fields(PSub)]
        kw = {}
        args = []
        sig = inspect.signature(Sub.__init__)
        for pname, param in list(sig.parameters.items())[1:]:
            if param.default is not inspect.Parameter.empty:
                continue
            val = 7 if "InitVar" in str(param.annotation) else ["v", pname]
            if param.kind is inspect.Parameter.KEYWORD_ONLY:
                kw[pname] = val
            else:
                args.append(val)
        made_plain = outcome(PSub, *args, **kw)
        made = outcome(Sub, *args, **kw)
        if made_plain[0] == "err":
            event("dataclasses cannot make an instance")
            assert made[0] == "err" and made[1] is made_plain[1]
            return
        obj = made[1]
        check_generated(obj)
        mt.assert_zerocopy(obj)
        mt.assert_zerocopy_class(Sub)
        changes = {}
        for pname, param in list(sig.parameters.items())[1:]:
            if data.draw(st.booleans()):
                changes[pname] = 13 if "InitVar" in str(param.annotation) else ["c", pname]
            elif (
                param.default is inspect.Parameter.empty
                and "InitVar" in str(param.annotation)
                and data.draw(st.booleans())
            ):
                changes[pname] = 14
        if data.draw(st.booleans()):
            nif = [f.name for f in dataclasses.fields(Sub) if not f.init]
            if nif:
                changes[data.draw(st.sampled_from(nif))] = 0
        assert_replace_like_dataclasses(obj, **changes)


# ---------------------------------------------------------------------------
# L. more engine shapes
# ---------------------------------------------------------------------------


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


@pytest.mark.parametrize("order", ["mk_first", "other_first"])
def test_plain_metaclass_call_combined(order):
    rec = []

    class CallMeta(type):
        def __call__(cls, *a, **k):
            rec.append((a, k))
            return super().__call__(*a, **k)

    bases = (ZeroCopyFields, CallMeta) if order == "mk_first" else (CallMeta, ZeroCopyFields)
    M = type("M", bases, {})

    @dataclass
    class C(metaclass=M):
        a: int
        b: int = 0

    o = C(1)
    rec.clear()
    dataclasses.replace(o, a=2)
    ref = list(rec)
    rec.clear()
    metakit.replace(o, a=2)
    assert rec == ref
    rec.clear()
    C.__replace__(o, a=2)
    assert rec == ref


def test_new_in_plain_mixin_body():
    rec = []

    class NewMixin:
        def __new__(cls, *a, **k):
            rec.append((a, k))
            return super().__new__(cls)

    @dataclass
    class D(NewMixin, ZeroCopy):
        a: int
        b: int = 0

    o = D(1)
    rec.clear()
    dataclasses.replace(o, a=2)
    ref = list(rec)
    rec.clear()
    metakit.replace(o, a=2)
    assert rec == ref


def test_new_assigned_later_to_plain_mixin_result_is_right():
    class Mix:
        pass

    @dataclass
    class MX(Mix, ZeroCopy):
        a: int
        b: int = 0

    o = MX(1, 2)
    metakit.replace(o, a=1)
    Mix.__new__ = staticmethod(lambda cls, *a, **k: object.__new__(cls))
    assert metakit.replace(o, a=5) == dataclasses.replace(o, a=5) == MX(5, 2)


@pytest.mark.parametrize("order", ["zc_first", "plain_first", "undecorated"])
def test_multiple_dataclass_bases(order):
    @dataclass
    class Common(ZeroCopy):
        a: int = 0
        shared: int = 1

    @dataclass
    class PerStage:
        p: int = 2
        w: object = field(default=None, metadata=OMIT)
        shared: int = 3

    if order == "zc_first":
        C = dataclass(type("C", (Common, PerStage), {"__annotations__": {"c": int}, "c": 4}))
    elif order == "plain_first":
        C = dataclass(type("C", (PerStage, Common), {"__annotations__": {"c": int}, "c": 4}))
    else:
        C = type("C", (PerStage, Common), {})
    o = C()
    check_generated(o)
    assert "w" not in o.asdict_zerocopy()
    assert_replace_like_dataclasses(o, shared=9)
    mt.assert_zerocopy_class(C)


def test_user_replace_method_untouched():
    @dataclass
    class V1Meta(ZeroCopy):
        num_actual_tokens: int = 0
        slot_mapping: list = field(default_factory=list)

        def replace(self, **kwargs):
            return ("mine", dataclasses.replace(self, **kwargs))

    o = V1Meta(1, [2])
    tag, r = o.replace(num_actual_tokens=3)
    assert tag == "mine" and r.slot_mapping is o.slot_mapping
    assert metakit.replace(o, num_actual_tokens=4) == V1Meta(4, [2])
    assert V1Meta.__replace__(o, num_actual_tokens=5) == V1Meta(5, [2])


def test_string_annotations_never_evaluated():
    @dataclass
    class Lazy(ZeroCopy):
        a: NameDefinedNowhere = None  # noqa: F821
        b: AlsoMissing | None = None  # noqa: F821
        c: list[torch.Tensor] = field(default_factory=list)  # noqa: F821

    o = Lazy(1, 2, [3])
    check_generated(o)
    assert_replace_like_dataclasses(o, b=5)
    mt.assert_zerocopy_class(Lazy)


def test_cached_property_values_never_appear():
    import functools

    @dataclass
    class CP(ZeroCopy):
        a: list = field(default_factory=list)

        @functools.cached_property
        def heavy(self):
            return [self.a]

    o = CP([1])
    assert o.heavy == [[1]]
    assert "heavy" in o.__dict__
    assert o.asdict_zerocopy() == {"a": [1]} and o.astuple_zerocopy() == ([1],)
    r = metakit.replace(o, a=[2])
    assert "heavy" not in r.__dict__


def test_descriptor_typed_field():
    class Stored:
        def __set_name__(self, owner, name):
            self.slot = "_" + name

        def __get__(self, obj, typ=None):
            if obj is None:
                return 7
            return getattr(obj, self.slot, 7)

        def __set__(self, obj, v):
            setattr(obj, self.slot, v)

    @dataclass
    class DF(ZeroCopy):
        x: Stored = Stored()  # noqa: RUF009 - a descriptor-typed field, as the docs show
        y: int = 0

    o = DF([1])
    check_generated(o)
    assert "_x" not in o.asdict_zerocopy()
    assert_replace_like_dataclasses(o, y=1)
    mt.assert_zerocopy(o)
    mt.assert_zerocopy_class(DF)


def test_view_descriptor_compared_by_type_in_helper():
    class Viewing:
        def __set_name__(self, owner, name):
            self.slot = "_" + name

        def __get__(self, obj, typ=None):
            if obj is None:
                return ()
            return tuple(getattr(obj, self.slot, ()))  # a new object on every read

        def __set__(self, obj, v):
            setattr(obj, self.slot, list(v))

    @dataclass
    class VD(ZeroCopy):
        v: Viewing = Viewing()  # noqa: RUF009
        n: int = 0

    mt.assert_zerocopy(VD([1, 2]))


def test_helper_reports_descriptor_refusing_sentinel():
    class IntOnly:
        def __set_name__(self, owner, name):
            self.slot = "_" + name

        def __get__(self, obj, typ=None):
            if obj is None:
                return 0
            return getattr(obj, self.slot, 0)

        def __set__(self, obj, v):
            object.__setattr__(obj, self.slot, int(v))

    @dataclass
    class IO(ZeroCopy):
        n: IntOnly = IntOnly()  # noqa: RUF009

    mt.assert_zerocopy(IO(3))
    with pytest.raises(AssertionError) as ei:
        mt.assert_zerocopy_class(IO)
    assert "IO" in str(ei.value) and "sentinel" in str(ei.value)


def test_generated_methods_signatures_and_pickle_by_reference():
    # OrderedMeta and SlotsMeta have no overriding subclass, so their methods are the
    # generated functions themselves
    assert str(inspect.signature(OrderedMeta.asdict_zerocopy)) == "(self, skip_fields=None)"
    assert str(inspect.signature(OrderedMeta.astuple_zerocopy)) == "(self)"
    assert str(inspect.signature(OrderedMeta.__replace__)) == "(self, /, **changes)"
    for fn in (
        OrderedMeta.asdict_zerocopy,
        OrderedMeta.astuple_zerocopy,
        OrderedMeta.__replace__,
        SlotsMeta.asdict_zerocopy,
    ):
        assert fn.__module__ == __name__
        assert pickle.loads(pickle.dumps(fn)) is fn
    for fn in (AttnMeta.asdict_zerocopy, FlashMeta.astuple_zerocopy):
        assert pickle.loads(pickle.dumps(fn)) is fn
    o = AttnMeta(1, 2, 3, [4])
    bound = pickle.loads(pickle.dumps(o.asdict_zerocopy))
    assert bound() == o.asdict_zerocopy()


def test_pydoc_renders_metakit_classes():
    import pydoc

    for cls in (AttnMeta, SlotsMeta, FlashInferMeta, MDFrozenSlots):
        text = pydoc.plain(pydoc.render_doc(cls))
        assert "asdict_zerocopy(self" in text and "astuple_zerocopy(self" in text


def test_dataclass_introspection_unchanged():
    for cls in (AttnMeta, FrozenSlotsMeta, KwOnlyInitVar, FlashInferMeta):
        assert dataclasses.is_dataclass(cls)
        fs = dataclasses.fields(cls)
        assert all(isinstance(f, dataclasses.Field) for f in fs)
        assert set(cls.__dataclass_fields__) >= {f.name for f in fs}
    assert typing.get_type_hints(FrozenSlotsMeta, globalns={"Any": Any})["input_tokens"] is Any


def test_match_statement_on_metakit_class():
    ns = {}
    exec(
        textwrap.dedent("""
        def classify(m):
            match m:
                case AttnMeta(num_prefills=0):
                    return "decode"
                case AttnMeta(p, t):
                    return ("prefill", p, t)
    """),
        {"AttnMeta": AttnMeta},
        ns,
    )
    assert ns["classify"](AttnMeta(0, 0, 1, [])) == "decode"
    assert ns["classify"](AttnMeta(2, 5, 0, [])) == ("prefill", 2, 5)
    assert AttnMeta.__match_args__ == (
        "num_prefills",
        "num_prefill_tokens",
        "num_decode_tokens",
        "slot_mapping",
        "seq_lens",
    )


def test_skip_fields_containers_and_unchanged():
    o = FlashMeta(1, 8, 2, [0, 1], [4])
    names = ref_names(FlashMeta)
    for container in (set, frozenset, tuple, list, lambda x: dict.fromkeys(x).keys(), lambda x: (n for n in x)):
        skip = container(["slot_mapping", "wrapper", "slot_mapping"])
        d = o.asdict_zerocopy(skip)
        assert list(d) == [n for n in names if n != "slot_mapping"]
    s = {"seq_lens"}
    o.asdict_zerocopy(skip_fields=s)
    metakit.asdict_zerocopy(o, s)
    assert s == {"seq_lens"}


def test_skip_fields_type_errors_name_skip_fields():
    o = AttnMeta(1, 2, 3, [4])
    for bad in (5, True, b"ab", "slot_mapping", [["a"]], [1]):
        for call in (lambda b=bad: o.asdict_zerocopy(b), lambda b=bad: metakit.asdict_zerocopy(o, skip_fields=b)):
            with pytest.raises(TypeError) as ei:
                call()
            assert isinstance(ei.value, metakit.SkipFieldsError)
            assert "skip_fields" in str(ei.value)


def test_function_forms_refuse_classes_and_non_dataclasses():
    for fn in (metakit.asdict_zerocopy, metakit.astuple_zerocopy):
        with pytest.raises(TypeError, match="AttnMeta"):
            fn(AttnMeta)
        with pytest.raises(TypeError, match="int"):
            fn(3)
        with pytest.raises(TypeError):
            fn(Box[int])


def test_undecorated_subclass_with_annotations_shares_fields():
    @dataclass
    class B(ZeroCopy):
        a: int = 1

    class U(B):
        z: int = 9  # an annotation, not a field: U is not re-decorated

    assert [f.name for f in dataclasses.fields(U)] == ["a"]
    assert U().asdict_zerocopy() == {"a": 1}
    r = metakit.replace(U(), a=2)
    assert type(r) is U and r.z == 9


def test_frozen_inheritance_errors_unchanged():
    @dataclass
    class NotFrozen(ZeroCopy):
        a: int = 0

    @dataclass
    class PlainNotFrozen:
        a: int = 0

    a = outcome(lambda: dataclass(frozen=True)(type("F", (PlainNotFrozen,), {})))
    b = outcome(lambda: dataclass(frozen=True)(type("F", (NotFrozen,), {})))
    assert a[0] == b[0] == "err" and a[1] is b[1] and a[2] == b[2]


def test_post_init_chain_across_levels_runs_once_per_replace():
    calls = []

    @dataclass
    class L0(ZeroCopy):
        a: int = 0

        def __post_init__(self):
            calls.append("L0")

    @dataclass
    class L1(L0):
        b: int = 0

        def __post_init__(self):
            super().__post_init__()
            calls.append("L1")

    class L2(L1):
        pass

    for cls in (L1, L2):
        o = cls()
        calls.clear()
        dataclasses.replace(o, b=1)
        ref = list(calls)
        calls.clear()
        metakit.replace(o, b=1)
        assert calls == ref == ["L0", "L1"]


def test_body_override_on_base_deleted_subclasses_get_own_code():
    @dataclass
    class B(ZeroCopy):
        a: int = 0

        def asdict_zerocopy(self, skip_fields=None):
            return {"custom": 1}

        def astuple_zerocopy(self):
            return ("custom",)

    @dataclass
    class S(B):
        b: int = 1

    class U(S):
        pass

    assert S().asdict_zerocopy() == {"custom": 1} and U().astuple_zerocopy() == ("custom",)
    del B.asdict_zerocopy, B.astuple_zerocopy
    assert B().asdict_zerocopy() == {"a": 0}
    for cls in (S, U):
        check_generated(cls())
    assert U().astuple_zerocopy() == (0, 1)


def test_override_assigned_before_subclass_exists_then_deleted():
    @dataclass
    class B(ZeroCopy):
        a: int = 0

    B.asdict_zerocopy = lambda self, skip_fields=None: {"custom": 2}

    @dataclass
    class S(B):
        b: int = 1

    assert S().asdict_zerocopy() == {"custom": 2}
    del B.asdict_zerocopy
    assert S().asdict_zerocopy() == {"a": 0, "b": 1}
    assert B().asdict_zerocopy() == {"a": 0}


def test_override_assigned_before_class_becomes_dataclass():
    class X(ZeroCopy):
        a: int = 0

    X.asdict_zerocopy = lambda self, skip_fields=None: {"mine": 1}
    dataclass(X)
    assert X().asdict_zerocopy() == {"mine": 1}
    assert metakit.asdict_zerocopy(X()) == {"a": 0}
    del X.asdict_zerocopy
    check_generated(X())


def test_body_override_deleted_on_own_class():
    @dataclass
    class Y(ZeroCopy):
        a: int = 0
        b: int = 1

        def asdict_zerocopy(self, skip_fields=None):
            return {}

    del Y.asdict_zerocopy
    check_generated(Y())


def test_override_on_undecorated_intermediate_class():
    @dataclass
    class P(ZeroCopy):
        a: int = 0

    class Mid(P):
        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"a", *(skip_fields or ())})

    @dataclass
    class Leaf(Mid):
        b: int = 0

    assert Leaf().asdict_zerocopy() == {"b": 0} and Mid().asdict_zerocopy() == {}
    mt.assert_zerocopy_class(Leaf)
    del Mid.asdict_zerocopy
    assert Leaf().asdict_zerocopy() == {"a": 0, "b": 0}
    assert Mid().asdict_zerocopy() == {"a": 0}


@pytest.mark.parametrize("shape", ["empty", "only_pseudo", "only_omit", "only_init_false"])
def test_degenerate_classes(shape):
    if shape == "empty":
        C = dataclass(type("Empty", (ZeroCopy,), {}))
        o = C()
    elif shape == "only_pseudo":
        C = dataclasses.make_dataclass(
            "Pseudo",
            [("cv", ClassVar[int], 1), ("iv", InitVar[int], field(default=2))],
            bases=(ZeroCopy,),
            namespace={"__post_init__": lambda self, iv: None},
        )
        o = C()
    elif shape == "only_omit":
        C = dataclasses.make_dataclass("OnlyOmit", [("w", Any, field(default=None, metadata=OMIT))], bases=(ZeroCopy,))
        o = C(object())
    else:
        C = dataclasses.make_dataclass("OnlyNif", [("n", Any, field(default=0, init=False))], bases=(ZeroCopy,))
        o = C()
    assert o.astuple_zerocopy() == tuple(getattr(o, n) for n in ref_names(C))
    check_generated(o)
    assert_replace_like_dataclasses(o)
    mt.assert_zerocopy_class(C)
    assert "def asdict_zerocopy" in metakit.generated_source(C)


def test_zerocopy_classes_in_this_module_excludes_abstract():
    found = mt.zerocopy_classes_in(sys.modules[__name__])
    assert AbstractBackendMeta not in found and AbstractBackendMeta2 not in found
    assert ZeroCopy not in found
    assert found.index(AttnMeta) < found.index(FlashMeta) < found.index(FlashInferMeta)
    assert UndecoratedConcrete in found and FlashInferUndecorated in found
    assert mt.class_id(FlashInferMeta) == "FlashInferMeta"


# The recipe of the README, over every metakit class this module defines (MethodNamesMeta
# is left out: its field named asdict_zerocopy shadows the method on instances).
@pytest.mark.parametrize(
    "cls",
    [c for c in mt.zerocopy_classes_in(sys.modules[__name__]) if c is not MethodNamesMeta],
    ids=mt.class_id,
)
def test_recipe_every_class_of_this_module(cls):
    mt.assert_zerocopy_class(cls)
