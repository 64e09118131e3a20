"""A class's layout -> its generated functions, with their source in ``linecache``.

This module knows nothing about metaclasses.  ``generate`` turns the layout
of one class into fresh function objects for it, from code that the live
classes of one name and layout share.  That code comes from a template where
one fits (``_template``) and from ``compile`` otherwise.  Its source stays
visible to ``inspect``, tracebacks and debuggers for exactly as long as some
function made from it lives: the ``linecache`` entry goes with the last of
them, and its file name is not given to other code before.

It takes no lock.  Each step on its registry and on ``linecache.cache`` is
one operation of a dict, which runs in C and which the GIL keeps whole: so
threads, and a finalizer that the garbage collector runs in the middle of
``generate`` (which may make a class itself), each see a consistent state.
"""

from __future__ import annotations

import _weakref
import builtins
import functools
import linecache
import sys
import weakref
from collections.abc import Callable, Iterable, Mapping
from types import CodeType, FunctionType
from typing import Any, Final, NamedTuple

from metakit._errors import GLOBALS
from metakit._fields import ASDICT, ASTUPLE, REPLACE, Layout
from metakit._source import function_lines, header, label_of, why_unwritable, writable
from metakit._template import compile_methods, named, template_for

STATE: Final = sys.intern("<metakit>")  # interned, as attribute names are
"""The class attribute under which a class holds its ``GeneratedMethods``: no field can have this name."""

# What generated code reads: nothing else, so no class and no user object can
# be reached from it.
_GLOBALS: Final[dict[str, Any]] = {"__builtins__": builtins, **GLOBALS}
_SOURCE: Final = "<metakit source>"
"""The global, read by no generated code, that holds the functions' ``_Source``: so the code, and its
``linecache`` entry, live as long as any of its functions does, even one that outlives its class."""


# The functions are made by ``def`` statements whose code is swapped for the
# class's: from 3.13 on, CPython specializes a call only to a function that
# its ``MAKE_FUNCTION`` instruction made, and calls one that
# ``FunctionType(code, ...)`` made the general way, every time.  Each takes
# the class's module as its ``__module__``: its globals have no ``__name__``
# to take it from (see ``GeneratedMethods``).
_MAKER: Final = next(
    code
    for code in compile(
        "def make(module):\n"
        f"    def {ASDICT}(self, skip_fields=None): pass\n"
        f"    def {ASTUPLE}(self): pass\n"
        f"    def {REPLACE}(self, /, **changes): pass\n"
        f"    {ASDICT}.__module__ = {ASTUPLE}.__module__ = {REPLACE}.__module__ = module\n"
        f"    return {ASDICT}, {ASTUPLE}, {REPLACE}\n",
        "<metakit>",
        "exec",
    ).co_consts
    if isinstance(code, CodeType)
)
_MAKER_SLOTS: Final = tuple(
    (index, code.co_name) for index, code in enumerate(_MAKER.co_consts) if isinstance(code, CodeType)
)
"""Where the maker's code holds each method's code, by the method's name."""


def _maker(codes: dict[str, CodeType]) -> CodeType:
    """The code of a function that makes the three functions of *codes*: ``_MAKER``'s, running them."""
    consts = list(_MAKER.co_consts)
    for index, method in _MAKER_SLOTS:
        consts[index] = codes[method]
    return _MAKER.replace(co_consts=tuple(consts))


class _Source:
    """The code that the live classes of one name and layout share, and its ``linecache`` entry."""

    __slots__ = ("__weakref__", "codes", "entry", "maker")

    def __init__(self, codes: dict[str, CodeType], maker: CodeType, entry: tuple[int, None, list[str], str]) -> None:
        self.codes = codes
        self.maker = maker  # ``_maker(codes)``
        self.entry = entry  # (size, mtime, lines, filename): a None mtime tells ``checkcache`` to keep it

    @property
    def filename(self) -> str:
        return self.entry[3]


class GeneratedMethods:
    """The generated functions of one class, and what they were made from.

    Each class has function objects of its own, made from shared code.  A
    class that ``ZeroCopyFields`` made holds this object as its ``STATE``
    attribute; ``_functions`` keeps those of other dataclasses.  It refers
    to no class, so it keeps none alive.
    """

    __slots__ = ("_source", "asdict", "astuple", "label", "layout", "replace")
    asdict: Callable[[Any, Iterable[str] | None], dict[str, Any]]
    astuple: Callable[[Any], tuple[Any, ...]]
    replace: Callable[..., Any]

    def __init__(self, label: str, layout: Layout, source: _Source, module: object, qualname: str) -> None:
        self.label = label
        self.layout = layout
        self._source = source
        # A globals dict per class: one per shared code would hold the code
        # that holds it, a cycle that only the garbage collector ends.  It has
        # no ``__name__``: ``torch.compile`` reads the globals of a function
        # whose globals name a module from that module, which holds none of these.
        maker = FunctionType(source.maker, {**_GLOBALS, _SOURCE: source})
        self.asdict, self.astuple, self.replace = maker(module)
        if sys.version_info < (3, 11):  # later, a function takes its qualified name from its code
            for function in (self.asdict, self.astuple, self.replace):
                function.__qualname__ = f"{qualname}.{function.__name__}"

    @property
    def names(self) -> tuple[str, ...]:
        """The fields that ``asdict_zerocopy`` returns, in order."""
        return self.layout.included

    @property
    def source(self) -> str:
        """The source text of the functions, as ``linecache`` holds it."""
        return "".join(self._source.entry[2])

    @property
    def filename(self) -> str:
        """The file name of the functions' code, under which ``linecache`` holds their source."""
        return self._source.filename

    def __repr__(self) -> str:
        return f"<metakit generated methods {self.filename} for {len(self.names)} fields>"

    def holds(self, value: object) -> bool:
        """Whether *value* is one of these functions."""
        return value is self.asdict or value is self.astuple or value is self.replace


def holds_generated(namespace: Mapping[str, Any], value: object) -> bool:
    """Whether *value* is one of the generated functions that the class of *namespace* holds as its own.

    A generated function belongs only to the class it was made for: one of
    another class's, put on a class by a user (``asdict_zerocopy =
    Base.asdict_zerocopy`` in a class body), is that user's method.
    """
    methods = namespace.get(STATE)
    return type(methods) is GeneratedMethods and methods.holds(value)


class _Lifetime(weakref.ref[_Source]):
    """The weak reference to a ``_Source`` whose callback, ``_forget``, ends its ``linecache`` entry."""

    __slots__ = ("entry", "key")
    key: tuple[str, Layout]
    entry: tuple[int, None, list[str], str]


_live: Final[dict[tuple[str, Layout], weakref.ref[_Source]]] = {}
"""The live shared code, by what its source says: the class's label and its layout."""
_files: Final[dict[str, weakref.ref[_Source]]] = {}
"""The same code by its file name: a name stays taken while its code lives, even once its ``linecache``
entry is gone (``linecache.clearcache()``), so that no other code shows its source in the meantime."""
_suffixes: Final[dict[str, int]] = {}
"""The last suffix that a label's file names took: live classes of one name with other fields (a
factory's) take ``-2``, ``-3``, ..., each new one looking on from the last, at O(1) a class.

The suffixes come round again past twice the live code, so that a label's file names are bounded by
what lives at once: a file name can stay in memory after its code is gone (from 3.13 on, Python
interns every code object's file name)."""
_MOST_SUFFIXES: Final = 1024
_SPARE_SUFFIXES: Final = 16


def _forget_dead_in_python(refs: dict[Any, weakref.ref[Any]], key: object) -> None:
    ref = refs.get(key)
    if ref is not None and ref() is None:
        refs.pop(key, None)


_forget_dead: Final[Callable[[dict[Any, weakref.ref[Any]], object], None]] = getattr(
    _weakref, "_remove_dead_weakref", _forget_dead_in_python
)
"""Remove *key* from *refs* if it holds a dead reference: in one step, CPython's own, which
``weakref.WeakValueDictionary`` uses; else in Python, where another thread could come between."""


def _forget(lifetime: _Lifetime) -> None:
    """Remove the ``linecache`` entry and the registry key of a ``_Source`` that was collected.

    It runs from the garbage collector, in any thread, at any moment: it
    removes only what is its own (the entry, by identity; the key, only
    while it holds a dead reference: a class made meanwhile may hold it again).
    """
    entry = lifetime.entry
    if linecache.cache.get(entry[3]) is entry:
        linecache.cache.pop(entry[3], None)
    _forget_dead(_live, lifetime.key)
    _forget_dead(_files, entry[3])


def generate(module: object, qualname: str, layout: Layout) -> GeneratedMethods:
    """New generated functions for the class *module.qualname* of this *layout*.

    Raises ``TypeError`` naming the field when a field's name cannot be
    written into source.
    """
    label = label_of(module, qualname)
    key = (label, layout)
    ref = _live.get(key)
    source = None if ref is None else ref()
    if source is None:
        source = _share(key, qualname)
    else:
        # Put back an entry that someone removed (``linecache.clearcache()``).
        linecache.cache.setdefault(source.filename, source.entry)
    return GeneratedMethods(label, layout, source, module, qualname)


def _share(key: tuple[str, Layout], qualname: str) -> _Source:
    """New code for the class *qualname* of *key*'s label and layout, with its ``linecache`` entry."""
    label, layout = key
    compiled = _compiled.get(layout)
    if compiled is None:
        body = _body(label, layout)
        body_size = len("".join(body))
    else:
        body, body_size = compiled.body, compiled.body_size
    top = header(label)
    entry = _claim(label, [top, *body], len(top) + body_size)
    filename = entry[3]
    try:
        if compiled is None:
            codes = _codes(layout, qualname, entry)
            maker = _maker(codes)
        else:
            codes = named(compiled.codes, filename, qualname)
            # A class made again under its old names runs the very same code.
            maker = compiled.maker if codes is compiled.codes else _maker(codes)
        source = _Source(codes, maker, entry)
    except BaseException:
        linecache.cache.pop(filename, None)
        raise
    if compiled is None and len(layout.names) <= _MOST_FIELDS_KEPT:
        if len(_compiled) >= _MOST_LAYOUTS:
            _compiled.clear()
        _compiled[layout] = _Compiled(body, body_size, codes, source.maker)
    lifetime = _Lifetime(source, _forget)
    lifetime.key = key
    lifetime.entry = entry
    _live[key] = lifetime
    _files[filename] = lifetime
    return source


class _Compiled(NamedTuple):
    """A layout's source lines below the header, and its code: each class runs a copy under its own names."""

    body: list[str]
    body_size: int
    """The length of the body's text: the size of a ``linecache`` entry is its text's."""
    codes: dict[str, CodeType]
    maker: CodeType
    """``_maker(codes)``."""


_compiled: Final[dict[Layout, _Compiled]] = {}
"""The code of the layouts met last (emptied when full): a class made again is not compiled again."""
_MOST_LAYOUTS: Final = 256
_MOST_FIELDS_KEPT: Final = 100
"""Code for more fields is not kept: such classes are rare, and their code large."""


def _body(label: str, layout: Layout) -> list[str]:
    """The source lines of *layout*'s functions, below the header; ``TypeError`` for a name that cannot be written."""
    if not writable(layout.names):
        name = next(name for name in layout.names if not writable([name]))
        raise TypeError(
            f"{label} has a field named {name!r}, which cannot be written into source: {why_unwritable(name)}"
        )
    return function_lines(layout)


def _claim(label: str, lines: list[str], size: int) -> tuple[int, None, list[str], str]:
    """A new ``linecache`` entry for *lines*, of *size* characters in all, under a file name that no other entry holds.

    The name is the label's own, ``<metakit label>``, where that is free:
    no live code has it, and ``linecache`` holds no entry under it.
    ``setdefault`` takes a name and tells whether it was free in one step,
    which no other thread and no finalizer can come between.
    """
    filename = f"<metakit {label}>"
    suffix = _suffixes.get(label, 1)
    came_round = False
    while True:
        entry = (size, None, lines, filename)
        owner = _files.get(filename)
        if (owner is None or owner() is None) and linecache.cache.setdefault(filename, entry) is entry:
            return entry
        suffix += 1
        if suffix > 2 * len(_files) + _SPARE_SUFFIXES and not came_round:  # once a claim: then on, to a free name
            suffix, came_round = 2, True
        if len(_suffixes) >= _MOST_SUFFIXES and label not in _suffixes:
            _suffixes.clear()  # a label that looks again from -2 skips the names taken
        _suffixes[label] = suffix
        filename = f"<metakit {label}-{suffix}>"


def _codes(layout: Layout, qualname: str, entry: tuple[int, None, list[str], str]) -> dict[str, CodeType]:
    """The code of the three functions for *layout*, as the methods of class *qualname*, under *entry*'s file name."""
    filename = entry[3]
    template = template_for(layout)
    if template is not None:
        try:
            return template.specialize(layout.names, filename, qualname)
        except Exception:  # any failure of the optimisation: compile for real
            pass
    return named(compile_methods("".join(entry[2]), filename), filename, qualname)


# --- linecache.checkcache and getlines, made safe for entries that go away ---
# metakit's entries leave ``linecache`` when their code is collected, in any
# thread, at any moment.  Up to 3.13, ``linecache.checkcache()`` takes a list
# of the keys, then looks each up, and ``getlines`` (which ``getline``,
# tracebacks and ``inspect`` use) looks a name up twice: each raises
# ``KeyError`` for an entry removed in between, even in its own thread (a
# collection can run inside it).  CPython fixed both in 3.14 (gh-126775).
# Before that, metakit wraps them once, so that each looks again when that
# happens: ``checkcache`` only discards stale entries, and ``getlines`` only
# reads, so running either again is harmless.


if sys.version_info < (3, 14):

    def _guard_linecache() -> None:
        checkcache, getlines = linecache.checkcache, linecache.getlines
        # Each is wrapped once: by metakit, or by someone else who knows best.
        if not hasattr(checkcache, "__wrapped__"):

            @functools.wraps(checkcache)
            def guarded_checkcache(filename: str | None = None) -> None:
                while True:
                    try:
                        return checkcache(filename)
                    except KeyError:  # an entry went away while it ran
                        continue

            linecache.checkcache = guarded_checkcache
        if not hasattr(getlines, "__wrapped__"):

            @functools.wraps(getlines)
            def guarded_getlines(filename: str, module_globals: Any = None) -> list[str]:
                for _ in range(_LOOKS):
                    try:
                        return getlines(filename, module_globals)
                    except KeyError:  # the entry went away while it ran; or a loader's error, which it raises again
                        continue
                return getlines(filename, module_globals)

            linecache.getlines = guarded_getlines

    _LOOKS: Final = 4
    """How many times ``getlines`` looks again: an entry goes away once, so more means an error of its own."""

    _guard_linecache()
