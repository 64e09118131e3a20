"""Assertions for a project's own tests of its metadata classes.

One test per class is enough::

    import pytest
    from metakit.testing import assert_zerocopy

    @pytest.mark.parametrize("meta", [make_prefill_metadata(), make_decode_metadata()])
    def test_metadata_converts_without_copying(meta):
        assert_zerocopy(meta)
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from metakit._codegen import ASDICT, ASTUPLE
from metakit._functions import asdict_zerocopy, astuple_zerocopy
from metakit._meta import OMIT_KEY, ZeroCopyFields, instance_methods

__all__ = ["assert_zerocopy"]


def assert_zerocopy(obj: object) -> None:
    """Check one instance's generated conversions against the ``fields()`` reference.

    The reference is ``{f.name: getattr(obj, f.name) for f in fields(obj)}``
    without ``OMIT`` fields.  This checks that ``asdict_zerocopy()`` returns
    a new dict with exactly those keys, in that order, holding the very same
    objects; that ``astuple_zerocopy()`` holds them in the same order; that
    the function forms agree; and that ``skip_fields`` removes exactly the
    names given, accepts ``OMIT`` fields, leaves its argument unchanged and
    rejects a name that is not a field.  The methods are checked when the
    class was made by ``ZeroCopyFields``, the function forms always.

    Raises ``AssertionError`` naming the class and the difference.  Raises
    ``TypeError`` when *obj* is not a dataclass instance.
    """
    instance_methods(obj, "assert_zerocopy")  # TypeError unless a dataclass instance
    assert is_dataclass(obj)
    cls: type = type(obj)
    every = [f.name for f in fields(obj)]
    omitted = {f.name for f in fields(obj) if f.metadata.get(OMIT_KEY)}
    expected = {name: getattr(obj, name) for name in every if name not in omitted}

    forms: list[tuple[str, Any, Any]] = [
        (f"metakit.{ASDICT}(obj)", lambda **kw: asdict_zerocopy(obj, **kw), lambda: astuple_zerocopy(obj))
    ]
    if isinstance(cls, ZeroCopyFields):
        forms.insert(0, (f"obj.{ASDICT}()", getattr(obj, ASDICT), getattr(obj, ASTUPLE)))

    for label, asdict, astuple in forms:
        where = f"{cls.__qualname__}: {label}"
        first = asdict()
        _check_dict(where, first, expected)
        second = asdict()
        if second is first:
            raise AssertionError(f"{where} returned the same dict twice; it must return a new one")
        _check_tuple(where.replace(ASDICT, ASTUPLE), astuple(), expected)

        for name in every:
            skip = frozenset({name})
            _check_dict(f"{where} with skip_fields={{{name!r}}}", asdict(skip_fields=skip), _without(expected, skip))
        skip_all = set(every)
        _check_dict(f"{where} with every field skipped", asdict(skip_fields=skip_all), {})
        if skip_all != set(every):
            raise AssertionError(f"{where} changed the skip_fields it was given")
        _check_rejects_unknown(where, asdict, every)


def _without(expected: dict[str, Any], skip: frozenset[str]) -> dict[str, Any]:
    return {name: value for name, value in expected.items() if name not in skip}


def _check_dict(where: str, got: object, expected: dict[str, Any]) -> None:
    if type(got) is not dict:
        raise AssertionError(f"{where} returned {type(got).__qualname__}, not dict")
    if list(got) != list(expected):
        missing = [name for name in expected if name not in got]
        extra = [name for name in got if name not in expected]
        detail = f"missing {missing}, unexpected {extra}" if missing or extra else "the order differs"
        raise AssertionError(f"{where} has keys {list(got)}, expected {list(expected)}: {detail}")
    for name, value in expected.items():
        if got[name] is not value:
            raise AssertionError(f"{where}[{name!r}] is not the object the instance holds: it was copied or replaced")


def _check_tuple(where: str, got: object, expected: dict[str, Any]) -> None:
    if type(got) is not tuple:
        raise AssertionError(f"{where} returned {type(got).__qualname__}, not tuple")
    if len(got) != len(expected) or any(a is not b for a, b in zip(got, expected.values(), strict=True)):
        raise AssertionError(f"{where} does not hold the field values {list(expected)} in order, by identity")


def _check_rejects_unknown(where: str, asdict: Any, every: list[str]) -> None:
    unknown = "_".join(every) + "_not_a_field"
    try:
        asdict(skip_fields={unknown})
    except ValueError as error:
        if repr(unknown) not in str(error):
            raise AssertionError(f"{where} rejected an unknown skip_fields name without naming it: {error}") from None
    else:
        raise AssertionError(f"{where} accepted skip_fields={{{unknown!r}}}, which is not a field")
