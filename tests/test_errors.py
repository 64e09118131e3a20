"""DESIGN "Semantics": the errors, with their messages.

A ``skip_fields`` name that is not a field is a ``ValueError`` naming it and the class; a
``skip_fields`` that is not an iterable of ``str`` is a ``TypeError`` naming ``skip_fields``; a
non-dataclass, or a class where an instance belongs, is a ``TypeError`` from the method and the
function form alike; field names that cannot be written are refused when the class is made.
"""

import dataclasses
import gc
import linecache
import re
import sys
import traceback
import types
import unicodedata
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


def metakit_entries() -> set[str]:
    return {name for name in linecache.cache.copy() if name.startswith("<metakit")}


# --- generated_source of what is not a dataclass -------------------------------------

GENERATED_SOURCE_REFUSES = {
    "int": (3, r"^expected a dataclass, but got 3, an instance of int, which is not a dataclass$"),
    "none": (None, r"got None, an instance of NoneType, which is not a dataclass$"),
    "str": ("Rec", r"got 'Rec', an instance of str, which is not a dataclass$"),
    "function": (len, r"an instance of builtin_function_or_method, which is not a dataclass$"),
    "module": (dataclasses, r"an instance of module, which is not a dataclass$"),
    "generic alias": (Box[int], r"which is not a dataclass$"),
    "plain class": (PlainNotDC, r"^PlainNotDC is not a dataclass$"),
    "int class": (int, r"^int is not a dataclass$"),
    "dict class": (dict, r"^dict is not a dataclass$"),
    "type": (type, r"^type is not a dataclass$"),
    "ZeroCopy": (ZeroCopy, r"^ZeroCopy is not a dataclass$"),
    "zero-copy non-dataclass": (NotDC, r"^NotDC is not a dataclass$"),
    "plain dataclass instance": (PlainPoint(), r"got an instance of PlainPoint; pass its class, PlainPoint$"),
    "zero-copy instance": (three(), r"got an instance of Three; pass its class, Three$"),
}


@pytest.mark.parametrize(("value", "message"), GENERATED_SOURCE_REFUSES.values(), ids=GENERATED_SOURCE_REFUSES.keys())
def test_generated_source_of_anything_but_a_dataclass_raises_type_error_saying_what_it_is(value, message):
    # DESIGN: non-dataclasses get a TypeError with a clear message; an instance is not a class
    with pytest.raises(TypeError, match=message):
        metakit.generated_source(value)


# --- skip_fields that is not an iterable of str: SkipFieldsError --------------------


class NotIterable:
    pass


class IterReturnsNonIterator:
    def __iter__(self):
        return 5


class StrSub_skip_errors(str):
    pass


class BytesSub(bytes):
    pass


# Each maker takes the name of a field of the object, for the kinds that hold a valid name first.
BAD_SKIP_FIELDS = {
    "int": lambda f: 5,
    "bool true": lambda f: True,
    "bool false": lambda f: False,
    "float": lambda f: 1.5,
    "object": lambda f: object(),
    "ellipsis": lambda f: ...,
    "not iterable": lambda f: NotIterable(),
    "__iter__ returns int": lambda f: IterReturnsNonIterator(),
    "str": lambda f: "x",
    "str of a field": str,
    "empty str": lambda f: "",
    "str subclass": StrSub,
    "other str subclass": lambda f: StrSub_skip_errors("a"),
    "bytes": lambda f: b"ab",
    "empty bytes": lambda f: b"",
    "bytes subclass": lambda f: BytesSub(b"ab"),
    "bytearray": lambda f: bytearray(b"ab"),
    "memoryview": lambda f: memoryview(b"ab"),
    "range": lambda f: range(3),
    "list of list": lambda f: [[f]],
    "list of tuple": lambda f: [(f,)],
    "list of int": lambda f: [1],
    "int after a field": lambda f: [f, 1],
    "list of None": lambda f: [None],
    "None after a field": lambda f: [f, None],
    "list of bytes": lambda f: [f.encode()],
    "list of bytearray": lambda f: [bytearray(f.encode())],
    "tuple of set": lambda f: ({f},),
    "set of int": lambda f: {1, 2},
    "frozenset of bytes": lambda f: frozenset({b"x"}),
    "dict values": lambda f: {"k": 1}.values(),
    "dict with int keys": lambda f: {1: f},
    "generator of ints": lambda f: (i for i in [1, 2]),
    "generator, a field then an int": lambda f: _gen(f, 2),
    "iterator of int": lambda f: iter([3]),
}

SKIP_FIELDS_OWNERS = [Rec(1), Meta(), PlainMeta(), AttnMeta(1, 2, 3, [4]), *OBJS]


@pytest.mark.parametrize("make", BAD_SKIP_FIELDS.values(), ids=BAD_SKIP_FIELDS.keys())
def test_bad_skip_fields_get_skip_fields_error(make):
    # DESIGN: "`skip_fields` that is not an iterable of `str` gets a `TypeError` that names
    # `skip_fields` (`5`, `True`, `b"ab"`, an item that is a list or an int); a `str` or `bytes` is
    # refused." README: "(or a subclass of either, which would be read as a set of letters)" and
    # "a bad `skip_fields` gets `metakit.SkipFieldsError`, a subclass of `TypeError`"
    for obj in SKIP_FIELDS_OWNERS:
        first = dataclasses.fields(obj)[0].name
        for form, call in calls(obj):
            with pytest.raises(SkipFieldsError) as info:
                call(make(first))
            assert isinstance(info.value, TypeError)
            assert "skip_fields" in str(info.value), (type(obj).__name__, form, str(info.value))


@dataclass
class Two(ZeroCopy):
    a: int = 1
    b: int = 2


@pytest.mark.parametrize(
    ("skip", "message"),
    [
        (5, r"skip_fields must be an iterable of field names, not int 5"),
        (True, r"skip_fields must be an iterable of field names, not bool True"),
        ([["a"]], r"skip_fields must hold field names \(str\), not list \['a'\]"),
        ([1], r"skip_fields must hold field names \(str\), not int 1"),
        (b"a", r"skip_fields must be an iterable of field names, not the bytes b'a'"),
        (bytearray(b"a"), r"skip_fields must hold field names \(str\), not int 97"),
        ("ab", r"not the str 'ab'; write skip_fields=\{'ab'\}"),
        ({"a": 1}.items(), r"skip_fields must hold field names \(str\), not tuple \('a', 1\)"),
    ],
    ids=["int", "bool", "list item", "int item", "bytes", "bytearray", "str", "items view"],
)
def test_bad_skip_fields_get_a_type_error_that_says_what_it_got(skip, message):
    for call in (Two().asdict_zerocopy, lambda s: metakit.asdict_zerocopy(Two(), s)):
        with pytest.raises(TypeError, match=message):
            call(skip)


@pytest.mark.parametrize("order", ["name first", "item first"])
@pytest.mark.parametrize("kind", [list, tuple, set, frozenset, dict.fromkeys], ids=lambda kind: kind.__name__)
@pytest.mark.parametrize("readable", [True, False], ids=["fields read", "a field unreadable"])
def test_an_item_that_is_no_name_is_the_fault_reported_beside_a_name_that_is_no_field(order, kind, readable):
    # (An outside tester: whichever came first won, so a set's order, which moves with the hash seed,
    # decided between ValueError and SkipFieldsError.) A collection is read again for such an item; an
    # iterator, which cannot be, reports the first fault it met.
    items = ["zz", 1] if order == "name first" else [1, "zz"]
    obj = Two()
    if not readable:
        object.__delattr__(obj, "b")
    for call in (obj.asdict_zerocopy, lambda s: metakit.asdict_zerocopy(obj, s)):
        with pytest.raises(SkipFieldsError, match=r"skip_fields must hold field names \(str\), not int 1"):
            call(kind(items))
    with pytest.raises(ValueError if order == "name first" else SkipFieldsError):
        obj.asdict_zerocopy(iter(items))


def test_a_collection_that_cannot_be_read_again_still_gets_the_value_error_of_its_unknown_name():
    class Once:
        read = 0

        def __iter__(self):
            self.read += 1
            if self.read > 1:
                raise RuntimeError("read twice")
            return iter(["zz", "a"])

    with pytest.raises(ValueError, match="skip_fields names 'zz', which is not a field of Two"):
        Two().asdict_zerocopy(Once())


class Name(str):
    pass


@pytest.mark.parametrize("text", ["b", "", "abc"])
@pytest.mark.parametrize("kind", [str, Name], ids=["str", "str subclass"])
@pytest.mark.parametrize("convert", ["method", "function"])
def test_a_str_is_refused_even_when_it_or_each_of_its_letters_is_a_field(text, kind, convert):
    # DESIGN: "a str or bytes is refused" even when every letter is a field name (Three's fields
    # are a, b and c).  Regression: only ``type(skip_fields) is str`` was checked up front, so a
    # str subclass whose letters were all fields dropped them silently.
    obj = three()
    asdict = obj.asdict_zerocopy if convert == "method" else lambda skip: metakit.asdict_zerocopy(obj, skip)
    message = rf"^skip_fields must be an iterable of field names, not the {kind.__name__} {text!r}; "
    with pytest.raises(SkipFieldsError, match=message):
        asdict(kind(text))


class Unhashable(str):
    __hash__ = None  # type: ignore[assignment]


class OtherHash(str):
    def __hash__(self) -> int:
        return 7


class HashRaises(str):
    def __hash__(self) -> int:
        raise KeyError(self)


@pytest.mark.parametrize("kind", [Unhashable, OtherHash, HashRaises])
@pytest.mark.parametrize("convert", ["method", "function"])
def test_a_str_that_a_dict_cannot_find_by_is_refused_not_left_in(kind, convert):
    # It equals the field's name, but ``del d[name]`` cannot find the key: the field stayed in the
    # dict, with no error.
    obj = Two()
    asdict = obj.asdict_zerocopy if convert == "method" else lambda skip: metakit.asdict_zerocopy(obj, skip)
    message = rf"^skip_fields must hold field names, not {kind.__name__} 'a', a str whose hash is not its text's$"
    with pytest.raises(SkipFieldsError, match=message):
        asdict([kind("a")])
    assert asdict([Name("a")]) == {"b": 2}  # a subclass that hashes as its text is a name like any


def test_an_iterable_that_raises_keeps_its_own_error():
    # DESIGN: "Each must get the documented error ... never a silent wrong result": an iterable
    # that fails half-way must not leave a half-skipped dict behind, and its own error (a TypeError
    # too) is never replaced by a SkipFieldsError.
    def gen(exc):
        yield "is_prompt"
        raise exc

    for exc in (TypeError("the iterable's own problem"), RuntimeError("boom"), KeyError("k"), ValueError("v")):
        for _form, call in _forms(Meta()):
            with pytest.raises(type(exc)) as info:
                call(gen(exc))
            assert info.value is exc


class LoadsItsNames:
    """An iterable of names whose ``__iter__`` has a bug: it raises a ``TypeError`` of its own."""

    def __iter__(self):
        return iter(sorted(self.load()))

    def load(self):
        return None  # sorted(None): "'NoneType' object is not iterable"


def test_a_type_error_raised_inside_an_iterables_own_iter_is_its_own():
    # It was a SkipFieldsError ("must be an iterable of field names"), with the user's error hidden
    # from the traceback; a generator's own TypeError was not (an outside tester).  An __iter__ that
    # returns no iterator is no iterable: that one is a SkipFieldsError (test_bad_skip_fields_...).
    for obj in SKIP_FIELDS_OWNERS:
        for _form, call in calls(obj):
            with pytest.raises(TypeError, match=r"^'NoneType' object is not iterable$") as info:
                call(LoadsItsNames())
            assert type(info.value) is TypeError
            assert info.value.__traceback__ is not None
            assert "__iter__" in [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]


# --- a name that is not a field: ValueError naming it and the class ------------------

UNKNOWN_NAMES = [
    "nope",
    "slot_mappin",
    "X",
    "",
    "a b",
    "cv",  # ClassVar and InitVar pseudo-fields are not fields
    "iv",
    "post",  # nor are attributes set in __post_init__
    "extra",
    "__init__",
    "__dict__",
    "asdict_zerocopy",  # nor methods
    "astuple_zerocopy",
]
UNKNOWN_NAME_OWNERS = [Rec(1), three(), Meta(), PlainMeta(), PlainRec(1), *OBJS]


@pytest.mark.parametrize("name", UNKNOWN_NAMES, ids=repr)
def test_unknown_name_value_error(name):
    # DESIGN: "A name that is not a field of the class raises ValueError naming it and the class."
    for obj in UNKNOWN_NAME_OWNERS:
        first = dataclasses.fields(obj)[0].name
        for form, call in calls(obj):
            for skip in ({name}, [first, name]):  # alone, and after a field
                with pytest.raises(ValueError, match="which is not a field of") as info:
                    call(skip)
                message = str(info.value)
                assert repr(name) in message, (form, message)
                assert type(obj).__name__ in message, (form, message)
                assert not isinstance(info.value, TypeError)


UNKNOWN_IN = {
    "list": lambda: ["slot_mappin"],
    "tuple": lambda: ("is_prompt", "nope"),
    "generator": lambda: (n for n in ["nope"]),
    "generator after a field": lambda: _gen("is_prompt", "nope"),
    "str subclass": lambda: [StrSub("nope")],
    "post-init attribute": lambda: ["attn_bias"],
    "method name": lambda: ["asdict_zerocopy"],
}


@pytest.mark.parametrize("make", UNKNOWN_IN.values(), ids=UNKNOWN_IN.keys())
def test_unknown_name_is_a_value_error_naming_it_and_the_class(make):
    # DESIGN: "A name that is not a field of the class raises `ValueError` naming it and the class."
    bad = next(n for n in make() if n not in {"is_prompt", "slot_mapping", "wrapper"})
    for obj in (Meta(), PlainMeta()):
        for _form, call in calls(obj):
            with pytest.raises(ValueError, match="which is not a field of") as info:
                call(make())
            assert repr(str(bad)) in str(info.value), str(info.value)
            assert type(obj).__name__ in str(info.value), str(info.value)


# --- what is not a dataclass, or a class where an instance belongs: TypeError -----------


class NotADataclass(ZeroCopy):
    pass


@dataclass
class _Parent(ZeroCopy):
    x: int = 0


class UndecoratedChild(_Parent):
    pass


@pytest.mark.parametrize(
    "thing",
    [*NON_DATACLASS_OBJECTS.values(), NotADataclass(), {"a": 1}, Box[int]],
    ids=[*NON_DATACLASS_OBJECTS, "NotADataclass", "dict", "generic alias"],  # the same on every xdist worker
)
def test_non_dataclass_instances(thing):
    # DESIGN: "Non-dataclasses get a `TypeError` with a clear message, whether the method or the
    # function form is used." README API: "on a class that is not a dataclass they raise TypeError"
    shown = re.escape(type(thing).__qualname__)
    for fn in (metakit.asdict_zerocopy, metakit.astuple_zerocopy, ZeroCopy.asdict_zerocopy, ZeroCopy.astuple_zerocopy):
        with pytest.raises(TypeError, match=rf"^{fn.__name__}\(\) takes a dataclass instance, but {shown} is not"):
            fn(thing)
    with pytest.raises(TypeError, match="not a dataclass") as info:
        metakit.asdict_zerocopy(thing, skip_fields={"a"})
    assert not isinstance(info.value, SkipFieldsError)
    with pytest.raises(TypeError):
        metakit.replace(thing)
    with pytest.raises(TypeError, match="not a dataclass"):
        metakit.generated_source(thing)
    if isinstance(thing, ZeroCopy):
        for method in ("asdict_zerocopy", "astuple_zerocopy", "__replace__"):
            with pytest.raises(TypeError, match=f"{shown} is not a dataclass"):
                getattr(thing, method)()
        with pytest.raises(TypeError, match=f"{shown} is not a dataclass"):
            thing.asdict_zerocopy({"x"})


@pytest.mark.parametrize(
    "thing",
    [
        Meta,
        PlainMeta,
        Three,
        PlainPoint,
        AttnMeta,
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
    for fn in (metakit.asdict_zerocopy, metakit.astuple_zerocopy, ZeroCopy.asdict_zerocopy, ZeroCopy.astuple_zerocopy):
        expected = rf"^{fn.__name__}\(\) takes a dataclass instance, but got the class {thing.__qualname__} itself$"
        with pytest.raises(TypeError, match=expected):
            fn(thing)
    with pytest.raises(TypeError):
        metakit.asdict_zerocopy(thing, skip_fields={"a"})
    with pytest.raises(TypeError):
        metakit.replace(thing)
    with pytest.raises(TypeError, match="assert_zerocopy"):
        metakit.testing.assert_zerocopy(thing)


def test_a_dataclass_subclassing_genericalias_is_refused_by_the_function_forms_as_dataclasses_refuses_it():
    @dataclass
    class Alias(types.GenericAlias):
        origin: type
        args: type

    alias = Alias(list, int)
    with pytest.raises(TypeError, match="must be called with a dataclass type or instance"):
        dataclasses.asdict(alias)
    with pytest.raises(TypeError, match=r"asdict_zerocopy\(\) takes a dataclass instance"):
        metakit.asdict_zerocopy(alias)
    with pytest.raises(TypeError, match=r"astuple_zerocopy\(\) takes a dataclass instance"):
        metakit.astuple_zerocopy(alias)
    with pytest.raises(Exception) as theirs:  # noqa: PT011  # what this Python's dataclasses.replace raises
        dataclasses.replace(alias)
    with pytest.raises(theirs.type) as ours:
        metakit.replace(alias)
    assert str(ours.value) == str(theirs.value)


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


def test_unknown_skip_fields_name_is_an_error_even_after_the_fields_are_gone():
    obj = three()
    with pytest.raises(ValueError, match="'d'"):
        obj.asdict_zerocopy(["a", "b", "c", "wrapper", "d"])


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


# --- field names that cannot be written into source: refused at class creation ---------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("not-ident", "it is not a Python identifier"),
        ("a-b", "it is not a Python identifier"),
        ("1x", "it is not a Python identifier"),
        ("1abc", "it is not a Python identifier"),
        ("a b", "it is not a Python identifier"),
        ("not valid", "it is not a Python identifier"),
        ("x.y", "it is not a Python identifier"),
        ("a.b", "it is not a Python identifier"),
        ("a;b", "it is not a Python identifier"),
        ("", "it is not a Python identifier"),
        ("class", "it is a Python keyword"),
        ("None", "it is a Python keyword"),
        ("lambda", "it is a Python keyword"),
        ("__debug__", "Python reserves __debug__, which cannot be assigned or passed by keyword"),
    ],
)
def test_a_field_name_that_cannot_be_written_raises_type_error_at_class_creation_saying_why(name, reason):
    # README Limits: "A field name that is not an identifier (possible only by editing
    # `__annotations__` by hand) raises `TypeError` when the class is created."  ``make_dataclass``
    # refuses such names; a hand-written ``__annotations__`` does not.  ``init=False`` keeps the
    # name out of ``__init__``'s signature.
    namespace = {"__annotations__": {name: int}, name: field(default=0, init=False, repr=False, compare=False)}
    cls = type("BadName", (ZeroCopy,), namespace)
    before = metakit_entries()
    with pytest.raises(TypeError) as error:
        dataclass(cls)
    assert str(error.value) == (
        f"{__name__}.BadName has a field named {name!r}, which cannot be written into source: {reason}"
    )
    assert metakit_entries() <= before  # nothing registered for the refused class


def test_a_fields_entry_named_none_is_refused_saying_so():
    # (An outside tester: a Field that was never given a name made the assignment fail deep inside, with
    # "sequence item 0: expected str instance"; ``unwritable`` returned the name found, here None.)
    class Hand(ZeroCopy):
        pass

    with pytest.raises(TypeError) as error:
        Hand.__dataclass_fields__ = {"a": field()}
    assert str(error.value) == (
        f"{Hand.__module__}.{Hand.__qualname__} has a field named None, which cannot be written into source: "
        "it is a NoneType, not a str"
    )


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


@pytest.mark.parametrize(
    "name", ["\ufb01", "e\u0301", "\u2160"], ids=["fi ligature", "decomposed e-acute", "roman one"]
)
def test_name_that_is_not_in_nfkc_form_is_rejected(name):
    # The parser reads identifiers in NFKC form: ``self.ﬁ`` would read ``self.fi``.
    assert name.isidentifier()
    read = unicodedata.normalize("NFKC", name)
    # Each is written with ascii(), so that two names that look the same show how they differ.
    with pytest.raises(TypeError, match=re.escape(f"in NFKC form, so it would read {read!a}, not {name!a}")):
        make_dataclass("Ligature", [name], bases=(ZeroCopy,))


@pytest.mark.parametrize("name", ["class", "def", "None", "True", "import", "not valid", "1x"])
def test_make_dataclass_refusals_are_unchanged(name):
    # README: "metakit changes none of its behaviour": make_dataclass refuses these names the same way
    plain = outcome(make_dataclass, "K", [name])
    ours = outcome(make_dataclass, "K", [name], bases=(ZeroCopy,))
    assert plain[0] == ours[0] == "err"
    assert plain[1:] == ours[1:]


# --- other errors are those of dataclasses and Python, unchanged ------------------------


def test_unexpected_class_keyword_is_a_typeerror_like_type():
    with pytest.raises(TypeError) as ours:
        type("X", (ZeroCopy,), {}, bogus=1)
    with pytest.raises(TypeError) as theirs:
        type("X", (), {}, bogus=1)
    assert str(ours.value) == str(theirs.value)


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
