"""Code compiled once for placeholder names, and copied for real names.

Compiling a class's source costs a third of what making its dataclass costs.
Yet the code for one *shape* of fields (how many there are, and what each is
to ``replace``) differs between classes only in the names it reads: its
``co_names`` and the strings in its ``co_consts``.  So each shape is
compiled once with the placeholder names ``_0``, ``_1``, ..., and a class
gets a copy made by ``CodeType.replace`` with its own names.  (Its source
text is written by ``_source``, for every class alike: f-strings cost less
than any copy of the template's text.)

Positions are kept by line only.  A column depends on the length of every
name before it on its line, so a copied column table would be wrong; the
template's table is rewritten once with lines and no columns (tracebacks
show the line, without carets under it).

Each template is checked once against a real ``compile`` of the same source
with sample names.  A template that differs, or any exception at all while
one is built, checked or copied, means no template: the caller compiles the
source for real (see ``usable``).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable
from operator import itemgetter
from types import CodeType
from typing import Any, Final

from metakit._fields import Layout
from metakit._source import methods_source

# A template's key: "P" or "K" (replace passes __init__'s arguments by
# position or by keyword), then one letter per entry of the layout.  Lower
# case: the field is returned by asdict_zerocopy; upper case: it is not.  The
# letter itself is the field's role in replace (see metakit._fields).
_INCLUDED: Final = frozenset("cr")

_MOST_ENTRIES: Final = 100
"""Past this many fields a class is compiled for real: such classes are rare, and their templates large."""
_MOST_TEMPLATES: Final = 64
_MOST_SEEN: Final = 1024


def template_key(layout: Layout) -> str:
    """The key of the template that serves *layout*: how ``replace`` calls, then a letter per field."""
    if len(layout.included) == len(layout.names):  # every field returned: the letters are the roles
        return ("P" if layout.by_position else "K") + layout.roles
    kept = set(layout.included)
    letters = (role if name in kept else role.upper() for name, role in zip(layout.names, layout.roles, strict=True))
    return ("P" if layout.by_position else "K") + "".join(letters)


def _layout(key: str, names: tuple[str, ...]) -> Layout:
    """The layout of fields *names* that *key* describes."""
    letters = key[1:]
    included = tuple(name for name, letter in zip(names, letters, strict=True) if letter in _INCLUDED)
    return Layout(names, letters.lower(), included, True, key[0] == "P")


def compile_methods(source: str) -> dict[str, CodeType]:
    """Compile *source* for real: each function's code, by name."""
    module = compile(source, "<metakit>", "exec")
    return {c.co_name: c for c in module.co_consts if isinstance(c, CodeType)}


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
        """*code* with the same line for each instruction and no columns."""
        table = bytearray()
        lines = [position[0] for position in code.co_positions()]
        previous = code.co_firstlineno
        start = 0
        while start < len(lines):
            line = lines[start]
            end = start + 1
            while end < len(lines) and end - start < 8 and lines[end] == line:
                end += 1
            if line is None:
                table.append(0x80 | 15 << 3 | (end - start - 1))
            else:
                table.append(0x80 | 13 << 3 | (end - start - 1))
                table += _signed_varint(line - previous)
                previous = line
            start = end
        return code.replace(co_linetable=bytes(table))

else:

    def lines_only(code: CodeType) -> CodeType:
        """*code* as it is: before 3.11, code has lines and no columns."""
        return code


# --- templates ---------------------------------------------------------------
# A copy for real names is made without a loop over the code: each of the
# template's names, constants and pieces of source is found, by its index,
# in one "pool" tuple that the three functions share: the class's names,
# then the fixed values, then the tuples that hold names (the keys of a dict
# display), built for the copy.


_Getter = Callable[[tuple[object, ...]], tuple[Any, ...]]


def _getter(indices: tuple[int, ...]) -> _Getter:
    """A function that takes the items at *indices* of a tuple, as a tuple, in C where it can."""
    if len(indices) >= 2:
        return itemgetter(*indices)
    return lambda pool: tuple([pool[at] for at in indices])


class _PoolLayout:
    """Where each value of the template's code is in the pool, while the recipes are written."""

    def __init__(self, placeholders: tuple[str, ...]) -> None:
        self.index = {name: at for at, name in enumerate(placeholders)}
        self.fixed: list[object] = []
        self.tuples: list[tuple[int, ...]] = []

    def at(self, value: object) -> int:
        """The index of *value*: a placeholder's own, else a new fixed value's."""
        if type(value) is str and value in self.index:
            return self.index[value]
        if type(value) is tuple and not self.index.keys().isdisjoint(value):
            raise ValueError("a tuple of names inside a tuple of constants")  # never written
        self.fixed.append(value)
        return len(self.index) + len(self.fixed) - 1

    def const_at(self, value: object) -> int:
        """``at``, but a tuple that holds names is built for the copy: for it, ``-1 - k`` (the k-th built)."""
        if type(value) is tuple and not self.index.keys().isdisjoint(value):
            self.tuples.append(tuple([self.at(item) for item in value]))
            return -len(self.tuples)
        return self.at(value)


class _Recipe:
    """How to copy one function's template code for other names: by index into the pool."""

    __slots__ = ("_consts", "_names", "code", "dotted")

    def __init__(self, code: CodeType, names: tuple[int, ...], consts: tuple[int, ...]) -> None:
        self.code = code
        self.dotted = f".{code.co_name}"
        self._names = _getter(names)
        self._consts = _getter(consts)

    if sys.version_info >= (3, 11):

        def copy(self, pool: tuple[object, ...], filename: str, qualname: str) -> CodeType:
            """The code for the names in *pool*, under *filename*, as the method of the class *qualname*."""
            return self.code.replace(
                co_names=self._names(pool),
                co_consts=self._consts(pool),
                co_filename=filename,
                co_qualname=qualname + self.dotted,
            )

    else:  # no co_qualname before 3.11

        def copy(self, pool: tuple[object, ...], filename: str, qualname: str) -> CodeType:
            """The code for the names in *pool*, under *filename*, as the method of the class *qualname*."""
            return self.code.replace(co_names=self._names(pool), co_consts=self._consts(pool), co_filename=filename)


def _recipes(
    codes: Iterable[CodeType], placeholders: tuple[str, ...]
) -> tuple[list[_Recipe], tuple[object, ...], tuple[_Getter, ...]]:
    """The recipes of *codes*, the fixed values of their pool, and the makers of its built tuples."""
    layout = _PoolLayout(placeholders)
    written = [
        (code, tuple([layout.at(name) for name in code.co_names]), [layout.const_at(value) for value in code.co_consts])
        for code in codes
    ]
    first_built = len(placeholders) + len(layout.fixed)  # the built tuples follow every fixed value
    recipes = [
        _Recipe(code, names, tuple([first_built - 1 - at if at < 0 else at for at in consts]))
        for code, names, consts in written
    ]
    return recipes, tuple(layout.fixed), tuple([_getter(indices) for indices in layout.tuples])


def same_code(a: CodeType, b: CodeType) -> bool:
    """Whether *a* and *b* run the same bytecode with the same names, constants and lines."""
    return (
        a == b
        and a.co_code == b.co_code
        and a.co_linetable == b.co_linetable
        and getattr(a, "co_exceptiontable", None) == getattr(b, "co_exceptiontable", None)
        and list(a.co_lines()) == list(b.co_lines())
    )


class Template:
    """The generated methods of one shape, compiled for placeholder names."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.placeholders = tuple(f"_{i}" for i in range(len(key) - 1))
        self.codes: dict[str, CodeType] = {}
        self.reads: frozenset[str] = frozenset()
        self._recipes: tuple[_Recipe, ...] = ()
        self._fixed: tuple[object, ...] = ()
        self._tuples: tuple[_Getter, ...] = ()
        try:
            self.trusted = self._build()
        except Exception:  # any failure means no template (see the module's docstring)
            self.trusted = False

    def _build(self) -> bool:
        """Compile the template and check it against a real compile; whether it agrees."""
        self.codes = self._compiled(self.placeholders)
        recipes, self._fixed, self._tuples = _recipes(self.codes.values(), self.placeholders)
        self._recipes = tuple(recipes)
        # Names the code reads besides the fields (``isinstance``, ``KeyError``,
        # ...).  ``compile`` holds a field of the same name once in
        # ``co_names``, a copy of the template twice: such fields are
        # compiled for real.
        self.reads = frozenset(n for c in self.codes.values() for n in c.co_names if n not in self.placeholders)
        # Names of many lengths, some not ASCII.
        sample = tuple(f"s{i}_" + "é" * (i % 3) + "w" * (i * 7 % 40) for i in range(len(self.placeholders)))
        ours = self.specialize(sample)
        theirs = self._compiled(sample)
        return ours.keys() == theirs.keys() and all(same_code(ours[m], theirs[m]) for m in ours)

    def _compiled(self, names: tuple[str, ...]) -> dict[str, CodeType]:
        codes = compile_methods(methods_source(_layout(self.key, names), "template"))
        return {name: lines_only(code) for name, code in codes.items()}

    def specialize(
        self, names: tuple[str, ...], filename: str = "<metakit>", qualname: str = ""
    ) -> dict[str, CodeType]:
        """The template's code for fields *names*: what ``compile`` gives for them, by line.

        The code is under *filename*, as the methods of the class *qualname*.
        """
        pool = names + self._fixed
        for make in self._tuples:  # each takes names and fixed values only: those before it
            pool += (make(pool),)
        asdict, astuple, replace = self._recipes
        return {
            asdict.code.co_name: asdict.copy(pool, filename, qualname),
            astuple.code.co_name: astuple.copy(pool, filename, qualname),
            replace.code.co_name: replace.copy(pool, filename, qualname),
        }


# Templates by key, least recently used first; and the keys met once, which
# get a template when they are met again (a shape met only once would pay
# for its template and never use it).  Both bounded.  The caller holds a lock.
_templates: OrderedDict[str, Template] = OrderedDict()
_seen: OrderedDict[str, None] = OrderedDict()


def usable(key: str, names: tuple[str, ...]) -> Template | None:
    """The trusted template for *key* that can serve fields *names*, or ``None``: compile for real."""
    # Any failure of the optimisation, whatever its exception, means no
    # template: a layout of code objects that this module does not expect
    # must cost speed, never correctness.
    try:
        template = _template(key)
        if template is None or not template.trusted or not template.reads.isdisjoint(names):
            return None
        return template
    except Exception:  # see above: fall back to compile
        return None


def _template(key: str) -> Template | None:
    template = _templates.get(key)
    if template is not None:
        _templates.move_to_end(key)
        return template
    if len(key) - 1 > _MOST_ENTRIES:
        return None
    if key not in _seen:
        _seen[key] = None
        if len(_seen) > _MOST_SEEN:
            _seen.popitem(last=False)
        return None
    del _seen[key]
    template = _templates[key] = Template(key)
    if len(_templates) > _MOST_TEMPLATES:
        _templates.popitem(last=False)
    return template
