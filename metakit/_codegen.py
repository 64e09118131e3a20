"""A class's layout -> its generated functions, with their source in ``linecache``.

This module knows nothing about metaclasses.  ``generate`` turns the layout
of one class into fresh function objects for it, from code that classes of
one name and layout share.  That code comes from a template where one fits
(``_template``) and from ``compile`` otherwise, and its source stays visible
to ``inspect``, tracebacks and debuggers for exactly as long as some class,
or some function made from it, holds it: the ``linecache`` entry goes with
the last of them, and its file name is not given to other code before.
"""

from __future__ import annotations

import builtins
import functools
import linecache
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from itertools import count
from types import CodeType, FunctionType
from typing import Any, Final

from metakit import _template
from metakit._errors import GLOBALS
from metakit._fields import ASDICT, ASTUPLE, REPLACE, Layout
from metakit._source import function_lines, header, unwritable, why_unwritable, writable_names
from metakit._weak import forget_dead, live, live_items

# What generated code reads: nothing else, so no class and no user object can
# be reached from it.  The functions of each class get a copy of their own,
# which also holds the ``_Shared`` code they run under ``_SHARED``, a name
# no generated code reads: so the code, and its ``linecache`` entry, live as
# long as any of its functions does, even one that outlives its class (held
# by a closure or a callback).  That key also marks a function as generated
# (see ``is_generated``).
_GLOBALS: Final[dict[str, Any]] = {"__builtins__": builtins, **GLOBALS}
_SHARED: Final = "<metakit shared code>"


def is_generated(value: object) -> bool:
    """Whether *value* is a function that this module generated."""
    namespace = getattr(value, "__globals__", None)
    return type(namespace) is dict and type(namespace.get(_SHARED)) is _Shared


class _Shared:
    """The source and code that the live classes of one name and layout share.

    Its ``linecache`` entry is removed when it is collected, that is, when
    the last class, or function, that holds it is (see ``_forget``).
    """

    __slots__ = ("__weakref__", "codes", "entry", "filename", "layout", "lines")
    # Made by ``_share`` only, which sets each attribute: no ``__init__`` to call.
    layout: Layout
    lines: list[str]
    filename: str
    codes: dict[str, CodeType]
    entry: tuple[int, None, list[str], str]  # its ``linecache`` entry


class _Lifetime(weakref.ref[_Shared]):
    """The weak reference to a ``_Shared`` whose callback, ``_forget``, ends its ``linecache`` entry.

    It holds what the callback needs (cheaper than a ``functools.partial``):
    the entry, and the key under which ``_by_key`` holds it, if it does.
    """

    __slots__ = ("entry", "key")
    key: tuple[str, Layout] | None
    entry: tuple[int, None, list[str], str]


STATE: Final = sys.intern("<metakit>")  # interned, as attribute names are: lookups hit the type cache
"""The class attribute that holds a class's ``GeneratedMethods``: no field can have this name."""


_ASDICT_DEFAULTS: Final = (None,)
_QUALIFIED_BY_CODE: Final = sys.version_info >= (3, 11)
"""Whether a function takes its ``__qualname__`` from its code's ``co_qualname``."""


class GeneratedMethods:
    """The generated functions of one class, and what they were made from.

    Each class has its own function objects.  A class that ``ZeroCopyFields``
    made holds this object as its ``STATE`` attribute; for other dataclasses
    it is kept in a cache keyed weakly by the class.  Either way it refers
    to no class, so it keeps none alive.
    """

    __slots__ = ("_shared", "asdict", "astuple", "label", "layout", "names", "replace")
    # Made by ``_methods`` only, which sets each attribute: no ``__init__`` to call.
    label: str
    layout: Layout
    names: tuple[str, ...]
    _shared: _Shared
    asdict: Callable[[Any, Iterable[str] | None], dict[str, Any]]
    astuple: Callable[[Any], tuple[Any, ...]]
    replace: Callable[..., Any]

    @property
    def source(self) -> str:
        """The source text of the functions, as ``linecache`` holds it."""
        return "".join(self._shared.lines)

    @property
    def filename(self) -> str:
        """The file name of the functions' code, under which ``linecache`` holds their source."""
        return self._shared.filename

    def __repr__(self) -> str:
        return f"<metakit generated methods {self.filename} for {len(self.names)} fields>"

    def holds(self, value: object) -> bool:
        """Whether *value* is one of these functions."""
        return value is self.asdict or value is self.astuple or value is self.replace


def holds_generated(namespace: Mapping[str, Any], value: object) -> bool:
    """Whether *value* is one of the generated functions that the class of *namespace* holds as its own.

    A generated function is metakit's only on the class it was made for:
    one of another class's, put on a class by a user (``asdict_zerocopy =
    Base.asdict_zerocopy`` in a class body), is that user's method.
    """
    methods = namespace.get(STATE)
    return type(methods) is GeneratedMethods and methods.holds(value)


_new: Final = object.__new__


LOCK: Final = threading.RLock()
"""metakit's one lock: over this module's indexes, and over each change ``_meta`` makes to classes.

One lock, so that no two can be taken in different orders.  Re-entrant: a
finalizer that the garbage collector runs while it is held, a signal
handler or a profiler may make a class in the same thread.
"""
_inside = False
"""Whether the thread that holds ``LOCK`` is inside ``generate`` already (only it can read True)."""
# Live shared code by file name; and by (label, layout) where it holds a file
# name other than its label's own, ``<metakit label>`` (both hold the one
# weak reference whose callback ends the ``linecache`` entry, see ``_weak``).
# Most code holds its label's own name, so a class made again finds its code
# by that name alone, and no layout is hashed.  Then the last suffix each
# label's file name took, for labels of live classes (see ``_free_filename``).
_by_filename: Final[dict[str, weakref.ref[_Shared]]] = {}
_by_key: Final[dict[tuple[str, Layout], weakref.ref[_Shared]]] = {}
_suffixes: dict[str, int] = {}
_suffixes_bound = 64
_made_inside = count(1)


def _forget(lifetime: _Lifetime) -> None:
    """Remove *lifetime*'s entry from ``linecache``, and its key's shared code from the indexes: its classes are gone.

    The callback of a ``_Shared``'s weak reference, cheaper at class
    creation than ``weakref.finalize``.  It runs from the garbage collector,
    in any thread, possibly while ``LOCK`` is held: so it takes no lock, and
    removes only what is its own (no other entry can take that file name
    while this one is in ``linecache``; ``forget_dead`` keeps a key that new
    code holds).  It relies on the GIL: each of its steps on ``linecache.cache``
    and on the indexes is one operation of a dict, which no other thread's
    interrupts (``linecache`` itself takes no lock).
    """
    entry = lifetime.entry
    filename = entry[3]
    if linecache.cache.get(filename) is entry:
        linecache.cache.pop(filename, None)
    forget_dead(_by_filename, filename)
    if lifetime.key is not None:
        forget_dead(_by_key, lifetime.key)


def generate(module: str, qualname: str, layout: Layout) -> GeneratedMethods:
    """New generated functions for the class *module.qualname* of this *layout*.

    The caller holds ``LOCK``.  Raises ``TypeError`` naming the field when a
    field's name cannot be written into source.
    """
    global _inside  # noqa: PLW0603  # this module's own state, under LOCK
    label = f"{module}.{qualname}"
    if not label.isprintable():  # (``printable``, written out: a call costs more than the test)
        label = printable(label)
    own = f"<metakit {label}>"
    if _inside:
        # Made from inside another class's ``generate`` in this thread (by a
        # finalizer, say), which may have chosen a file name and not yet
        # taken it: this code takes a name of a form it never chooses.
        inside = _share(label, layout, qualname, _inside_filename(label), True)
        return _methods(layout, inside, module, qualname, label)
    _inside = True
    try:
        # Live code of this label and layout: under the label's own file name
        # (``live``, written out: a call costs more than the lookup), or else by key.
        ref = _by_filename.get(own)
        shared: _Shared | None = None if ref is None else ref()
        if shared is not None and shared.layout is not layout and shared.layout != layout:
            shared = None
        if shared is None and _by_key:
            shared = live(_by_key, (label, layout))
        if shared is None:
            filename = _free_filename(label, own)
            shared = _share(label, layout, qualname, filename, filename != own)
        elif shared.filename not in linecache.cache:
            # Live code whose entry someone removed (``linecache.clearcache()``):
            # the new class shows its source again.
            linecache.cache[shared.filename] = shared.entry
    finally:
        _inside = False
    return _methods(layout, shared, module, qualname, label)


def _methods(layout: Layout, shared: _Shared, module: str, qualname: str, label: str) -> GeneratedMethods:
    """New functions for the class *module.qualname* from *shared* code (a function call costs less than a class's)."""
    methods = _new(GeneratedMethods)
    methods.label = label
    methods.layout = layout
    methods.names = layout.included
    methods._shared = shared
    codes = shared.codes
    # Each function takes its name from its code (and from 3.11 on, its
    # qualified name from the code's co_qualname).
    namespace = _GLOBALS.copy()  # (a copy per class: one per shared code would hold it, and so form a cycle)
    namespace[_SHARED] = shared
    asdict = FunctionType(codes[ASDICT], namespace, None, _ASDICT_DEFAULTS)
    astuple = FunctionType(codes[ASTUPLE], namespace)
    replace = FunctionType(codes[REPLACE], namespace)
    asdict.__module__ = astuple.__module__ = replace.__module__ = module
    if not _QUALIFIED_BY_CODE:
        for function in (asdict, astuple, replace):
            function.__qualname__ = f"{qualname}.{function.__name__}"
    methods.asdict = asdict
    methods.astuple = astuple
    methods.replace = replace
    return methods


def printable(label: str) -> str:
    """*label* as one printable line: a class's name can hold a newline (``make_dataclass`` takes any)."""
    return label if label.isprintable() else repr(label)[1:-1]


def _share(label: str, layout: Layout, qualname: str, filename: str, by_key: bool) -> _Shared:
    """New shared code for *label* and *layout*, under the free *filename*; indexed by key too if *by_key*.

    (Code under its label's own file name is found by that name alone.)
    """
    try:
        compiled = _compiled(layout)
    except _BadName as error:
        name = error.args[0]
        raise TypeError(
            f"{label} has a field named {name!r}, which cannot be written into source: {why_unwritable(name)}"
        ) from None
    last = compiled.last  # one read: another thread may set it meanwhile
    if last is not None and last[0] == filename and last[1] == qualname and last[2] == label:
        codes, lines = last[3], last[4]  # a class made again, as a class statement run again makes it
    else:
        codes, lines = compiled.named(label, filename, qualname)
    shared = _Shared()
    shared.layout = layout
    shared.lines = lines
    shared.filename = filename
    shared.codes = codes
    # ``mtime=None`` tells ``linecache.checkcache`` to keep the entry: there is
    # no file to compare it with.
    shared.entry = entry = (len(lines[0]) + compiled.size, None, lines, filename)
    linecache.cache[filename] = entry
    lifetime = _Lifetime(shared, _forget)
    lifetime.entry = entry
    _by_filename[filename] = lifetime
    if by_key:
        lifetime.key = key = (label, layout)
        _by_key[key] = lifetime
    else:
        lifetime.key = None
    return shared


class _BadName(Exception):
    """A field name that may not be written into source."""


class _Compiled:
    """The code of one layout's three functions, and their source lines (without header).

    The code is made for each file name and class name it serves: copied
    from a template where one fits, else renamed from a real compile.  The
    last one made is kept with its lines, header included, for a class made
    again (``last``: file name, qualified name, label, code, lines).
    """

    __slots__ = ("_codes", "_names", "_template", "body", "last", "size")

    def __init__(self, body: tuple[str, ...], template: _template.Template | None, names: tuple[str, ...]) -> None:
        self.body = body
        self.size = len("".join(body))  # (a join costs less than summing lengths)
        self._template = template
        self._names = names
        self._codes: dict[str, CodeType] | None = None
        self.last: tuple[str, str, str, dict[str, CodeType], list[str]] | None = None

    def named(self, label: str, filename: str, qualname: str) -> tuple[dict[str, CodeType], list[str]]:
        """New code under *filename* with the qualified names of class *qualname*'s methods, and *label*'s lines.

        (The caller looks at ``last`` first.)
        """
        named = None
        if self._template is not None:
            try:
                named = self._template.specialize(self._names, filename, qualname)
            except Exception:  # any failure of the optimisation: compile for real
                self._template = None
        if named is None:
            if self._codes is None:
                self._codes = _template.compile_methods(header("metakit") + "".join(self.body))
            named = {method: _renamed(code, filename, qualname) for method, code in self._codes.items()}
        lines = [header(label), *self.body]
        self.last = (filename, qualname, label, named, lines)
        return named, lines


def _renamed(code: CodeType, filename: str, qualname: str) -> CodeType:
    if sys.version_info >= (3, 11):
        return code.replace(co_filename=filename, co_qualname=f"{qualname}.{code.co_name}")
    else:  # noqa: RET505  # no co_qualname before 3.11 (and mypy checks each branch as its version)
        return code.replace(co_filename=filename)


_MOST_CACHED_FIELDS: Final = 100
"""Code for more fields is not kept: such classes are rare, and their code large."""


def _compile(layout: Layout) -> _Compiled:
    names = layout.names
    if not writable_names(names):
        raise _BadName(unwritable(names))
    template = _template.usable(_template.template_key(layout), names) if layout.exact else None
    return _Compiled(tuple(function_lines(layout)), template, names)


# Classes made again and again meet the same layouts; the cache holds no class.
_cached_compile: Final = functools.lru_cache(maxsize=256)(_compile)


_by_layout: Final[dict[int, tuple[Layout, _Compiled]]] = {}
"""The code of the layouts met last, by the identity of the ``Layout`` (each entry holds it: no other takes its id)."""
_MOST_BY_LAYOUT: Final = 256


def _compiled(layout: Layout) -> _Compiled:
    """The code of *layout*: cached, found by identity where ``layout_of`` gave the very object before.

    ``layout_of`` gives one object for each layout of plain fields, and a
    lookup by identity costs less than the cache's hash of a layout.
    """
    known = _by_layout.get(id(layout))
    if known is not None and known[0] is layout:
        return known[1]
    if len(layout.names) > _MOST_CACHED_FIELDS:
        return _compile(layout)
    compiled = _cached_compile(layout)
    if len(_by_layout) >= _MOST_BY_LAYOUT:
        _by_layout.clear()
    _by_layout[id(layout)] = (layout, compiled)
    return compiled


def _free_filename(label: str, own: str) -> str:
    """A file name for *label* that no live code and no ``linecache`` entry holds: its *own*, if that is free."""
    ref = _by_filename.get(own)  # (``_taken``, written out: a call costs more than the lookups)
    if own not in linecache.cache and (ref is None or ref() is None):
        return own
    # Live classes of one name with different fields (a factory's classes)
    # take suffixes in turn; each new one looks on from the last, so that
    # it costs O(1), not O(number alive).
    if len(_suffixes) > 64:
        _forget_suffixes()
    suffix = _suffixes.get(label, 1)
    while True:
        suffix += 1
        filename = f"<metakit {label}-{suffix}>"
        if not _taken(filename):
            _suffixes[label] = suffix
            return filename


def _inside_filename(label: str) -> str:
    """A file name for *label* that no live code holds, and that ``_free_filename`` never gives.

    Its names all have a space after ``<metakit``; these have a colon.
    """
    while True:
        filename = f"<metakit:{next(_made_inside)} {label}>"
        if not _taken(filename):
            return filename


def _forget_suffixes() -> None:
    """Drop the suffixes of labels whose suffixed file names no live code holds any more, once they have doubled."""
    global _suffixes_bound  # noqa: PLW0603  # this module's own state, under LOCK
    if len(_suffixes) > _suffixes_bound:
        live = {label for (label, _), _ in live_items(_by_key)}
        for label in [label for label in _suffixes if label not in live]:
            del _suffixes[label]
        _suffixes_bound = max(64, 2 * len(_suffixes))


def _taken(filename: str) -> bool:
    return filename in linecache.cache or live(_by_filename, filename) is not None


# --- linecache.checkcache, made safe for entries that go away ----------------
# metakit's entries leave ``linecache`` when their classes are collected, in
# any thread, at any moment.  Up to 3.13, ``linecache.checkcache()`` takes a
# list of the keys, then looks each up, and so raises ``KeyError`` for an
# entry removed in between, even in its own thread (a collection can run
# inside it).  CPython fixed this in 3.14 (gh-126775).  Before that, metakit
# wraps it once, so that it looks again when that happens: it only discards
# stale entries, so running it again is harmless.


if sys.version_info < (3, 14):

    def _guard_checkcache() -> None:
        original = linecache.checkcache
        if hasattr(original, "__wrapped__"):
            return  # wrapped already (by metakit, or by someone else who knows best)

        @functools.wraps(original)
        def checkcache(filename: str | None = None) -> None:
            while True:
                try:
                    return original(filename)
                except KeyError:  # an entry went away while it ran
                    continue

        linecache.checkcache = checkcache

    _guard_checkcache()
