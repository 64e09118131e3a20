"""Field names -> source text -> compiled methods, registered in ``linecache``.

This module knows nothing about classes.  It turns a tuple of field names into
the source of two functions, ``asdict_zerocopy`` and ``astuple_zerocopy``, and
into the functions themselves, and it keeps that source visible to
``inspect``, tracebacks and debuggers for exactly as long as the functions live.

Compiling source costs a third of what creating the dataclass it serves
costs.  So the source is compiled once per *number* of fields, with
placeholder names, and each list of names gets a copy of that code made by
``CodeType.replace`` with its own names, constants and position table.  The
copy is what ``compile`` gives for the real source, bytecode and positions
alike: each template is checked once against a real compile, and a template
that does not match is never used (its field count falls back to
``compile``).  So the source in ``linecache`` is always true to the code.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import linecache
import re
import sys
import threading
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from types import CodeType, FunctionType
from typing import Any, Final

ASDICT: Final = "asdict_zerocopy"
ASTUPLE: Final = "astuple_zerocopy"

_HAS_COLUMNS: Final = sys.version_info >= (3, 11)
"""Whether code objects have column positions and qualified names (3.11+)."""

_Position = tuple[int | None, int | None, int | None, int | None]
_Changes = dict[str, Any]
"""Keyword arguments to ``CodeType.replace``."""

if sys.version_info >= (3, 11):

    def _positions(code: CodeType) -> list[_Position]:
        return list(code.co_positions())

    def _named(code: CodeType, filename: str, qualname: str, changes: _Changes) -> CodeType:
        return code.replace(co_filename=filename, co_qualname=qualname, **changes)

else:

    def _positions(code: CodeType) -> list[_Position]:
        return []

    def _named(code: CodeType, filename: str, qualname: str, changes: _Changes) -> CodeType:
        return code.replace(co_filename=filename, **changes)


# --- runtime support called by generated code ------------------------------
# Generated ``asdict_zerocopy`` methods delete skipped names from the finished
# dict: cheaper than building a second one.  A name that is missing from the
# dict costs nothing until it turns out to be missing; only then do these
# helpers tell an omitted field or a repeated name from a mistake.


def _skip_fields_str(skip_fields: str) -> TypeError:
    return TypeError(
        f"skip_fields must be an iterable of field names, not the str {skip_fields!r}; "
        f"write skip_fields={{{skip_fields!r}}}"
    )


def _check_skipped(obj: object, skip_fields: object, name: object) -> None:
    """Accept *name*, missing from *obj*'s dict, if it is a field; raise if not."""
    if isinstance(skip_fields, str):  # a str subclass got past the generated check
        raise _skip_fields_str(skip_fields) from None
    for f in fields(obj):  # type: ignore[arg-type]  # obj is a dataclass instance here
        if f.name == name:
            return
    raise ValueError(f"skip_fields names {name!r}, which is not a field of {type(obj).__qualname__}") from None


# Every generated function shares these globals: generated code refers to
# nothing else, so no class and no user object can be reached from them.
# Sharing them also marks a function as generated (see ``is_generated``).
_GLOBALS: Final[dict[str, Any]] = {
    "__builtins__": builtins,
    "_skip_fields_str": _skip_fields_str,
    "_check_skipped": _check_skipped,
}


def is_generated(value: object) -> bool:
    """Whether *value* is a function that this module generated."""
    return getattr(value, "__globals__", None) is _GLOBALS


# --- source ----------------------------------------------------------------


def writable_name(name: object) -> bool:
    """Whether *name* may be written into source as an attribute name.

    Only such names are written into generated source; the rest of it is
    fixed text and the ``repr`` of those names.  The parser reads
    identifiers in NFKC form, so a name that is not in that form would
    name another attribute.
    """
    return (
        isinstance(name, str)
        and name.isidentifier()
        and not keyword.iskeyword(name)
        and (name.isascii() or unicodedata.normalize("NFKC", name) == name)
    )


def _unwritable(names: Sequence[object]) -> object | None:
    """The first of *names* that ``writable_name`` refuses, or ``None``."""
    try:
        # The usual names, ASCII identifiers that are not keywords, are
        # checked all at once, in C.
        if all(map(str.isidentifier, names)) and "".join(names).isascii() and _KEYWORDS.isdisjoint(names):  # type: ignore[arg-type]
            return None
    except TypeError:  # a name that is not a str
        pass
    return next((name for name in names if not writable_name(name)), None)


_KEYWORDS: Final = frozenset(keyword.kwlist)

# The generated source, line by line, around the lines of each field.
_ASDICT_HEAD: Final = (f"def {ASDICT}(self, skip_fields=None):\n", "    d = {\n")
_ASDICT_TAIL: Final = (
    "    }\n",
    "    if skip_fields is None:\n",
    "        return d\n",
    # ``type() is`` is the cheapest check; ``_check_skipped`` catches subclasses.
    "    if type(skip_fields) is str:\n",
    "        raise _skip_fields_str(skip_fields)\n",
    "    for name in skip_fields:\n",
    "        try:\n",
    "            del d[name]\n",
    "        except KeyError:\n",
    "            _check_skipped(self, skip_fields, name)\n",
    "    return d\n",
)
_ASTUPLE_HEAD: Final = ("\n", "\n", f"def {ASTUPLE}(self):\n", "    return (\n")
_ASTUPLE_TAIL: Final = ("    )\n",)


def _function_lines(names: Sequence[str]) -> list[str]:
    """The lines of both functions for fields *names*, each with its newline."""
    return [
        *_ASDICT_HEAD,
        *[f"        {name!r}: self.{name},\n" for name in names],
        *_ASDICT_TAIL,
        *_ASTUPLE_HEAD,
        *[f"        self.{name},\n" for name in names],
        *_ASTUPLE_TAIL,
    ]


def methods_source(names: Sequence[str], owner: str) -> str:
    """The source of both generated methods for fields *names* of class *owner*.

    The first line names the class; it is a comment, so the code does not
    depend on it.

    >>> print(methods_source(["is_prompt"], "engine.Step"))
    # metakit: the generated methods of engine.Step
    def asdict_zerocopy(self, skip_fields=None):
        d = {
            'is_prompt': self.is_prompt,
        }
        if skip_fields is None:
            return d
        if type(skip_fields) is str:
            raise _skip_fields_str(skip_fields)
        for name in skip_fields:
            try:
                del d[name]
            except KeyError:
                _check_skipped(self, skip_fields, name)
        return d
    <BLANKLINE>
    <BLANKLINE>
    def astuple_zerocopy(self):
        return (
            self.is_prompt,
        )
    <BLANKLINE>
    """
    return "".join([_header(owner), *_function_lines(names)])


def _header(owner: str) -> str:
    return f"# metakit: the generated methods of {owner}\n"


def _compile(source: str) -> dict[str, CodeType]:
    """Compile *source* for real: the slow path, and the reference for templates."""
    module = compile(source, _SHAPE_FILENAME, "exec")
    return {c.co_name: c for c in module.co_consts if isinstance(c, CodeType)}


# Code before a class gives it a file name and a qualified name.
_SHAPE_FILENAME: Final = "<metakit>"


# --- position tables (3.11+) -----------------------------------------------
# A code object's ``co_linetable`` maps runs of code units to (line, end line,
# column, end column), in the format of CPython's Objects/locations.md.  Only
# columns on a field's line depend on the field's name, so a template's table
# is written once in the long form, with holes where those columns go.


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 64:
        out.append(0x40 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _svarint(value: int) -> bytes:
    return _varint((-value << 1) | 1 if value < 0 else value << 1)


# A hole: (field index, column + 1 in the template, how many times the field's
# name occurs before that column on its line).  Its value for real names is
# ``column + 1 + before * growth``, where growth is how many bytes longer the
# field's name is than its placeholder.
_Hole = tuple[int, int, int]


def _position_table(code: CodeType, columns: dict[int, tuple[int, list[int]]]) -> tuple[list[bytes], list[_Hole]]:
    """*code*'s position table in the long form: fixed bytes around holes.

    *columns* maps a line number to the index of the field on that line and
    the columns at which its placeholder ends.  The result has one more
    piece of fixed bytes than it has holes.
    """
    positions = _positions(code)
    # The first byte of each entry has its top bit set, and its low three
    # bits hold the entry's length in code units, minus one.  Entries keep
    # their lengths, so that ``co_lines()`` gives the same ranges as before.
    lengths = [(b & 7) + 1 for b in code.co_linetable if b & 0x80]
    fixed = [bytearray()]
    holes: list[_Hole] = []
    line = code.co_firstlineno
    start = 0
    for length in lengths:
        first, last, col, end_col = positions[start]
        start += length
        header = 0x80 | (length - 1)
        if first is None:
            fixed[-1] += bytes([header | 15 << 3])
        elif col is None or end_col is None or last is None:
            fixed[-1] += bytes([header | 13 << 3]) + _svarint(first - line)
            line = first
        else:
            fixed[-1] += bytes([header | 14 << 3]) + _svarint(first - line) + _varint(last - first)
            for at_line, column in ((first, col), (last, end_col)):
                field, ends = columns.get(at_line, (0, []))
                before = sum(end <= column for end in ends)
                if before:
                    holes.append((field, column + 1, before))
                    fixed.append(bytearray())
                else:
                    fixed[-1] += _varint(column + 1)
            line = first
    return [bytes(piece) for piece in fixed], holes


class _Runs(dict[int, bytes]):
    """A field's run of a position table, by the byte length of the field's name.

    A run is the field's holes, each followed by the fixed bytes up to the
    next hole (or the next field's first hole): made on first use of a
    length, then looked up.
    """

    def __init__(self, holes: list[tuple[int, int]], pieces: list[bytes], placeholder: str) -> None:
        super().__init__()
        self.holes = holes  # (column + 1 in the template, occurrences of the name before it)
        self.pieces = pieces
        self.placeholder = len(placeholder)

    def __missing__(self, length: int) -> bytes:
        growth = length - self.placeholder
        parts: list[bytes] = []
        for (col, before), piece in zip(self.holes, self.pieces, strict=True):
            parts += (_varint(col + before * growth), piece)
        self[length] = run = b"".join(parts)
        return run


class _Table:
    """A template's position table, refilled for the lengths of the fields' names.

    The holes of one field sit together, on its lines, so the bytes from its
    first hole to the first hole of the next field depend on the length of
    that field's name alone: refilling a table is a lookup per field, all of
    it in C.
    """

    def __init__(self, fixed: list[bytes], holes: list[_Hole], placeholders: list[str]) -> None:
        self.head = fixed[0]
        self.fields: list[int] = []
        self.runs: list[_Runs] = []
        for piece, (field, col, before) in zip(fixed[1:], holes, strict=True):
            if not self.fields or self.fields[-1] != field:
                self.fields.append(field)
                self.runs.append(_Runs([], [], placeholders[field]))
            self.runs[-1].holes.append((col, before))
            self.runs[-1].pieces.append(piece)

    def fill(self, lengths: list[int]) -> bytes:
        """The table for names of these byte *lengths*, field by field."""
        return self.head + b"".join(map(dict.__getitem__, self.runs, map(lengths.__getitem__, self.fields)))


# --- templates -------------------------------------------------------------


def _placeholder(index: int) -> str:
    return f"_{index}"


_PLACEHOLDER: Final = re.compile(r"\b_[0-9]+\b")


class _Unexpected(Exception):
    """A template's code is not laid out as ``_MethodTemplate`` expects."""


class _MethodTemplate:
    """One method compiled for placeholder names, and the plan to rewrite it."""

    def __init__(self, code: CodeType, placeholders: list[str], columns: dict[int, tuple[int, list[int]]]) -> None:
        self.code = code
        # The fields' names are the method's first names, in order.
        count = len(placeholders)
        if list(code.co_names[:count]) != placeholders or set(code.co_names[count:]) & set(placeholders):
            raise _Unexpected(code.co_names)
        self.other_names = code.co_names[count:]
        # Constants that hold placeholders are the keys of a dict display:
        # a tuple of them all, for a small display, or one constant per key.
        # Either way they come in runs that follow the fields' order.
        self.consts = list(code.co_consts)
        self.key_tuples: list[tuple[int, int, int]] = []  # (position, first field, last field + 1)
        self.key_runs: list[tuple[int, int, int]] = []  # (first position, first field, last field + 1)
        index = {name: i for i, name in enumerate(placeholders)}
        for position, const in enumerate(code.co_consts):
            if isinstance(const, tuple) and const and all(isinstance(c, str) and c in index for c in const):
                start = index[const[0]]
                if list(const) != placeholders[start : start + len(const)]:
                    raise _Unexpected(const)
                self.key_tuples.append((position, start, start + len(const)))
            elif isinstance(const, str) and const in index:
                at = index[const]
                last = self.key_runs[-1] if self.key_runs else None
                if last is not None and last[0] + last[2] - last[1] == position and last[2] == at:
                    self.key_runs[-1] = (last[0], last[1], at + 1)
                else:
                    self.key_runs.append((position, at, at + 1))
            elif isinstance(const, tuple) and any(c in index for c in const if isinstance(c, str)):
                raise _Unexpected(const)
        if _HAS_COLUMNS:
            self.table = _Table(*_position_table(code, columns), placeholders)

    def changes(self, names: tuple[str, ...], lengths: list[int]) -> _Changes:
        """What ``CodeType.replace`` must change to make the code for *names*, of byte *lengths*."""
        consts = self.consts.copy()
        for position, start, stop in self.key_tuples:
            consts[position] = names[start:stop]
        for position, start, stop in self.key_runs:
            consts[position : position + stop - start] = names[start:stop]
        if _HAS_COLUMNS:
            return {
                "co_names": names + self.other_names,
                "co_consts": tuple(consts),
                "co_linetable": self.table.fill(lengths),
            }
        return {"co_names": names + self.other_names, "co_consts": tuple(consts)}


class _Template:
    """Both methods compiled once for *count* fields with placeholder names."""

    def __init__(self, count: int) -> None:
        self.placeholders = [_placeholder(i) for i in range(count)]
        source = methods_source(self.placeholders, "Template")
        columns = _placeholder_columns(source.split("\n"), self.placeholders)
        try:
            self.methods = [_MethodTemplate(code, self.placeholders, columns) for code in _compile(source).values()]
            self.trusted = self._agrees_with_compile()
        except _Unexpected:
            self.trusted = False
            return
        # The names the code reads besides the fields (``type``, ``KeyError``,
        # ...).  ``compile`` holds a field of the same name once in
        # ``co_names``, a specialised template twice: so such fields are
        # compiled for real, to keep the code exactly what ``compile`` makes.
        self.reads = frozenset(name for method in self.methods for name in method.other_names)

    def changes(self, names: tuple[str, ...]) -> dict[str, tuple[CodeType, _Changes]]:
        """Each method's template code, and how to rewrite it for *names*."""
        # Columns count bytes; before 3.11 there are none.
        lengths = []
        if _HAS_COLUMNS:
            lengths = list(map(len, names if "".join(names).isascii() else map(str.encode, names)))
        return {m.code.co_name: (m.code, m.changes(names, lengths)) for m in self.methods}

    def specialize(self, names: tuple[str, ...]) -> dict[str, CodeType]:
        """The template's code, rewritten for *names*: what ``compile`` gives for them."""
        return {name: code.replace(**changes) for name, (code, changes) in self.changes(names).items()}

    def _agrees_with_compile(self) -> bool:
        # Names of many lengths, some past 63 bytes (two-byte columns), some
        # not ASCII (columns count bytes, not characters).
        sample = tuple(f"s{i}_" + "é" * (i % 3) + "w" * (i * 37 % 90) for i in range(len(self.placeholders)))
        ours = self.specialize(sample)
        theirs = _compile(methods_source(sample, "Check"))
        return all(same_code(ours[m], theirs[m]) for m in (ASDICT, ASTUPLE))


def _placeholder_columns(lines: list[str], placeholders: list[str]) -> dict[int, tuple[int, list[int]]]:
    """Line number -> (field index, end columns of its placeholder) in *lines*.

    Each field has lines of its own, and its placeholder is the only one on them.
    """
    index = {name: i for i, name in enumerate(placeholders)}
    found: dict[int, tuple[int, list[int]]] = {}
    for number, text in enumerate(lines, start=1):
        for match in _PLACEHOLDER.finditer(text):
            found.setdefault(number, (index[match.group()], []))[1].append(match.end())
    return found


def same_code(a: CodeType, b: CodeType) -> bool:
    """Whether *a* and *b* run the same bytecode with the same debug information."""
    attrs = ["co_code", "co_consts", "co_names", "co_varnames", "co_flags", "co_stacksize", "co_firstlineno"]
    if _HAS_COLUMNS:
        attrs += ["co_exceptiontable", "co_qualname"]
    return (
        all(getattr(a, attr) == getattr(b, attr) for attr in attrs)
        and list(a.co_lines()) == list(b.co_lines())
        and _positions(a) == _positions(b)
    )


# --- generated methods and their lifetime ----------------------------------


class GeneratedMethods:
    """The generated methods for one list of field names on one class name.

    Classes with the same module, qualified name and fields share one
    instance, and with it one ``linecache`` entry.  No class is referenced
    from here, so a cache of these keeps no class alive; the ``linecache``
    entry goes away with the last class that holds this object.
    """

    __slots__ = ("__weakref__", "asdict", "astuple", "filename", "names", "source")

    def __init__(self, names: tuple[str, ...], source: str, filename: str, functions: dict[str, FunctionType]) -> None:
        self.names = names
        self.source = source
        self.filename = filename
        self.asdict: Callable[[Any, Iterable[str] | None], dict[str, Any]] = functions[ASDICT]
        self.astuple: Callable[[Any], tuple[Any, ...]] = functions[ASTUPLE]

    def __repr__(self) -> str:
        return f"<metakit generated methods {self.filename} for {len(self.names)} fields>"


_DEFAULTS: Final = {ASDICT: (None,), ASTUPLE: None}  # skip_fields=None

_lock = threading.Lock()
_templates: dict[int, _Template] = {}

# Live generated methods, by (module, qualified name, names) and by file name.
# Plain dicts of weak references, pruned from time to time (``_prune``), cost
# less per class than ``WeakValueDictionary``; a dead reference counts as absent.
_Key = tuple[str, str, tuple[str, ...]]
_by_key: dict[_Key, weakref.ref[GeneratedMethods]] = {}
_by_filename: dict[str, weakref.ref[GeneratedMethods]] = {}
_pruned_at = 64
# The last suffix that each class name's file name took (see ``_free_filename``),
# for the names of live classes.
_suffixes: dict[str, int] = {}


def generate(module: str, qualname: str, names: tuple[str, ...]) -> GeneratedMethods:
    """The methods for fields *names* of class *module.qualname*, made at most once."""
    key = (module, qualname, names)
    with _lock:
        ref = _by_key.get(key)
        methods = ref() if ref is not None else None
        if methods is None:
            methods, ref = _make(module, qualname, names)
            _by_key[key] = _by_filename[methods.filename] = ref
            if len(_by_key) > _pruned_at:
                _prune()
    return methods


def _prune() -> None:
    """Drop dead references, and the suffixes of class names no class has any more.

    It runs each time the dicts have doubled, so it costs O(1) a class.
    """
    global _pruned_at  # noqa: PLW0603  # this module's own state, under _lock
    for key in [key for key, ref in _by_key.items() if ref() is None]:
        del _by_key[key]
    for filename in [filename for filename, ref in _by_filename.items() if ref() is None]:
        del _by_filename[filename]
    live = {f"{module}.{qualname}" for module, qualname, _ in _by_key}
    for label in [label for label in _suffixes if label not in live]:
        del _suffixes[label]
    _pruned_at = max(64, 2 * len(_by_key))


class _BadName(Exception):
    """A field name that may not be written into source."""


def _make(module: str, qualname: str, names: tuple[str, ...]) -> tuple[GeneratedMethods, weakref.ref[GeneratedMethods]]:
    """New methods, and a reference to them that removes their source from ``linecache`` when they die."""
    label = f"{module}.{qualname}"
    try:
        shape = _shape(names)
    except _BadName as error:
        raise TypeError(f"{label} has a field named {error.args[0]!r}, which is not a Python identifier") from None
    header = _header(label)
    filename = _free_filename(label)
    functions = shape.functions(filename, module, qualname)
    methods = GeneratedMethods(names, header + shape.source, filename, functions)
    # ``mtime=None`` tells ``linecache.checkcache`` to keep the entry: there
    # is no file to compare it with.
    entry = (len(methods.source), None, [header, *shape.lines], filename)
    linecache.cache[filename] = entry
    return methods, weakref.ref(methods, functools.partial(_forget_source, entry))


def _forget_source(entry: tuple[int, None, list[str], str], _: object) -> None:
    """Remove *entry* from ``linecache``: its methods have been collected.

    Runs from the garbage collector, possibly while ``_lock`` is held, so it
    takes no lock.  It removes only its own entry; and no other entry can
    take that file name while this one is in ``linecache``.
    """
    filename = entry[3]
    if linecache.cache.get(filename) is entry:
        linecache.cache.pop(filename, None)


class _Shape:
    """What every class with one list of field names shares: source and code."""

    __slots__ = ("_last", "codes", "lines", "source")

    def __init__(self, names: tuple[str, ...]) -> None:
        bad = _unwritable(names)
        if bad is not None:
            raise _BadName(bad)
        template = _templates.get(len(names))
        if template is None:
            template = _templates[len(names)] = _Template(len(names))
        # Each method's code, and what a class must still change in it:
        # its file name and qualified name, and for a template, the rest.
        self.codes: dict[str, tuple[CodeType, _Changes]]
        if template.trusted and template.reads.isdisjoint(names):
            self.codes = template.changes(names)
        else:
            self.codes = {name: (code, {}) for name, code in _compile(methods_source(names, "metakit")).items()}
        self.lines = _function_lines(names)  # without the header that names the class
        self.source = "".join(self.lines)
        self._last: tuple[tuple[str, str, str], dict[str, FunctionType]] | None = None

    def functions(self, filename: str, module: str, qualname: str) -> dict[str, FunctionType]:
        """The methods as functions of *module.qualname*, their source in *filename*.

        A class made again after its twin was collected gets the twin's
        functions, which refer to no class: only what compiling them
        again would give, at the cost of a ``CodeType.replace`` each.
        """
        stamp = (filename, module, qualname)
        if self._last is not None and self._last[0] == stamp:
            return self._last[1]
        functions = {}
        for method, (template, changes) in self.codes.items():
            code = _named(template, filename, f"{qualname}.{method}", changes)
            function = FunctionType(code, _GLOBALS, method, _DEFAULTS[method])
            function.__module__ = module
            if not _HAS_COLUMNS:  # from 3.11 on, it comes from the code's co_qualname
                function.__qualname__ = f"{qualname}.{method}"
            functions[method] = function
        self._last = (stamp, functions)
        return functions


# Class creation in a loop meets the same names again as soon as the previous
# class has been collected.  The shapes hold no class.
_shape = functools.lru_cache(maxsize=512)(_Shape)


def _free_filename(label: str) -> str:
    """A file name for *label* that no live methods and no ``linecache`` entry hold."""
    filename = f"<metakit {label}>"
    if not _taken(filename):
        return filename
    # Live classes of one name with different fields (a factory's classes)
    # take suffixes in turn; each new one looks on from the last, so that
    # it costs O(1), not O(number alive).
    suffix = _suffixes.get(label, 1)
    while True:
        suffix += 1
        filename = f"<metakit {label}-{suffix}>"
        if not _taken(filename):
            _suffixes[label] = suffix
            return filename


def _taken(filename: str) -> bool:
    ref = _by_filename.get(filename)
    return filename in linecache.cache or (ref is not None and ref() is not None)
