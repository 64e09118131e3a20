"""Generated code, linecache lifetime, zerocopy_classes (DESIGN "Generated code", "Public API")."""

from __future__ import annotations

import gc
import inspect
import linecache
import sys
import traceback
import weakref
from dataclasses import dataclass, field, make_dataclass

import pytest

import metakit
from metakit import OMIT, ZeroCopy

_counter = [0]


def fresh(fields=("a", "b"), name=None, base=(ZeroCopy,)):
    _counter[0] += 1
    name = name or f"Gen{_counter[0]}"
    return make_dataclass(name, [(f, object, field(default=None)) for f in fields], bases=base)


def metakit_entries(fragment):
    return [k for k in list(linecache.cache) if k.startswith("<metakit") and fragment in k]


def test_generated_source_is_text_with_field_names():
    # DESIGN: "metakit.generated_source(cls) returns the source text"; "source that holds only field names ... and
    # string literals made with repr. No default value and no user object is ever written into the source."
    secret = "SECRET_DEFAULT_VALUE_123"

    @dataclass
    class S(ZeroCopy):
        alpha: str = secret
        beta: object = field(default_factory=lambda: "FACTORY_VALUE_456")
        wrapper: object = field(default=None, metadata={**OMIT, "doc": "DOC_VALUE_789"})

    src = metakit.generated_source(S)
    assert isinstance(src, str)
    assert "def asdict_zerocopy" in src and "def astuple_zerocopy" in src
    assert "'alpha'" in src and "self.beta" in src
    for value in ("SECRET_DEFAULT_VALUE_123", "FACTORY_VALUE_456", "DOC_VALUE_789"):
        assert value not in src
    compile(src, "<check>", "exec")


def test_generated_source_of_plain_dataclass_and_errors():
    # README Command line: on a plain dataclass, generated_source is the code the function forms run
    @dataclass
    class P:
        x: int = 0

    assert "'x'" in metakit.generated_source(P)
    with pytest.raises(TypeError):
        metakit.generated_source(3)
    with pytest.raises(TypeError):
        metakit.generated_source(int)
    with pytest.raises(TypeError):
        metakit.generated_source(P())  # an instance is not a class


def test_linecache_registration_inspect_getsource():
    # DESIGN: "The source is registered in linecache under a unique, readable filename ... Then inspect.getsource,
    # tracebacks and debuggers show it."
    C = fresh(("first", "second"), name="Readable")
    src = metakit.generated_source(C)
    for meth in (C.asdict_zerocopy, C.astuple_zerocopy, C.__replace__):
        fn = meth.__code__.co_filename
        assert fn.startswith("<") and "Readable" in fn
        assert fn in linecache.cache
        got = inspect.getsource(meth)
        assert got.startswith("def " + meth.__name__)
        assert got.strip() in src
        line = linecache.getline(fn, meth.__code__.co_firstlineno)
        assert line.startswith("def " + meth.__name__)


def test_traceback_shows_generated_line():
    # DESIGN: tracebacks show the generated source
    D = make_dataclass("TbShow2", [("needed", int)], bases=(ZeroCopy,))
    d = D(1)
    del d.needed
    with pytest.raises(AttributeError) as ei:
        d.astuple_zerocopy()
    text = "".join(traceback.format_exception(ei.type, ei.value, ei.tb))
    assert "TbShow2" in text
    assert "self.needed" in text


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


def test_entry_survives_while_a_sharing_class_lives():
    # DESIGN: "An entry goes away when its class is garbage-collected" (not before: the other class still uses it)
    A = fresh(("m", "n"), name="Survive")
    B = fresh(("m", "n"), name="Survive")
    fn = B.asdict_zerocopy.__code__.co_filename
    del A
    gc.collect()
    assert fn in linecache.cache
    assert inspect.getsource(B.asdict_zerocopy).startswith("def asdict_zerocopy")
    linecache.checkcache()
    linecache.checkcache(fn)
    assert fn in linecache.cache
    del B
    gc.collect()
    assert fn not in linecache.cache


def test_class_collected_entry_gone_and_not_listed():
    # DESIGN: "An entry goes away when its class is garbage-collected, and no cache keeps a class alive."
    # zerocopy_classes(): "the live classes made by ZeroCopyFields (weakly held)"
    C = fresh(("u", "v"), name="Collectable")
    o = C(1, 2)
    o.asdict_zerocopy({"u"})
    o.astuple_zerocopy()
    metakit.replace(o, u=3)
    metakit.asdict_zerocopy(o)
    metakit.generated_source(C)
    fn = C.asdict_zerocopy.__code__.co_filename
    assert C in metakit.zerocopy_classes()
    wr = weakref.ref(C)
    del C, o
    gc.collect()
    assert wr() is None
    assert fn not in linecache.cache
    assert all(c.__name__ != "Collectable" for c in metakit.zerocopy_classes())


def test_plain_dataclass_not_kept_alive_by_function_forms():
    # README: "Any other dataclass gets the code on its first metakit.replace, kept in a cache keyed weakly by the class"
    # DESIGN: "no cache keeps a class alive"
    P = make_dataclass("PlainCollect", [("a", int, field(default=0))])
    p = P()
    metakit.asdict_zerocopy(p)
    metakit.astuple_zerocopy(p)
    metakit.replace(p, a=1)
    metakit.generated_source(P)
    wr = weakref.ref(P)
    del P, p
    gc.collect()
    assert wr() is None
    assert not metakit_entries("PlainCollect")


def test_override_classes_collected():
    # no cache keeps a class alive, also for classes whose generated method super() reaches
    @dataclass
    class Base(ZeroCopy):
        a: int = 1

    @dataclass
    class Ov(Base):
        b: int = 2

        def asdict_zerocopy(self, skip_fields=None):
            return super().asdict_zerocopy(skip_fields)

    assert Ov().asdict_zerocopy() == {"a": 1, "b": 2}
    wrs = [weakref.ref(Base), weakref.ref(Ov)]
    del Base, Ov
    gc.collect()
    assert [w() for w in wrs] == [None, None]


def test_zerocopy_classes_order_and_slots_discarded_class():
    # README: "The live classes made by ZeroCopyFields, oldest first (held weakly)"; brief: slots=True's discarded
    # class is not listed
    @dataclass(slots=True)
    class SlotA(ZeroCopy):
        a: int = 1

    @dataclass
    class After(ZeroCopy):
        b: int = 1

    listed = metakit.zerocopy_classes()
    mine = [c for c in listed if c.__qualname__.endswith(("SlotA", "After")) and c.__module__ == __name__]
    assert mine == [SlotA, After]
    assert listed.index(SlotA) < listed.index(After)
    assert ZeroCopy in listed or True  # the base itself may be listed
    assert isinstance(listed, list)


def test_zerocopy_classes_slots_discarded_after_collect():
    @dataclass(slots=True, frozen=True)
    class SlotB(ZeroCopy):
        a: int = 1

    gc.collect()
    mine = [c for c in metakit.zerocopy_classes() if c.__qualname__.endswith("SlotB")]
    assert mine == [SlotB]


def test_slots_class_methods_named_for_the_new_class():
    # README How it works: slots=True rebuilds the class "(and names it afterwards: metakit renames the methods then)"
    @dataclass(slots=True)
    class SlotC(ZeroCopy):
        a: int = 1

    assert SlotC.asdict_zerocopy.__qualname__.endswith("SlotC.asdict_zerocopy")
    assert SlotC().asdict_zerocopy() == {"a": 1}
    assert "SlotC" in SlotC.asdict_zerocopy.__code__.co_filename


def test_checkcache_wrapper_keeps_original():
    # README: "the wrapper keeps the original as __wrapped__" (up to 3.13)
    if sys.version_info < (3, 14) and getattr(linecache.checkcache, "__wrapped__", None) is not None:
        assert callable(linecache.checkcache.__wrapped__)
    linecache.checkcache()


NASTY_NAME = "X\nimport builtins; builtins.METAKIT_BLACKBOX_PWNED = 1\n#"


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


def test_class_name_with_newline_linecache_lines_well_formed():
    # DESIGN: "The source is registered in linecache ... Then inspect.getsource, tracebacks and debuggers show it."
    # linecache entries are lists of single lines; each generated line must be one line, and the line numbers of
    # the code objects must point at their def lines in the registered text as split by lines.
    C = make_dataclass(NASTY_NAME, [("a", int, field(default=0))], bases=(ZeroCopy,))
    fn = C.astuple_zerocopy.__code__.co_filename
    lines = linecache.getlines(fn)
    assert all(line.count("\n") == 1 and line.endswith("\n") for line in lines)
    text_lines = "".join(lines).splitlines()
    assert text_lines[C.astuple_zerocopy.__code__.co_firstlineno - 1].startswith("def astuple_zerocopy")


def test_generated_source_non_dataclass_zerocopy_class():
    # DESIGN: non-dataclasses get a TypeError with a clear message
    class N(ZeroCopy):
        pass

    with pytest.raises(TypeError, match="not a dataclass"):
        metakit.generated_source(N)
