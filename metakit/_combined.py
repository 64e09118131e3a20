"""Metaclasses combined with ``ZeroCopyFields``: whether they pass changes on to it.

``dataclasses`` makes a class a dataclass by setting its attributes, and
``ZeroCopyFields`` must see each of those changes (and a user's later
ones) to give the class methods for its own fields.  A metaclass that
derives from ``ZeroCopyFields`` and another metaclass may put a
``__setattr__`` or ``__delattr__`` of its own in front; the first class of
each such metaclass is probed once, by setting and deleting ``PROBE``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Final

PROBE: Final = "__metakit_probe__"
"""Set and deleted once on the first class of a metaclass whose own ``__setattr__`` or ``__delattr__``
stands in front of ``ZeroCopyFields``', to see that they pass changes on."""

cooperating: Final[weakref.WeakSet[type]] = weakref.WeakSet()
"""The metaclasses (other than ``ZeroCopyFields``) whose ``__setattr__`` and ``__delattr__`` are known to pass
changes on to ``ZeroCopyFields``'."""
_probe: Final = threading.local()


def probed(what: str) -> None:
    """Note that ``check_cooperates``' probe reached ``ZeroCopyFields``: it was *what*."""
    seen = getattr(_probe, "seen", None)
    if seen is not None:
        seen.append(what)


def check_cooperates(cls: type, zerocopy_fields: type) -> None:
    """Raise ``TypeError`` unless setting and deleting an attribute of *cls* reaches ``ZeroCopyFields``' methods.

    *zerocopy_fields* is ``ZeroCopyFields``, one of the bases of the metaclass of *cls*.  A metaclass
    whose own hook goes straight to ``type``'s would hide what ``dataclasses`` and a user's later
    assignments set, and a subclass would silently serve its base's fields.
    """
    mcls: type = type(cls)
    owners = {method: next(k for k in mcls.__mro__ if method in vars(k)) for method in ("__setattr__", "__delattr__")}
    if all(owner is zerocopy_fields for owner in owners.values()):
        cooperating.add(mcls)
        return
    outer = getattr(_probe, "seen", None)  # a hook of the metaclass may make a class of it meanwhile
    _probe.seen = seen = []
    try:
        setattr(cls, PROBE, None)
        try:
            delattr(cls, PROBE)
        except Exception:
            if PROBE not in cls.__dict__:
                raise
            seen.append("refused")  # a metaclass that refuses deletions (a sealed one): none goes past unseen
    except Exception as error:  # a __setattr__ that refuses names it does not know
        seen.append(f"raised {type(error).__name__}: {str(error)[:200]}")
    finally:
        _probe.seen = outer
        if PROBE in cls.__dict__:
            type.__delattr__(cls, PROBE)
    if "set" in seen and ("deleted" in seen or "refused" in seen):
        cooperating.add(mcls)
        return
    for (method, owner), word, done in zip(
        owners.items(), ("assignments", "deletions"), ("set", "deleted"), strict=True
    ):
        if done not in seen:
            happened = f" ({seen[-1]})" if seen and seen[-1].startswith("raised") else ""
            raise TypeError(
                f"the metaclass {mcls.__qualname__} of {cls.__qualname__}: {owner.__qualname__}.{method} does not "
                f"pass attribute {word} on to ZeroCopyFields.{method}{happened}, which must see them to give each "
                f"class methods for its own fields; call super().{method} there, or list ZeroCopyFields first in "
                f"{mcls.__qualname__}'s bases"
            )
