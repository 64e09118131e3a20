"""Code compiled once per shape of fields, and copied for real names.

Compiling a class's source costs about three quarters of what making its dataclass costs (3.11).
Yet the code for one *shape* of fields (how many there are, and what each is
to ``replace``) differs between classes only in the names it reads: its
``co_names`` and the strings in its ``co_consts``.  So each shape is
compiled once with the placeholder names ``_0``, ``_1``, ..., and a class
gets a copy made by ``CodeType.replace`` with its own names.

Positions are kept by line only.  A column depends on the length of every
name before it on its line, so a copied column table would be wrong; the
template's table is rewritten once with lines and no columns (tracebacks
show the line, without carets under it).

Each template is checked once against a real ``compile`` of the same source
with sample names.  A template that differs, or any exception at all while
one is built, checked or copied, means no template: the caller compiles the
source for real (see ``template_for``).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable
from itertools import groupby
from operator import itemgetter
from types import CodeType
from typing import Any, Final

from metakit._fields import ASDICT, Layout
from metakit._source import methods_source

# A shape's key: "P" or "K" (replace passes __init__'s arguments by position
# or by keyword), then one letter per entry of the layout.  Lower case: the
# field is returned by asdict_zerocopy; upper case: it is not.  The letter
# itself is the field's role in replace (see metakit._fields).
_INCLUDED: Final = frozenset("cr")

_MOST_ENTRIES: Final = 100
"""Past this many fields a class is compiled for real: such classes are rare, and their templates large."""
_MOST_SHAPES: Final = 64


def shape(layout: Layout) -> str:
    """The key of the template that serves *layout*: how ``replace`` calls, then a letter per field."""
    letters = layout.roles
    if len(layout.included) < len(layout.names):  # fields that it does not return: their letters in upper case
        kept = set(layout.included)
        pairs = zip(layout.names, letters, strict=True)
        letters = "".join([role if name in kept else role.upper() for name, role in pairs])
    return ("P" if layout.by_position else "K") + letters


def layout_of_shape(key: str, names: tuple[str, ...]) -> Layout:
    """The layout of fields *names* that the shape *key* describes."""
    letters = key[1:]
    included = tuple(name for name, letter in zip(names, letters, strict=True) if letter in _INCLUDED)
    return Layout(names, letters.lower(), included, True, key[0] == "P")


def compile_methods(source: str, filename: str = "<metakit>") -> dict[str, CodeType]:
    """Compile *source* for real: each function's code, by name."""
    module = compile(source, filename, "exec")
    return {c.co_name: c for c in module.co_consts if isinstance(c, CodeType)}


if sys.version_info >= (3, 11):

    def _named(
        code: CodeType, filename: str, qualname: str, names: tuple[str, ...], consts: tuple[object, ...]
    ) -> CodeType:
        """*code* under *filename*, as the method of the class *qualname*, reading *names* and *consts*."""
        qualified = f"{qualname}.{code.co_name}"
        return code.replace(co_filename=filename, co_qualname=qualified, co_names=names, co_consts=consts)

    def _is_named(code: CodeType, filename: str, qualname: str) -> bool:
        """Whether *code* is under *filename*, as the method of the class *qualname*."""
        return code.co_filename == filename and code.co_qualname == f"{qualname}.{code.co_name}"

else:

    def _named(
        code: CodeType, filename: str, qualname: str, names: tuple[str, ...], consts: tuple[object, ...]
    ) -> CodeType:
        """*code* under *filename*, reading *names* and *consts* (no ``co_qualname`` before 3.11)."""
        return code.replace(co_filename=filename, co_names=names, co_consts=consts)

    def _is_named(code: CodeType, filename: str, qualname: str) -> bool:  # 3.11+'s signature
        """Whether *code* is under *filename* (a function takes its qualified name from elsewhere)."""
        return code.co_filename == filename


def named(codes: dict[str, CodeType], filename: str, qualname: str) -> dict[str, CodeType]:
    """*codes*, from a real compile, under *filename*, as the methods of the class *qualname*.

    A class made again under the file name and name that its code was made
    for (once the class before it is collected) shares that code: a code
    object never changes, and copies cost nearly half of ``generate``.
    """
    if _is_named(codes[ASDICT], filename, qualname):  # the three are named together
        return codes
    return {method: _named(code, filename, qualname, code.co_names, code.co_consts) for method, code in codes.items()}


# --- positions by line (3.11+) ---------------------------------------------
# From 3.11 on, ``co_linetable`` holds entries of up to 8 code units each; the
# first byte of an entry is 0x80 | code << 3 | (length - 1).  Code 13 means
# "a line and no columns", followed by the line's distance from the previous
# entry's line as a signed varint; code 15 means "no position".  See
# CPython's InternalDocs/locations.md (Objects/locations.md before 3.13).


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 64:
        out.append(0x40 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _signed_varint(value: int) -> bytes:
    return _varint((-value << 1) | 1 if value < 0 else value << 1)


if sys.version_info >= (3, 11):

    def lines_only(code: CodeType) -> CodeType:
        """*code* with the same line for each instruction and no columns.

        Read by ranges of instructions (``co_lines``), not one instruction
        at a time: this runs for each template made, twice.
        """
        table = bytearray()
        previous = code.co_firstlineno
        for line, ranges in groupby(code.co_lines(), key=itemgetter(2)):
            units = sum((end - start) // 2 for start, end, _ in ranges)
            while units:
                length = min(units, 8)
                if line is None:
                    table.append(0x80 | 15 << 3 | (length - 1))
                else:
                    table.append(0x80 | 13 << 3 | (length - 1))
                    table += _signed_varint(line - previous)
                    previous = line
                units -= length
        return code.replace(co_linetable=bytes(table))

else:

    def lines_only(code: CodeType) -> CodeType:
        """*code* as it is: before 3.11, code has lines and no columns."""
        return code


def same_code(a: CodeType, b: CodeType) -> bool:
    """Whether *a* and *b* run the same bytecode with the same names, constants and lines."""
    return (
        a == b
        and a.co_code == b.co_code
        and a.co_linetable == b.co_linetable
        and getattr(a, "co_exceptiontable", None) == getattr(b, "co_exceptiontable", None)
        and list(a.co_lines()) == list(b.co_lines())
    )


_Take = Callable[[tuple[object, ...]], tuple[Any, ...]]


def _taker(indices: list[int]) -> _Take:
    """A function that takes the items at *indices* of a tuple, as a tuple: in C, where there are two or more."""
    if len(indices) >= 2:
        return itemgetter(*indices)
    return lambda pool: tuple([pool[at] for at in indices])


class _Copier:
    """How to copy one function's template code for other names, without a loop in Python.

    Each name and constant of the copy is found by its index in one pool of
    values: the class's names, then the template's other values, then the
    tuples of names it holds as constants (a dict display's keys), built for
    the copy.
    """

    def __init__(self, code: CodeType, names: _Take, consts: _Take) -> None:
        self.code = code
        self.names = names
        self.consts = consts


def _copiers(
    codes: Iterable[CodeType], placeholders: tuple[str, ...]
) -> tuple[list[_Copier], tuple[object, ...], list[_Take]]:
    """The copiers of *codes*, the fixed values of their pool, and the makers of the tuples it holds."""
    index = {name: at for at, name in enumerate(placeholders)}
    fixed: list[object] = []
    tuples: list[list[int]] = []

    def at(value: object) -> int:
        if type(value) is str and value in index:
            return index[value]
        if type(value) is tuple and not index.keys().isdisjoint(value):
            tuples.append([at(item) for item in value])
            return -len(tuples)  # the k-th tuple built: its index is known once every fixed value is
        fixed.append(value)
        return len(placeholders) + len(fixed) - 1

    written = [(code, [at(name) for name in code.co_names], [at(value) for value in code.co_consts]) for code in codes]
    built = len(placeholders) + len(fixed) - 1  # the tuples follow every fixed value
    copiers = [
        _Copier(code, _taker(names), _taker([built - at if at < 0 else at for at in consts]))
        for code, names, consts in written
    ]
    return copiers, tuple(fixed), [_taker(indices) for indices in tuples]


class Template:
    """The generated methods of one shape, compiled for placeholder names."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.placeholders = tuple(f"_{i}" for i in range(len(key) - 1))
        self.codes: dict[str, CodeType] = {}
        self.reads: frozenset[str] = frozenset()
        self._copiers: list[_Copier] = []
        self._fixed: tuple[object, ...] = ()
        self._tuples: list[_Take] = []
        try:
            self.trusted = self._build()
        except Exception:  # any failure means no template (see the module's docstring)
            self.trusted = False

    def _build(self) -> bool:
        """Compile the template and check it against a real compile; whether it agrees."""
        self.codes = self._compiled(self.placeholders)
        self._copiers, self._fixed, self._tuples = _copiers(self.codes.values(), self.placeholders)
        # Names the code reads besides the fields (``isinstance``, ``KeyError``,
        # ...).  ``compile`` holds a field of the same name once in
        # ``co_names``, a copy of the template twice: such fields are
        # compiled for real.
        self.reads = frozenset(n for c in self.codes.values() for n in c.co_names if n not in self.placeholders)
        # Names of many lengths, some not ASCII.
        sample = tuple(f"s{i}_" + "é" * (i % 3) + "w" * (i * 7 % 40) for i in range(len(self.placeholders)))
        ours = self.specialize(sample, "<metakit>", "")
        theirs = self._compiled(sample)
        return ours.keys() == theirs.keys() and all(same_code(ours[m], theirs[m]) for m in ours)

    def _compiled(self, names: tuple[str, ...]) -> dict[str, CodeType]:
        codes = named(compile_methods(methods_source(layout_of_shape(self.key, names), "template")), "<metakit>", "")
        return {name: lines_only(code) for name, code in codes.items()}

    def specialize(self, names: tuple[str, ...], filename: str, qualname: str) -> dict[str, CodeType]:
        """The template's code for fields *names*: what ``compile`` gives for them, by line.

        The code is under *filename*, as the methods of the class *qualname*.
        """
        pool = names + self._fixed
        for take in self._tuples:  # each takes names and fixed values only: those before it
            pool += (take(pool),)
        return {
            copier.code.co_name: _named(copier.code, filename, qualname, copier.names(pool), copier.consts(pool))
            for copier in self._copiers
        }


# Templates by shape, least recently used first.  A shape met once maps to
# ``None`` and gets its template when it is met again: a shape met only once
# would pay for a template and never use it.  Bounded.  No lock: two threads
# may each build a template for one shape, and either serves.
_templates: OrderedDict[str, Template | None] = OrderedDict()


def template_for(layout: Layout) -> Template | None:
    """The trusted template that serves *layout*, or ``None``: compile for real."""
    # Any failure of the optimisation, whatever its exception, means no
    # template: a layout of code objects that this module does not expect
    # must cost speed, never correctness.
    try:
        if not layout.exact or len(layout.names) > _MOST_ENTRIES:
            return None
        key = shape(layout)
        if key not in _templates:
            _templates[key] = None
            template = None
        else:
            template = _templates[key] or Template(key)
            _templates[key] = template
            _templates.move_to_end(key)
        if len(_templates) > _MOST_SHAPES:
            _templates.popitem(last=False)
        if template is None or not template.trusted or not template.reads.isdisjoint(layout.names):
            return None
        return template
    except Exception:  # see above: fall back to compile
        return None
