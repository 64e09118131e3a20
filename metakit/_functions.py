"""The function forms, for any dataclass instance, and ``generated_source``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from metakit._codegen import ASDICT, ASTUPLE
from metakit._meta import STATE, methods_of, plain_instance_methods


def asdict_zerocopy(obj: object, skip_fields: Iterable[str] | None = None) -> dict[str, Any]:
    """A new dict of the dataclass instance *obj*'s fields, holding the very same objects.

    Works on any dataclass instance, with or without ``ZeroCopy``, and
    always returns the fields: a class's own ``asdict_zerocopy`` override is
    not called.  The keys are those of ``dataclasses.fields(obj)``, in
    order, less ``OMIT`` fields and the names in *skip_fields*.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Point:
    ...     x: int
    ...     y: int
    >>> asdict_zerocopy(Point(1, 2), skip_fields={"y"})
    {'x': 1}
    """
    # ``instance_methods``, with its first step written out: this is a hot path.
    methods = getattr(type(obj), STATE, None) or plain_instance_methods(obj, ASDICT)
    return methods.asdict(obj, skip_fields)


def astuple_zerocopy(obj: object) -> tuple[Any, ...]:
    """A tuple of the dataclass instance *obj*'s field values, in the order of ``asdict_zerocopy``."""
    methods = getattr(type(obj), STATE, None) or plain_instance_methods(obj, ASTUPLE)
    return methods.astuple(obj)


def generated_source(cls: type) -> str:
    """The source text of the methods generated for the dataclass *cls*.

    It is also what ``inspect.getsource`` and tracebacks show for them.
    """
    return methods_of(cls).source


__all__ = ["asdict_zerocopy", "astuple_zerocopy", "generated_source", "instance_methods", "is_generated", "methods_of"]
from metakit._codegen import is_generated  # noqa: E402
from metakit._meta import instance_methods  # noqa: E402
