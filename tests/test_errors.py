"""DESIGN "Semantics": the errors, with their messages.

A ``skip_fields`` name that is not a field is a ``ValueError`` naming it and the class; a
``skip_fields`` that is not an iterable of ``str`` is a ``TypeError`` naming ``skip_fields``; a
non-dataclass, or a class where an instance belongs, is a ``TypeError`` from the method and the
function form alike; field names that cannot be written are refused when the class is made.
"""

import dataclasses
import functools
import gc
import linecache
import sys
from dataclasses import dataclass, field, make_dataclass

import pytest

import metakit
import metakit.testing
from metakit import OMIT, SkipFieldsError, ZeroCopy, ZeroCopyFields
from tests.records import (
    INSTANCE_IDS,
    NON_DATACLASS_OBJECTS,
    OBJS,
    AttnMeta,
    Box,
    Meta,
    NotDC,
    PlainMeta,
    PlainNotDC,
    PlainPoint,
    PlainRec,
    PlainRec_skip_errors,
    Rec,
    Rec_skip_errors,
    StrSub,
    Three,
    _class_with_annotations,
    _forms,
    _gen,
    assert_same_objects,
    bare,
    calls,
    inst,
    outcome,
    reference,
    reference_tuple,
    three,
)


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


def test_generated_source_non_dataclass_zerocopy_class():
    # DESIGN: non-dataclasses get a TypeError with a clear message
    class N(ZeroCopy):
        pass

    with pytest.raises(TypeError, match="not a dataclass"):
        metakit.generated_source(N)


BAD_SKIP = {
    "int": lambda: 5,
    "bool-true": lambda: True,
    "bool-false": lambda: False,
    "float": lambda: 1.5,
    "str": lambda: "x",
    "empty-str": lambda: "",
    "str-subclass": lambda: type("S", (str,), {})("x"),
    "bytes": lambda: b"ab",
    "empty-bytes": lambda: b"",
    "bytes-subclass": lambda: type("B", (bytes,), {})(b"x"),
    "bytearray": lambda: bytearray(b"x"),
    "memoryview": lambda: memoryview(b"x"),
    "none-item": lambda: [None],
    "none-after-valid": lambda: ["x", None],
    "nested-list": lambda: [["x"]],
    "nested-tuple": lambda: [("x",)],
    "int-item": lambda: [1],
    "set-of-int": lambda: {1, 2},
    "frozenset-of-bytes": lambda: frozenset({b"x"}),
    "range": lambda: range(3),
    "object": object,
    "ellipsis": lambda: ...,
    "iter-raises-typeerror": type("It", (), {"__iter__": lambda self: (_ for _ in ()).throw(TypeError("x"))}),
    "generator-of-int": lambda: _gen(1),
    "generator-valid-then-int": lambda: _gen("x", 2),
    "iterator-of-int": lambda: iter([3]),
}


@pytest.mark.parametrize("form", ["method", "function"])
@pytest.mark.parametrize("name", sorted(BAD_SKIP))
def test_bad_skip_fields_raise_skipfieldserror(name, form):
    rec = Rec(1)
    value = BAD_SKIP[name]()
    if form == "method":
        call = functools.partial(rec.asdict_zerocopy, skip_fields=value)
    else:
        call = functools.partial(metakit.asdict_zerocopy, rec, value)
    with pytest.raises(SkipFieldsError) as info:
        call()
    assert isinstance(info.value, TypeError)
    assert "skip_fields" in str(info.value)


@pytest.mark.parametrize("name", ["cv", "iv", "extra", "", "a b", "asdict_zerocopy", "__dict__", "X"])
@pytest.mark.parametrize("form", ["method", "function"])
def test_unknown_skip_name_valueerror_names_it_and_class(name, form):
    rec = Rec(1)
    if form == "method":
        call = functools.partial(rec.asdict_zerocopy, {name})
    else:
        call = functools.partial(metakit.asdict_zerocopy, rec, [name])
    with pytest.raises(ValueError, match="which is not a field of") as info:
        call()
    assert not isinstance(info.value, TypeError)
    assert repr(name) in str(info.value)
    assert "Rec" in str(info.value)


def test_unknown_skip_name_in_generator_valueerror():
    with pytest.raises(ValueError, match="'zz'"):
        Rec(1).asdict_zerocopy(_gen("x", "zz"))


def test_user_generator_raising_typeerror_stays_a_typeerror():
    def gen():
        yield "x"
        raise TypeError("from the user's generator")

    with pytest.raises(TypeError):
        Rec(1).asdict_zerocopy(gen())


def test_skip_fields_plain_dataclass_function_form_bad_input():
    with pytest.raises(SkipFieldsError, match="skip_fields"):
        metakit.asdict_zerocopy(PlainRec(1), 7)
    with pytest.raises(ValueError, match=r"'nope'.*PlainRec"):
        metakit.asdict_zerocopy(PlainRec(1), {"nope"})


@pytest.mark.parametrize("fn", ["asdict_zerocopy", "astuple_zerocopy"])
@pytest.mark.parametrize("name", sorted(NON_DATACLASS_OBJECTS))
def test_function_forms_on_non_dataclass(fn, name):
    obj = NON_DATACLASS_OBJECTS[name]
    with pytest.raises(TypeError) as info:
        getattr(metakit, fn)(obj)
    assert not isinstance(info.value, SkipFieldsError)
    assert "dataclass" in str(info.value)
    assert type(obj).__name__ in str(info.value)


@pytest.mark.parametrize("method", ["asdict_zerocopy", "astuple_zerocopy", "__replace__"])
def test_methods_on_zerocopy_non_dataclass(method):
    with pytest.raises(TypeError, match="NotDC is not a dataclass"):
        getattr(NotDC(), method)()


def test_methods_on_zerocopy_non_dataclass_with_skip_fields():
    with pytest.raises(TypeError, match="NotDC"):
        NotDC().asdict_zerocopy({"x"})


GENSRC_BAD = {
    "int": 3,
    "none": None,
    "str": "Rec",
    "function": len,
    "module": dataclasses,
    "plain-class": PlainNotDC,
    "zerocopy": ZeroCopy,
    "zerocopy-non-dc": NotDC,
    "type": type,
}


@pytest.mark.parametrize("name", sorted(GENSRC_BAD))
def test_generated_source_of_non_dataclass(name):
    with pytest.raises(TypeError) as info:
        metakit.generated_source(GENSRC_BAD[name])
    assert "dataclass" in str(info.value)


def test_unexpected_class_keyword_is_a_typeerror_like_type():
    with pytest.raises(TypeError) as ours:
        type("X", (ZeroCopy,), {}, bogus=1)
    with pytest.raises(TypeError) as theirs:
        type("X", (), {}, bogus=1)
    assert str(ours.value) == str(theirs.value)


def test_clearcache_then_class_death_raises_nothing(monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    def make():
        @dataclass
        class Cleared(ZeroCopy):
            a: int = 1

        return Cleared

    cls = make()
    name = cls.asdict_zerocopy.__code__.co_filename
    saved = {k: v for k, v in linecache.cache.copy().items() if k != name}
    try:
        linecache.clearcache()
        del cls
        gc.collect()
        assert not unraisable
        again = make()
        assert again().asdict_zerocopy() == {"a": 1}
        assert again.asdict_zerocopy.__code__.co_filename in linecache.cache
        del again
        gc.collect()
        assert not unraisable
    finally:
        for key, value in saved.items():
            linecache.cache.setdefault(key, value)


@pytest.mark.parametrize("name", INSTANCE_IDS)
def test_skip_non_field_names_raise_value_error(name):
    obj = inst(name)
    cls = type(obj)
    for bad in ("not_a_field_xyz", "attn_bias", "block_size", "scale", "__orig_class__"):
        if bad in {f.name for f in dataclasses.fields(cls)}:
            continue
        with pytest.raises(ValueError, match="which is not a field of") as ei:
            metakit.asdict_zerocopy(obj, skip_fields={bad})
        assert repr(bad) in str(ei.value) or bad in str(ei.value)
        assert cls.__name__ in str(ei.value)


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


def test_generated_source_refuses_non_dataclasses():
    for bad in (3, int, AttnMeta(1, 2, 3, [])):
        if dataclasses.is_dataclass(bad) and not isinstance(bad, type):
            # an instance: documented as "expected a dataclass" for non-dataclasses only
            continue
        with pytest.raises(TypeError):
            metakit.generated_source(bad)


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


def test_frozen_inheritance_errors_unchanged():
    @dataclass
    class NotFrozen(ZeroCopy):
        a: int = 0

    @dataclass
    class PlainNotFrozen:
        a: int = 0

    a = outcome(lambda: dataclass(frozen=True)(type("F", (PlainNotFrozen,), {})))
    b = outcome(lambda: dataclass(frozen=True)(type("F", (NotFrozen,), {})))
    assert a[0] == b[0] == "err"
    assert a[1] is b[1]
    assert a[2] == b[2]


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


_BAD_NAMES = ["not-ident", "class", "1x", "\ufb01eld", "\u210cx", "__debug__", "", "a b", "x\n", "None", "True"]


@pytest.mark.parametrize("bad", _BAD_NAMES)
@pytest.mark.parametrize(
    "decorate",
    [
        dataclass,
        dataclass(init=False),
        dataclass(slots=True),
        dataclass(frozen=True),
        dataclass(init=False, repr=False, eq=False, match_args=False),
    ],
)
def test_field_name_not_writable_refused_at_creation_naming_the_field(bad, decorate):
    # README: "A field name that is not an identifier (possible only by editing __annotations__ by hand) raises
    # TypeError when the class is created." / "(checked as identifiers, in the NFKC form the parser reads, and not
    # __debug__)"
    with pytest.raises(TypeError) as info:
        decorate(_class_with_annotations("BadName", {"ok": int, bad: int}))
    assert repr(bad) in str(info.value) or bad in str(info.value)


@pytest.mark.parametrize("bad", ["not-ident", "class", "\ufb01"])
def test_field_name_not_writable_omit_or_inherited_refused(bad):
    # README: "A field name that is not an identifier ... raises TypeError when the class is created."
    with pytest.raises(TypeError) as info:
        dataclass(_class_with_annotations("BadOmit", {bad: int}, {bad: field(default=0, metadata=OMIT)}))
    assert repr(bad) in str(info.value)
    plain = dataclass(init=False, repr=False, eq=False, match_args=False)(
        type("P", (), {"__annotations__": {bad: int}})
    )
    with pytest.raises(TypeError) as info:
        ZeroCopyFields("Inherits", (plain, ZeroCopy), {})
    assert repr(bad) in str(info.value)
    with pytest.raises(TypeError) as info:
        dataclass(ZeroCopyFields("InheritsDecorated", (plain, ZeroCopy), {"__annotations__": {"ok": int}}))
    assert repr(bad) in str(info.value)


class _ClaimsIdentifier(str):
    def isidentifier(self):
        return True


def test_str_subclass_claiming_identifier_gets_type_error():
    # README: "A field name that is not an identifier (possible only by editing __annotations__ by hand) raises
    # TypeError when the class is created."
    with pytest.raises(TypeError, match="a-b"):
        dataclass(init=False, repr=False, eq=False)(_class_with_annotations("Liar", {_ClaimsIdentifier("a-b"): int}))


@pytest.mark.parametrize("obj", OBJS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("name", ["nope", "cv", "iv", "post", "__init__", "asdict_zerocopy", ""])
def test_unknown_name_value_error(obj, name):
    # DESIGN: "A name that is not a field of the class raises ValueError naming it and the class."
    # ClassVar / InitVar pseudo-fields and post-init attributes are not fields.
    for _label, call in calls(obj):
        with pytest.raises(ValueError, match="which is not a field of") as ei:
            call({name})
        msg = str(ei.value)
        assert repr(name) in msg or name in msg
        assert type(obj).__name__ in msg
        assert not isinstance(ei.value, TypeError)


class StrSub_skip_errors(str):
    pass


class BytesSub(bytes):
    pass


BAD = [
    ("int", lambda: 5),
    ("bool", lambda: True),
    ("float", lambda: 1.5),
    ("object", object),
    ("str", lambda: "a"),
    ("bytes", lambda: b"ab"),
    ("str-sub", lambda: StrSub_skip_errors("a")),
    ("bytes-sub", lambda: BytesSub(b"a")),
    ("empty-str", lambda: ""),
    ("item-list", lambda: [["a"]]),
    ("item-int", lambda: [1]),
    ("item-int-after-valid", lambda: ["a", 1]),
    ("item-bytes", lambda: [b"a"]),
    ("item-set", lambda: [{"a"}]),
    ("item-none", lambda: [None]),
    ("bytearray", lambda: bytearray(b"a")),
    ("values-view", {"x": 1}.values),
]


@pytest.mark.parametrize("obj", OBJS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("kind", BAD, ids=lambda k: k[0])
def test_bad_skip_fields_type_error_names_skip_fields(obj, kind):
    # DESIGN: "skip_fields that is not an iterable of str gets a TypeError that names skip_fields (5, True,
    # b"ab", an item that is a list or an int); a str or bytes is refused."
    for _label, call in calls(obj):
        with pytest.raises(TypeError, match="skip_fields"):
            call(kind[1]())


def test_str_that_is_also_valid_field_refused():
    # DESIGN: "a str or bytes is refused" even when every letter is a field name
    @dataclass
    class L(ZeroCopy):
        a: int = 1
        b: int = 2

    with pytest.raises(TypeError, match="skip_fields"):
        L().asdict_zerocopy("ab")
    with pytest.raises(TypeError, match="skip_fields"):
        metakit.asdict_zerocopy(L(), "a")


def test_non_dataclass_methods_raise():
    # README API: "on a class that is not a dataclass they raise TypeError"
    with pytest.raises(TypeError, match="NotDC"):
        NotDC().asdict_zerocopy()
    with pytest.raises(TypeError, match="NotDC"):
        NotDC().astuple_zerocopy()
    with pytest.raises(TypeError, match="NotDC"):
        NotDC().asdict_zerocopy(skip_fields={"a"})


class NotIterable:
    pass


class IterReturnsNonIterator:
    def __iter__(self):
        return 5


BAD_SKIP_FIELDS = [
    ("int", lambda: 5),
    ("bool", lambda: True),
    ("float", lambda: 1.5),
    ("object", object),
    ("not iterable", NotIterable),
    ("__iter__ returns int", IterReturnsNonIterator),
    ("str", lambda: "is_prompt"),
    ("str subclass", lambda: StrSub("is_prompt")),
    ("empty str", lambda: ""),
    ("bytes", lambda: b"ab"),
    ("bytes subclass", lambda: BytesSub(b"ab")),
    ("bytearray", lambda: bytearray(b"ab")),
    ("memoryview", lambda: memoryview(b"ab")),
    ("list of list", lambda: [["is_prompt"]]),
    ("list of int", lambda: [1]),
    ("list with None", lambda: ["is_prompt", None]),
    ("list of None", lambda: [None]),
    ("list of bytes", lambda: [b"is_prompt"]),
    ("list of bytearray", lambda: [bytearray(b"is_prompt")]),
    ("tuple of set", lambda: ({"is_prompt"},)),
    ("dict values", {"k": 1}.values),
    ("generator of ints", lambda: (i for i in [1, 2])),
    ("dict with int keys", lambda: {1: "is_prompt"}),
]


@pytest.mark.parametrize(("label", "make"), BAD_SKIP_FIELDS, ids=[b[0] for b in BAD_SKIP_FIELDS])
@pytest.mark.parametrize("which", ["zerocopy", "plain"])
def test_bad_skip_fields_get_skip_fields_error(label, make, which):
    # DESIGN: "`skip_fields` that is not an iterable of `str` gets a `TypeError` that names
    # `skip_fields` (`5`, `True`, `b"ab"`, an item that is a list or an int); a `str` or `bytes` is
    # refused." README: "(or a subclass of either, which would be read as a set of letters)" and
    # "a bad `skip_fields` gets `metakit.SkipFieldsError`, a subclass of `TypeError`"
    obj = Meta() if which == "zerocopy" else PlainMeta()
    forms = list(_forms(obj)) if which == "zerocopy" else list(_forms(obj))[2:]
    for form, call in forms:
        with pytest.raises(metakit.SkipFieldsError) as info:
            call(make())
        assert isinstance(info.value, TypeError)
        assert "skip_fields" in str(info.value), (form, str(info.value))


def test_generator_that_raises_is_not_swallowed():
    # DESIGN: "Each must get the documented error ... never a silent wrong result": an iterable
    # that fails half-way must not leave a half-skipped dict behind.
    def gen(exc):
        yield "is_prompt"
        raise exc

    for exc in (RuntimeError("boom"), KeyError("slot_mapping"), ValueError("v")):
        for _form, call in _forms(Meta()):
            with pytest.raises(type(exc)):
                call(gen(exc))


@pytest.mark.parametrize(
    "skip",
    [
        ["slot_mappin"],
        ("is_prompt", "nope"),
        (n for n in ["nope"]),
        [StrSub("nope")],
        ["attn_bias"],
        ["asdict_zerocopy"],
    ],
    ids=["list", "tuple", "generator", "str subclass", "post-init attribute", "method name"],
)
def test_unknown_name_is_a_value_error_naming_it_and_the_class(skip):
    # DESIGN: "A name that is not a field of the class raises `ValueError` naming it and the class."
    obj = Meta()
    items = list(skip)
    bad = next(n for n in items if n not in {"is_prompt", "slot_mapping", "wrapper"})
    for _form, call in _forms(obj):
        with pytest.raises(ValueError, match="which is not a field of") as info:
            call(list(items))
        assert repr(str(bad)) in str(info.value), str(info.value)
        assert "Meta" in str(info.value), str(info.value)
    with pytest.raises(ValueError, match="PlainMeta"):
        metakit.asdict_zerocopy(PlainMeta(), skip_fields=[bad])


def test_readme_error_messages_verbatim():
    # README "Errors": the messages shown there
    obj = Meta(True, [0, 1])
    with pytest.raises(ValueError, match=r"^skip_fields names 'slot_mappin', which is not a field of Meta$"):
        obj.asdict_zerocopy(skip_fields={"slot_mappin"})
    with pytest.raises(
        TypeError, match=r"^asdict_zerocopy\(\) takes a dataclass instance, but got the class Meta itself$"
    ):
        metakit.asdict_zerocopy(Meta)
    with pytest.raises(
        TypeError, match=r"^asdict_zerocopy\(\) takes a dataclass instance, but int is not a dataclass$"
    ):
        metakit.asdict_zerocopy(3)
    with pytest.raises(metakit.SkipFieldsError, match=r"^skip_fields must be an iterable of field names, not int 5$"):
        obj.asdict_zerocopy(skip_fields=5)
    with pytest.raises(
        metakit.SkipFieldsError, match=r"^skip_fields must hold field names \(str\), not list \['wrapper'\]$"
    ):
        obj.asdict_zerocopy(skip_fields=[["wrapper"]])
    with pytest.raises(
        metakit.SkipFieldsError,
        match=r"^skip_fields must be an iterable of field names, not the str 'wrapper'; "
        r"write skip_fields=\{'wrapper'\}$",
    ):
        obj.asdict_zerocopy(skip_fields="wrapper")
    with pytest.raises(
        TypeError, match=r"^expected a dataclass, but got 3, an instance of int, which is not a dataclass$"
    ):
        metakit.generated_source(3)


class NotADataclass(ZeroCopy):
    pass


@dataclass
class _Parent(ZeroCopy):
    x: int = 0


class UndecoratedChild(_Parent):
    pass


@pytest.mark.parametrize(
    "thing",
    [
        Meta,
        PlainMeta,
        Rec_skip_errors,
        PlainRec_skip_errors,
        NotDC,
        ZeroCopy,
        NotADataclass,
        UndecoratedChild,
        int,
        type,
        ZeroCopyFields,
    ],
    ids=lambda t: t.__name__,
)
def test_classes_where_instances_belong(thing):
    # DESIGN: "Non-dataclasses get a `TypeError` with a clear message, whether the method or the
    # function form is used. So do classes passed where instances belong."
    for fn, name in ((metakit.asdict_zerocopy, "asdict_zerocopy"), (metakit.astuple_zerocopy, "astuple_zerocopy")):
        with pytest.raises(TypeError) as info:
            fn(thing)
        assert name in str(info.value), str(info.value)
        assert thing.__name__ in str(info.value), str(info.value)
        assert "itself" in str(info.value) or "class" in str(info.value)
    with pytest.raises(TypeError):
        metakit.asdict_zerocopy(thing, skip_fields={"a"})
    with pytest.raises(TypeError):
        metakit.replace(thing)
    with pytest.raises(TypeError, match="assert_zerocopy"):
        metakit.testing.assert_zerocopy(thing)
    # the class-level methods of ZeroCopy itself, called with a class
    for method in ("asdict_zerocopy", "astuple_zerocopy"):
        with pytest.raises(TypeError) as info:
            getattr(ZeroCopy, method)(thing)
        assert thing.__name__ in str(info.value)


@pytest.mark.parametrize(
    "thing",
    [3, None, "text", NotADataclass(), object(), [1], {"a": 1}],
    ids=lambda thing: type(thing).__name__,  # the same on every xdist worker, unlike repr
)
def test_non_dataclass_instances(thing):
    # DESIGN: "Non-dataclasses get a `TypeError` with a clear message, whether the method or the
    # function form is used."
    for fn in (metakit.asdict_zerocopy, metakit.astuple_zerocopy):
        with pytest.raises(TypeError, match="not a dataclass"):
            fn(thing)
    with pytest.raises(TypeError):
        metakit.replace(thing)
    with pytest.raises(TypeError, match="not a dataclass"):
        metakit.generated_source(thing)
    if isinstance(thing, ZeroCopy):
        for method in ("asdict_zerocopy", "astuple_zerocopy", "__replace__"):
            with pytest.raises(TypeError, match="NotADataclass is not a dataclass"):
                getattr(thing, method)()


@pytest.mark.parametrize("name", ["\ufb01", "\u210c", "A\u030a", "\u2167", "__debug__", "ﬀ_x"])
def test_names_that_the_parser_reads_otherwise_are_refused_or_right(name):
    # README: "source that holds only field names (checked as identifiers, in the NFKC form the
    # parser reads, and not `__debug__`)" and Limits: "A field name that is not an identifier ...
    # raises `TypeError` when the class is created." Never a silent wrong result.
    ns = {"__annotations__": {name: int, "ok": int}, name: 1, "ok": 2, "__module__": __name__}
    try:
        cls = dataclass(type("Nfkc", (ZeroCopy,), ns))
    except TypeError as error:
        message = str(error)
    else:
        obj = bare(cls)
        assert_same_objects(obj.asdict_zerocopy(), reference(obj))
        assert_same_objects(obj.astuple_zerocopy(), reference_tuple(obj))
        return
    assert repr(name) in message or name in message, message


@pytest.mark.parametrize("name", ["not valid", "1abc", "a-b", "", "a.b", "class", "None", "lambda"])
def test_non_identifier_names_raise_type_error_at_creation(name):
    # README Limits: "A field name that is not an identifier (possible only by editing
    # `__annotations__` by hand) raises `TypeError` when the class is created."
    ns = {"__annotations__": {name: int}, name: 1, "__module__": __name__}
    with pytest.raises(TypeError) as info:
        dataclass(type("BadName", (ZeroCopy,), ns))
    assert repr(name) in str(info.value) or "identifier" in str(info.value) or "keyword" in str(info.value)


@pytest.mark.parametrize("name", ["class", "def", "None", "True", "import", "not valid", "1x"])
def test_make_dataclass_refusals_are_unchanged(name):
    # README: "metakit changes none of its behaviour": make_dataclass refuses these names the same way
    plain = outcome(make_dataclass, "K", [name])
    ours = outcome(make_dataclass, "K", [name], bases=(ZeroCopy,))
    assert plain[0] == ours[0] == "err"
    assert plain[1:] == ours[1:]


@pytest.mark.parametrize("convert", ["method", "function"])
def test_unknown_skip_fields_name_raises_value_error_naming_it_and_the_class(convert):
    obj = three()
    asdict = obj.asdict_zerocopy if convert == "method" else lambda skip: metakit.asdict_zerocopy(obj, skip)
    with pytest.raises(ValueError, match=r"'slot_mappin'.*Three"):
        asdict(["a", "slot_mappin"])
    with pytest.raises(ValueError, match="'astuple_zerocopy'"):
        asdict({"astuple_zerocopy"})  # an attribute, not a field


def test_unknown_skip_fields_name_is_an_error_even_after_the_fields_are_gone():
    obj = three()
    with pytest.raises(ValueError, match="'d'"):
        obj.asdict_zerocopy(["a", "b", "c", "wrapper", "d"])


@pytest.mark.parametrize("text", ["b", "", "abc"])
@pytest.mark.parametrize("convert", ["method", "function"])
def test_skip_fields_given_as_a_str_raises_type_error(text, convert):
    obj = three()
    asdict = obj.asdict_zerocopy if convert == "method" else lambda skip: metakit.asdict_zerocopy(obj, skip)
    with pytest.raises(TypeError, match="skip_fields"):
        asdict(text)


def test_str_subclass_is_refused_even_when_each_of_its_letters_is_a_field():
    # Regression: only ``type(skip_fields) is str`` was checked up front, so
    # a str subclass whose letters were all fields dropped them silently.
    class Name(str):
        pass

    obj = three()
    with pytest.raises(TypeError, match=r"skip_fields must be an iterable of field names, not the .*Name 'ab'"):
        obj.asdict_zerocopy(Name("ab"))


def test_method_on_a_zero_copy_class_that_is_not_a_dataclass_raises_type_error():
    with pytest.raises(TypeError, match="NotADataclass is not a dataclass"):
        NotADataclass().asdict_zerocopy()
    with pytest.raises(TypeError, match="NotADataclass is not a dataclass"):
        NotADataclass().astuple_zerocopy()


@pytest.mark.parametrize("value", [3, "text", object(), NotADataclass(), [1, 2]], ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("function", [metakit.asdict_zerocopy, metakit.astuple_zerocopy])
def test_function_forms_on_a_non_dataclass_raise_type_error(value, function):
    with pytest.raises(TypeError, match=f"{function.__name__}.*{type(value).__qualname__} is not a dataclass"):
        function(value)


@pytest.mark.parametrize("cls", [Three, PlainPoint, NotADataclass])
@pytest.mark.parametrize("function", [metakit.asdict_zerocopy, metakit.astuple_zerocopy])
def test_function_forms_on_a_class_raise_type_error(cls, function):
    with pytest.raises(TypeError, match=f"got the class {cls.__qualname__} itself"):
        function(cls)


def test_base_method_called_with_a_class_raises_type_error():
    with pytest.raises(TypeError, match="got the class Three itself"):
        ZeroCopy.asdict_zerocopy(Three)


@pytest.mark.parametrize(
    "value",
    [NotADataclass, int, 3, PlainPoint(), three()],
    ids=["non-dataclass class", "int class", "int", "plain dataclass instance", "zero-copy instance"],
)
def test_generated_source_of_anything_but_a_dataclass_raises_type_error(value):
    shown = value if isinstance(value, type) else type(value)
    with pytest.raises(TypeError, match=rf"\b{shown.__qualname__}\b"):
        metakit.generated_source(value)
