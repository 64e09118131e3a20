"""Record classes and reference checks that several topic files of the suite use.

The classes are shaped like real engines' metadata (FlashInfer's override, frozen and slotted
records, mangled and builtin-named fields, deep and wide hierarchies); the checks compare metakit
with the plain reference, ``{f.name: getattr(o, f.name) for f in fields(o)}``, and with
``dataclasses.replace``.
"""

import abc
import copy
import dataclasses
import re
import sys
from dataclasses import KW_ONLY, InitVar, dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import metakit
import metakit.testing
from metakit import OMIT, ZeroCopy, ZeroCopyFields


def is_omitted(f: dataclasses.Field) -> bool:
    """Whether *f* carries ``OMIT``'s metadata, alone or merged with other keys."""
    return OMIT.items() <= f.metadata.items()


def ref_names(cls: type) -> list[str]:
    """The names in ``dataclasses.fields(cls)``, in order, less the ``OMIT`` fields."""
    return [f.name for f in dataclasses.fields(cls) if not is_omitted(f)]


def reference(obj: Any, skip: object = ()) -> dict[str, Any]:
    """What ``asdict_zerocopy`` must return: DESIGN's reference, less ``OMIT`` and *skip* fields."""
    skip = set(skip or ())
    return {n: getattr(obj, n) for n in ref_names(type(obj)) if n not in skip}


def reference_tuple(obj: Any) -> tuple:
    """What ``astuple_zerocopy`` must return."""
    return tuple(getattr(obj, n) for n in ref_names(type(obj)))


def check_all(obj, skip=()):
    """DESIGN: keys are exactly fields() in order, less ClassVar/InitVar/OMIT/skip; d[k] is getattr(obj, k)."""
    exp = reference(obj, skip)
    for d in (
        obj.asdict_zerocopy(skip_fields=set(skip)) if skip else obj.asdict_zerocopy(),
        metakit.asdict_zerocopy(obj, set(skip)) if skip else metakit.asdict_zerocopy(obj),
    ):
        assert type(d) is dict
        assert list(d) == list(exp)
        for k in exp:
            assert d[k] is exp[k]
    if not skip:
        t = obj.astuple_zerocopy()
        assert type(t) is tuple
        assert len(t) == len(exp)
        assert all(a is b for a, b in zip(t, exp.values(), strict=False))
        t2 = metakit.astuple_zerocopy(obj)
        assert all(a is b for a, b in zip(t2, exp.values(), strict=False))
        assert len(t2) == len(exp)


class Marker:
    pass


_counter = [0]


def fresh(fields=("a", "b"), name=None, base=(ZeroCopy,)):
    _counter[0] += 1
    name = name or f"Gen{_counter[0]}"
    return make_dataclass(name, [(f, object, field(default=None)) for f in fields], bases=base)


NASTY_NAME = "X\nimport builtins; builtins.METAKIT_BLACKBOX_PWNED = 1\n#"


REPO = Path(__file__).resolve().parents[2]


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


make_chain = _fresh_chain  # the same three new dataclasses, a, b and c, each a subclass of the one before


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


def _gen(*items):
    return (i for i in items)


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


def _make_override(level, kind):
    if kind == "d":

        def asdict_zerocopy(self, skip_fields=None):
            return {level.__name__: super(level, self).asdict_zerocopy(skip_fields)}

        return asdict_zerocopy

    def astuple_zerocopy(self):
        return (level.__name__, *super(level, self).astuple_zerocopy())

    return astuple_zerocopy


def _swapped_init(cls):
    orig = cls.__init__

    def __init__(self, y=0, x=0):
        orig(self, x, y)

    return __init__


PY313 = sys.version_info >= (3, 13)


def check_dict(d: Any, obj: Any, names: list[str]) -> None:
    assert type(d) is dict
    assert list(d) == names
    for n in names:
        assert d[n] is getattr(obj, n), n


def check_tuple(t: Any, obj: Any, names: list[str]) -> None:
    assert type(t) is tuple
    assert len(t) == len(names)
    for v, n in zip(t, names, strict=False):
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


# field names MethodNamesMeta shadows
METHOD_SHADOWED = {"MethodNamesMeta"}


def inst(name: str) -> Any:
    return _instances()[name]


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
        return super().asdict_zerocopy(skip_fields)

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


def _is_omit(f: dataclasses.Field) -> bool:
    return all(k in f.metadata and f.metadata[k] == v for k, v in OMIT.items())


def _reference_names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if not _is_omit(f)]


def _check_methods(obj) -> None:
    """The generated methods against the fields() reference, by identity."""
    names = _reference_names(type(obj))
    d = obj.asdict_zerocopy()
    assert list(d) == names, (type(obj), list(d), names)
    assert all(d[k] is getattr(obj, k) for k in names)
    t = obj.astuple_zerocopy()
    assert len(t) == len(names)
    assert all(v is getattr(obj, k) for v, k in zip(t, names, strict=False))
    f = metakit.asdict_zerocopy(obj)
    assert list(f) == names
    assert all(f[k] is getattr(obj, k) for k in names)
    ft = metakit.astuple_zerocopy(obj)
    assert len(ft) == len(names)
    assert all(v is getattr(obj, k) for v, k in zip(ft, names, strict=False))


_calls: list = []


_UNSET = "<unset>"


def _snapshot(r):
    values = []
    for f in dataclasses.fields(r):
        try:
            values.append((f.name, getattr(r, f.name)))
        except AttributeError:
            values.append((f.name, _UNSET))
    extra = sorted(vars(r).items()) if hasattr(r, "__dict__") else None
    return values, extra


def _outcome(fn):
    _calls.clear()
    try:
        r = fn()
    except Exception as e:
        return ("error", type(e), str(e), tuple(_calls))
    return ("ok", type(r), repr(r), _snapshot(r), tuple(_calls))


def _replace_outcomes(obj, /, **changes):
    """metakit.replace, the class's __replace__, copy.replace (3.13+) against dataclasses.replace."""
    ref = _outcome(lambda: dataclasses.replace(obj, **changes))
    got = {"metakit.replace": _outcome(lambda: metakit.replace(obj, **changes))}
    if hasattr(type(obj), "__replace__"):
        got["__replace__"] = _outcome(lambda: obj.__replace__(**changes))
    if PY313:
        got["copy.replace"] = _outcome(lambda: copy.replace(obj, **changes))
    return ref, got


def _assert_replace_like_dataclasses(obj, /, **changes):
    ref, got = _replace_outcomes(obj, **changes)
    for how, outcome in got.items():
        assert outcome == ref, (how, changes, outcome, ref)


def _filenames(cls) -> set[str]:
    return {
        getattr(cls, m).__code__.co_filename
        for m in ("asdict_zerocopy", "astuple_zerocopy", "__replace__")
        if getattr(getattr(cls, m), "__code__", None) and getattr(cls, m).__code__.co_filename.startswith("<metakit")
    }


def _class_with_annotations(name, annotations, defaults=None):
    return ZeroCopyFields(name, (ZeroCopy,), {"__annotations__": dict(annotations), **(defaults or {})})


@dataclass
class Rec_skip_errors(ZeroCopy):
    a: int = 1
    b: int = 2
    c: int = 3
    w: object = field(default=None, metadata=OMIT)
    cv: ClassVar[int] = 0
    iv: InitVar[int] = 0

    def __post_init__(self, iv):
        self.post = 1


@dataclass
class PlainRec_skip_errors:
    a: int = 1
    b: int = 2
    c: int = 3
    w: object = field(default=None, metadata=OMIT)
    cv: ClassVar[int] = 0
    iv: InitVar[int] = 0

    def __post_init__(self, iv):
        self.post = 1


def calls(obj):
    # DESIGN: "given by keyword or by position"; function form: "any dataclass instance"
    out = [
        ("kw", lambda sf: metakit.asdict_zerocopy(obj, skip_fields=sf)),
        ("pos", lambda sf: metakit.asdict_zerocopy(obj, sf)),
    ]
    if isinstance(obj, ZeroCopy):
        out += [
            ("meth-kw", lambda sf: obj.asdict_zerocopy(skip_fields=sf)),
            ("meth-pos", lambda sf: obj.asdict_zerocopy(sf)),  # noqa: PLW0108 - the method is looked up at call time
        ]
    return out


OBJS = [Rec_skip_errors(), PlainRec_skip_errors()]


class Val:
    """A value with an identity of its own; equal by payload so that results compare."""

    __slots__ = ("v",)

    def __init__(self, v: object) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Val) and other.v == self.v

    def __hash__(self) -> int:
        return hash(self.v)

    def __repr__(self) -> str:
        return f"Val({self.v!r})"


def assert_same_objects(actual: object, expected: object, where: str = "") -> None:
    """Keys and order equal, leaves identical (``is``), strings equal."""
    assert type(actual) is type(expected), f"{where}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_same_objects(actual[k], expected[k], f"{where}[{k!r}]")
    elif isinstance(expected, tuple):
        assert len(actual) == len(expected), f"{where}: {actual!r} != {expected!r}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            assert_same_objects(a, e, f"{where}[{i}]")
    elif isinstance(expected, (str, type(None), bool, int)):
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual is expected, f"{where}: {actual!r} is not the very object {expected!r}"


def norm_instance(r: object) -> tuple:
    """A dataclass instance as its class and every field's value (or a marker when unset)."""
    return (type(r), tuple((f.name, getattr(r, f.name, "<unset>")) for f in dataclasses.fields(type(r))))


def norm_outcome(o: tuple) -> tuple:
    if o[0] == "err":
        return o
    return ("ok", norm_instance(o[1]))


def bare(cls: type, tag: str = "") -> object:
    """An instance made without __init__, every field set to a Val of its own."""
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):
        object.__setattr__(obj, f.name, Val(f"{tag}{cls.__qualname__}.{f.name}"))
    return obj


@dataclass
class Meta(ZeroCopy):
    is_prompt: bool = True
    slot_mapping: list = field(default_factory=lambda: [0, 1])
    wrapper: object = field(default=None, metadata=OMIT)


@dataclass
class PlainMeta:
    is_prompt: bool = True
    slot_mapping: list = field(default_factory=lambda: [0, 1])


class StrSub(str):
    pass


def _forms(obj):
    yield "method keyword", lambda skip: obj.asdict_zerocopy(skip_fields=skip)
    yield "method positional", lambda skip: obj.asdict_zerocopy(skip)  # noqa: PLW0108 - the method is looked up at call time
    yield "function form", lambda skip: metakit.asdict_zerocopy(obj, skip_fields=skip)
    yield "function form positional", lambda skip: metakit.asdict_zerocopy(obj, skip)


def assert_converts(obj: Any) -> None:
    """The method and the function forms all return the reference, by identity."""
    expected = reference(obj)
    assert_same_objects(obj.asdict_zerocopy(), expected)
    assert_same_objects(metakit.asdict_zerocopy(obj), expected)
    for astuple in (obj.astuple_zerocopy(), metakit.astuple_zerocopy(obj)):
        assert type(astuple) is tuple
        assert len(astuple) == len(expected)
        assert all(a is b for a, b in zip(astuple, expected.values(), strict=True))


@dataclass
class Three(ZeroCopy):
    a: object
    b: object
    c: object
    wrapper: object = field(default=None, metadata=OMIT)


def three() -> Three:
    return Three(object(), object(), object(), object())


@dataclass
class PlainPoint:
    x: int = 0


def shown(obj: Any) -> str:
    """*obj*'s repr without addresses, which differ between any two objects."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(obj))
