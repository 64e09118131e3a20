"""Random class hierarchies against the plain reference.

Hypothesis builds hierarchies of up to three classes (the way attrs'
``tests/strategies.py`` builds attrs classes): random ``@dataclass`` options,
every kind of field, redefined fields, undecorated subclasses, post-init
attributes and overrides that call ``super()``.  Every instance holds a fresh
``object()`` in each field, so identity tells every value apart, and
``asdict_zerocopy`` must equal

    {f.name: getattr(o, f.name) for f in fields(o)}

less ``OMIT`` fields and the names in ``skip_fields``, by keys, order and
identity.
"""

import types
from dataclasses import KW_ONLY, InitVar, dataclass, field, fields, make_dataclass
from typing import Any, ClassVar

from hypothesis import given, settings
from hypothesis import strategies as st

import metakit
from metakit import OMIT, ZeroCopy
from metakit.testing import assert_zerocopy

# --- what a hierarchy is made of ----------------------------------------------

# Kinds of entries in a class body.  "plain" and "omit" have no default;
# "initvar" and "classvar" are not fields.
KINDS = ["plain", "default", "factory", "init_false", "initvar", "classvar", "omit", "omit_merged"]
HAS_DEFAULT = {"default", "factory", "omit_merged"}
# How a subclass may redefine a field of its bases: always with a default, and
# keyword-only, so that the order of __init__'s arguments stays legal.
REDEFINITIONS = ["default", "factory", "omit_merged"]


@dataclass(frozen=True)
class Entry:
    """One annotated name in a class body."""

    name: str
    kind: str
    kw_only: bool = False  # field(kw_only=True)

    def spec(self) -> tuple[str, Any, Any]:
        """The entry as ``make_dataclass`` takes it: name, annotation, value."""
        kw: dict[str, Any] = {"kw_only": True} if self.kw_only else {}
        annotation, value = {
            "plain": (object, field(**kw)),
            "default": (object, field(default=object(), **kw)),
            "factory": (object, field(default_factory=object, **kw)),
            "init_false": (object, field(default=object(), init=False)),
            "initvar": (InitVar[object], field(kw_only=True)),
            "classvar": (ClassVar[object], object()),
            "omit": (object, field(metadata=OMIT, **kw)),
            "omit_merged": (object, field(default=None, metadata={**OMIT, "doc": self.name}, **kw)),
        }[self.kind]
        return (self.name, annotation, value)


@dataclass(frozen=True)
class Level:
    """One class of a hierarchy: decorated with *options*, or not decorated at all."""

    decorated: bool
    options: dict[str, bool]
    entries: list[Entry]
    kw_only_marker: int | None  # where ``_: KW_ONLY`` goes among the entries
    post_init: bool  # sets attributes that are not fields
    override: bool  # asdict_zerocopy / astuple_zerocopy that call super()


@st.composite
def options(draw: st.DrawFn, frozen: bool) -> dict[str, bool]:
    eq = draw(st.booleans())
    return {
        "frozen": frozen,  # the same on every level: dataclasses insists
        "eq": eq,
        "order": eq and draw(st.booleans()),
        "unsafe_hash": draw(st.booleans()),
        "repr": draw(st.booleans()),
        "init": draw(st.booleans()),
        "slots": draw(st.booleans()),
        "kw_only": draw(st.booleans()),
        "match_args": draw(st.booleans()),
    }


@st.composite
def hierarchies(draw: st.DrawFn) -> list[Level]:
    """Up to three classes, each a subclass of the one before; the first is a dataclass."""
    frozen = draw(st.booleans())
    levels: list[Level] = []
    positional_default_seen = False  # no field without a default may follow one positionally
    field_names: list[str] = []  # the fields so far, which a subclass may redefine
    for depth in range(draw(st.sampled_from([1, 2, 3]))):
        inherited = list(field_names)
        decorated = depth == 0 or draw(st.booleans())
        level_options = draw(options(frozen)) if decorated else {}
        entries: list[Entry] = []
        kinds = draw(st.lists(st.sampled_from(KINDS), max_size=6)) if decorated else []
        marker = draw(st.none() | st.integers(0, len(kinds))) if decorated else None
        for i, kind in enumerate(kinds):
            keyword = level_options["kw_only"] or (marker is not None and i >= marker)
            name = f"{kind}_{depth}_{i}"
            forced = kind in ("plain", "omit") and positional_default_seen and not keyword
            entries.append(Entry(name, kind, kw_only=forced))
            if kind in HAS_DEFAULT and not keyword:
                positional_default_seen = True
            if kind not in ("initvar", "classvar"):
                field_names.append(name)
        if decorated and inherited:
            redefined = draw(st.lists(st.sampled_from(inherited), unique=True, max_size=2))
            entries += [Entry(name, draw(st.sampled_from(REDEFINITIONS)), kw_only=True) for name in redefined]
        levels.append(
            Level(
                decorated, level_options, entries, marker, post_init=draw(st.booleans()), override=draw(st.booleans())
            )
        )
    return levels


# --- from a hierarchy to classes and an instance ------------------------------


def methods(level: Level, owner: list[type]) -> dict[str, Any]:
    """The class body's methods; *owner* will hold the class, once it is made."""
    body: dict[str, Any] = {}
    if level.post_init:

        def __post_init__(self: Any, *initvars: object) -> None:
            # object.__setattr__ also works on frozen instances; slotted ones
            # without a __dict__ have nowhere to put an attribute.
            if hasattr(self, "__dict__"):
                object.__setattr__(self, "post_init_attribute", object())
                object.__setattr__(self, "received_initvars", initvars)

        body["__post_init__"] = __post_init__
    if level.override:
        # Like vLLM's FlashInfer metadata: a method of the user's, through super().
        def asdict_zerocopy(self: Any, skip_fields: Any = None) -> Any:
            return super(owner[0], self).asdict_zerocopy(skip_fields)

        def astuple_zerocopy(self: Any) -> Any:
            return super(owner[0], self).astuple_zerocopy()

        body.update(asdict_zerocopy=asdict_zerocopy, astuple_zerocopy=astuple_zerocopy)
    return body


def build(levels: list[Level]) -> type:
    """The classes of *levels*; returns the last one."""
    cls: type = ZeroCopy
    for depth, level in enumerate(levels):
        owner: list[type] = []
        name = f"Level{depth}"
        if level.decorated:
            specs: list[Any] = [entry.spec() for entry in level.entries]
            if level.kw_only_marker is not None:
                specs.insert(level.kw_only_marker, ("_", KW_ONLY))
            cls = make_dataclass(name, specs, bases=(cls,), namespace=methods(level, owner), **level.options)
        else:
            body = methods(level, owner)
            body["__annotations__"] = {"annotated_but_not_a_field": int}
            cls = types.new_class(name, (cls,), exec_body=lambda ns, body=body: ns.update(body))
        owner.append(cls)  # after slots=True has made the final class
    return cls


def instantiate(cls: type, levels: list[Level], data: st.DataObject) -> Any:
    """An instance of *cls* with a fresh object in every field, through ``__init__`` if it has one."""
    last = [level for level in levels if level.decorated][-1]
    if last.options["init"]:
        initvars = {e.name: object() for level in levels for e in level.entries if e.kind == "initvar"}
        # Every field without a default is passed; the others sometimes.
        arguments = {
            f.name: object()
            for f in fields(cls)
            if f.init and (f.name in required(levels) or data.draw(st.booleans(), label=f"pass {f.name}"))
        }
        obj = cls(**arguments, **initvars)
        if post_init_runs(levels) and hasattr(obj, "__dict__"):
            assert obj.received_initvars == tuple(initvars.values())
    else:
        obj = cls.__new__(cls)
    for f in fields(cls):
        if not hasattr(obj, f.name):
            object.__setattr__(obj, f.name, object())
    if hasattr(obj, "__dict__"):
        object.__setattr__(obj, "set_after_init", object())
    return obj


def required(levels: list[Level]) -> set[str]:
    """The fields whose latest definition has no default."""
    latest = {e.name: e.kind for level in levels for e in level.entries}
    return {name for name, kind in latest.items() if kind in ("plain", "omit")}


def post_init_runs(levels: list[Level]) -> bool:
    """Whether ``__init__`` calls a ``__post_init__`` (ours all record the InitVars).

    It does when a class up to the last decorated one defines it, at the
    time that class is decorated.
    """
    last = max(depth for depth, level in enumerate(levels) if level.decorated)
    return any(level.post_init for level in levels[: last + 1])


# --- the property ----------------------------------------------------------------


def reference(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj) if not OMIT.items() <= f.metadata.items()}


def assert_identical(got: Any, expected: dict[str, Any]) -> None:
    assert type(got) is dict
    assert list(got) == list(expected)
    assert all(got[name] is value for name, value in expected.items())


def assert_tuple_identical(got: Any, expected: dict[str, Any]) -> None:
    assert type(got) is tuple
    assert len(got) == len(expected)
    assert all(a is b for a, b in zip(got, expected.values(), strict=True))


SKIP_CONTAINERS = [set, frozenset, tuple, list, lambda names: dict.fromkeys(names).keys(), iter]


@settings(max_examples=300, deadline=None)
@given(levels=hierarchies(), data=st.data())
def test_random_hierarchies_convert_exactly_their_fields(levels, data):
    cls = build(levels)
    obj = instantiate(cls, levels, data)
    expected = reference(obj)

    assert_identical(obj.asdict_zerocopy(), expected)
    assert_identical(metakit.asdict_zerocopy(obj), expected)
    assert_tuple_identical(obj.astuple_zerocopy(), expected)
    assert_tuple_identical(metakit.astuple_zerocopy(obj), expected)

    every = [f.name for f in fields(obj)]
    if every:
        names = data.draw(st.lists(st.sampled_from(every), max_size=len(every) + 2), label="skip_fields")
        container = data.draw(st.sampled_from(SKIP_CONTAINERS), label="container")
        without = {name: value for name, value in expected.items() if name not in names}
        skip = container(names)
        kept = list(skip) if isinstance(skip, list | set | frozenset | tuple) else None
        assert_identical(obj.asdict_zerocopy(skip_fields=skip), without)
        if kept is not None:
            assert list(skip) == kept
        assert_identical(metakit.asdict_zerocopy(obj, container(names)), without)
    assert_zerocopy(obj)
