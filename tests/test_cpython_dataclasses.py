"""CPython's own ``test_dataclasses``, with every class it makes made by ``ZeroCopyFields``.

DESIGN promises that metakit behaves, on each Python, exactly as
``@dataclass`` does there.  This runs the running interpreter's own test
suite of ``dataclasses`` (its ``test`` package, which every interpreter
``.ci/venv.sh`` takes ships) with two changes, and with nothing else of it
touched:

- every class that the suite's modules make, by a class statement or by
  ``make_dataclass``, gets ``ZeroCopyFields`` as its metaclass (combined with
  the metaclass it would have had, where that is another one);
- every instance that a dataclass's ``__init__`` makes is checked, as it
  returns, against the ``fields()`` reference: ``asdict_zerocopy`` and
  ``astuple_zerocopy``, the methods and the function forms, hold the very
  values of ``{f.name: getattr(obj, f.name) for f in fields(obj)}``, in that
  order, or raise what the reference raises.

Each of the suite's tests is one test here, named by its unittest id, and
none is left out.  Those that assert on the MRO (``TestFrozen``'s
inheritance tests, ``Generic`` bases) pass as they are, since a metaclass
changes no MRO; those that give a class a metaclass of their own
(``test_docstring_with_no_signature``'s ``__call__ = dict``) get it combined
with ``ZeroCopyFields``, as DESIGN says a user may, and pass too.  CPython's
own skips (a test that needs a build option) count as passes, as they do
under plain ``@dataclass``.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import sys
import types
import unittest
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import metakit
from metakit import ZeroCopyFields
from tests.records import is_omitted

_SUITE = "test.test_dataclasses"
# The modules whose classes are made by ZeroCopyFields: the suite and the
# helper modules it imports (``test.dataclass_module_1`` up to 3.11,
# ``test.test_dataclasses.dataclass_module_1`` from 3.12 on).
_SUITE_MODULES = (_SUITE, "test.dataclass_")


def _is_suite_module(name: object) -> bool:
    return isinstance(name, str) and name.startswith(_SUITE_MODULES)


_combined: dict[type, type] = {}


def _with_zerocopy(meta: type) -> type:
    """*meta*, or a metaclass deriving from it and from ``ZeroCopyFields``, made once for each."""
    if meta is type or issubclass(meta, ZeroCopyFields):
        return ZeroCopyFields if meta is type else meta
    if meta not in _combined:
        _combined[meta] = type(f"ZeroCopy{meta.__name__}", (ZeroCopyFields, meta), {"__module__": __name__})
    return _combined[meta]


def _metaclass_of(bases: tuple[Any, ...], explicit: object) -> object:
    """The metaclass that ``type`` would choose for *bases* (``explicit``: one given as ``metaclass=``)."""
    winner = explicit if explicit is not None else type
    if not isinstance(winner, type):
        return winner  # a function given as metaclass: left as it is
    for base in types.resolve_bases(bases):
        meta = type(base)
        if issubclass(winner, meta):
            continue
        if issubclass(meta, winner):
            winner = meta
    return winner


@contextmanager
def _made_by_zerocopyfields() -> Iterator[None]:
    """Within it, the classes that the suite's modules make are made by ``ZeroCopyFields``."""
    build_class = builtins.__build_class__
    new_class = types.new_class

    def zerocopy_build_class(body: Callable[..., Any], name: str, *bases: Any, **keywords: Any) -> Any:
        if _is_suite_module(sys._getframe(1).f_globals.get("__name__")):
            meta = _metaclass_of(bases, keywords.get("metaclass"))
            if isinstance(meta, type):
                keywords["metaclass"] = _with_zerocopy(meta)
        return build_class(body, name, *bases, **keywords)

    def zerocopy_new_class(
        name: str,
        bases: tuple[Any, ...] = (),
        kwds: dict[str, Any] | None = None,
        exec_body: Callable[[dict[str, Any]], object] | None = None,
    ) -> type:
        # ``make_dataclass`` makes its class with ``types.new_class``.
        if sys._getframe(1).f_globals is vars(dataclasses):
            kwds = dict(kwds or {})
            meta = _metaclass_of(bases, kwds.get("metaclass"))
            if isinstance(meta, type):
                kwds["metaclass"] = _with_zerocopy(meta)
        return new_class(name, bases, kwds, exec_body)

    builtins.__build_class__ = zerocopy_build_class
    types.new_class = zerocopy_new_class  # type: ignore[assignment]
    try:
        yield
    finally:
        builtins.__build_class__ = build_class
        types.new_class = new_class


# --- each instance against the fields() reference ---------------------------


def _outcome(read: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "returned", read()
    except Exception as error:  # what the reference raises, the methods must raise
        return "raised", type(error)


def _differences(obj: object) -> list[str]:
    """How the generated methods of *obj*, just made by its class's ``__init__``, differ from the reference."""

    def reference() -> tuple[list[str], list[Any]]:
        names = [f.name for f in dataclasses.fields(obj) if not is_omitted(f)]  # type: ignore[arg-type]
        return names, [getattr(obj, name) for name in names]

    kind, expected = _outcome(reference)
    forms: dict[str, Callable[[], Any]] = {
        "metakit.asdict_zerocopy(obj)": lambda: metakit.asdict_zerocopy(obj),
        "metakit.astuple_zerocopy(obj)": lambda: metakit.astuple_zerocopy(obj),
    }
    cls = type(obj)
    refused = _outcome(lambda: dataclasses.fields(obj))[0] == "raised"  # type: ignore[arg-type]
    if isinstance(cls, ZeroCopyFields) and not refused:
        # (An instance that dataclasses.fields() refuses has no reference for its methods.)
        forms["obj.asdict_zerocopy()"] = lambda: obj.asdict_zerocopy()  # type: ignore[attr-defined]  # noqa: PLW0108
        forms["obj.astuple_zerocopy()"] = lambda: obj.astuple_zerocopy()  # type: ignore[attr-defined]  # noqa: PLW0108
    differences = []
    for call, read in forms.items():
        got_kind, got = _outcome(read)
        if kind == "raised" or got_kind == "raised":
            same = (got_kind, got) == (kind, expected)
        else:
            names, values = expected
            same = (list(got) == names if isinstance(got, dict) else len(got) == len(values)) and all(
                value is ref for value, ref in zip(got.values() if isinstance(got, dict) else got, values, strict=True)
            )
        if not same:
            differences.append(
                f"{cls.__name__}: {call} {got_kind} {got!r:.200}; the reference {kind} {expected!r:.200}"
            )
    return differences


@contextmanager
def _instances_checked(differences: list[str], checked: list[type] | None = None) -> Iterator[None]:
    """Within it, each dataclass instance an ``__init__`` returns is checked; what differs goes to *differences*.

    The class of each instance checked goes to *checked*, if given.
    """

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event != "return" or code.co_name != "__init__" or not code.co_argcount:
            return
        obj = frame.f_locals.get(code.co_varnames[0])
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            sys.setprofile(None)  # the check's own calls are not checked
            try:
                differences.extend(_differences(obj))
                if checked is not None:
                    checked.append(type(obj))
            finally:
                sys.setprofile(profile)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


# --- the suite ----------------------------------------------------------------


def _load_suite() -> types.ModuleType:
    """The running interpreter's ``test.test_dataclasses``, imported anew with its classes made by ZeroCopyFields.

    Its helper modules are imported anew too, by the tests that use them,
    while they run.
    """
    for name in [name for name in sys.modules if _is_suite_module(name)]:
        del sys.modules[name]
    with _made_by_zerocopyfields():
        return importlib.import_module(_SUITE)


def _flatten(tests: unittest.TestSuite | unittest.TestCase) -> Iterator[unittest.TestCase]:
    if isinstance(tests, unittest.TestCase):
        yield tests
    else:
        for test in tests:
            yield from _flatten(test)


_suite = _load_suite()
_cases = {case.id(): case for case in _flatten(unittest.defaultTestLoader.loadTestsFromModule(_suite))}


@pytest.mark.parametrize("test_id", list(_cases))
def test_cpython_test_dataclasses_with_zerocopyfields(test_id: str) -> None:
    result = unittest.TestResult()
    differences: list[str] = []
    with _made_by_zerocopyfields(), _instances_checked(differences):
        _cases[test_id].run(result)
    problems = [text for _, text in result.errors + result.failures]
    problems += [f"unexpected success: {case.id()}" for case in result.unexpectedSuccesses]
    assert not problems, "\n".join(problems)
    assert not differences, "\n".join(differences)


def test_the_suite_is_the_running_interpreters() -> None:
    assert _suite.__file__.startswith(sys.base_prefix) or _suite.__file__.startswith(sys.prefix)
    assert len(_cases) > 200


def test_the_suites_classes_are_made_by_zerocopyfields() -> None:
    """A class statement in the suite's modules, and ``make_dataclass``, give a class of ZeroCopyFields."""
    import abc

    source = "class Plain: pass\nclass Abstract(metaclass=abc.ABCMeta): pass\n"
    namespace: dict[str, Any] = {"__name__": _SUITE, "abc": abc}
    with _made_by_zerocopyfields():
        exec(source, namespace)  # a class statement run as the suite's module runs it
        made = dataclasses.make_dataclass("Made", ["x"])
    assert type(namespace["Plain"]) is ZeroCopyFields
    assert isinstance(namespace["Abstract"], ZeroCopyFields)
    assert isinstance(namespace["Abstract"], abc.ABCMeta)
    assert type(made) is ZeroCopyFields
    outside: dict[str, Any] = {"__name__": __name__, "abc": abc}
    with _made_by_zerocopyfields():
        exec(source, outside)
    assert type(outside["Plain"]) is type  # other modules' classes are left alone


def test_an_instance_whose_methods_differ_from_the_reference_is_reported() -> None:
    differences: list[str] = []

    @dataclasses.dataclass
    class Broken(metakit.ZeroCopy):
        x: int
        y: int

    Broken.asdict_zerocopy = lambda self, skip_fields=None: {"y": self.y, "x": self.x}  # type: ignore[method-assign]
    with _instances_checked(differences):
        Broken(1, 2)
    assert differences == [
        "Broken: obj.asdict_zerocopy() returned {'y': 2, 'x': 1}; the reference returned (['x', 'y'], [1, 2])"
    ]


def test_the_suites_instances_are_checked():
    test_id = f"{_SUITE}.TestCase.test_1_field_compare"
    differences: list[str] = []
    checked: list[type] = []
    with _made_by_zerocopyfields(), _instances_checked(differences, checked):
        _cases[test_id].run(unittest.TestResult())
    assert checked
    assert all(isinstance(cls, ZeroCopyFields) for cls in checked)
    assert differences == []
