"""DESIGN "Public API": ``ZeroCopyFields`` composed with other metaclasses, mixins and bases.

``class M(ZeroCopyFields, abc.ABCMeta)`` works in either order; every metaclass's ``__setattr__``
and ``__delattr__`` still runs, in MRO order; class keywords reach ``__init_subclass__``; generic,
protocol, mixin and multiple-dataclass bases behave as without metakit.
"""

import abc
import dataclasses
import re
import sys
import typing
from dataclasses import KW_ONLY, dataclass, field, make_dataclass
from typing import Any, Generic, TypeVar

import pytest

import metakit
import metakit.testing
import metakit.testing as mt
from metakit import OMIT, ZeroCopy, ZeroCopyFields
from tests.records import (
    PY313,
    ABCZeroCopyFields,
    AbstractBackendMeta,
    AbstractBackendMeta2,
    ConcreteBackendMeta,
    ConcreteBackendMeta2,
    HasSlotMapping,
    ProtoMeta,
    ProtoMeta2,
    UndecoratedConcrete,
    ZeroCopyFieldsABC,
    _assert_replace_like_dataclasses,
    _calls,
    _check_methods,
    assert_converts,
    assert_replace_like_dataclasses,
    check_all,
    check_generated,
)


def test_mixins_non_dataclass():
    # DESIGN: every class ZeroCopyFields creates that is a dataclass gets the methods
    class Mixin:
        def helper(self):
            return 1

    @dataclass
    class M(Mixin, ZeroCopy):
        a: int = 1

    @dataclass
    class M2(ZeroCopy, Mixin):
        a: int = 1

    for o in (M(), M2()):
        assert o.asdict_zerocopy() == {"a": 1}
        assert o.astuple_zerocopy() == (1,)


def test_undecorated_subclass_of_plain_dataclass_with_zerocopy_mixin():
    # README "How it works": "Its __new__ covers ... undecorated subclasses of plain dataclasses"
    # DESIGN: "Every class it creates that is, or becomes, a dataclass gets ..."
    @dataclass
    class Plain:
        x: int = 1
        w: object = field(default=None, metadata=OMIT)

    class U1(Plain, ZeroCopy):
        pass

    class U2(ZeroCopy, Plain):
        pass

    for cls in (U1, U2):
        o = cls()
        assert o.asdict_zerocopy() == {"x": 1}
        assert o.astuple_zerocopy() == (1,)
        assert metakit.replace(o, x=5).x == 5


def test_kw_only_sentinel_and_generic():
    # DESIGN: KW_ONLY, generic classes work
    T = typing.TypeVar("T")

    @dataclass
    class G(ZeroCopy, typing.Generic[T]):
        v: T
        _: KW_ONLY
        k: int = 0

    g = G[int](1, k=2)
    assert g.asdict_zerocopy() == {"v": 1, "k": 2}
    assert g.astuple_zerocopy() == (1, 2)
    assert type(g) is G
    check_all(g)


def test_metaclass_without_zerocopy_base_gets_methods():
    # README Limits: "A class that uses metaclass=ZeroCopyFields without the ZeroCopy base gets the
    # methods", whether it names the metaclass itself or inherits it from a plain root.
    @dataclass
    class W(metaclass=ZeroCopyFields):
        x: int = 1
        w: int = field(default=0, metadata=OMIT)

    class Root(metaclass=ZeroCopyFields):
        pass

    @dataclass
    class R(Root):
        a: int = 0
        b: list = field(default_factory=list)

    assert ZeroCopy not in W.__mro__
    assert ZeroCopy not in R.__mro__
    assert W().asdict_zerocopy() == {"x": 1}
    assert W().astuple_zerocopy() == (1,)
    _assert_replace_like_dataclasses(W(), x=2)
    o = R(1, [2])
    check_generated(o)
    assert metakit.replace(o, a=3) == R(3, [2])
    mt.assert_zerocopy_class(R)
    # Overrides follow the same rules as with the ZeroCopy base.
    W.asdict_zerocopy = lambda self, skip_fields=None: {"over": 1}
    assert W().asdict_zerocopy() == {"over": 1}
    del W.asdict_zerocopy
    assert W().asdict_zerocopy() == {"x": 1}


def test_pep695_generic_and_manual_slots():
    # DESIGN: generic classes work; __slots__ behave as without metakit
    if sys.version_info >= (3, 12):
        ns = {"dataclass": dataclass, "ZeroCopy": ZeroCopy, "field": field}
        exec("@dataclass\nclass G[T](ZeroCopy):\n    v: T\n    w: list[T] = field(default_factory=list)\n", ns)
        G = ns["G"]
        g = G[int](1)
        assert g.asdict_zerocopy() == {"v": 1, "w": []}
        assert metakit.replace(g, v=2) == G(2)

    @dataclass
    class S(ZeroCopy):
        __slots__ = ("a",)
        a: int

    s = S(1)
    assert s.asdict_zerocopy() == {"a": 1}
    assert not hasattr(s, "__dict__")


def _logging_meta(tag, log):
    def __setattr__(cls, key, value):
        log.append((tag, "set", key))
        super(M, cls).__setattr__(key, value)

    def __delattr__(cls, key):
        log.append((tag, "del", key))
        super(M, cls).__delattr__(key)

    M = type(f"Log{tag}", (type,), {"__setattr__": __setattr__, "__delattr__": __delattr__})
    return M


def _combined(order, log):
    parts = {"Z": ZeroCopyFields, "L1": _logging_meta("L1", log), "L2": _logging_meta("L2", log)}
    bases = tuple(parts[p] for p in order)

    def __setattr__(cls, key, value):
        log.append(("own", "set", key))
        super(Combined, cls).__setattr__(key, value)

    def __delattr__(cls, key):
        log.append(("own", "del", key))
        super(Combined, cls).__delattr__(key)

    Combined = type("Combined", bases, {"__setattr__": __setattr__, "__delattr__": __delattr__})
    expected = ["own"] + [c.__name__[3:] for c in Combined.__mro__ if c.__name__.startswith("Log")]
    return Combined, expected


ORDERS = [("Z", "L1"), ("L1", "Z"), ("Z", "L1", "L2"), ("L1", "Z", "L2"), ("L1", "L2", "Z"), ("L2", "Z", "L1")]


@pytest.mark.parametrize("zc_base", [False, True], ids=["metaclass-only", "zerocopy-base"])
@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_composed_setattr_delattr_all_run_in_mro_order(order, zc_base):
    # DESIGN: "every __setattr__ that a metaclass in the combination defines, the combined one's own included,
    # still runs, in MRO order." README: "Every __setattr__ and __delattr__ ..."
    log: list = []
    M, expected = _combined(order, log)
    bases = (ZeroCopy,) if zc_base else ()

    @dataclass
    class K(*bases, metaclass=M):
        x: int = 1
        y: int = 2

    # the class still gets its methods
    assert K().asdict_zerocopy() == {"x": 1, "y": 2}
    assert metakit.replace(K(), y=5) == K(1, 5)
    assert_converts(K(object(), object()))
    # dataclasses' writes went through every __setattr__, in MRO order
    for key in ("__dataclass_fields__", "__init__", "__repr__", "__eq__"):
        assert [t for t, op, k in log if k == key and op == "set"] == expected, key

    def override(self, skip_fields=None):
        return {"ov": True}

    for key, value in (("plain_attr", 1), ("asdict_zerocopy", override)):
        log.clear()
        setattr(K, key, value)
        assert log == [(t, "set", key) for t in expected]
        log.clear()
        delattr(K, key)
        assert log == [(t, "del", key) for t in expected]
    # override semantics held through the combination
    K.asdict_zerocopy = override
    assert K().asdict_zerocopy() == {"ov": True}
    assert metakit.asdict_zerocopy(K()) == {"x": 1, "y": 2}
    del K.asdict_zerocopy
    assert K().asdict_zerocopy() == {"x": 1, "y": 2}


@pytest.mark.parametrize("first", [True, False])
def test_protocol_metaclass_combination(first):
    pmeta = type(typing.Protocol)
    M = type("PM", (ZeroCopyFields, pmeta) if first else (pmeta, ZeroCopyFields), {})

    @typing.runtime_checkable
    class HasX(typing.Protocol, metaclass=M):
        x: int

    @dataclass
    class Impl(HasX):
        x: int = 1
        y: int = 2

    obj = Impl()
    assert obj.asdict_zerocopy() == {"x": 1, "y": 2}
    assert isinstance(obj, HasX)
    assert metakit.replace(obj, y=3) == Impl(1, 3)

    class Duck:
        x = 0

    assert isinstance(Duck(), HasX)


def test_metaclass_keyword_arguments_reach_new_and_init():
    seen = []

    class KM(ZeroCopyFields):
        def __new__(mcls, name, bases, ns, flag=None, **kw):
            cls = super().__new__(mcls, name, bases, ns, **kw)
            seen.append(("new", name, flag))
            return cls

        def __init__(cls, name, bases, ns, flag=None, **kw):
            super().__init__(name, bases, ns, **kw)
            seen.append(("init", name, flag))

    @dataclass
    class K(metaclass=KM, flag=7):
        a: int = 1

    assert ("new", "K", 7) in seen
    assert ("init", "K", 7) in seen
    assert K().asdict_zerocopy() == {"a": 1}


def test_init_subclass_keyword_arguments():
    # DESIGN: class keywords reach __init_subclass__
    @dataclass
    class Base(ZeroCopy):
        x: int = 0

        def __init_subclass__(cls, tag=None, **kw):
            super().__init_subclass__(**kw)
            cls.tag = tag

    @dataclass
    class Sub(Base, tag="hello"):
        y: int = 1

    class Undecorated(Sub, tag="t2"):
        pass

    assert Sub.tag == "hello"
    assert Undecorated.tag == "t2"
    assert Sub().asdict_zerocopy() == {"x": 0, "y": 1}
    assert Undecorated().asdict_zerocopy() == {"x": 0, "y": 1}
    assert_converts(Sub(object(), object()))


def test_metaclass_init_assigning_override_before_dataclass():
    def override(self, skip_fields=None):
        return {"mine": 1}

    class SetsOverride(ZeroCopyFields):
        def __init__(cls, name, bases, ns, **kw):
            super().__init__(name, bases, ns, **kw)
            cls.asdict_zerocopy = override

    @dataclass
    class K(metaclass=SetsOverride):
        x: int = 1

    assert K().asdict_zerocopy() == {"mine": 1}
    assert metakit.asdict_zerocopy(K()) == {"x": 1}
    assert K().astuple_zerocopy() == (1,)


def test_init_subclass_assigning_override_is_kept():
    def override(self):
        return ("mine",)

    @dataclass
    class Base(ZeroCopy):
        x: int = 1

        def __init_subclass__(cls, **kw):
            super().__init_subclass__(**kw)
            cls.astuple_zerocopy = override

    @dataclass
    class Sub(Base):
        y: int = 2

    assert Sub().astuple_zerocopy() == ("mine",)
    assert metakit.astuple_zerocopy(Sub()) == (1, 2)
    assert Sub().asdict_zerocopy() == {"x": 1, "y": 2}


@pytest.mark.parametrize("first", [True, False])
def test_refusing_metaclass_setattr_leaves_class_consistent(first):
    class Refuser(type):
        def __setattr__(cls, key, value):
            if cls.__dict__.get("_locked") and key in {"asdict_zerocopy", "astuple_zerocopy", "__replace__"}:
                raise AttributeError(f"locked: {key}")
            super().__setattr__(key, value)

        def __delattr__(cls, key):
            if cls.__dict__.get("_locked"):
                raise AttributeError(f"locked: {key}")
            super().__delattr__(key)

    M = type("M", (ZeroCopyFields, Refuser) if first else (Refuser, ZeroCopyFields), {})

    @dataclass
    class A(metaclass=M):
        a: int = 1

    @dataclass
    class B(A):
        b: int = 2

    type.__setattr__(B, "_locked", True)

    def override(self, skip_fields=None):
        return {"ov": super(B, self).asdict_zerocopy(skip_fields)}

    with pytest.raises(AttributeError, match="locked"):
        B.asdict_zerocopy = override
    assert B().asdict_zerocopy() == {"a": 1, "b": 2}
    with pytest.raises(AttributeError, match="locked"):
        del B.asdict_zerocopy
    assert B().asdict_zerocopy() == {"a": 1, "b": 2}
    type.__setattr__(B, "_locked", False)
    B.asdict_zerocopy = override
    type.__setattr__(B, "_locked", True)
    with pytest.raises(AttributeError, match="locked"):
        del B.asdict_zerocopy
    assert B().asdict_zerocopy() == {"ov": {"a": 1, "b": 2}}


def test_slots_rebuild_with_metaclass_kwargs_like_plain():
    def build(base_meta):
        seen = []

        class KM(base_meta):
            def __new__(mcls, name, bases, ns, flag="default", **kw):
                seen.append(flag)
                return super().__new__(mcls, name, bases, ns, **kw)

            def __init__(cls, name, bases, ns, flag="default", **kw):
                super().__init__(name, bases, ns, **kw)

        @dataclass(slots=True)
        class K(metaclass=KM, flag="given"):
            a: int = 1

        return K, seen

    ours, seen_ours = build(ZeroCopyFields)
    theirs, seen_theirs = build(type)
    assert seen_ours == seen_theirs
    assert ours.__slots__ == theirs.__slots__
    assert ours().asdict_zerocopy() == {"a": 1}
    assert ours in metakit.zerocopy_classes()


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
    assert issubclass(ABCZeroCopyFields, ZeroCopyFields)
    assert issubclass(ZeroCopyFieldsABC, abc.ABCMeta)


class _Straight(type):
    """A metaclass whose hooks go straight to ``type``'s, past any other metaclass's."""

    def __setattr__(cls, name, value):
        type.__setattr__(cls, name, value)

    def __delattr__(cls, name):
        type.__delattr__(cls, name)


class _StraightDelete(type):
    def __delattr__(cls, name):
        type.__delattr__(cls, name)


class _Picky(type):
    def __setattr__(cls, name, value):
        if name.startswith("__metakit"):
            raise AttributeError(f"no {name} here")
        super().__setattr__(name, value)


@pytest.mark.parametrize(
    ("other", "refused"),
    [
        (_Straight, "_Straight.__setattr__ does not pass attribute assignments on to ZeroCopyFields.__setattr__"),
        (_StraightDelete, "_StraightDelete.__delattr__ does not pass attribute deletions on to ZeroCopyFields"),
        (
            _Picky,
            "_Picky.__setattr__ does not pass attribute assignments on to ZeroCopyFields.__setattr__ "
            "(raised AttributeError: no __metakit_probe__ here)",
        ),
    ],
)
def test_a_metaclass_whose_hooks_bypass_zerocopyfields_is_refused_and_works_listed_after_it(other, refused):
    # A subclass silently served its base's fields: dataclasses' setting of its
    # fields never reached ZeroCopyFields.
    behind = type("Behind", (other, ZeroCopyFields), {})
    with pytest.raises(TypeError, match=f"^the metaclass Behind of [^ ]*A: {re.escape(refused)}"):

        @dataclass
        class A(metaclass=behind):
            a: int = 1

    _, C = _two_levels(type("InFront", (ZeroCopyFields, other), {}))
    assert C().asdict_zerocopy() == {"a": 1, "c": 3}
    assert metakit.astuple_zerocopy(C()) == (1, 3)


def _two_levels(metaclass: type) -> tuple[Any, Any]:
    """A dataclass of *metaclass* with a field ``a = 1``, and one below it that adds ``c = 3``."""

    @dataclass
    class A(metaclass=metaclass):
        a: int = 1

    @dataclass
    class C(A):
        c: int = 3

    return A, C


class _Sealed(type):
    def __delattr__(cls, name):
        raise AttributeError(f"{cls.__name__} is sealed: cannot delete {name}")


@pytest.mark.parametrize("order", ["sealed first", "ZeroCopyFields first"])
def test_a_metaclass_that_refuses_every_deletion_combines_in_either_order(order):
    # An outside tester: one listed first was refused at its first class, for the probe's deletion
    # alone, though no deletion can then go past ZeroCopyFields unseen.
    bases = (_Sealed, ZeroCopyFields) if order == "sealed first" else (ZeroCopyFields, _Sealed)
    A, C = _two_levels(type("Combined", bases, {}))
    assert C().asdict_zerocopy() == {"a": 1, "c": 3}
    assert metakit.replace(C(), c=5) == C(1, 5)
    assert "__metakit_probe__" not in vars(A)
    with pytest.raises(AttributeError, match="sealed"):
        del C.asdict_zerocopy
    assert C().asdict_zerocopy() == {"a": 1, "c": 3}


def test_a_metaclass_hook_that_makes_a_class_of_its_own_while_checked_is_not_refused():
    class Spawning(type):
        made: typing.ClassVar[list[type]] = []
        started = False

        def __setattr__(cls, name, value):
            if not Spawning.started:  # the first time: a class of the same metaclass, made meanwhile
                Spawning.started = True
                Spawning.made.append(type(cls)("Inner", (), {}))
            super().__setattr__(name, value)

    combined = type("Combined", (Spawning, ZeroCopyFields), {})

    @dataclass
    class A(metaclass=combined):
        a: int = 1

    assert [type(made) for made in Spawning.made] == [combined]
    assert A().asdict_zerocopy() == {"a": 1}
    A.__metakit_probe__ = "a user's own value"  # the probe's name means nothing outside the check
    assert A.__metakit_probe__ == "a user's own value"


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
        class First(metaclass=meta):  # metakit checks a metaclass's hooks once, on its first class
            pass

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


def test_protocol_metaclass_both_orders():
    for cls, extra in ((ProtoMeta, "n"), (ProtoMeta2, "m")):
        o = cls([1], 5)
        assert isinstance(o, HasSlotMapping)
        assert o.asdict_zerocopy() == {"slot_mapping": [1], extra: 5}
        assert metakit.replace(o, **{extra: 6}) == cls([1], 6)


def _calls_made(rec: list, replace, obj, /, **changes) -> list:
    """What the recording hook saw during one replace call."""
    rec.clear()
    replace(obj, **changes)
    return list(rec)


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
    ref = _calls_made(rec, dataclasses.replace, o, a=2)
    assert _calls_made(rec, metakit.replace, o, a=2) == ref
    assert _calls_made(rec, C.__replace__, o, a=2) == ref


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
    ref = _calls_made(rec, dataclasses.replace, o, a=2)
    assert _calls_made(rec, metakit.replace, o, a=2) == ref


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


@pytest.mark.parametrize("zc_base", [False, True], ids=["metaclass-only", "zerocopy-base"])
@pytest.mark.parametrize("order", ["ZA", "AZ", "ZLA", "LAZ"])
def test_abcmeta_either_order(order, zc_base):
    # DESIGN: "class M(ZeroCopyFields, abc.ABCMeta): ... works, in either order" (Z: ZeroCopyFields, A: ABCMeta,
    # L: a metaclass that logs its __setattr__)
    log: list = []
    parts = {"Z": ZeroCopyFields, "A": abc.ABCMeta, "L": _logging_meta("L", log)}
    meta = type("M", tuple(parts[c] for c in order), {})
    bases = (ZeroCopy,) if zc_base else ()

    @dataclass
    class Base(*bases, metaclass=meta):
        a: int = 1
        w: object = field(default=None, metadata=OMIT)

        @abc.abstractmethod
        def f(self): ...

    with pytest.raises(TypeError, match="abstract"):
        Base()

    @dataclass
    class Impl(Base):
        b: int = 2

        def f(self):
            return 1

    i = Impl()
    assert i.asdict_zerocopy() == {"a": 1, "b": 2}
    assert i.astuple_zerocopy() == (1, 2)
    assert i.__replace__(a=3) == Impl(3)
    assert metakit.replace(i, b=4) == Impl(1, b=4)
    assert isinstance(i, Base)
    assert_converts(Impl(object(), object(), object()))
    if "L" in order:
        assert ("L", "set", "__init__") in log

    class Virtual:
        pass

    Base.register(Virtual)
    assert isinstance(Virtual(), Base)
    assert Impl in metakit.zerocopy_classes()


@pytest.mark.parametrize("zc_base", [False, True], ids=["metaclass-only", "zerocopy-base"])
def test_metaclass_after_zerocopyfields_sees_its_setattr(zc_base):
    # DESIGN: every __setattr__ runs, including those after ZeroCopyFields in the MRO (here the combined
    # metaclass has no __setattr__ of its own)
    log: list = []
    Combined = type("Combined", (ZeroCopyFields, _logging_meta("After", log)), {})
    bases = (ZeroCopy,) if zc_base else ()

    @dataclass
    class Y(*bases, metaclass=Combined):
        a: int = 1

    for key in ("__dataclass_fields__", "__init__", "__repr__", "__eq__"):
        assert ("After", "set", key) in log, key
    assert Y().asdict_zerocopy() == {"a": 1}
    assert_converts(Y(object()))


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


def test_metaclass_with_new_and_kwargs():
    # DESIGN: "It composes with other metaclasses"; class keywords reach __init_subclass__
    seen = []

    class Meta(ZeroCopyFields):
        def __new__(mcls, name, bases, ns, **kw):
            ns["added_by_meta"] = 1
            return super().__new__(mcls, name, bases, ns, **kw)

    class Base(ZeroCopy, metaclass=Meta):
        def __init_subclass__(cls, /, tag=None, **kw):
            super().__init_subclass__(**kw)
            seen.append((cls.__name__, tag))

    @dataclass
    class K(Base, tag="hi"):
        a: int = 1

    assert seen == [("K", "hi")]
    assert K.added_by_meta == 1
    assert K().asdict_zerocopy() == {"a": 1}


def test_override_from_init_subclass_and_make_dataclass_namespace_kept():
    # DESIGN: a method the user wrote (however it appears) is never replaced by a generated one
    class IS(ZeroCopy):
        def __init_subclass__(cls, **kw):
            super().__init_subclass__(**kw)
            cls.asdict_zerocopy = lambda self, skip_fields=None: {"init_subclass": 1}

    @dataclass
    class X(IS):
        a: int = 1

    assert X().asdict_zerocopy() == {"init_subclass": 1}
    assert X().astuple_zerocopy() == (1,)
    M = dataclasses_make("M", {"asdict_zerocopy": lambda self, skip_fields=None: {"ns": 1}})
    assert M(1).asdict_zerocopy() == {"ns": 1}
    assert M(1).astuple_zerocopy() == (1,)


def dataclasses_make(name, ns):

    return make_dataclass(name, ["a"], bases=(ZeroCopy,), namespace=ns)


T_REWORK = typing.TypeVar("T_REWORK")


def test_generic_bases():
    # DESIGN: "Inherited fields are included and generic parameters substituted" (run time: the fields of the class)
    @dataclass
    class Gen(ZeroCopy, typing.Generic[T_REWORK]):
        g: T_REWORK
        h: int = 0

    @dataclass
    class Spec(Gen[int]):
        s: str = "s"

    class Undecorated(Gen[str]):
        pass

    assert Gen[int](1).asdict_zerocopy() == {"g": 1, "h": 0}
    assert Spec(1).asdict_zerocopy() == {"g": 1, "h": 0, "s": "s"}
    assert Undecorated("x").astuple_zerocopy() == ("x", 0)
    for obj in (Gen(1), Spec(1), Undecorated("x")):
        _check_methods(obj)
        _assert_replace_like_dataclasses(obj, g=2)
        _assert_replace_like_dataclasses(obj, h=2)


class _ABCZero(ZeroCopyFields, abc.ABCMeta):
    pass


class _ZeroABC(abc.ABCMeta, ZeroCopyFields):
    pass


@pytest.mark.parametrize("meta", [_ABCZero, _ZeroABC])
def test_abc_metaclass_combination_in_either_order(meta):
    # DESIGN: "It composes with other metaclasses: class M(ZeroCopyFields, abc.ABCMeta): ... works, in either order"
    class Abstract(ZeroCopy, metaclass=meta):
        @abc.abstractmethod
        def run(self): ...

    @dataclass
    class Concrete(Abstract):
        x: int = 1
        y: int = 2

        def run(self):
            return self.x

    with pytest.raises(TypeError):
        Abstract()
    c = Concrete()
    _check_methods(c)
    assert c.asdict_zerocopy() == {"x": 1, "y": 2}
    _assert_replace_like_dataclasses(c, y=3)
    assert isinstance(c, Abstract)

    @dataclass(slots=True)
    class ConcreteSlots(Abstract):
        x: int = 1

        def run(self):
            return self.x

    assert ConcreteSlots().asdict_zerocopy() == {"x": 1}
    _assert_replace_like_dataclasses(ConcreteSlots(), x=3)


def test_protocol_subclass_with_combined_metaclass():
    # DESIGN: "It composes with other metaclasses"
    class ProtoMeta(ZeroCopyFields, type(typing.Protocol)):
        pass

    @typing.runtime_checkable
    class HasX(typing.Protocol):
        x: int

        def value(self) -> int: ...

    @dataclass
    class Impl(ZeroCopy, HasX, metaclass=ProtoMeta):
        x: int = 1
        y: int = 2

        def value(self) -> int:
            return self.x

    i = Impl()
    assert isinstance(i, HasX)
    _check_methods(i)
    assert i.asdict_zerocopy() == {"x": 1, "y": 2}
    _assert_replace_like_dataclasses(i, x=4)


class _ExtraMixin:
    def asdict_zerocopy(self, skip_fields=None):
        return {**super().asdict_zerocopy(skip_fields), "extra": True}

    def astuple_zerocopy(self):
        return (*super().astuple_zerocopy(), "extra")

    def __replace__(self, /, **changes):
        r = super().__replace__(**changes)
        _calls.append(("mixin-replace", type(r).__name__))
        return r


def test_mixin_override_wins_and_super_serves_instance_class():
    # DESIGN: "A method that the user wrote in a class body, or inherits from one, is never replaced by a generated
    # one." and "Inside an override, super().asdict_zerocopy() and super().astuple_zerocopy() agree: both serve the
    # instance's own class."
    @dataclass
    class Base(ZeroCopy):
        x: int = 1

    @dataclass
    class WithMixin(_ExtraMixin, Base):
        y: int = 2

    @dataclass
    class Deeper(WithMixin):
        z: int = 3

    class Undecorated(Deeper):
        pass

    # On 3.13+ the @dataclass decorator itself writes a __replace__ into each class it decorates, which shadows the
    # mixin's: the plain twin says what metakit must do ("metakit changes none of its behaviour").
    @dataclass
    class PlainBase:
        x: int = 1

    @dataclass
    class PlainTwin(_ExtraMixin, PlainBase):
        y: int = 2

    mixin_replace_runs = "__replace__" not in PlainTwin.__dict__
    assert mixin_replace_runs == (not PY313)

    for cls, names in ((WithMixin, "xy"), (Deeper, "xyz"), (Undecorated, "xyz")):
        o = cls()
        assert list(o.asdict_zerocopy()) == [*names, "extra"]
        assert o.astuple_zerocopy() == (*(getattr(o, n) for n in names), "extra")
        assert list(o.asdict_zerocopy(skip_fields={"x"})) == [*names[1:], "extra"]
        _calls.clear()
        r = o.__replace__(x=9)
        assert type(r) is cls
        assert r.x == 9
        assert r.y == 2
        assert _calls == ([("mixin-replace", cls.__name__)] if mixin_replace_runs else [])
        # the function forms give the fields only
        assert list(metakit.asdict_zerocopy(o)) == list(names)


def test_override_assigned_later_on_zerocopy_mixin_is_seen_by_subclasses():
    # DESIGN: "Overrides behave the same however and whenever they appear: written in the class body, assigned to the
    # class after it was created, or deleted again."
    class Body(ZeroCopy):
        def asdict_zerocopy(self, skip_fields=None):
            return {"mixin": True, **ZeroCopy.asdict_zerocopy(self, skip_fields)}

    class Later(ZeroCopy):
        pass

    @dataclass
    class A(Body):
        x: int = 1

    @dataclass
    class B(Later):
        x: int = 1

    Later.asdict_zerocopy = Body.__dict__["asdict_zerocopy"]
    assert A().asdict_zerocopy() == B().asdict_zerocopy() == {"mixin": True, "x": 1}
    del Later.asdict_zerocopy
    assert B().asdict_zerocopy() == {"x": 1}


def test_generic_alias_refused_by_function_form():
    import typing

    T = typing.TypeVar("T")

    @dataclass
    class G(ZeroCopy, typing.Generic[T]):
        v: int = 0

    with pytest.raises(TypeError):
        metakit.asdict_zerocopy(G[int])
    with pytest.raises(TypeError):
        metakit.astuple_zerocopy(G[int])


def test_zero_copy_is_an_empty_slotted_base_made_by_the_metaclass():
    assert issubclass(ZeroCopyFields, type)
    assert type(ZeroCopy) is ZeroCopyFields
    assert ZeroCopy.__slots__ == ()
    assert not dataclasses.is_dataclass(ZeroCopy)
    assert ZeroCopy.asdict_zerocopy.__doc__
    assert ZeroCopy.astuple_zerocopy.__doc__


T_SEMANTICS = TypeVar("T_SEMANTICS")


def test_generic_slotted_dataclass_and_an_alias_call():
    @dataclass(slots=True)
    class SlottedBox(ZeroCopy, Generic[T_SEMANTICS]):
        item: T_SEMANTICS

    @dataclass(slots=True)
    class SlottedIntBox(SlottedBox[int]):
        count: int = 0

    assert_converts(SlottedBox[int](object()))  # made through the alias SlottedBox[int]
    assert SlottedIntBox(1, 2).asdict_zerocopy() == {"item": 1, "count": 2}


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


class ABCZeroCopyFields_semantics(ZeroCopyFields, abc.ABCMeta):
    pass


def test_metaclass_combined_with_abc_meta_keeps_the_direct_setattr():
    # ABCMeta has no __setattr__ of its own: nothing to cooperate with.
    assert ABCZeroCopyFields_semantics.__setattr__ is ZeroCopyFields.__setattr__


# --- a user's method inherited through another base ------------------------------------------


def _drops_wrapper() -> tuple[type, type]:
    """Two bases of a record: one plain, one whose override leaves its kernel wrapper out (FlashInfer's shape)."""

    @dataclass
    class Counts(ZeroCopy):
        num_tokens: int = 1

    @dataclass
    class DropsWrapper(ZeroCopy):
        wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"wrapper", *(skip_fields or ())})

    return Counts, DropsWrapper


def test_an_override_inherited_through_a_second_base_is_not_hidden_by_the_firsts_generated_method():
    # DESIGN: "A method that the user wrote in a class body, or inherits from one, is never replaced
    # by a generated one." Counts writes none: as in Python without metakit, Meta runs DropsWrapper's.
    Counts, DropsWrapper = _drops_wrapper()

    @dataclass
    class Meta(Counts, DropsWrapper):
        page_size: int = 16

    meta = Meta(wrapper=object())
    assert meta.asdict_zerocopy() == {"num_tokens": 1, "page_size": 16}
    assert meta.asdict_zerocopy(["page_size"]) == {"num_tokens": 1}
    assert meta.astuple_zerocopy() == (meta.wrapper, 1, 16)  # no override: the instance's own fields
    assert metakit.replace(meta, page_size=8) == Meta(num_tokens=1, wrapper=meta.wrapper, page_size=8)
    assert Counts(2).asdict_zerocopy() == {"num_tokens": 2}  # the first base's own instances are unchanged
    mt.assert_zerocopy(meta)
    mt.assert_zerocopy_class(Meta)


def test_super_from_an_override_goes_on_to_the_next_users_method_past_generated_ones():
    Counts, DropsWrapper = _drops_wrapper()

    @dataclass
    class Tagged(ZeroCopy):
        tag: str = "t"

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"tag", *(skip_fields or ())})

    @dataclass
    class Meta(Tagged, Counts, DropsWrapper):
        page_size: int = 16

    # Tagged's super() passes Counts (metakit's) and reaches DropsWrapper's, whose super() serves Meta.
    assert Meta(wrapper=object()).asdict_zerocopy() == {"num_tokens": 1, "page_size": 16}
    assert Tagged().asdict_zerocopy() == {}
    mt.assert_zerocopy(Meta())


def test_an_override_given_to_a_second_base_later_and_taken_away_again():
    Counts, _ = _drops_wrapper()

    @dataclass
    class Plain(ZeroCopy):
        wrapper: object = None

    @dataclass
    class Meta(Counts, Plain):
        page_size: int = 16

    assert Meta().asdict_zerocopy() == {"num_tokens": 1, "wrapper": None, "page_size": 16}
    Plain.asdict_zerocopy = lambda self, skip_fields=None: {"plain's": True}
    assert Meta().asdict_zerocopy() == {"plain's": True}
    assert Counts().asdict_zerocopy() == {"num_tokens": 1}
    del Plain.asdict_zerocopy
    assert Meta().asdict_zerocopy() == {"num_tokens": 1, "wrapper": None, "page_size": 16}
    assert Plain().asdict_zerocopy() == {"wrapper": None}


def test_zerocopys_own_method_ends_the_walk_as_it_would_in_python():
    # ZeroCopy's methods are real methods of a real base: a plain mixin after it in the MRO is never
    # reached, as in Python, and the record keeps its own generated method.
    class Mixin:
        def asdict_zerocopy(self, skip_fields=None):
            return "mixin"

    Counts, _ = _drops_wrapper()

    @dataclass
    class Meta(Counts, Mixin):
        page_size: int = 16

    assert [klass.__name__ for klass in Meta.__mro__] == ["Meta", "Counts", "ZeroCopy", "Mixin", "object"]
    assert Meta().asdict_zerocopy() == {"num_tokens": 1, "page_size": 16}
    assert Meta.__dict__["asdict_zerocopy"].__code__.co_filename.startswith("<metakit")


def test_making_a_class_never_asks_a_metaclass_getattr() -> None:
    # Only namespaces are read while a class is made: a combined metaclass's __getattr__ runs no code.
    asked: list[str] = []

    class Loud(ZeroCopyFields):
        def __getattr__(cls, name: str) -> Any:
            asked.append(name)
            raise RuntimeError(f"asked for {name}")

    class Base(metaclass=Loud):
        pass

    class Sub(Base):
        x = 1

    assert Sub.x == 1
    assert asked == []
