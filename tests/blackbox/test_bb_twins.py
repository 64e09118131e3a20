"""DESIGN "Semantics": "pickle, copy, repr, eq, hash, __slots__ and __match_args__ behave exactly as without metakit."
README: "metakit changes none of its behaviour: __init__, repr, eq, hash, __slots__, __match_args__, pickle and copy
work exactly as they do without it."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import sys
from dataclasses import InitVar, dataclass, field
from typing import ClassVar

import pytest

from metakit import OMIT, ZeroCopy

OPTS = [
    {},
    {"frozen": True},
    {"slots": True},
    {"slots": True, "frozen": True},
    {"eq": False},
    {"order": True},
    {"unsafe_hash": True},
    {"kw_only": True},
    {"match_args": False},
    {"repr": False},
]
if sys.version_info >= (3, 11):
    OPTS.append({"slots": True, "weakref_slot": True})


def build(opts, base):
    bases = (base,) if base else ()
    ns = {
        "__annotations__": {"a": int, "b": list, "w": object, "z": int, "cv": ClassVar[int], "iv": InitVar[int]},
        "b": field(default_factory=list),
        "w": field(default=None, metadata=OMIT),
        "z": field(default=0, init=False),
        "cv": 1,
        "iv": 0,
        "__module__": __name__,
        "__qualname__": "Twin",
    }

    def __post_init__(self, iv):
        if not opts.get("frozen"):
            self.z = iv

    ns["__post_init__"] = __post_init__
    cls = type(base) if base else type
    C = cls("Twin", bases, ns)
    return dataclass(**opts)(C)


def _hash_outcome(o1, o2):
    try:
        return hash(o1) == hash(o2)
    except TypeError as e:
        return ("TypeError", str(e))


def surface(C, make):
    o1, o2 = make(C, 1), make(C, 1)
    o3 = make(C, 2)
    out = {
        "repr": repr(o1).replace(hex(id(o1)), "ID"),
        "eq": (o1 == o2, o1 == o3, o1 != o2),
        "hash_is_none": C.__hash__ is None,
        "hashes_equal": _hash_outcome(o1, o2) if C.__hash__ is not None else None,
        "match_args": getattr(C, "__match_args__", "ABSENT"),
        "slots": C.__dict__.get("__slots__", "ABSENT"),
        "has_dict": hasattr(o1, "__dict__"),
        "signature": str(inspect.signature(C)),
        "doc": C.__doc__,
        "fields": [
            (f.name, f.init, f.repr, f.compare, f.hash, dict(f.metadata), f.kw_only) for f in dataclasses.fields(C)
        ],
        "params": repr(C.__dataclass_params__),
        "order": None,
        "setattr_frozen": None,
    }
    if C.__dataclass_params__.order:
        out["order"] = (o1 < o3, o1 <= o2)
    try:
        o1.a = 5
        out["setattr_frozen"] = "ok"
    except dataclasses.FrozenInstanceError as e:
        out["setattr_frozen"] = ("frozen", str(e))
    return out


def make(C, a):
    try:
        return C(a=a)
    except TypeError:
        return C(a)


@pytest.mark.parametrize("opts", OPTS, ids=repr)
def test_twin_surface_identical(opts):
    plain = build(opts, None)
    zc = build(opts, ZeroCopy)
    assert surface(zc, make) == surface(plain, make)


# module-level twins for pickle
@dataclass
class PPlain:
    a: int = 1
    b: list = field(default_factory=list)
    w: object = field(default=None, metadata=OMIT)


@dataclass
class PZC(ZeroCopy):
    a: int = 1
    b: list = field(default_factory=list)
    w: object = field(default=None, metadata=OMIT)


@dataclass(frozen=True, slots=True)
class FSPlain:
    a: int = 1
    b: tuple = ()


@dataclass(frozen=True, slots=True)
class FSZC(ZeroCopy):
    a: int = 1
    b: tuple = ()


@dataclass(slots=True)
class SPlain:
    a: int = 1
    z: int = field(default=0, init=False)


@dataclass(slots=True)
class SZC(ZeroCopy):
    a: int = 1
    z: int = field(default=0, init=False)


def _pickle_outcome(o, proto):
    try:
        o2 = pickle.loads(pickle.dumps(o, proto))
    except Exception as e:
        return ("raise", type(e), str(e).replace(type(o).__name__, "CLS"))
    return ("ok", o2 == o, type(o2) is type(o))


@pytest.mark.parametrize("pair", [(PPlain, PZC), (FSPlain, FSZC), (SPlain, SZC)], ids=lambda p: p[1].__name__)
@pytest.mark.parametrize("proto", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_roundtrip_like_plain(pair, proto):
    # pickle behaves exactly as without metakit (works where it works, fails the same way where it fails)
    plain, zc = pair
    po, zo = plain(a=3), zc(a=3)
    assert _pickle_outcome(zo, proto) == _pickle_outcome(po, proto)
    rp, rz = po.__reduce_ex__(proto) if proto >= 2 else None, zo.__reduce_ex__(proto) if proto >= 2 else None
    if proto >= 2:
        assert len(rp) == len(rz) and rp[2:] == rz[2:]
        o2 = pickle.loads(pickle.dumps(zo, proto))
        assert o2.asdict_zerocopy() == zo.asdict_zerocopy()


@pytest.mark.parametrize("C", [PZC, FSZC, SZC])
def test_copy_and_deepcopy(C):
    o = C()
    c1, c2 = copy.copy(o), copy.deepcopy(o)
    assert c1 == o and c2 == o and type(c1) is C and type(c2) is C
    if C is PZC:
        o.b.append(1)
        assert c1.b is o.b and c2.b is not o.b
    assert c1.asdict_zerocopy() == o.asdict_zerocopy()


def test_match_statement():
    # __match_args__ unchanged
    ns: dict = {}
    exec(
        "def m(o):\n    match o:\n        case PZC(x, y):\n            return (x, y)\n    return None\n",
        {"PZC": PZC},
        ns,
    )
    assert ns["m"](PZC(5, [1])) == (5, [1])
    assert PZC.__match_args__ == PPlain.__match_args__ == ("a", "b", "w")


def test_instance_dict_has_no_metakit_attributes():
    # DESIGN: "Attributes that are not fields never appear"; metakit adds nothing to instances
    assert vars(PZC()) == vars(PPlain())
