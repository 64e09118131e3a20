"""The suite's Hypothesis strategies and the builders that turn what they draw into classes.

Three generators, all compared against a plain reference by the tests that use them:

- ``shape_specs``/``class_options`` draw a flat record shape (names from ``NAME_POOL``, which
  holds names that collide with generated code's locals, helpers and builtins, and one of the
  field ``KINDS``) and
  ``build_shape`` makes it, with ``ZeroCopy`` or with no base at all for the plain twin;
  ``sub_shape_specs`` and ``build_hierarchy`` add a subclass on top.
- ``hierarchies`` draws up to three classes, each a subclass of the one before, with random
  ``@dataclass`` options, every kind of field, redefined fields, undecorated subclasses,
  post-init attributes and overrides through ``super()`` (as attrs' ``tests/strategies.py`` does
  for attrs classes); ``build_hierarchy_levels`` and ``instantiate`` make the classes and an
  instance with a fresh object in every field.
- ``replace_shapes`` draws a class and, optionally, a subclass of it made in one of the ways
  that change how ``replace`` must call the class (decorated, undecorated, with its own
  ``__init__`` or ``__new__``, assigned later); ``build_replace_shape`` makes it on ``ZeroCopy``
  or on ``object`` for the plain twin.
"""

import dataclasses
import textwrap
import types
from dataclasses import KW_ONLY, InitVar, dataclass, field, fields, make_dataclass
from typing import Any, ClassVar

from hypothesis import strategies as st

from metakit import OMIT, ZeroCopy
from tests.records import Val

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
    "TypeError",
    "isinstance",
    "str",
    "bytes",
    "print",
    "len",
    "getattr",
    "object",
    "match",
    "case",
    "_",
    "é",
    "x" * 40,
    "_skip_fields_text",
    "_check_skipped",
    "_skip_fields_failed",
    "_asdict_kept",
    "AttributeError",
    "_replace_by_dataclasses",
]


KINDS = ["req", "def", "fac", "nif", "niffac", "omit", "cv", "ivr", "ivd", "kwr", "kwd", "nifnod"]


def build_shape(spec, base, options, cls_name="Rec", namespace=None):  # noqa: PLR0912 - one branch per field kind
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

    ns = {"__post_init__": __post_init__, **(namespace or {})}
    bases = (base,) if base is not None else ()
    return dataclasses.make_dataclass(cls_name, fields_, bases=bases, namespace=ns, **options), ordered


def construct(cls, ordered, options):
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


shape_specs = st.lists(
    st.tuples(st.sampled_from(NAME_POOL), st.sampled_from(KINDS)),
    min_size=0,
    max_size=8,
    unique_by=lambda t: t[0],
)


class_options = st.fixed_dictionaries(
    {}, optional={"frozen": st.booleans(), "slots": st.booleans(), "eq": st.booleans(), "kw_only": st.booleans()}
)


def build_hierarchy(base_spec, sub_spec, options, sub_mode, root):
    Base, base_ordered = build_shape(base_spec, root, options)
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


sub_shape_specs = st.lists(
    st.tuples(st.sampled_from(NAME_POOL), st.sampled_from(["def", "omit", "kwd", "nif", "cv"])),
    max_size=4,
    unique_by=lambda t: t[0],
)


sub_shape_specs = st.lists(
    st.tuples(st.sampled_from(NAME_POOL), st.sampled_from(["def", "omit", "kwd", "nif", "cv"])),
    max_size=4,
    unique_by=lambda t: t[0],
)


# Kinds of entries in a class body.  "plain" and "omit" have no default;
# "initvar" and "classvar" are not fields.
HIERARCHY_KINDS = ["plain", "default", "factory", "init_false", "initvar", "classvar", "omit", "omit_merged"]


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
        kinds = draw(st.lists(st.sampled_from(HIERARCHY_KINDS), max_size=6)) if decorated else []
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


def build_hierarchy_levels(levels: list[Level]) -> type:
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


ALL_KINDS = [
    "plain",
    "default",
    "factory",
    "init_false",
    "init_false_factory",
    "init_false_nodefault",
    "initvar",
    "initvar_default",
    "classvar",
    "kw_only",
    "kw_only_default",
    "omit",
]


REPLACE_NAMES = ["a", "b", "c", "self", "obj", "changes", "d", "name", "error", "arguments", "cls"]


def shape_entry(name, kind, label):  # noqa: PLR0911 - one return per field kind
    if kind == "plain":
        return int, dataclasses.MISSING
    if kind == "default":
        return int, Val(f"{label}.{name}")
    if kind == "factory":
        return list, field(default_factory=lambda: [label, name])
    if kind == "init_false":
        return int, field(init=False, default=Val(f"{label}.{name}.nf"))
    if kind == "init_false_factory":
        return list, field(init=False, default_factory=lambda: [label, name, "nf"])
    if kind == "init_false_nodefault":
        return int, field(init=False)
    if kind == "initvar":
        return InitVar[int], dataclasses.MISSING
    if kind == "initvar_default":
        return InitVar[int], Val(f"{label}.{name}.iv")
    if kind == "classvar":
        return ClassVar[int], Val(f"{label}.{name}.cv")
    if kind == "kw_only":
        return int, field(kw_only=True)
    if kind == "kw_only_default":
        return int, field(kw_only=True, default=Val(f"{label}.{name}.kw"))
    if kind == "omit":
        return object, field(default=Val(f"{label}.{name}.omit"), metadata=OMIT)
    raise AssertionError(kind)


def post_init_for(slots, frozen):
    def __post_init__(self, *initvars):
        for f in dataclasses.fields(self):
            if not f.init:
                object.__setattr__(self, f.name, ("made by __post_init__", initvars, getattr(self, f.name, None)))
        if not slots:
            object.__setattr__(self, "attn_bias", ("not a field", initvars))
            # an InitVar's name may also be an instance attribute: replace passes what it reads
            ivs = [
                f.name for f in type(self).__dataclass_fields__.values() if f._field_type is dataclasses._FIELD_INITVAR
            ]
            for name, value in zip(ivs, initvars, strict=False):
                object.__setattr__(self, name, ("initvar seen", value))

    return __post_init__


replace_shapes = st.fixed_dictionaries(
    {
        "base": st.lists(
            st.tuples(st.sampled_from(REPLACE_NAMES), st.sampled_from(ALL_KINDS)), max_size=5, unique_by=lambda t: t[0]
        ),
        "kw_only_marker": st.one_of(st.none(), st.integers(0, 5)),
        "slots": st.booleans(),
        "frozen": st.booleans(),
        "post_init": st.booleans(),
        "sub": st.sampled_from(
            [
                None,
                "decorated",
                "undecorated",
                "undecorated_init",
                "undecorated_new",
                "decorated_own_init",
                "assigned_init",
                "assigned_new",
            ]
        ),
        "sub_fields": st.lists(
            st.tuples(st.sampled_from(REPLACE_NAMES), st.sampled_from(ALL_KINDS)), max_size=3, unique_by=lambda t: t[0]
        ),
        "sub_slots": st.booleans(),
        "sub_post_init": st.booleans(),
        "options": st.fixed_dictionaries({"eq": st.booleans(), "repr": st.booleans(), "match_args": st.booleans()}),
    }
)


def build_replace_shape(shape, base_class):  # noqa: PLR0912 - one branch per class option
    """Builds the shape on the given base (ZeroCopy or a plain object); returns the class or the creation error."""
    label = "R"
    ann: dict[str, Any] = {}
    ns: dict[str, Any] = {"__module__": "tests.test_replace", "__qualname__": "Rec"}
    for i, (name, kind) in enumerate(shape["base"]):
        if shape["kw_only_marker"] == i:
            ann["_"] = KW_ONLY
        ann[name], default = shape_entry(name, kind, label)
        if default is not dataclasses.MISSING:
            ns[name] = default
    ns["__annotations__"] = ann
    if shape["post_init"]:
        ns["__post_init__"] = post_init_for(shape["slots"], shape["frozen"])
    opts = dict(shape["options"], frozen=shape["frozen"], slots=shape["slots"])
    bases = (base_class,) if base_class is not object else ()
    rec = dataclass(**opts)(type("Rec", bases, ns))
    sub = shape["sub"]
    if sub is None:
        return rec
    sns: dict[str, Any] = {"__module__": "tests.test_replace", "__qualname__": "Sub"}
    init_names = [f.name for f in dataclasses.fields(rec) if f.init] + [
        n for n, k in shape["base"] if k in ("initvar", "initvar_default")
    ]
    if sub.startswith("decorated"):
        sann = {}
        for name, kind in shape["sub_fields"]:
            sann[name], default = shape_entry(name, kind, "S")
            if default is not dataclasses.MISSING:
                sns[name] = default
        sns["__annotations__"] = sann
        if shape["sub_post_init"]:
            sns["__post_init__"] = post_init_for(shape["sub_slots"], shape["frozen"])
        if sub == "decorated_own_init":
            sns["__init__"] = keyword_init(rec)
        return dataclass(frozen=shape["frozen"], slots=shape["sub_slots"])(type("Sub", (rec,), sns))
    if sub == "undecorated_init":
        sns["__init__"] = reversed_init(rec, init_names)
    if sub == "undecorated_new":

        def __new__(klass_, /, *args, **kwargs):
            NEW_CALLS.append((args, dict(kwargs)))
            return object.__new__(klass_)

        sns["__new__"] = __new__
    cls = type(rec)("Sub", (rec,), sns)
    if sub == "assigned_init":
        cls.__init__ = reversed_init(rec, init_names)
    if sub == "assigned_new":
        cls.__new__ = staticmethod(lambda klass_, /, *a, **k: object.__new__(klass_))
    return cls


NEW_CALLS: list = []


def reversed_init(parent, names):
    """An __init__ that takes the same names by position in reversed order."""
    params = ", ".join(f"{n}=_MISSING" for n in reversed(names))
    passing = ", ".join(f"{n}={n}" for n in names)
    src = (
        textwrap.dedent(
            f"""
        def __init__(__self, {params}):
            kwargs = dict({passing})
            parent.__init__(__self, **{{k: v for k, v in kwargs.items() if v is not _MISSING}})
        """
        )
        if names
        else "def __init__(__self):\n    parent.__init__(__self)\n"
    )
    namespace = {"parent": parent, "_MISSING": object()}
    exec(src, namespace)  # test scaffolding: a user-written __init__ with its own parameter order
    return namespace["__init__"]


def keyword_init(parent):
    def __init__(self_, /, **kwargs):  # keywords only: a positional call is refused
        parent.__init__(self_, **kwargs)

    return __init__


def required_kwargs(cls):
    kw = {}
    for f in dataclasses.fields(cls):
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kw[f.name] = Val(f"given {f.name}")
    for f in cls.__dataclass_fields__.values():
        if f._field_type is dataclasses._FIELD_INITVAR and f.default is dataclasses.MISSING:
            kw[f.name] = Val(f"given initvar {f.name}")
    return kw
