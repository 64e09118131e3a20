"""DESIGN "Generated code": the source text of the generated methods.

It holds only field names and ``repr`` literals (never a default or a user object), any field
name works (``self``, ``skip_fields``, ``dict``, keywords' neighbours, mangled and NFKC names), and
``metakit.generated_source`` returns it.  The ``linecache`` entries' lifetime is in
``test_lifetime_threads.py``.
"""

import builtins
import dataclasses
import gc
import inspect
import io
import keyword
import linecache
import sys
import tokenize
import unicodedata
from dataclasses import KW_ONLY, InitVar, dataclass, field, make_dataclass
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metakit
import metakit._fields
import metakit.testing
import metakit.testing as mt

# Private: the template optimisation and the comparison of code by line (see their sections below).
from metakit import OMIT, ZeroCopy, _template
from metakit._fields import Layout
from metakit._source import methods_source
from metakit._template import Template, compile_methods, layout_of_shape, lines_only, same_code, shape
from tests.records import (
    DEEP,
    NASTY_NAME,
    BuiltinNamesMeta,
    ConcreteBackendMeta,
    FrozenSlotsMeta,
    IntBox,
    MangledMeta,
    Marker,
    MDFrozenSlots,
    MDMeta,
    PlainMeta,
    PlainPoint,
    PlainRec,
    ProtoMeta,
    Rec,
    Rec_skip_errors,
    SlotsMeta,
    Three,
    Val,
    _assert_replace_like_dataclasses,
    _class_with_annotations,
    _filenames,
    assert_converts,
    assert_replace_like_dataclasses,
    assert_same_objects,
    bare,
    fresh,
    norm_outcome,
    outcome,
    ref_names,
    reference,
    three,
)

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
    "arguments",
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
    "x" * 400,
    "async_",
    "__dataclass_fields_x",
    "replace",
    "asdict_zerocopy",
    "astuple_zerocopy",
    "__x",
    "iter",
    "next",
    "set",
    "frozenset",
    "list",
    "__name__",
    "__module__",
    "__doc__",
    "_1",
    "x\u0301",
    "\u00c5",
    "\u00e9t\u00e9",
    "a" * 200,
    "True_",
    "__debug___",
]


METHOD_NAMES = {"asdict_zerocopy", "astuple_zerocopy"}


@pytest.mark.parametrize("name", ODD_NAMES, ids=[repr(n)[:24] for n in ODD_NAMES])
@pytest.mark.parametrize("opts", [{}, {"slots": True, "frozen": True}], ids=["plain", "slots-frozen"])
def test_odd_field_names_work(name, opts):
    # DESIGN: "Internal names cannot collide with field names: fields may be called `self`,
    # `skip_fields`, `dict`, `cls`, `__d` and so on." README: "neither is one [a template] for a field
    # named like a name the code reads (`isinstance`, `KeyError`, ...)"
    sources = []
    for attempt in range(3):  # the second and third meet a shape already seen (templates)
        other = f"other{attempt}"
        if attempt == 0:  # the odd name first, without a default
            spec = [(name, Any), (other, Any, field(default=None))]
        else:
            spec = [(other, Any, field(default=None)), (name, Any, field(default=None))]
        values = {name: Marker(), other: Marker()}
        args = [values[entry[0]] for entry in spec]
        plain = outcome(lambda: make_dataclass(f"Odd{attempt}", spec, **opts)(*args))  # noqa: B023
        ours = outcome(lambda: make_dataclass(f"Odd{attempt}", spec, bases=(ZeroCopy,), **opts)(*args))  # noqa: B023
        if plain[0] == "err":
            # CPython itself cannot make or fill it (slots with a mangled or reserved name): nor can we, the same way
            # (but for a slotted `__module__`, refused as the class is made rather than as it is called)
            assert ours[0] == "err", (plain, ours)
            assert ours[1] is plain[1] or name == "__module__", (plain, ours)
            return
        assert ours[0] == "ok", ours
        obj = ours[1]
        cls = type(obj)
        full = {entry[0]: values[entry[0]] for entry in spec}
        assert_same_objects(metakit.asdict_zerocopy(obj), full)
        assert_same_objects(metakit.asdict_zerocopy(obj, skip_fields={name}), {other: values[other]})
        assert_same_objects(metakit.astuple_zerocopy(obj), tuple(full.values()))
        if name not in METHOD_NAMES:  # a field of that name hides the method on the instance
            assert_same_objects(obj.asdict_zerocopy(), full)
            assert_same_objects(obj.asdict_zerocopy(skip_fields=[name]), {other: values[other]})
            assert_same_objects(obj.asdict_zerocopy([other]), {name: values[name]})
            assert_same_objects(obj.asdict_zerocopy([name, other]), {})
            assert_same_objects(obj.astuple_zerocopy(), tuple(full.values()))
            with pytest.raises(ValueError, match="zz_not_here"):
                obj.asdict_zerocopy(skip_fields=["zz_not_here"])
            with pytest.raises(metakit.SkipFieldsError):
                obj.asdict_zerocopy(skip_fields=5)
            with pytest.raises(TypeError, match="skip_fields"):
                obj.asdict_zerocopy(skip_fields=[1])
            mt.assert_zerocopy(obj)
            mt.assert_zerocopy_class(cls)
        new = Val("new")
        for r in (metakit.replace(obj, **{name: new}), obj.__replace__(**{name: new})):
            assert getattr(r, name) is new
            assert getattr(r, other) is values[other]
        assert getattr(metakit.replace(obj), name) is values[name]
        assert_replace_like_dataclasses(obj, **{name: 5})
        assert_replace_like_dataclasses(obj, **{other: 6})
        assert_replace_like_dataclasses(obj)
        assert norm_outcome(outcome(metakit.replace, obj, zz=1)) == norm_outcome(
            outcome(dataclasses.replace, obj, zz=1)
        )
        sources.append(metakit.generated_source(cls))
    assert repr(name) in sources[-1]
    assert f"self.{name}" in sources[-1]


# every odd name that one plain class can hold, and a few more
TOGETHER = [n for n in ODD_NAMES if n not in {*METHOD_NAMES, "__name__", "__weakref__"}] + [
    "_skip_fields_str",
    "asdict_zerocopy_",
    "_0",
]


def test_odd_field_names_all_together():
    # DESIGN: same promise, with every odd name in one class
    skip = ["self", "skip_fields", "d", "name", "KeyError", "__d", "type"]
    for _ in range(3):  # the second and third of one shape may come from a template
        C = make_dataclass("AllOdd", [(n, object, field(default=None)) for n in TOGETHER], bases=(ZeroCopy,))
        o = C(*(Marker() for _ in TOGETHER))
        assert list(o.asdict_zerocopy()) == TOGETHER
        assert_converts(o)
        assert list(o.asdict_zerocopy(skip_fields=skip)) == [n for n in TOGETHER if n not in skip]
        with pytest.raises(ValueError, match="'nope'"):
            o.asdict_zerocopy(skip_fields=["self", "nope"])
        with pytest.raises(TypeError, match="skip_fields"):
            o.asdict_zerocopy(skip_fields=5)
        assert_replace_like_dataclasses(o, **{n: Marker() for n in TOGETHER})
        assert_replace_like_dataclasses(o, self=7, changes=-2, obj=-3)


def test_name_mangled_field():
    # DESIGN: fields are read as attributes: a private (mangled) field name works
    @dataclass
    class Priv(ZeroCopy):
        __secret: int = 1

    p = Priv()
    assert p.asdict_zerocopy() == {"_Priv__secret": 1}
    assert p.astuple_zerocopy() == (1,)


def test_identical_sources_share_entry_distinct_shapes_distinct():
    # DESIGN: "Identical sources share an entry."; README: live classes of one name with different fields get -2 ...
    A = fresh(("p", "q"), name="Shared")
    B = fresh(("p", "q"), name="Shared")
    C = fresh(("r",), name="Shared")
    fa = A.asdict_zerocopy.__code__.co_filename
    fb = B.asdict_zerocopy.__code__.co_filename
    fc = C.asdict_zerocopy.__code__.co_filename
    assert fa == fb
    assert fc != fa
    assert linecache.getlines(fc) != linecache.getlines(fa)
    # README: "Each class has its own function objects."
    assert A.asdict_zerocopy is not B.asdict_zerocopy


def test_class_name_with_newline_not_written_raw_into_source():
    # DESIGN "Generated code": "compiled from source that holds only field names, checked as identifiers, and string
    # literals made with repr. No default value and no user object is ever written into the source."
    # make_dataclass accepts any class name (plain dataclasses work with it); the name must not become code lines
    # in the source text metakit.generated_source returns "for people and for the CLI".
    import ast
    import builtins

    C = make_dataclass(NASTY_NAME, [("a", int, field(default=0))], bases=(ZeroCopy,))
    assert C().asdict_zerocopy() == {"a": 0}
    assert not hasattr(builtins, "METAKIT_BLACKBOX_PWNED")
    src = metakit.generated_source(C)
    tree = ast.parse(src)
    assert all(isinstance(node, ast.FunctionDef) for node in tree.body), [type(n).__name__ for n in tree.body]


@pytest.mark.parametrize("obj", [Rec(1), PlainRec(1)])
def test_generated_source_of_instance_names_its_class(obj):
    with pytest.raises(TypeError, match=type(obj).__name__):
        metakit.generated_source(obj)


def test_generated_source_plain_dataclass_and_zerocopy():
    # README Command line: on a plain dataclass, generated_source is the code the function forms run
    for cls in (Rec, PlainRec):
        src = metakit.generated_source(cls)
        assert "def asdict_zerocopy" in src
        assert "'x': self.x" in src
        conversions = src.split("def __replace__")[0]
        assert "'w'" not in conversions  # an OMIT field is in no conversion
        assert "self.w" not in conversions
    assert "'a': self.a," in metakit.generated_source(Three)
    assert "'x': self.x," in metakit.generated_source(PlainPoint)


def test_nfkc_names_in_class_body():
    ns = {"dataclass": dataclass, "ZeroCopy": ZeroCopy}
    exec("@dataclass\nclass U(ZeroCopy):\n    \ufb01eld: int = 1\n    \u210cx: int = 2\n", ns)
    U = ns["U"]
    names = [f.name for f in dataclasses.fields(U)]
    assert U().asdict_zerocopy() == dict(zip(names, (1, 2), strict=False))
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


def test_very_long_names_many_fields():
    names = [("q" * 200) + str(i) for i in range(60)]
    C = dataclasses.make_dataclass(
        "LongNames", [(n, int, field(default=i)) for i, n in enumerate(names)], bases=(ZeroCopy,)
    )
    o = C()
    assert list(o.asdict_zerocopy()) == names
    assert_replace_like_dataclasses(o, **{names[-1]: 0})


def test_generated_source_names_fields_and_no_defaults():
    # DESIGN: "metakit.generated_source(cls) returns the source text"; "source that holds only field names ... and
    # string literals made with repr. No default value and no user object is ever written into the source."
    secret = "SECRET-DEFAULT-VALUE-1234"
    sentinel = object()

    @dataclass
    class Src(ZeroCopy):
        alpha: str = secret
        beta: list = field(default_factory=lambda: [secret])
        gamma: object = field(default=secret, metadata={**OMIT, "doc": secret})
        number: int = 987654321
        other: object = sentinel

    src = metakit.generated_source(Src)
    assert isinstance(src, str)
    compile(src, "<check>", "exec")
    for marker in (secret, "987654321", "object at"):
        assert marker not in src
    for method in (Src.asdict_zerocopy, Src.astuple_zerocopy):  # nor in the code, nor in its globals
        consts = method.__code__.co_consts
        assert all(const is None or type(const) in (str, tuple) for const in consts), consts
        assert secret not in consts
        assert sentinel not in method.__globals__.values()
        assert Src not in method.__globals__.values()
    assert "self.beta" in src
    assert src.index("'alpha'") < src.index("'beta'")
    assert "def asdict_zerocopy" in src
    assert "def astuple_zerocopy" in src
    assert "def __replace__" in src
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


ASDICT_HEADER = "def asdict_zerocopy(self, skip_fields=None):"
ASTUPLE_HEADER = "def astuple_zerocopy(self):"
REPLACE_HEADER = "def __replace__(self, /, **changes):"


@dataclass
class Step(ZeroCopy):
    is_prompt: bool
    slot_mapping: list[int]
    wrapper: object = field(default=None, metadata=OMIT)
    seq_len: int = 0


def test_generated_source_is_a_dict_display_of_the_fields_in_order():
    source = metakit.generated_source(Step)
    lines = source.splitlines()
    assert lines[0] == f"# metakit: the generated methods of {__name__}.Step"
    assert lines[1] == ASDICT_HEADER
    display = lines[
        lines.index("        d = {") + 1 : lines.index(
            "    except AttributeError:  # a field that cannot be read: read only those kept"
        )
        - 1
    ]
    assert display == [
        "            'is_prompt': self.is_prompt,",
        "            'slot_mapping': self.slot_mapping,",
        "            'seq_len': self.seq_len,",
    ]


def test_generated_source_holds_a_tuple_display_of_the_same_fields():
    source = metakit.generated_source(Step)
    astuple = source[source.index(ASTUPLE_HEADER) : source.index(REPLACE_HEADER)].splitlines()
    assert astuple[1:-2] == [
        "    return (",
        "        self.is_prompt,",
        "        self.slot_mapping,",
        "        self.seq_len,",
        "    )",
    ]


def test_generated_source_writes_field_names_as_repr_literals():
    Accented = make_dataclass("Accented", ["café", "名前"], bases=(ZeroCopy,))
    source = metakit.generated_source(Accented)
    assert f"{'café'!r}: self.café," in source
    assert f"{'名前'!r}: self.名前," in source
    obj = Accented(1, 2)
    assert obj.asdict_zerocopy() == {"café": 1, "名前": 2}


def test_generated_source_of_an_empty_dataclass():
    @dataclass
    class Empty(ZeroCopy):
        pass

    source = metakit.generated_source(Empty)
    assert "        d = {\n        }" in source
    assert Empty().asdict_zerocopy() == {}
    assert Empty().astuple_zerocopy() == ()


def test_undecorated_subclass_shares_its_dataclass_source():
    class Sub(Step):
        pass

    assert metakit.generated_source(Sub) == metakit.generated_source(Step)


# Names of every kind a writable name can be: ASCII, accented, other scripts,
# and (where this Python's Unicode takes them, 3.13 on) zero-width joiners,
# which are not printable, so that their ``repr`` escapes them.
LITERAL_NAMES = ["plain", "café", "名前", "_", "__dunder__", "Ω", "a\u200cb", "x\u200d", "self", "changes", "d"]


def string_literals(source: str) -> list[str]:
    """The text of every string literal token in *source* (comments and names left out)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [token.string for token in tokens if token.type == tokenize.STRING]


def field_of_role(name: str, role: str) -> tuple:
    """A ``make_dataclass`` spec: "c" an ``__init__`` argument, "r" an ``init=False`` field, "q" an ``InitVar``."""
    if role == "c":
        return (name, Any)
    if role == "r":
        return (name, Any, field(init=False, default=None))
    return (name, InitVar[Any])


@given(
    names=st.lists(
        st.sampled_from([n for n in LITERAL_NAMES if n.isidentifier()]), min_size=0, max_size=6, unique=True
    ),
    roles=st.lists(st.sampled_from("crq"), min_size=6, max_size=6),
    kw_only=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_every_string_literal_in_the_source_is_the_repr_of_a_field_name(names, roles, kw_only):
    # DESIGN: the source holds only field names and string literals made
    # with ``repr``: metakit writes the quotes itself where that is the same.
    spec = [field_of_role(name, role) for name, role in zip(names, roles, strict=False)]
    cls = make_dataclass("Odd", spec, bases=(ZeroCopy,), kw_only=kw_only)
    included = [name for name, role in zip(names, roles, strict=False) if role != "q"]
    source = metakit.generated_source(cls)
    literals = string_literals(source)
    assert set(literals) <= {repr(name) for name in names}
    assert all(literal in source for literal in map(repr, included))  # each returned name is a key
    compile(source, "<test>", "exec")  # and the source is valid


def test_a_name_that_is_not_printable_is_escaped_by_repr_where_it_is_quoted():
    joined = "a\u200cb"  # a zero-width joiner: in names from 3.13 on
    if joined.isidentifier():
        Joined = make_dataclass("Joined", [joined, "plain"], bases=(ZeroCopy,))
        source = metakit.generated_source(Joined)
        assert Joined(1, 2).asdict_zerocopy() == {joined: 1, "plain": 2}
    else:
        # Before 3.13 no class has such a name: only metakit's source writer shows how it would be quoted.
        source = methods_source(Layout((joined, "plain"), "cc", (joined, "plain"), True, True), "Joined")
    assert set(string_literals(source)) == {repr(joined), "'plain'"}
    assert f"{joined!r}: self.{joined}," in source  # the literal escaped, the attribute as it is
    assert f"changes.pop({joined!r}) if {joined!r} in changes else self.{joined}," in source


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


def test_soft_keywords_and_underscore_are_fine_field_names():
    # DESIGN: "compiled from source that holds only field names, checked as identifiers"
    K = dataclass(_class_with_annotations("Soft", {"match": int, "case": int, "_": int, "type": int}))
    assert K(1, 2, 3, 4).asdict_zerocopy() == {"match": 1, "case": 2, "_": 3, "type": 4}
    _assert_replace_like_dataclasses(K(1, 2, 3, 4), match=9)


class _ReprInjects(str):
    def __repr__(self):
        return "__import__('builtins').__dict__.setdefault('_metakit_bb_pwned', 1) and 'bb_injected_name'"


def test_str_subclass_field_name_repr_is_not_written_into_source():
    # DESIGN: "compiled from source that holds only field names, checked as identifiers, and string literals made
    # with repr. No default value and no user object is ever written into the source."
    builtins.__dict__.pop("_metakit_bb_pwned", None)
    # a list of names never seen before in this process
    try:
        K = dataclass(_class_with_annotations("Injected", {_ReprInjects("bb_injected_name"): int}))
        d = K(5).asdict_zerocopy()
        assert "_metakit_bb_pwned" not in builtins.__dict__
    finally:
        builtins.__dict__.pop("_metakit_bb_pwned", None)
    assert "__import__" not in metakit.generated_source(K)
    assert d == {"bb_injected_name": 5}


def test_getsource_of_each_generated_method_and_generated_source():
    # DESIGN: "The source is registered in linecache under a unique, readable filename ... Then inspect.getsource,
    # tracebacks and debuggers show it." / "metakit.generated_source(cls) returns the source text"
    @dataclass
    class Shown(ZeroCopy):
        alpha: int = 1
        beta: int = 2

    full = metakit.generated_source(Shown)
    for m in ("asdict_zerocopy", "astuple_zerocopy", "__replace__"):
        fn = getattr(Shown, m)
        src = inspect.getsource(fn)
        assert src.lstrip().startswith(f"def {m}(")
        assert "alpha" in src
        assert "beta" in src
        assert src.strip() in full
        assert fn.__code__.co_filename.startswith("<metakit")
        assert "Shown" in fn.__code__.co_filename
        assert fn.__code__.co_filename in linecache.cache
    linecache.checkcache()
    assert inspect.getsource(Shown.asdict_zerocopy)


def test_classes_of_one_name_with_different_fields_live_at_once():
    # README: "Live classes of one name with different fields (a factory's classes) get <metakit module.Name-2>,
    # -3, and so on. Each class has its own function objects."
    def make(n, prefix="g"):
        return make_dataclass("Factory", [(f"{prefix}{i}", int, field(default=i)) for i in range(n)], bases=(ZeroCopy,))

    live = {n: make(n) for n in (1, 2, 3, 4)}
    files = {n: _filenames(k) for n, k in live.items()}
    assert all(len(f) == 1 for f in files.values())
    assert len(set().union(*files.values())) == 4

    def check():
        for n, k in live.items():
            src = inspect.getsource(k.asdict_zerocopy)
            assert all(f"'g{i}'" in src for i in range(n)), (n, src)
            assert f"'g{n}'" not in src
            assert k().asdict_zerocopy() == {f"g{i}": i for i in range(n)}

    check()
    del live[2]
    gc.collect()
    live[7] = make(7)
    live[8] = make(8)
    check()
    fnames = [next(iter(_filenames(k))) for k in live.values()]
    assert len(set(fnames)) == len(fnames)


def test_unknown_name_message_exact():
    # README Errors: "skip_fields names 'slot_mappin', which is not a field of InputMetadata"
    with pytest.raises(ValueError, match=r"^skip_fields names 'nope', which is not a field of Rec_skip_errors$"):
        Rec_skip_errors().asdict_zerocopy(skip_fields={"nope"})


def test_unknown_name_after_valid_names():
    with pytest.raises(ValueError, match="nope"):
        Rec_skip_errors().asdict_zerocopy(["a", "b", "nope"])


def test_keyword_name_is_skip_fields():
    # DESIGN: obj.asdict_zerocopy(skip_fields=None)
    with pytest.raises(TypeError):
        Rec_skip_errors().asdict_zerocopy(skip=["a"])
    with pytest.raises(TypeError):
        Rec_skip_errors().asdict_zerocopy(["a"], skip_fields=["a"])
    with pytest.raises(TypeError):
        Rec_skip_errors().astuple_zerocopy(["a"])


def test_str_subclass_field_names_via_make_dataclass():
    # DESIGN: "source that holds only field names, checked as identifiers, and string literals made
    # with `repr`": a name given as a str subclass (with a misleading repr) is still the name
    class Tricky(str):
        def __repr__(self):
            return "'evil'); import os; ('"

    cls = make_dataclass("TrickyNames", [(Tricky("alpha"), int, field(default=0))], bases=(ZeroCopy,))
    obj = bare(cls)
    assert list(obj.asdict_zerocopy()) == ["alpha"]
    assert "evil" not in metakit.generated_source(cls)


def test_no_default_or_user_object_in_the_source():
    # DESIGN: "No default value and no user object is ever written into the source." README: the
    # source holds "only field names ... and their `repr`"
    import ast

    class Loud:
        def __repr__(self):
            return "SECRET_DEFAULT_REPR"

    loud = Loud()

    @dataclass
    class Rec(ZeroCopy):
        a: int
        b: InitVar[int] = loud  # type: ignore[assignment]
        c: ClassVar[object] = loud
        n: object = field(init=False, default=Loud())
        w: object = field(default=Loud(), metadata={**OMIT, "doc": Loud()})
        _: KW_ONLY
        k: object = Loud()

    src = metakit.generated_source(Rec)
    assert "SECRET" not in src
    assert src.startswith(f"# metakit: the generated methods of {__name__}.{Rec.__qualname__}")
    for needed in ("def asdict_zerocopy(self, skip_fields=None):", "def astuple_zerocopy(self):", "def __replace__("):
        assert needed in src
    names = set(Rec.__dataclass_fields__)
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert node.value in names, node.value


def test_generated_source_of_slots_and_plain_classes():
    # DESIGN: "`metakit.generated_source(cls)` returns the source text" and README: "`slots=True`
    # (which builds a new class) ... names it afterwards: metakit renames the methods then"
    @dataclass(slots=True, frozen=True)
    class Slotted(ZeroCopy):
        alpha: int = 0
        beta: int = 1

    src = metakit.generated_source(Slotted)
    assert src.startswith(f"# metakit: the generated methods of {__name__}.{Slotted.__qualname__}")
    assert "'alpha': self.alpha" in src
    assert "'beta': self.beta" in src
    fn = Slotted.asdict_zerocopy
    assert fn.__code__.co_filename.startswith("<metakit ")
    assert "Slotted" in fn.__code__.co_filename
    assert inspect.getsource(fn) in src
    assert Slotted in metakit.zerocopy_classes()
    obj = bare(Slotted)
    assert_same_objects(obj.asdict_zerocopy(), reference(obj))

    plain_src = metakit.generated_source(PlainMeta)
    assert "'is_prompt': self.is_prompt" in plain_src
    assert PlainMeta not in metakit.zerocopy_classes()


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


def test_skip_fields_may_name_a_field_twice():
    obj = three()
    assert obj.asdict_zerocopy(["b", "b", "a", "b"]) == {"c": obj.c}


def test_skip_fields_may_name_omit_fields():
    obj = three()
    assert obj.asdict_zerocopy({"wrapper"}) == {"a": obj.a, "b": obj.b, "c": obj.c}
    assert obj.asdict_zerocopy(["wrapper", "a", "wrapper"]) == {"b": obj.b, "c": obj.c}


# --- what runs is the code of the source shown -----------------------------------
#
# compile_methods, lines_only and same_code are metakit's own comparison of code
# by line (templates keep no columns): nothing public compares code objects so.

METHODS = ("asdict_zerocopy", "astuple_zerocopy", "__replace__")


def assert_installed_code_is_its_compiled_source(cls: type) -> None:
    """What runs is what ``compile`` makes of the source that ``generated_source`` shows, line by line."""
    compiled = compile_methods(metakit.generated_source(cls))
    assert set(compiled) == set(METHODS)
    for name in METHODS:
        installed = getattr(cls, name).__code__
        assert same_code(lines_only(installed), lines_only(compiled[name])), name


def made_twice(names: list[str], name: str = "Wide") -> type:
    """A class with fields *names*, made after one of the same shape: its code comes from a template."""
    make_dataclass(name, [f"other_{n}" for n in names], bases=(ZeroCopy,))
    return make_dataclass(name, names, bases=(ZeroCopy,))


def test_installed_code_is_its_compiled_source():
    assert_installed_code_is_its_compiled_source(Step)
    assert_installed_code_is_its_compiled_source(made_twice([f"f{i}" for i in range(40)]))


def test_a_class_made_again_runs_code_named_for_it():
    # "a.b" + "C" and "a" + "b.C" write one label, so the second class takes the first one's file
    # name once it is gone, and the code compiled for the first (fields no other test has): under
    # its own qualified name.
    def make(module: str, qualname: str) -> type:
        namespace = {"__name__": module, "dataclass": dataclass, "ZeroCopy": ZeroCopy}
        body = f"    __qualname__ = {qualname!r}\n    again_x: int\n    again_y: int\n"
        exec(f"@dataclass\nclass C(ZeroCopy):\n{body}", namespace)
        return namespace["C"]

    first = make("a.b", "C")
    filename = first.asdict_zerocopy.__code__.co_filename
    del first
    gc.collect()
    for module, qualname in [("a", "b.C"), ("a", "b.C"), ("a.b", "C")]:
        again = make(module, qualname)
        assert again.asdict_zerocopy.__code__.co_filename == filename
        for method in METHODS:
            assert getattr(again, method).__qualname__ == f"{qualname}.{method}"
        assert again(1, 2).asdict_zerocopy() == {"again_x": 1, "again_y": 2}
        del again
        gc.collect()


def names_read(cls: type) -> set[str]:
    """The names the generated methods of *cls* read besides its fields: builtins and metakit's helpers."""
    return {n for m in METHODS for n in getattr(cls, m).__code__.co_names} - set(cls.__dataclass_fields__)


# One field of each role ("c", "r", "q"), with __init__'s arguments passed by position and by keyword.
NAMES_THE_CODE_READS = sorted(
    set().union(
        *(
            names_read(
                make_dataclass("Reads", [field_of_role(f"z{r}", r) for r in "crq"], bases=(ZeroCopy,), kw_only=kw)
            )
            for kw in (False, True)
        )
    )
)


def test_the_names_the_code_reads_are_its_builtins_and_helpers():
    assert set(NAMES_THE_CODE_READS) == {
        "type", "isinstance", "str", "bytes", "KeyError", "TypeError", "AttributeError", "__class__", "pop",
        "_NAME_COLLECTIONS", "_skip_fields_text", "_check_skipped", "_skip_fields_failed", "_asdict_kept",
        "_replace_by_dataclasses",
    }  # fmt: skip


@pytest.mark.parametrize("name", [name for name in NAMES_THE_CODE_READS if not hasattr(ZeroCopy, name)])
def test_installed_code_is_its_compiled_source_when_a_field_has_a_name_the_code_reads(name):
    # Regression: a template specialised for such a name held it twice in
    # ``co_names``, where ``compile`` holds it once, so the code that ran was
    # not the code of the source shown.
    cls = made_twice(["a", name, "b"], "Reads")
    assert_installed_code_is_its_compiled_source(cls)
    obj = cls(1, 2, 3)
    assert obj.asdict_zerocopy() == {"a": 1, name: 2, "b": 3}
    assert obj.asdict_zerocopy([name, name]) == {"a": 1, "b": 3}
    with pytest.raises(ValueError, match="'nope'"):
        obj.asdict_zerocopy([name, "nope"])
    with pytest.raises(TypeError, match="skip_fields"):
        obj.asdict_zerocopy(name)


@pytest.mark.parametrize("name", ["a\u200cb", "x\u200d", "\u0915\u094d\u200d\u0937"])
def test_names_with_zero_width_joiners_run_the_code_of_the_source_shown(name):
    if not name.isidentifier():  # before Unicode 15.1 (3.13): refused as any non-identifier is
        namespace = {"__annotations__": {name: int}, name: field(default=0, init=False, repr=False, compare=False)}
        with pytest.raises(TypeError, match="it is not a Python identifier"):
            dataclass(type("Joiner", (ZeroCopy,), namespace))
        return
    cls = made_twice([name, "plain"], "Joiner")
    assert_installed_code_is_its_compiled_source(cls)
    assert cls(1, 2).asdict_zerocopy() == {name: 1, "plain": 2}


# Any name a field may take.  Names that ``ZeroCopy`` or ``object`` already
# define would give the field that attribute as its default, and dunder names
# (``__weakref__``, ...) belong to Python, with or without metakit.
identifier = st.text(
    alphabet=st.characters(categories=["Lu", "Ll", "Lo", "Nd", "Pc"], max_codepoint=0x9FFF), min_size=1, max_size=80
).filter(
    lambda name: (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and unicodedata.normalize("NFKC", name) == name
        and not hasattr(ZeroCopy, name)
        and not (name.startswith("__") and name.endswith("__"))
    )
)


@settings(max_examples=60, deadline=None)
@given(names=st.lists(identifier, max_size=20, unique=True))
def test_installed_code_is_its_compiled_source_for_any_names(names):
    cls = made_twice(names, "Random")
    assert_installed_code_is_its_compiled_source(cls)
    obj = cls(*names)
    assert obj.asdict_zerocopy() == dict(zip(names, names, strict=True))


# --- templates specialised with CodeType.replace equal a real compile -------------
#
# The template cache is metakit's own optimisation, invisible but for speed:
# these tests read metakit._template, and inject faults into it, because
# nothing public shows whether a template was built, trusted or used.

SAMPLE_NAMES = [
    "a",
    "is_prompt",
    "x" * 63,
    "y" * 64,
    "long_" * 30,
    "é",
    "é" * 40,
    "名前" * 25,
    "ünïcödé_" * 12,
    "self",
    "skip_fields",
    "d",
    "name",
    "_0",
    "_1",
    "_12",
    "KeyError",
    "__d",
    "z9",
]


def names_for(count: int, shift: int) -> tuple[str, ...]:
    """*count* distinct names drawn from SAMPLE_NAMES, in a varied order."""
    return tuple(f"{SAMPLE_NAMES[(i * 7 + shift) % len(SAMPLE_NAMES)]}{i}" for i in range(count))


SHAPES = ["", "c", "cc", "c" * 15, "c" * 50, "cCrRq", "qcrC", "RRcc", "q", "crCRq" * 5]
KEYS = [f"{call}{shape}" for call in "PK" for shape in SHAPES]


def source_for(key: str, names: tuple[str, ...]) -> str:
    return methods_source(layout_of_shape(key, names), "C")


@pytest.mark.parametrize("key", KEYS)
def test_template_copy_equals_a_real_compile_by_line(key):
    template = Template(key)
    assert template.trusted
    for shift in range(len(SAMPLE_NAMES)):
        names = names_for(len(key) - 1, shift)
        ours = template.specialize(names, "<metakit>", "")
        theirs = {m: lines_only(c) for m, c in compile_methods(source_for(key, names)).items()}
        assert set(ours) == set(theirs) == set(METHODS)
        for method, code in theirs.items():
            assert same_code(ours[method], code), (names, method)


def test_template_copy_with_placeholder_names_in_another_order():
    names = ("_2", "_0", "_1")
    ours = Template("Pccc").specialize(names, "<metakit>", "")
    theirs = compile_methods(source_for("Pccc", names))
    assert all(same_code(ours[m], lines_only(theirs[m])) for m in theirs)


def test_the_template_key_names_role_and_inclusion_of_each_field():
    layout = Layout(("a", "b", "c", "d"), "crqc", ("a", "b"), True, True)
    assert shape(layout) == "PcrQC"
    assert shape(layout._replace(by_position=False)) == "KcrQC"


def test_lines_only_keeps_every_instruction_on_its_line_and_drops_columns():
    code = compile_methods(source_for("Pcc", ("alpha", "beta")))["asdict_zerocopy"]
    stripped = lines_only(code)

    def unit_lines(code: Any) -> list[int | None]:
        return [line for start, end, line in code.co_lines() for _ in range(start, end, 2)]

    assert unit_lines(stripped) == unit_lines(code)
    if sys.version_info >= (3, 11):
        assert [p[0] for p in stripped.co_positions()] == [p[0] for p in code.co_positions()]
        assert {p[2:] for p in stripped.co_positions()} == {(None, None)}


def test_same_code_tells_different_code_apart():
    names = ("a", "bb")

    def code(source: str) -> Any:
        return lines_only(compile_methods(source)["asdict_zerocopy"])

    reference = code(source_for("Pcc", names))
    assert same_code(reference, code(source_for("Pcc", names)))
    assert not same_code(reference, code(source_for("Pcc", ("a", "bc"))))
    assert not same_code(reference, code(source_for("Pcc", ("bb", "a"))))
    assert not same_code(reference, code("\n" + source_for("Pcc", names)))
    assert not same_code(reference, code(source_for("PcC", names)))


# --- any failure of the template falls back to compile -----------------------------


def failing(error: type[Exception]) -> Any:
    def fail(*args: object, **kwargs: object) -> Any:
        raise error("a code layout this version of metakit does not know")

    return fail


ERRORS = [IndexError, ValueError, KeyError, TypeError, AttributeError, RuntimeError]


def a_new_shape(test: int) -> int:
    """A field count that no other test meets: its template is built, in that test, from scratch."""
    return 60 + test


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("where", ["lines_only", "_copiers", "same_code"])
def test_any_failure_of_the_template_falls_back_to_compile(monkeypatch, where, error):
    # A changed code layout (simulated: the position reader, the copy or the
    # check raises while the template is built) must cost speed, never correctness.
    monkeypatch.setattr(_template, where, failing(error))
    count = a_new_shape(ERRORS.index(error) * 3 + ["lines_only", "_copiers", "same_code"].index(where))
    names = [f"fallback_{where}_{error.__name__}_{i}" for i in range(count)]
    cls = made_twice(names, "Fallback")
    assert_installed_code_is_its_compiled_source(cls)
    # Compiled for real: the code keeps its columns, where code has them.
    compiled = compile_methods(metakit.generated_source(cls))["asdict_zerocopy"]
    assert cls.asdict_zerocopy.__code__.co_linetable == compiled.co_linetable
    obj = cls(*range(count))
    assert obj.asdict_zerocopy() == dict(zip(names, range(count), strict=True))
    assert metakit.replace(obj, **{names[0]: -1}).astuple_zerocopy() == (-1, *range(1, count))


@pytest.mark.parametrize("error", ERRORS)
def test_a_trusted_template_that_fails_to_copy_falls_back_to_compile(monkeypatch, error):
    names = [f"late_{error.__name__}_{i}" for i in range(3)]
    made_twice(names[::-1], "Warm")  # the shape's template is built, and trusted
    monkeypatch.setattr(Template, "specialize", failing(error))
    cls = made_twice(names, "LateFallback")
    assert_installed_code_is_its_compiled_source(cls)
    compiled = compile_methods(metakit.generated_source(cls))["asdict_zerocopy"]
    assert cls.asdict_zerocopy.__code__.co_linetable == compiled.co_linetable  # compiled for real
    obj = cls(*range(3))
    assert obj.asdict_zerocopy() == dict(zip(names, range(3), strict=True))
    assert metakit.replace(obj, **{names[2]: 9}).astuple_zerocopy() == (0, 1, 9)


def test_an_untrusted_template_is_never_used(monkeypatch):
    monkeypatch.setattr(_template, "same_code", lambda a, b: False)
    layout = layout_of_shape("P" + "c" * a_new_shape(20), tuple(f"u{i}" for i in range(a_new_shape(20))))
    assert _template.template_for(layout) is None  # first sight
    assert _template.template_for(layout) is None  # built, and found untrusted


def test_a_template_is_built_on_the_second_sight_of_a_shape_only():
    names = tuple(f"s{i}" for i in range(a_new_shape(21)))
    key = "P" + "c" * (len(names) - 2) + "Rq"
    assert _template.template_for(layout_of_shape(key, names)) is None
    assert _template.template_for(layout_of_shape(key, names[::-1])) is not None


# --- a Python whose dataclasses marks field kinds otherwise ------------------------------


def test_where_field_kinds_are_unknown_replace_is_left_to_dataclasses(monkeypatch):
    # metakit reads the kind of a field (ClassVar, InitVar) from private markers of
    # dataclasses.  Without them, asdict_zerocopy still returns what fields() lists, less
    # OMIT fields; replace is dataclasses.replace's own, with nothing written for it.
    monkeypatch.setattr(metakit._fields, "_KINDS_KNOWN", False)

    @dataclass
    class Unknown(ZeroCopy):
        shared: ClassVar[int] = 0
        a: int
        hidden: int = field(default=2, metadata=OMIT)
        b: str = "b"
        late: int = field(default=3, init=False)

    obj = Unknown(1)
    assert obj.asdict_zerocopy() == {"a": 1, "b": "b", "late": 3}
    assert obj.astuple_zerocopy() == (1, "b", 3)
    source = metakit.generated_source(Unknown)
    assert "return _replace_by_dataclasses(self, changes)" in source
    assert "hidden" not in source
    assert "shared" not in source
    assert metakit.replace(obj, b="c") == Unknown(1, b="c")
    with pytest.raises(Exception, match="late") as theirs:  # an init=False field: refused
        dataclasses.replace(obj, late=4)
    with pytest.raises(type(theirs.value)) as ours:  # by dataclasses itself, in its words on this Python
        metakit.replace(obj, late=4)
    assert str(ours.value) == str(theirs.value)


class _NoText:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __format__ = __str__  # type: ignore[assignment]


@pytest.mark.parametrize("module", ["deleted", _NoText(), 42], ids=["deleted", "no text", "int"])
def test_a_class_whose_module_is_gone_or_no_str_is_made_as_dataclasses_makes_it(module):
    # Found by an outside tester: ``del C.__module__`` (which a Python metaclass allows) raised
    # KeyError, and a __module__ whose text cannot be read raised its error; @dataclass takes both.
    namespace: dict[str, Any] = {"__annotations__": {"x": int}}
    if module != "deleted":
        namespace["__module__"] = module
    cls = metakit.ZeroCopyFields("C", (ZeroCopy,), namespace)
    if module == "deleted":
        del cls.__module__
    cls = dataclass(cls)
    assert cls(1).asdict_zerocopy() == {"x": 1}
    assert metakit.replace(cls(1), x=2) == cls(2)
    assert metakit.generated_source(cls).startswith("# metakit: the generated methods of ?.C\n")
    mt.assert_zerocopy_class(cls)
