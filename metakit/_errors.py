"""What generated code calls when a call goes wrong.

The generated methods check nothing on the valid path beyond what the
operations themselves check.  When something fails, they call one of these,
which tells what was wrong with the argument and raises an error that names
it.  These functions are among the globals of every generated function.
``describe`` is how the rest of metakit quotes an exception it caught.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, NoReturn

from metakit._fields import included_names


class SkipFieldsError(TypeError):
    """A ``skip_fields`` that is not an iterable of field names (a ``TypeError``)."""


SkipFieldsError.__module__ = "metakit"  # where users import it from


def describe(error: BaseException) -> str:
    """``Type: message`` for *error*, as metakit quotes an exception it caught (the wire, the
    testing helpers); the type alone where it has no message, and said so where its message cannot
    be read."""
    try:
        message = str(error)
    except Exception:  # its __str__ raised: the user's exception class, not ours
        return f"{type(error).__name__} (its message cannot be read)"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _describe(value: object) -> str:
    return f"{type(value).__qualname__} {value!r}"


def _skip_fields_text(skip_fields: str | bytes) -> SkipFieldsError:
    """The error for a ``str`` or ``bytes`` given as ``skip_fields``: each letter would be taken for a name."""
    suggestion = f"; write skip_fields={{{skip_fields!r}}}" if isinstance(skip_fields, str) else ""
    return SkipFieldsError(
        f"skip_fields must be an iterable of field names, not the {type(skip_fields).__qualname__} "
        f"{skip_fields!r}{suggestion}"
    )


def _check_skipped(obj: object, name: object, skip_fields: object = None) -> None:
    """Accept *name*, an item of *skip_fields* missing from *obj*'s dict, if it is a field; raise if not.

    A field can be missing because it is omitted, or named twice in
    ``skip_fields``.  Where *skip_fields* also holds an item that is no name,
    that is the fault reported (``SkipFieldsError``), wherever it lies: so a
    set's order, which moves with the hash seed, never decides the error.
    """
    _check_name(name)
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]  # obj is a dataclass instance here
        if f.name == name:
            return
    try:
        again = iter(skip_fields)  # type: ignore[call-overload]
        if again is not skip_fields:  # a collection, read again: an iterator cannot be
            for item in again:
                _check_name(item)
    except SkipFieldsError:
        raise
    except Exception:  # a second reading that fails tells nothing more: the name is the fault found
        pass
    raise ValueError(f"skip_fields names {name!r}, which is not a field of {type(obj).__qualname__}") from None


def _check_name(name: object) -> None:
    """Raise ``SkipFieldsError`` unless *name*, an item of ``skip_fields``, can name a field."""
    if not isinstance(name, str):
        raise SkipFieldsError(f"skip_fields must hold field names (str), not {_describe(name)}") from None
    if type(name) is not str and not _hashes_as_text(name):
        # A dict finds no key by it: a field it names would stay in the dict.
        raise SkipFieldsError(
            f"skip_fields must hold field names, not {_describe(name)}, a str whose hash is not its text's"
        ) from None


def _hashes_as_text(name: str) -> bool:
    """Whether the ``str`` subclass *name* hashes as its text does, as a dict key must."""
    try:
        return hash(name) == hash(str.__str__(name))
    except Exception:  # its own __hash__ raised: it cannot be looked up either
        return False


def _skip_fields_failed(skip_fields: object, error: BaseException | None = None) -> NoReturn:
    """Re-raise *error* (by default the ``TypeError`` being handled), met while taking names from
    *skip_fields*, so that it names ``skip_fields``."""
    if error is None:
        error = sys.exc_info()[1]
        assert error is not None, "called outside an except clause"
    if isinstance(error, SkipFieldsError):
        raise error
    try:
        iterator = iter(skip_fields)  # type: ignore[call-overload]
    except TypeError as failed:
        if failed.__traceback__ is not None and failed.__traceback__.tb_next is not None:
            raise error from None  # raised inside its own __iter__: its own error, as a generator's is
        raise SkipFieldsError(f"skip_fields must be an iterable of field names, not {_describe(skip_fields)}") from None
    if iterator is not skip_fields:  # a collection: find the name that failed
        for name in iterator:
            try:
                hash(name)
            except TypeError:
                raise SkipFieldsError(f"skip_fields must hold field names (str), not {_describe(name)}") from None
    raise error  # raised by the iterable itself: its own error


def _asdict_kept(obj: object, skip_fields: object) -> dict[str, Any]:
    """``asdict_zerocopy(skip_fields)`` where a field could not be read: the fields that *skip_fields*
    does not name, each read once, as the ``fields()`` comprehension reads them (a field that cannot be
    read, such as an ``init=False`` field not set yet, is fine where it is skipped)."""
    if type(skip_fields) not in _NAME_COLLECTIONS and isinstance(skip_fields, (str, bytes)):
        raise _skip_fields_text(skip_fields) from None
    kept = dict.fromkeys(included_names(type(obj)))
    try:
        for name in skip_fields:  # type: ignore[attr-defined]  # a TypeError if not iterable, as below
            try:
                del kept[name]
            except (KeyError, TypeError):  # not a name kept, or not hashable
                _check_skipped(obj, name, skip_fields)
    except TypeError:
        _skip_fields_failed(skip_fields)
    try:
        return {name: getattr(obj, name) for name in kept}
    except AttributeError as error:  # a field kept that cannot be read: its error alone, as fields() gives it
        raise error from None


def _replace_by_dataclasses(obj: object, changes: dict[str, Any]) -> Any:
    """``dataclasses.replace(obj, **changes)``: for what it refuses, with its own error."""
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]  # obj is a dataclass instance


_NAME_COLLECTIONS: frozenset[type] = frozenset([set, frozenset, list, tuple, type({}.keys())])
"""The usual types of a ``skip_fields``: the generated check for text skips them at the cost of one lookup."""

GLOBALS: dict[str, Any] = {
    "_NAME_COLLECTIONS": _NAME_COLLECTIONS,
    "_skip_fields_text": _skip_fields_text,
    "_check_skipped": _check_skipped,
    "_skip_fields_failed": _skip_fields_failed,
    "_asdict_kept": _asdict_kept,
    "_replace_by_dataclasses": _replace_by_dataclasses,
}
"""The helpers, by the names generated code calls them."""
