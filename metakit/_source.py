"""Field names -> the source text of a class's generated methods.

Pure functions on text, testable with no class involved (as attrs'
``_make_*_script`` functions are).  The source holds only field names, each
checked by ``unwritable``, the ``repr`` of those names, and fixed text:
never a default value or any other user object.

The generated functions read two kinds of names besides their arguments:
attributes of ``self`` (the fields) and the globals that ``_codegen`` gives
them (``type``, ``isinstance``, ``str``, ``bytes``, ``KeyError``, ``TypeError`` and the
helpers in ``_errors``).  Their locals are ``self``, ``skip_fields``,
``changes``, ``arguments``, ``d``, ``name`` and ``error``, which no field name can reach: a field is
only ever read as ``self.<name>`` or named in a string literal.
"""

from __future__ import annotations

import keyword
import unicodedata
from collections.abc import Iterable
from typing import Final

from metakit._fields import ASDICT, ASTUPLE, REFUSED, REPLACE, REQUIRED, Layout, as_text

_KEYWORDS: Final = frozenset([*keyword.kwlist, "__debug__"])


def writable(names: Iterable[object]) -> bool:
    """Whether each of *names* can be written into source as an attribute name.

    The parser reads identifiers in NFKC form, so a name that is not in that
    form would name another attribute; ``__debug__`` cannot be a keyword
    argument.  A ``str`` subclass is read as its text: its methods are not asked.
    """
    for name in names:
        text = name if type(name) is str else as_text(name) if isinstance(name, str) else None
        if (
            text is None
            or not text.isidentifier()
            or text in _KEYWORDS
            or not (text.isascii() or unicodedata.normalize("NFKC", text) == text)
        ):
            return False
    return True


def why_unwritable(name: object) -> str:
    """Why ``writable`` refuses *name*, for an error message."""
    if not isinstance(name, str):
        return f"it is a {type(name).__qualname__}, not a str"
    text = as_text(name)
    if not text.isidentifier():
        return "it is not a Python identifier"
    if text == "__debug__":
        return "Python reserves __debug__, which cannot be assigned or passed by keyword"
    if text in _KEYWORDS:
        return "it is a Python keyword"
    normal = unicodedata.normalize("NFKC", text)
    return f"the parser reads identifiers in NFKC form, so it would read {normal!a}, not {text!a}"


def printable(label: str) -> str:
    """*label* as one printable line: a class's name can hold a newline (``make_dataclass`` takes any)."""
    return label if label.isprintable() else repr(label)[1:-1]


def label_of(module: object, qualname: str) -> str:
    """The name of the class *module.qualname* in its generated source, as one printable line.

    A class's ``__module__`` is whatever its namespace holds: a module that
    is gone, or not a ``str``, is written ``?``, never asked for its text.
    """
    text = module if type(module) is str else as_text(module) if isinstance(module, str) else "?"
    return printable(f"{text}.{qualname}")


def header(owner: str) -> str:
    """The first line of a class's generated source: a comment naming *owner*."""
    return f"# metakit: the generated methods of {owner}\n"


# The plain call returns the dict display itself.  A call with skip_fields
# builds the same display, then deletes the skipped names from it: cheaper
# than building a second one.  Where a field cannot be read (an ``init=False``
# field not set yet), it reads only the fields that it keeps, as the
# ``fields()`` comprehension does: the field may be one that it skips.  A
# name that is missing from it costs nothing until it turns out to be
# missing, and a skip_fields that is no iterable of names costs nothing until
# it fails; only then do the helpers in ``_errors`` tell what is wrong.  (Each
# local costs every call, even the plain one: so no ``except`` clause binds
# its exception to a name.)
_ASDICT_HEAD: Final = (
    f"def {ASDICT}(self, skip_fields=None):\n",
    "    if skip_fields is None:\n",
    "        return {\n",
)
_ASDICT_SKIPPING: Final = ("        }\n", "    try:\n", "        d = {\n")
_ASDICT_TAIL: Final = (
    "        }\n",
    "    except AttributeError:  # a field that cannot be read: read only those kept\n",
    "        return _asdict_kept(self, skip_fields)\n",
    # Sets, lists and tuples are never text: only other types pay for isinstance().
    "    if type(skip_fields) not in _NAME_COLLECTIONS and isinstance(skip_fields, (str, bytes)):\n",
    "        raise _skip_fields_text(skip_fields)\n",
    "    try:\n",
    "        for name in skip_fields:\n",
    "            try:\n",
    "                del d[name]\n",
    "            except (KeyError, TypeError):  # not in d, or not hashable\n",
    "                _check_skipped(self, name, skip_fields)\n",
    "    except TypeError:\n",
    "        _skip_fields_failed(skip_fields)\n",
    "    return d\n",
)
_ASTUPLE_HEAD: Final = ("\n", "\n", f"def {ASTUPLE}(self):\n", "    return (\n")
_ASTUPLE_TAIL: Final = ("    )\n",)
_REPLACE_HEAD: Final = ("\n", "\n", f"def {REPLACE}(self, /, **changes):\n")


def _replace_lines(layout: Layout, attributes: list[str]) -> list[str]:
    """``__replace__``: ``dataclasses.replace``, written out for these fields.

    *attributes* are the lines of ``astuple_zerocopy``'s tuple display, one
    ``self.<name>,`` for each returned field.

    Whatever ``dataclasses.replace`` would refuse (an ``init=False`` field
    given, an ``InitVar`` without default missing) is handed to it, so that
    it raises its own error, as the running Python words it.  A name that is
    no field is left for ``__init__`` to refuse, as ``dataclasses.replace``
    leaves it.
    """
    if not layout.exact:
        return [*_REPLACE_HEAD, "    return _replace_by_dataclasses(self, changes)\n"]
    roles = layout.roles
    arguments = layout.arguments
    lines = [*_REPLACE_HEAD, "    if changes:\n"]
    if REFUSED in roles or REQUIRED in roles:
        pairs = list(zip(layout.names, roles, strict=True))
        refusals = [f"'{name}' in changes" for name, role in pairs if role == REFUSED]
        refusals += [f"'{name}' not in changes" for name, role in pairs if role == REQUIRED]
        lines += [
            f"        if {' or '.join(refusals)}:\n",
            "            return _replace_by_dataclasses(self, changes)\n",
        ]
    if layout.by_position:
        lines += [
            "        arguments = (\n",
            *[f"            changes.pop('{name}') if '{name}' in changes else self.{name},\n" for name in arguments],
            "        )\n",
            "        if changes:  # names that are no fields: __init__ refuses them\n",
            "            return self.__class__(*arguments, **changes)\n",
            "        return self.__class__(*arguments)\n",
        ]
        # Most often the arguments are the fields returned: their lines are written already.
        passed = attributes if arguments == layout.included else [f"        self.{name},\n" for name in arguments]
    else:
        for name in arguments:
            lines += [f"        if '{name}' not in changes:\n", f"            changes['{name}'] = self.{name}\n"]
        lines.append("        return self.__class__(**changes)\n")
        passed = [f"        {name}=self.{name},\n" for name in arguments]
    if REQUIRED in roles:
        return [*lines, "    return _replace_by_dataclasses(self, changes)\n"]
    return [*lines, "    return self.__class__(\n", *passed, "    )\n"]


def function_lines(layout: Layout) -> list[str]:
    """The lines of the three generated functions for *layout*, each with its newline."""
    included = layout.included
    attributes = [f"        self.{name},\n" for name in included]
    items = [f"            '{name}': self.{name},\n" for name in included]
    lines = [
        *_ASDICT_HEAD,
        *items,
        *_ASDICT_SKIPPING,
        *items,
        *_ASDICT_TAIL,
        *_ASTUPLE_HEAD,
        *attributes,
        *_ASTUPLE_TAIL,
        *_replace_lines(layout, attributes),
    ]
    # Each name is written in quotes as its string literal.  A writable name
    # holds no quote, backslash or newline, so that is its ``repr`` unless it
    # holds a character that is not printable (``repr`` escapes those).
    if not "".join(layout.names).isprintable():
        return _with_escapes(lines, layout.names)
    return lines


def _with_escapes(lines: list[str], names: tuple[str, ...]) -> list[str]:
    """*lines* with each name that is not printable written as its ``repr`` where it is quoted."""
    for name in names:
        if not name.isprintable():
            quoted, literal = f"'{name}'", repr(name)
            lines = [line.replace(quoted, literal) for line in lines]
    return lines


def methods_source(layout: Layout, owner: str) -> str:
    """The source of the generated methods of class *owner*.

    >>> print(methods_source(Layout(("is_prompt",), "c", ("is_prompt",), True, True), "engine.Step"))
    # metakit: the generated methods of engine.Step
    def asdict_zerocopy(self, skip_fields=None):
        if skip_fields is None:
            return {
                'is_prompt': self.is_prompt,
            }
        try:
            d = {
                'is_prompt': self.is_prompt,
            }
        except AttributeError:  # a field that cannot be read: read only those kept
            return _asdict_kept(self, skip_fields)
        if type(skip_fields) not in _NAME_COLLECTIONS and isinstance(skip_fields, (str, bytes)):
            raise _skip_fields_text(skip_fields)
        try:
            for name in skip_fields:
                try:
                    del d[name]
                except (KeyError, TypeError):  # not in d, or not hashable
                    _check_skipped(self, name, skip_fields)
        except TypeError:
            _skip_fields_failed(skip_fields)
        return d
    <BLANKLINE>
    <BLANKLINE>
    def astuple_zerocopy(self):
        return (
            self.is_prompt,
        )
    <BLANKLINE>
    <BLANKLINE>
    def __replace__(self, /, **changes):
        if changes:
            arguments = (
                changes.pop('is_prompt') if 'is_prompt' in changes else self.is_prompt,
            )
            if changes:  # names that are no fields: __init__ refuses them
                return self.__class__(*arguments, **changes)
            return self.__class__(*arguments)
        return self.__class__(
            self.is_prompt,
        )
    <BLANKLINE>
    """
    return "".join([header(owner), *function_lines(layout)])
