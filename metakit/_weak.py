"""A dict whose values are held weakly: the one weak container metakit keeps."""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import Generic, TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class WeakValues(Generic[_K, _V]):
    """A dict of weak references to its values, in insertion order.

    A dead value counts as absent.  Dead references are dropped whenever the
    dict has doubled since the last time, which costs O(1) an entry: cheaper
    than ``weakref.WeakValueDictionary``'s callback per entry.

    Each method changes or reads the dict by single operations that run in
    C, and walks only a copy of it: another thread, or a finalizer that the
    garbage collector runs in the middle of a method, may use it at any
    moment without an error.  An owner that must also see the dict and
    what it holds as one (a file name looked up, then taken) locks.
    """

    __slots__ = ("_prune_at", "_refs")

    def __init__(self) -> None:
        self._refs: dict[_K, weakref.ref[_V]] = {}
        self._prune_at = 64

    def get(self, key: _K) -> _V | None:
        """The live value under *key*, or ``None``."""
        ref = self._refs.get(key)
        return None if ref is None else ref()

    def __setitem__(self, key: _K, value: _V) -> None:
        self.hold(key, weakref.ref(value))

    def hold(self, key: _K, ref: weakref.ref[_V]) -> None:
        """Keep *ref*, a weak reference to the value for *key*: one that has a callback, or that others share.

        The reference stays alive as long as its value does, so its callback runs.
        """
        refs = self._refs
        refs[key] = ref
        if len(refs) > self._prune_at:
            self._prune_at = 2 * len(refs)  # first, so that no other hold prunes meanwhile
            for old, held in refs.copy().items():
                if held() is None and refs.get(old) is held:  # not held again meanwhile
                    refs.pop(old, None)
            self._prune_at = max(64, 2 * len(refs))

    def pop(self, key: _K) -> None:
        """Forget *key*, if it is there."""
        self._refs.pop(key, None)

    def __len__(self) -> int:
        """How many references it holds, dead ones not yet dropped included."""
        return len(self._refs)

    def values(self) -> list[_V]:
        """The live values, oldest first."""
        return [value for value in (ref() for ref in self._refs.copy().values()) if value is not None]

    def keys(self) -> list[_K]:
        """The keys of live values, oldest first."""
        return [key for key, ref in self._refs.copy().items() if ref() is not None]
