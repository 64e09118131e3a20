"""User overrides, super(), deletion, and metaclass composition (DESIGN "Public API", "Semantics"; README
"Your own methods win", "API")."""

from __future__ import annotations

import abc
import copy
import sys
from dataclasses import dataclass, field

import pytest

import metakit
from metakit import OMIT, ZeroCopy, ZeroCopyFields


def make_chain():
    @dataclass
    class P(ZeroCopy):
        a: int = 1

    @dataclass
    class Q(P):
        b: int = 2

    @dataclass
    class R(Q):
        c: int = 3

    return P, Q, R


def test_body_override_kept_and_super_serves_instance_class():
    # DESIGN: "A user override calling super().asdict_zerocopy(...) still gets the fields of the instance's own
    # class. A method that the user wrote in a class body, or inherits from one, is never replaced"
    @dataclass
    class Base(ZeroCopy):
        x: int = 1
        wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"wrapper", *(skip_fields or ())})

        def astuple_zerocopy(self):
            return ("T", *super().astuple_zerocopy())

        def __replace__(self, /, **changes):
            r = super().__replace__(**changes)
            r.tagged = True
            return r

    @dataclass
    class Sub(Base):
        y: int = 2

    @dataclass
    class SubSub(Sub):
        z: int = 3

    assert Base().asdict_zerocopy() == {"x": 1}
    assert Sub().asdict_zerocopy() == {"x": 1, "y": 2}
    assert SubSub().asdict_zerocopy() == {"x": 1, "y": 2, "z": 3}
    assert SubSub().asdict_zerocopy({"y"}) == {"x": 1, "z": 3}
    # README: "so do super().astuple_zerocopy() and super().__replace__(...) inside it"
    assert Base().astuple_zerocopy() == ("T", 1, None)
    assert Sub().astuple_zerocopy() == ("T", 1, None, 2)
    assert SubSub().astuple_zerocopy() == ("T", 1, None, 2, 3)
    rb = Base().__replace__(x=5)
    assert type(rb) is Base and rb.x == 5 and rb.tagged
    # function forms never call the override
    assert metakit.asdict_zerocopy(Sub()) == {"x": 1, "wrapper": None, "y": 2}
    assert metakit.astuple_zerocopy(Sub()) == (1, None, 2)
    assert not hasattr(metakit.replace(Base(), x=2), "tagged")
    with pytest.raises(ValueError, match="Sub"):
        Sub().asdict_zerocopy({"nope"})


def test_inherited_asdict_override_not_replaced():
    # DESIGN: "A method that the user wrote in a class body, or inherits from one, is never replaced by a generated one."
    @dataclass
    class Base(ZeroCopy):
        x: int = 1

        def asdict_zerocopy(self, skip_fields=None):
            return {"custom": True}

        def astuple_zerocopy(self):
            return ("custom",)

    @dataclass
    class Sub(Base):
        y: int = 2

    class Undecorated(Sub):
        pass

    for cls in (Sub, Undecorated):
        assert cls().asdict_zerocopy() == {"custom": True}
        assert cls().astuple_zerocopy() == ("custom",)
        assert metakit.asdict_zerocopy(cls()) == {"x": 1, "y": 2}


def test_super_in_middle_override_deep_chain_astuple_and_asdict_agree():
    # DESIGN: "Inside an override, super().asdict_zerocopy() and super().astuple_zerocopy() agree: both serve the
    # instance's own class."
    @dataclass
    class A(ZeroCopy):
        a: int = 1

    @dataclass
    class B(A):
        b: int = 2

        def asdict_zerocopy(self, skip_fields=None):
            d = super().asdict_zerocopy(skip_fields)
            t = super().astuple_zerocopy()
            assert tuple(d.values()) == t, (d, t)
            return d

        def astuple_zerocopy(self):
            return super().astuple_zerocopy()

    @dataclass
    class C(B):
        c: int = 3

    assert C().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
    assert C().astuple_zerocopy() == (1, 2, 3)


def test_override_assigned_after_creation_on_base_after_subclasses_exist():
    # DESIGN: "Overrides behave the same however and whenever they appear: written in the class body, assigned to
    # the class after it was created, or deleted again." README: "or on a base after its subclasses exist"
    P, Q, R = make_chain()
    r_before = R()
    assert r_before.asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}

    def ov(self, skip_fields=None):
        return {**super(Q, self).asdict_zerocopy(skip_fields), "ov": True}

    def ovt(self):
        return (*super(Q, self).astuple_zerocopy(), "ov")

    Q.asdict_zerocopy = ov
    Q.astuple_zerocopy = ovt
    # R inherits Q's override, exactly as if Q's body had defined it (R has no override of its own)
    assert R().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3, "ov": True}
    assert R().astuple_zerocopy() == (1, 2, 3, "ov")
    assert Q().asdict_zerocopy() == {"a": 1, "b": 2, "ov": True}
    assert P().asdict_zerocopy() == {"a": 1}
    assert R().asdict_zerocopy({"b"}) == {"a": 1, "c": 3, "ov": True}
    assert metakit.asdict_zerocopy(R()) == {"a": 1, "b": 2, "c": 3}
    # deleted again: each class its own generated method
    del Q.asdict_zerocopy
    del Q.astuple_zerocopy
    assert R().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
    assert Q().asdict_zerocopy() == {"a": 1, "b": 2}
    assert R().astuple_zerocopy() == (1, 2, 3)
    assert Q().astuple_zerocopy() == (1, 2)


def test_override_assigned_on_leaf_then_deleted_gives_own_generated_not_base():
    # DESIGN: "After del Cls.asdict_zerocopy the class gets its own generated method back, never a base's."
    P, Q, R = make_chain()
    R.asdict_zerocopy = lambda self, skip_fields=None: {"L": 1}
    R.astuple_zerocopy = lambda self: ("L",)
    assert R().asdict_zerocopy() == {"L": 1}
    assert R().astuple_zerocopy() == ("L",)
    del R.asdict_zerocopy
    del R.astuple_zerocopy
    assert R().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
    assert R().astuple_zerocopy() == (1, 2, 3)


def test_body_override_deleted_gives_own_generated():
    # DESIGN: "After del Cls.asdict_zerocopy the class gets its own generated method back, never a base's."
    @dataclass
    class A(ZeroCopy):
        a: int = 1

    @dataclass
    class B(A):
        b: int = 2

        def asdict_zerocopy(self, skip_fields=None):
            return {"mine": 1}

        def astuple_zerocopy(self):
            return ("mine",)

    @dataclass
    class C(B):
        c: int = 3

    assert C().asdict_zerocopy() == {"mine": 1}
    del B.asdict_zerocopy
    del B.astuple_zerocopy
    assert B().asdict_zerocopy() == {"a": 1, "b": 2}
    assert B().astuple_zerocopy() == (1, 2)
    assert C().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
    assert C().astuple_zerocopy() == (1, 2, 3)
    assert B().asdict_zerocopy({"a"}) == {"b": 2}


def test_del_generated_method_keeps_generated():
    # DESIGN: after del the class has its own generated method
    P, Q, R = make_chain()
    del R.asdict_zerocopy
    assert R().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
    assert metakit.asdict_zerocopy(R()) == {"a": 1, "b": 2, "c": 3}


def test_override_assigned_then_reassigned_then_deleted_repeatedly():
    P, Q, R = make_chain()
    for i in range(3):
        Q.asdict_zerocopy = lambda self, skip_fields=None, i=i: {"i": i}
        assert R().asdict_zerocopy() == {"i": i}
        assert Q().asdict_zerocopy() == {"i": i}
        del Q.asdict_zerocopy
        assert R().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}
        assert Q().asdict_zerocopy() == {"a": 1, "b": 2}


def test_override_non_function_then_delete():
    P, Q, R = make_chain()
    Q.asdict_zerocopy = None
    with pytest.raises(TypeError):
        Q().asdict_zerocopy()
    assert metakit.asdict_zerocopy(Q()) == {"a": 1, "b": 2}
    del Q.asdict_zerocopy
    assert Q().asdict_zerocopy() == {"a": 1, "b": 2}
    assert R().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}


def test_replace_override_assigned_on_base_super_serves_instance_class():
    # README: "super().__replace__(...) inside it" gets the instance's own class; overrides assigned later behave
    # like body ones
    P, Q, R = make_chain()

    def rep(self, /, **changes):
        out = super(Q, self).__replace__(**changes)
        return out

    Q.__replace__ = rep
    q2 = Q().__replace__(a=9)
    assert type(q2) is Q and q2.a == 9 and q2.b == 2
    assert metakit.replace(R(), a=4) == R(4, 2, 3)
    del Q.__replace__
    q3 = Q().__replace__(b=7)
    assert type(q3) is Q and q3 == Q(1, 7)


def test_copy_replace_on_313():
    # DESIGN: "Every class made by ZeroCopyFields also gets it as __replace__, so copy.replace (3.13+) uses it."
    P, Q, R = make_chain()
    if sys.version_info >= (3, 13):
        r = copy.replace(R(), b=5)
        assert type(r) is R and r == R(1, 5, 3)
    assert R.__replace__(R(), b=5) == R(1, 5, 3)


def test_user_replace_method_untouched():
    # README: "A __replace__ or replace that you write is never touched; metakit.replace(obj) runs the generated
    # code all the same"
    @dataclass
    class V(ZeroCopy):
        a: int = 1

        def replace(self, **kw):
            return ("mine", kw)

        def __replace__(self, /, **kw):
            return ("dunder", kw)

    assert V().replace(a=2) == ("mine", {"a": 2})
    assert V().__replace__(a=2) == ("dunder", {"a": 2})
    assert metakit.replace(V(), a=2) == V(2)
    if sys.version_info >= (3, 13):
        assert copy.replace(V(), a=2) == ("dunder", {"a": 2})


# ---- metaclass composition ----------------------------------------------------------


class ABC1(ZeroCopyFields, abc.ABCMeta):
    pass


class ABC2(abc.ABCMeta, ZeroCopyFields):
    pass


@pytest.mark.parametrize("meta", [ABC1, ABC2], ids=["zc-first", "abc-first"])
def test_abcmeta_either_order(meta):
    # DESIGN: "class M(ZeroCopyFields, abc.ABCMeta): ... works, in either order"
    @dataclass
    class Base(metaclass=meta):
        a: int = 1
        w: object = field(default=None, metadata=OMIT)

        @abc.abstractmethod
        def f(self): ...

    with pytest.raises(TypeError):
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
    assert isinstance(i, Base)

    class Virtual:
        pass

    Base.register(Virtual)
    assert isinstance(Virtual(), Base)
    assert Impl in metakit.zerocopy_classes()


def _logging_metas():
    log = []

    def mk(label):
        def __setattr__(cls, k, v):
            log.append((label, "set", k))
            super(meta_cls, cls).__setattr__(k, v)

        def __delattr__(cls, k):
            log.append((label, "del", k))
            super(meta_cls, cls).__delattr__(k)

        meta_cls = type(label, (type,), {"__setattr__": __setattr__, "__delattr__": __delattr__})
        return meta_cls

    return log, mk


@pytest.mark.parametrize("zc_base", [False, True])
def test_setattr_delattr_of_every_metaclass_run_in_mro_order(zc_base):
    # DESIGN: "every __setattr__ that a metaclass in the combination defines, the combined one's own included,
    # still runs, in MRO order." README: "Every __setattr__ and __delattr__ ..."
    log, mk = _logging_metas()
    Before, After = mk("Before"), mk("After")

    class Combined(Before, ZeroCopyFields, After):
        def __setattr__(cls, k, v):
            log.append(("Combined", "set", k))
            super().__setattr__(k, v)

        def __delattr__(cls, k):
            log.append(("Combined", "del", k))
            super().__delattr__(k)

    bases = (ZeroCopy,) if zc_base else ()

    @dataclass
    class X(*bases, metaclass=Combined):
        a: int = 1

    # dataclasses' own setattr calls went through all three, in MRO order
    fields_events = [e[0] for e in log if e[2] == "__dataclass_fields__"]
    assert fields_events == ["Combined", "Before", "After"]
    assert X().asdict_zerocopy() == {"a": 1}
    log.clear()
    X.foo = 1
    assert log == [("Combined", "set", "foo"), ("Before", "set", "foo"), ("After", "set", "foo")]
    log.clear()
    del X.foo
    assert log == [("Combined", "del", "foo"), ("Before", "del", "foo"), ("After", "del", "foo")]
    log.clear()
    X.asdict_zerocopy = lambda self, skip_fields=None: {"o": 1}
    assert [e[0] for e in log if e[2] == "asdict_zerocopy" and e[1] == "set"] == ["Combined", "Before", "After"]
    assert X().asdict_zerocopy() == {"o": 1}
    log.clear()
    del X.asdict_zerocopy
    assert [e[0] for e in log if e[2] == "asdict_zerocopy" and e[1] == "del"] == ["Combined", "Before", "After"]
    assert X().asdict_zerocopy() == {"a": 1}


def test_metaclass_after_zerocopyfields_sees_its_setattr():
    # DESIGN: every __setattr__ runs, including those after ZeroCopyFields in the MRO
    log, mk = _logging_metas()
    After = mk("After")

    class Combined(ZeroCopyFields, After):
        pass

    @dataclass
    class Y(ZeroCopy, metaclass=Combined):
        a: int = 1

    assert ("After", "set", "__dataclass_fields__") in log
    assert ("After", "set", "__init__") in log
    assert Y().asdict_zerocopy() == {"a": 1}


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


def test_zerocopy_base_slots_and_type():
    # DESIGN: "ZeroCopyFields is a metaclass (a subclass of type)"; ZeroCopy "has __slots__ = ()"
    assert issubclass(ZeroCopyFields, type)
    assert type(ZeroCopy) is ZeroCopyFields
    assert ZeroCopy.__dict__["__slots__"] == ()

    @dataclass(slots=True)
    class S(ZeroCopy):
        a: int = 1

    s = S()
    assert not hasattr(s, "__dict__")
    with pytest.raises(AttributeError):
        s.other = 1


def test_override_in_plain_mixin_body_kept_and_super_serves_instance_class():
    # DESIGN: "A method that the user wrote in a class body, or inherits from one, is never replaced by a generated
    # one." and super() inside it "still gets the fields of the instance's own class"
    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    class Mixin:
        def asdict_zerocopy(self, skip_fields=None):
            return {**super().asdict_zerocopy(skip_fields), "m": 1}

        def astuple_zerocopy(self):
            return (*super().astuple_zerocopy(), "m")

    @dataclass
    class D(Mixin, Base):
        b: int = 2

    @dataclass
    class E(D):
        c: int = 3

    assert D().asdict_zerocopy() == {"a": 1, "b": 2, "m": 1}
    assert D().astuple_zerocopy() == (1, 2, "m")
    assert E().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3, "m": 1}
    assert E().astuple_zerocopy() == (1, 2, 3, "m")
    assert E().asdict_zerocopy({"a"}) == {"b": 2, "c": 3, "m": 1}


def test_override_in_plain_dataclass_base_follows_mro():
    @dataclass
    class PB:
        a: int = 1

        def asdict_zerocopy(self, skip_fields=None):
            return {"pb": 1}

    @dataclass
    class H(PB, ZeroCopy):
        b: int = 2

    @dataclass
    class G(ZeroCopy, PB):
        b: int = 2

    assert H().asdict_zerocopy() == {"pb": 1}  # inherited from a body: never replaced
    assert G().asdict_zerocopy() == {"a": 1, "b": 2}  # ZeroCopy's declaration comes first in the MRO
    assert metakit.asdict_zerocopy(H()) == {"a": 1, "b": 2}


def test_testing_helpers_accept_good_classes():
    # DESIGN: metakit.testing.assert_zerocopy(obj) / assert_zerocopy_class(cls) check generated methods and overrides
    from metakit.testing import assert_zerocopy, assert_zerocopy_class

    @dataclass
    class Good(ZeroCopy):
        a: object = None
        w: object = field(default=None, metadata=OMIT)

    @dataclass
    class GoodOv(Good):
        wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy({"wrapper", *(skip_fields or ())})

    @dataclass(frozen=True, slots=True)
    class FS(ZeroCopy):
        a: object = None

    for cls in (Good, GoodOv, FS):
        assert_zerocopy_class(cls)
        assert_zerocopy(cls())


def test_testing_helper_reports_mutating_override():
    # README "Testing your own classes": an override that calls .add() on skip_fields "is reported with the names it
    # added", and the failure names the class
    from metakit.testing import assert_zerocopy_class

    @dataclass
    class Base(ZeroCopy):
        a: object = None

    @dataclass
    class BadOv(Base):
        decode_wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            skip_fields = skip_fields if skip_fields is not None else set()
            skip_fields.add("decode_wrapper")
            return super().asdict_zerocopy(skip_fields)

    with pytest.raises(AssertionError) as ei:
        assert_zerocopy_class(BadOv)
    msg = str(ei.value)
    assert "BadOv" in msg and "decode_wrapper" in msg and "override" in msg


def test_deleting_own_override_falls_back_to_inherited_user_override_like_never_overridden():
    # DESIGN: "Overrides behave the same however and whenever they appear"; a class that inherits a user method
    # "is never replaced by a generated one": after del, C behaves as a twin that never had its own override.
    @dataclass
    class A(ZeroCopy):
        a: int = 1

    @dataclass
    class B(A):
        b: int = 2

        def asdict_zerocopy(self, skip_fields=None):
            return {"B-user": 1}

        def astuple_zerocopy(self):
            return ("B-user",)

    @dataclass
    class C(B):
        c: int = 3

        def asdict_zerocopy(self, skip_fields=None):
            return {"C-user": 1}

        def astuple_zerocopy(self):
            return ("C-user",)

    @dataclass
    class Twin(B):
        c: int = 3

    del C.asdict_zerocopy
    del C.astuple_zerocopy
    assert C().asdict_zerocopy() == Twin().asdict_zerocopy() == {"B-user": 1}
    assert C().astuple_zerocopy() == Twin().astuple_zerocopy() == ("B-user",)


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
    from dataclasses import make_dataclass

    return make_dataclass(name, ["a"], bases=(ZeroCopy,), namespace=ns)


def test_slots_class_override_with_explicit_super():
    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    @dataclass(slots=True)
    class SlotOv(Base):
        b: int = 2

        def asdict_zerocopy(self, skip_fields=None):
            return {**super(SlotOvRef[0], self).asdict_zerocopy(skip_fields), "ov": 1}

    SlotOvRef = [SlotOv]

    @dataclass(slots=True)
    class SlotSub(SlotOv):
        c: int = 3

    assert SlotOv().asdict_zerocopy() == {"a": 1, "b": 2, "ov": 1}
    assert SlotSub().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3, "ov": 1}


def _inherited_replace_outcome(base):
    bases = (base,) if base else ()

    @dataclass
    class Q(*bases):
        a: int = 1

        def __replace__(self, /, **changes):
            return "user __replace__"

    @dataclass
    class R(Q):
        b: int = 2

    return R().__replace__(a=5)


def test_inherited_user_dunder_replace_behaves_as_without_metakit():
    # README "Your own methods win": "A method named asdict_zerocopy or astuple_zerocopy that you write in a class
    # body, or that a class inherits from one, is never replaced by a generated one; nor is a __replace__ or a
    # replace method of your own." README API: "metakit changes none of its behaviour".
    # So a dataclass R(Q) that inherits Q's own __replace__ must behave as the plain-dataclass twin does on this
    # Python: on 3.10-3.12 R inherits Q's method; on 3.13 dataclasses itself gives R its own __replace__.
    plain = _inherited_replace_outcome(None)
    zc = _inherited_replace_outcome(ZeroCopy)
    if sys.version_info >= (3, 13):
        assert plain != "user __replace__"
        assert zc != "user __replace__" and type(zc).__name__ == "R"
    else:
        assert plain == "user __replace__"
        assert zc == plain


def test_zerocopy_classes_while_classes_are_collected_in_another_thread():
    # DESIGN: thread-safe; zerocopy_classes() lists live classes (weakly held)
    import gc
    import threading
    from dataclasses import make_dataclass

    stop = threading.Event()

    def churn():
        i = 0
        while not stop.is_set():
            C = make_dataclass(f"Churn{i % 20}", [f"x{i % 7}"], bases=(ZeroCopy,))
            del C
            i += 1
            if i % 10 == 0:
                gc.collect()

    t = threading.Thread(target=churn)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    t.start()
    try:
        for _ in range(500):
            listed = metakit.zerocopy_classes()
            assert all(isinstance(c, type) for c in listed)
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)


def test_missing_attribute_propagates_attribute_error():
    @dataclass
    class A(ZeroCopy):
        x: int

    a = A(1)
    del a.x
    for call in (
        a.asdict_zerocopy,
        a.astuple_zerocopy,
        lambda: metakit.asdict_zerocopy(a),
        lambda: metakit.astuple_zerocopy(a),
    ):
        with pytest.raises(AttributeError, match="'x'"):
            call()


def test_zerocopy_dispatcher_on_non_dataclass():
    # DESIGN: "Non-dataclasses get a TypeError with a clear message"
    for v in (3, None, object()):
        with pytest.raises(TypeError, match="not a dataclass"):
            ZeroCopy.asdict_zerocopy(v)
        with pytest.raises(TypeError, match="not a dataclass"):
            ZeroCopy.astuple_zerocopy(v)


def test_override_assigned_in_middle_of_chain_with_body_override_below():
    # DESIGN: overrides "written in the class body, assigned to the class after it was created" combine; every
    # super() reaches code serving the instance's own class
    P, Q, R0 = make_chain()

    @dataclass
    class R(Q):
        c: int = 3

        def asdict_zerocopy(self, skip_fields=None):
            return {**super().asdict_zerocopy(skip_fields), "R": 1}

        def astuple_zerocopy(self):
            return (*super().astuple_zerocopy(), "R")

    @dataclass
    class S(R):
        d: int = 4

    assert S().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3, "d": 4, "R": 1}

    def qov(self, skip_fields=None):
        return {**super(Q, self).asdict_zerocopy(skip_fields), "Q": 1}

    def qovt(self):
        return (*super(Q, self).astuple_zerocopy(), "Q")

    Q.asdict_zerocopy = qov
    Q.astuple_zerocopy = qovt
    assert S().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3, "d": 4, "Q": 1, "R": 1}
    assert S().astuple_zerocopy() == (1, 2, 3, 4, "Q", "R")
    assert Q().asdict_zerocopy() == {"a": 1, "b": 2, "Q": 1}
    assert R0().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3, "Q": 1}
    del Q.asdict_zerocopy, Q.astuple_zerocopy
    assert S().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3, "d": 4, "R": 1}
    assert R0().asdict_zerocopy() == {"a": 1, "b": 2, "c": 3}


def test_override_on_base_before_subclass_then_deleted():
    # DESIGN: "After del Cls.asdict_zerocopy the class gets its own generated method back, never a base's."
    @dataclass
    class B(ZeroCopy):
        x: int = 1

    B.asdict_zerocopy = lambda self, skip_fields=None: {"B": 1}

    @dataclass
    class C(B):
        y: int = 2

    assert C().asdict_zerocopy() == {"B": 1}
    del B.asdict_zerocopy
    assert C().asdict_zerocopy() == {"x": 1, "y": 2}
    assert B().asdict_zerocopy() == {"x": 1}
