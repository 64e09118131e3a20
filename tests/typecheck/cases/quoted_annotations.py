"""Under ``from __future__ import annotations`` a ``ClassVar`` or ``InitVar`` written in quotes is quoted again
at run time (``"'ClassVar[str]'"``), and ``dataclasses`` reads it as neither: it is a field, which mypy takes for
no field.  So is one inside ``Annotated[...]`` (an outside tester), in quotes or not.  Such a class, and every class
below it, keeps the declared types; without the quotes, they are exact."""

from __future__ import annotations

from dataclasses import InitVar, dataclass
from typing import Annotated, Any, ClassVar

from typing_extensions import assert_type

from metakit import ZeroCopy


@dataclass
class Quoted(ZeroCopy):
    a: int
    label: "ClassVar[str]" = "x"  # noqa: UP037  # the quotes are the case


@dataclass
class QuotedInitVar(ZeroCopy):
    a: int
    scale: "InitVar[int]" = 1  # noqa: UP037  # the quotes are the case


@dataclass
class AnnotatedInitVar(ZeroCopy):
    a: int
    scale: Annotated[InitVar[int], "a field at run time"] = 1


@dataclass
class Below(Quoted):
    b: int = 0


@dataclass
class Unquoted(ZeroCopy):
    a: int
    label: ClassVar[str] = "x"
    scale: InitVar[int] = 1


def declared_types(
    quoted: Quoted, initvar: QuotedInitVar, annotated: AnnotatedInitVar, below: Below, unquoted: Unquoted
) -> None:
    assert_type(quoted.asdict_zerocopy(), dict[str, Any])
    assert_type(quoted.astuple_zerocopy(), tuple[Any, ...])
    assert_type(initvar.astuple_zerocopy(), tuple[Any, ...])
    assert_type(annotated.asdict_zerocopy(), dict[str, Any])
    assert_type(annotated.astuple_zerocopy(), tuple[Any, ...])
    assert_type(below.astuple_zerocopy(), tuple[Any, ...])
    assert_type(unquoted.astuple_zerocopy(), tuple[int])
