"""The generated code: its source as text, and that the code copied from
templates is what ``compile`` makes, by line.  Where that source is registered
(``linecache``, ``inspect``, tracebacks) is in ``test_lifetime_threads.py``."""

import io
import linecache
import re
import sys
import tokenize
import unicodedata
from dataclasses import dataclass, field, make_dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metakit
from metakit import OMIT, ZeroCopy, _template
from metakit._fields import Layout
from metakit._source import methods_source, writable_name
from metakit._template import Template, compile_methods, layout_of_shape, lines_only, same_code, shape

ASDICT_HEADER = "def asdict_zerocopy(self, skip_fields=None):"
ASTUPLE_HEADER = "def astuple_zerocopy(self):"
REPLACE_HEADER = "def __replace__(self, /, **changes):"


@dataclass
class Step(ZeroCopy):
    is_prompt: bool
    slot_mapping: list[int]
    wrapper: object = field(default=None, metadata=OMIT)
    seq_len: int = 0


def metakit_entries() -> set[str]:
    return {name for name in linecache.cache.copy() if name.startswith("<metakit")}


# --- the source, as text ------------------------------------------------------


def test_generated_source_is_a_dict_display_of_the_fields_in_order():
    source = metakit.generated_source(Step)
    lines = source.splitlines()
    assert lines[0] == f"# metakit: the generated methods of {__name__}.Step"
    assert lines[1] == ASDICT_HEADER
    display = lines[lines.index("    d = {") + 1 : lines.index("    }")]
    assert display == [
        "        'is_prompt': self.is_prompt,",
        "        'slot_mapping': self.slot_mapping,",
        "        'seq_len': self.seq_len,",
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


def test_generated_source_never_holds_a_default_or_a_user_object():
    sentinel = object()

    @dataclass
    class Defaults(ZeroCopy):
        text: str = "DEFAULT-MARKER"
        number: int = 987654321
        other: object = sentinel
        listed: list[str] = field(default_factory=lambda: ["FACTORY-MARKER"])

    source = metakit.generated_source(Defaults)
    for marker in ("DEFAULT-MARKER", "987654321", "FACTORY-MARKER", "object at"):
        assert marker not in source
    for method in (Defaults.asdict_zerocopy, Defaults.astuple_zerocopy):
        consts = method.__code__.co_consts
        assert all(const is None or type(const) in (str, tuple) for const in consts), consts
        assert "DEFAULT-MARKER" not in consts
        assert sentinel not in method.__globals__.values()
        assert Defaults not in method.__globals__.values()


def test_generated_source_writes_field_names_as_repr_literals():
    Accented = make_dataclass("Accented", ["café", "名前"], bases=(ZeroCopy,))
    source = metakit.generated_source(Accented)
    assert f"{'café'!r}: self.café," in source
    assert f"{'名前'!r}: self.名前," in source
    obj = Accented(1, 2)
    assert obj.asdict_zerocopy() == {"café": 1, "名前": 2}


# Names of every kind a writable name can be: ASCII, accented, other scripts,
# and (where this Python's Unicode takes them, 3.13 on) zero-width joiners,
# which are not printable, so that their ``repr`` escapes them.
_ODD_NAMES = ["plain", "café", "名前", "_", "__dunder__", "Ω", "a\u200cb", "x\u200d", "self", "changes", "d"]


def string_literals(source: str) -> list[str]:
    """The text of every string literal token in *source* (comments and names left out)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [token.string for token in tokens if token.type == tokenize.STRING]


@given(
    names=st.lists(st.sampled_from([n for n in _ODD_NAMES if n.isidentifier()]), min_size=0, max_size=6, unique=True),
    roles=st.lists(st.sampled_from("crq"), min_size=6, max_size=6),
    by_position=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_every_string_literal_in_the_source_is_the_repr_of_a_field_name(names, roles, by_position):
    # DESIGN: the source holds only field names and string literals made
    # with ``repr``: metakit writes the quotes itself where that is the same.
    roles_text = "".join(roles[: len(names)])
    included = tuple(name for name, role in zip(names, roles_text, strict=True) if role != "q")
    layout = Layout(tuple(names), roles_text, included, True, by_position and "q" not in roles_text)
    source = methods_source(layout, "Odd")
    literals = string_literals(source)
    assert set(literals) <= {repr(name) for name in names}
    assert all(literal in source for literal in map(repr, included))  # each returned name is a key
    compile(source, "<test>", "exec")  # and the source is valid


def test_a_name_that_is_not_printable_is_escaped_by_repr_where_it_is_quoted():
    # As text, on every version (a zero-width joiner is in names from 3.13 on).
    joined = "a\u200cb"
    layout = Layout((joined, "plain"), "cc", (joined, "plain"), True, True)
    source = methods_source(layout, "Joined")
    assert set(string_literals(source)) == {repr(joined), "'plain'"}
    assert f"{joined!r}: self.{joined}," in source  # the literal escaped, the attribute as it is
    assert f"changes.pop({joined!r}) if {joined!r} in changes else self.{joined}," in source
    if joined.isidentifier():
        Joined = make_dataclass("Joined", [joined, "plain"], bases=(ZeroCopy,))
        assert metakit.generated_source(Joined).endswith(source.split("\n", 1)[1])
        assert Joined(1, 2).asdict_zerocopy() == {joined: 1, "plain": 2}


def test_generated_source_of_an_empty_dataclass():
    @dataclass
    class Empty(ZeroCopy):
        pass

    source = metakit.generated_source(Empty)
    assert "    d = {\n    }" in source
    assert Empty().asdict_zerocopy() == {}
    assert Empty().astuple_zerocopy() == ()


def test_undecorated_subclass_shares_its_dataclass_source():
    class Sub(Step):
        pass

    assert metakit.generated_source(Sub) == metakit.generated_source(Step)


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


# Names that the generated code itself reads: builtins and metakit's helpers.
NAMES_THE_CODE_READS = sorted(Template("Pcrq").reads | Template("Kcrq").reads)


def test_the_names_the_code_reads_are_its_builtins_and_helpers():
    assert set(NAMES_THE_CODE_READS) == {
        "type", "isinstance", "str", "bytes", "KeyError", "TypeError", "__class__", "pop", "_NAME_COLLECTIONS",
        "_skip_fields_text", "_check_skipped", "_skip_fields_failed", "_replace_by_dataclasses",
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


# --- names that cannot be written into source -----------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("not-ident", "it is not a Python identifier"),
        ("1x", "it is not a Python identifier"),
        ("a b", "it is not a Python identifier"),
        ("x.y", "it is not a Python identifier"),
        ("a;b", "it is not a Python identifier"),
        ("class", "it is a Python keyword"),
        ("None", "it is a Python keyword"),
        ("__debug__", "Python reserves __debug__, which cannot be assigned or passed by keyword"),
    ],
)
def test_a_field_name_that_cannot_be_written_raises_type_error_at_class_creation_saying_why(name, reason):
    # ``make_dataclass`` refuses such names; a hand-written ``__annotations__``
    # does not.  ``init=False`` keeps the name out of ``__init__``'s signature.
    namespace = {"__annotations__": {name: int}, name: field(default=0, init=False, repr=False, compare=False)}
    cls = type("BadName", (ZeroCopy,), namespace)
    before = metakit_entries()
    with pytest.raises(TypeError) as error:
        dataclass(cls)
    assert str(error.value) == (
        f"{__name__}.BadName has a field named {name!r}, which cannot be written into source: {reason}"
    )
    assert metakit_entries() <= before


@pytest.mark.parametrize(
    "name", ["\ufb01", "e\u0301", "\u2160"], ids=["fi ligature", "decomposed e-acute", "roman one"]
)
def test_name_that_is_not_in_nfkc_form_is_rejected(name):
    # The parser reads identifiers in NFKC form: ``self.ﬁ`` would read ``self.fi``.
    assert name.isidentifier()
    read = unicodedata.normalize("NFKC", name)
    with pytest.raises(TypeError, match=re.escape(f"in NFKC form, so it would read {read!r}")):
        make_dataclass("Ligature", [name], bases=(ZeroCopy,))


def test_writable_name_accepts_identifiers_in_nfkc_form():
    for name in ("a", "_x", "self", "café", "名前", "x" * 300):
        assert writable_name(name)
    for name in ("", "None", "class", "1a", "a-b", "\ufb01", 3, None):
        assert not writable_name(name)


# --- templates specialised with CodeType.replace equal a real compile -------------

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


# Any name a field may take.  Names that ``ZeroCopy`` or ``object`` already
# define would give the field that attribute as its default, and dunder names
# (``__weakref__``, ...) belong to Python, with or without metakit.
identifier = st.text(
    alphabet=st.characters(categories=["Lu", "Ll", "Lo", "Nd", "Pc"], max_codepoint=0x9FFF), min_size=1, max_size=80
).filter(
    lambda name: (
        writable_name(name) and not hasattr(ZeroCopy, name) and not (name.startswith("__") and name.endswith("__"))
    )
)


@settings(max_examples=60, deadline=None)
@given(names=st.lists(identifier, max_size=20, unique=True))
def test_installed_code_is_its_compiled_source_for_any_names(names):
    cls = made_twice(names, "Random")
    assert_installed_code_is_its_compiled_source(cls)
    obj = cls(*names)
    assert obj.asdict_zerocopy() == dict(zip(names, names, strict=True))


def test_a_str_subclass_is_checked_as_the_text_it_holds():
    class Name(str):
        __slots__ = ()

        def isidentifier(self) -> bool:  # not asked: the text itself is checked
            return True

    assert writable_name(Name("sub"))
    assert not writable_name(Name("a-b"))
