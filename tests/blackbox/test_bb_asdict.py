"""Black-box tests of asdict_zerocopy / astuple_zerocopy (DESIGN "Semantics", README "What is in the dict")."""

from __future__ import annotations

import dataclasses
import sys
import typing
from dataclasses import KW_ONLY, InitVar, dataclass, field, make_dataclass
from typing import ClassVar

import pytest

import metakit
from metakit import OMIT, ZeroCopy, ZeroCopyFields


def ref(obj, skip=()):
    omit = {f.name for f in dataclasses.fields(obj) if dict(f.metadata).items() >= dict(OMIT).items()}
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in omit and f.name not in skip}


def check_all(obj, skip=()):
    """DESIGN: keys are exactly fields() in order, less ClassVar/InitVar/OMIT/skip; d[k] is getattr(obj, k)."""
    exp = ref(obj, skip)
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
        assert all(a is b for a, b in zip(t, exp.values()))
        t2 = metakit.astuple_zerocopy(obj)
        assert all(a is b for a, b in zip(t2, exp.values())) and len(t2) == len(exp)


class Marker:
    pass


@dataclass
class Rich(ZeroCopy):
    a: object
    b: list = field(default_factory=list)
    wrapper: object = field(default=None, metadata=OMIT)
    doc: object = field(default=None, metadata={**OMIT, "doc": "merged"})
    z: object = field(default_factory=Marker, init=False)
    cv: ClassVar[int] = 5
    iv: InitVar[int] = 0

    def __post_init__(self, iv):
        self.attn_bias = Marker()


def test_keys_order_identity_rich():
    # DESIGN: "keys are exactly the names in dataclasses.fields(type(obj)), in that order. That includes
    # init=False fields and inherited fields, and leaves out ClassVar, InitVar, OMIT fields"
    r = Rich(Marker(), [Marker()], wrapper=Marker())
    d = r.asdict_zerocopy()
    assert list(d) == ["a", "b", "z"]
    assert d["a"] is r.a and d["b"] is r.b and d["z"] is r.z
    check_all(r)


def test_new_dict_each_call_and_no_copy_of_nested():
    # DESIGN: "returns a new dict"; "no copy and no recursion into nested dataclasses, lists"
    inner = Rich(1)
    r = Rich(inner, [inner])
    d1, d2 = r.asdict_zerocopy(), r.asdict_zerocopy()
    assert d1 is not d2
    assert d1["a"] is inner and d1["b"] is r.b and d1["b"][0] is inner
    d1["a"] = 99
    assert r.a is inner


def test_non_field_attributes_never_appear():
    # DESIGN: "Attributes that are not fields never appear, whenever they were set."
    r = Rich(1)
    r.later = 3
    r.__dict__["sneaky"] = 4
    Rich.class_attr = 5
    try:
        assert list(r.asdict_zerocopy()) == ["a", "b", "z"]
        assert len(r.astuple_zerocopy()) == 3
    finally:
        del Rich.class_attr


def test_inherited_fields_and_override_of_field_default():
    # DESIGN: "That includes ... inherited fields"
    @dataclass
    class Base(ZeroCopy):
        x: int = 1
        y: int = 2

    @dataclass
    class Sub(Base):
        z: int = 3
        x: int = 10  # redefined: keeps its position

    s = Sub()
    assert list(s.asdict_zerocopy()) == [f.name for f in dataclasses.fields(Sub)] == ["x", "y", "z"]
    assert s.asdict_zerocopy() == {"x": 10, "y": 2, "z": 3}
    check_all(s)


def test_multiple_inheritance_field_order():
    # DESIGN: keys in dataclasses.fields order, for every way of making a dataclass
    @dataclass
    class A(ZeroCopy):
        a: int = 1

    @dataclass
    class B(ZeroCopy):
        b: int = 2

    @dataclass
    class Plain:
        p: int = 3

    @dataclass
    class C(A, B, Plain):
        c: int = 4

    c = C()
    assert list(c.asdict_zerocopy()) == [f.name for f in dataclasses.fields(C)]
    check_all(c)


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


def test_undecorated_subclass_of_metakit_dataclass():
    # DESIGN: "an undecorated subclass of such a dataclass"
    @dataclass
    class Base(ZeroCopy):
        x: int = 1

    class Sub(Base):
        y: int = 2  # not a field: not decorated

        def __init__(self):
            super().__init__()
            self.extra = 1

    s = Sub()
    assert s.asdict_zerocopy() == {"x": 1}
    assert s.astuple_zerocopy() == (1,)
    assert metakit.asdict_zerocopy(s) == {"x": 1}


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


def test_class_becomes_dataclass_later():
    # DESIGN: "Every class it creates that is, or becomes, a dataclass"
    class Later(ZeroCopy):
        a: int = 1

    with pytest.raises(TypeError):
        Later().asdict_zerocopy()
    Later = dataclass(Later)
    assert Later().asdict_zerocopy() == {"a": 1}


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"frozen": True},
        {"slots": True},
        {"slots": True, "frozen": True},
        {"kw_only": True},
        {"eq": False},
        {"order": True},
        {"unsafe_hash": True},
        {"repr": False, "init": True},
        {"match_args": False},
    ],
    ids=repr,
)
def test_dataclass_options(opts):
    # DESIGN: "the plain @dataclass decorator in any of its forms (options, slots=True ...)"
    @dataclass(**opts)
    class O(ZeroCopy):
        a: object = None
        b: object = None
        w: object = field(default=None, metadata=OMIT)

    m1, m2 = Marker(), Marker()
    o = O(a=m1, b=m2)
    assert o.asdict_zerocopy() == {"a": m1, "b": m2}
    assert o.astuple_zerocopy() == (m1, m2)
    check_all(o)
    assert metakit.replace(o, a=1).a == 1


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


def test_make_dataclass():
    # DESIGN: "make_dataclass(..., bases=(ZeroCopy,))"
    M = make_dataclass(
        "M",
        [("a", int), ("b", int, field(default=0)), ("w", object, field(default=None, metadata=OMIT))],
        bases=(ZeroCopy,),
    )
    m = M(1)
    assert m.asdict_zerocopy() == {"a": 1, "b": 0}
    assert m.astuple_zerocopy() == (1, 0)
    assert M in metakit.zerocopy_classes()


def test_string_annotations_not_evaluated():
    # DESIGN: "Classes never have their annotations evaluated: string annotations and names imported only
    # under TYPE_CHECKING are fine."
    @dataclass
    class S(ZeroCopy):
        a: NoSuchName  # noqa: F821
        b: list[Undefined] = None  # noqa: F821

    assert S(1).asdict_zerocopy() == {"a": 1, "b": None}


ODD_NAMES = [
    "self",
    "skip_fields",
    "changes",
    "obj",
    "cls",
    "dict",
    "d",
    "name",
    "error",
    "isinstance",
    "KeyError",
    "TypeError",
    "__d",
    "_d",
    "__class__x",
    "__x__",
    "é",
    "数据",
    "Ωmega",
    "x" * 500,
    "print",
    "str",
    "bytes",
    "tuple",
    "None_",
    "_skip_fields_text",
    "_check_skipped",
    "_skip_fields_failed",
    "_replace_by_dataclasses",
    "getattr",
    "len",
    "super",
    "object",
    "type",
    "__build_class__",
    "__builtins__",
    "__module__x",
]


@pytest.mark.parametrize("name", ODD_NAMES, ids=lambda n: n[:20])
def test_odd_field_names_single(name):
    # DESIGN: "Internal names cannot collide with field names: fields may be called self, skip_fields,
    # dict, cls, __d and so on."
    C = make_dataclass(
        "Odd", [("first", object, field(default=None)), (name, object, field(default=None))], bases=(ZeroCopy,)
    )
    m1, m2 = Marker(), Marker()
    o = C(m1, m2)
    d = o.asdict_zerocopy()
    assert list(d) == ["first", name]
    assert d["first"] is m1 and d[name] is m2
    assert o.astuple_zerocopy() == (m1, m2)
    assert o.asdict_zerocopy(skip_fields={name}) == {"first": m1}
    assert o.asdict_zerocopy([name, "first"]) == {}
    with pytest.raises(ValueError, match="nope"):
        o.asdict_zerocopy(skip_fields={"nope"})
    with pytest.raises(TypeError, match="skip_fields"):
        o.asdict_zerocopy(skip_fields=[1])
    r = metakit.replace(o, **{name: 5})
    assert getattr(r, name) == 5 and r.first is m1
    assert metakit.replace(o) == dataclasses.replace(o)


def test_odd_field_names_all_together():
    # DESIGN: same promise, with every odd name in one class
    C = make_dataclass("AllOdd", [(n, int, field(default=i)) for i, n in enumerate(ODD_NAMES)], bases=(ZeroCopy,))
    o = C()
    assert o.asdict_zerocopy() == {n: i for i, n in enumerate(ODD_NAMES)}
    assert o.astuple_zerocopy() == tuple(range(len(ODD_NAMES)))
    assert o.asdict_zerocopy(skip_fields=set(ODD_NAMES[:5])) == {n: i for i, n in enumerate(ODD_NAMES) if i >= 5}
    assert metakit.replace(o, self=-1, changes=-2, obj=-3) == dataclasses.replace(o, self=-1, changes=-2, obj=-3)


def test_name_mangled_field():
    # DESIGN: fields are read as attributes: a private (mangled) field name works
    @dataclass
    class Priv(ZeroCopy):
        __secret: int = 1

    p = Priv()
    assert p.asdict_zerocopy() == {"_Priv__secret": 1}
    assert p.astuple_zerocopy() == (1,)


def test_many_fields():
    # DESIGN: code written for the one class, any field count (beyond the template limit of 100)
    n = 300
    C = make_dataclass("Wide", [(f"f{i}", int, field(default=i)) for i in range(n)], bases=(ZeroCopy,))
    o = C()
    assert o.asdict_zerocopy() == {f"f{i}": i for i in range(n)}
    assert o.astuple_zerocopy() == tuple(range(n))
    assert metakit.replace(o, f7=-1).f7 == -1


def test_empty_dataclass():
    @dataclass
    class E(ZeroCopy):
        pass

    assert E().asdict_zerocopy() == {}
    assert E().astuple_zerocopy() == ()
    assert E().asdict_zerocopy(skip_fields=()) == {}
    with pytest.raises(ValueError, match="x"):
        E().asdict_zerocopy(skip_fields=["x"])


def test_only_omit_fields():
    @dataclass
    class E(ZeroCopy):
        w: int = field(default=0, metadata=OMIT)

    assert E().asdict_zerocopy() == {}
    assert E().astuple_zerocopy() == ()
    assert E().asdict_zerocopy(skip_fields={"w"}) == {}
    assert repr(E()) == "test_only_omit_fields.<locals>.E(w=0)"


def test_descriptor_field_read_through_descriptor():
    # DESIGN: "Its values are the very objects that the instance holds (d[k] is getattr(obj, k))"
    class Desc:
        def __set_name__(self, owner, name):
            self.name = "_" + name

        def __get__(self, obj, typ=None):
            return 7 if obj is None else getattr(obj, self.name)

        def __set__(self, obj, v):
            setattr(obj, self.name, [v])

    @dataclass
    class D(ZeroCopy):
        v: object = Desc()

    d = D(3)
    assert d.asdict_zerocopy()["v"] is d.v
    assert d.astuple_zerocopy()[0] is d.v


def test_metaclass_without_zerocopy_base_gets_methods():
    # README Limits: "A class that uses metaclass=ZeroCopyFields without the ZeroCopy base gets the methods"
    @dataclass
    class W(metaclass=ZeroCopyFields):
        x: int = 1
        w: int = field(default=0, metadata=OMIT)

    assert W().asdict_zerocopy() == {"x": 1}
    assert W().astuple_zerocopy() == (1,)
    assert W().__replace__(x=2) == W(2)


def test_omit_is_read_only_mapping():
    # DESIGN: "OMIT is a read-only mapping"
    import collections.abc

    assert isinstance(OMIT, collections.abc.Mapping)
    with pytest.raises(TypeError):
        OMIT["x"] = 1  # type: ignore[index]
    assert len(dict(OMIT)) >= 1


def test_omit_field_still_a_field():
    # DESIGN: "An omitted field is still a dataclass field, in __init__, repr and eq"
    r1 = Rich(1, wrapper="w1")
    r2 = Rich(1, wrapper="w2")
    assert "wrapper" in [f.name for f in dataclasses.fields(Rich)]
    assert "wrapper='w1'" in repr(r1)
    assert r1 != r2


def test_omit_redefined_in_subclass_follows_subclass_fields():
    # DESIGN: keys are exactly fields(type(obj)) less OMIT fields: a subclass that redefines a field decides
    @dataclass
    class B(ZeroCopy):
        w: object = field(default=None, metadata=OMIT)
        a: int = 1
        k: int = 0

    @dataclass
    class Flip(B):
        w: object = None
        k: int = field(default=0, metadata=OMIT)

    assert B().asdict_zerocopy() == {"a": 1, "k": 0}
    assert list(Flip().asdict_zerocopy()) == ["w", "a"]
    assert Flip().astuple_zerocopy() == (None, 1)
    assert metakit.asdict_zerocopy(Flip()) == {"w": None, "a": 1}
    assert Flip().asdict_zerocopy({"k"}) == {"w": None, "a": 1}


def test_omit_in_plain_dataclass_base():
    # DESIGN (typing): "an OMIT field declared in a plain dataclass base ... is typed as it behaves at run time"
    @dataclass
    class PB:
        w: object = field(default=None, metadata=OMIT)
        a: int = 1

    @dataclass
    class S(PB, ZeroCopy):
        b: int = 2

    assert S().asdict_zerocopy() == {"a": 1, "b": 2}
    assert S().asdict_zerocopy({"w"}) == {"a": 1, "b": 2}
    assert S().astuple_zerocopy() == (1, 2)


def test_many_identical_classes_share_one_linecache_entry():
    # DESIGN: "Identical sources share an entry."
    import linecache

    classes = [make_dataclass("Same", [("p", int), ("q", int)], bases=(ZeroCopy,)) for _ in range(50)]
    names = {c.asdict_zerocopy.__code__.co_filename for c in classes}
    assert len(names) == 1
    assert len([k for k in linecache.cache.copy() if k.startswith("<metakit") and k.endswith(".Same>")]) == 1
    assert len({id(c.asdict_zerocopy) for c in classes}) == 50


def test_signatures():
    # README Quick start: "def asdict_zerocopy(self, skip_fields=None)", "def astuple_zerocopy(self)",
    # "def __replace__(self, /, **changes)"
    import inspect

    assert list(inspect.signature(Rich.asdict_zerocopy).parameters) == ["self", "skip_fields"]
    assert inspect.signature(Rich.asdict_zerocopy).parameters["skip_fields"].default is None
    assert list(inspect.signature(Rich.astuple_zerocopy).parameters) == ["self"]
    params = inspect.signature(Rich.__replace__).parameters
    assert list(params) == ["self", "changes"]
    assert params["self"].kind is inspect.Parameter.POSITIONAL_ONLY


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


def test_zerocopy_base_itself():
    # DESIGN: "ZeroCopy: an empty base whose metaclass is ZeroCopyFields"; "It declares both methods"
    assert not dataclasses.is_dataclass(ZeroCopy)
    assert "asdict_zerocopy" in ZeroCopy.__dict__ and "astuple_zerocopy" in ZeroCopy.__dict__
    with pytest.raises(TypeError, match="not a dataclass"):
        ZeroCopy().asdict_zerocopy()
    with pytest.raises(TypeError, match="not a dataclass"):
        metakit.asdict_zerocopy(ZeroCopy())
