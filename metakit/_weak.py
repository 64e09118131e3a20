"""Dicts of weak references, the one weak container metakit keeps.

Such a dict maps each key to a ``weakref.ref`` to its value, and takes no
lock: each operation on it is a single one that runs in C, and each walk
goes over a copy, so that another thread, or a callback that the garbage
collector runs in the middle of anything, may use it at any moment without
an error.  (``weakref.WeakValueDictionary`` works the same way, at the cost
of a Python method call for each operation, which class creation cannot
afford.)  An owner that must also see the dict and what it holds as one (a
file name looked up, then taken) locks.

This relies on the GIL: that a single operation of a dict that runs in C,
and a callback that the collector runs, is not interleaved with another
thread's.  The free-threaded builds (3.13t, 3.14t) lock each dict in its
own operations, which keeps each of them whole too, but metakit has not been
run on them: none can be had where it is tested.

An entry whose value has died goes one of two ways:

- the reference's callback takes it out with ``forget_dead``, which removes
  it only while it still holds a dead reference, so that a key held again
  meanwhile keeps its new value;
- or, where no callback runs (one per entry would cost too much), the owner
  calls ``prune`` whenever the dict has doubled since the last time: O(1)
  an entry.
"""

from __future__ import annotations

import _weakref
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Final, TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


def _forget_dead_in_python(refs: dict[Any, weakref.ref[Any]], key: object) -> None:
    ref = refs.get(key)
    if ref is not None and ref() is None:
        refs.pop(key, None)


forget_dead: Final[Callable[[dict[Any, weakref.ref[Any]], object], None]] = getattr(
    _weakref, "_remove_dead_weakref", _forget_dead_in_python
)
"""Remove *key* from *refs* if it holds a dead reference: CPython's own, in one step in C, which
``weakref.WeakValueDictionary`` uses (every CPython from 3.6 to 3.14 has it); else the same in
Python, where another thread could hold the key again between the look and the removal."""


def live(refs: dict[_K, weakref.ref[_V]], key: _K) -> _V | None:
    """The live value under *key*, or ``None``."""
    ref = refs.get(key)
    return None if ref is None else ref()


def prune(refs: dict[Any, weakref.ref[Any]]) -> int:
    """Drop the dead references of *refs* (held by no callback); the size past which to prune again: twice the live.

    Called whenever *refs* has grown past that size, it costs O(1) an entry.
    """
    for key, ref in refs.copy().items():
        if ref() is None:
            forget_dead(refs, key)
    return max(64, 2 * len(refs))


def live_items(refs: dict[_K, weakref.ref[_V]]) -> list[tuple[_K, _V]]:
    """The keys and live values, oldest first (read from a copy: the dict may change meanwhile)."""
    return [(key, value) for key, ref in refs.copy().items() if (value := ref()) is not None]
