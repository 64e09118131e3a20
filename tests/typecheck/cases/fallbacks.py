"""Classes whose fields mypy cannot fully know keep the declared types, and nothing crashes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from not_installed import Unknown  # type: ignore[import-not-found]
from typing_extensions import Self, assert_type

import metakit
from metakit import OMIT, ZeroCopy

WRAPPER_METADATA = {**OMIT, "doc": "whether this is OMIT is only known at run time"}
SEND_WRAPPER = os.environ.get("SEND_WRAPPER") == "1"


@dataclass
class UnknownBase(Unknown, ZeroCopy):  # type: ignore[misc]
    """A base of type Any may bring any fields."""

    a: int


@dataclass
class UnknownMetadata(ZeroCopy):
    a: int
    wrapper: object = field(default=None, metadata=WRAPPER_METADATA)


@dataclass
class ChosenField(ZeroCopy):
    """A field that only one of the two ``field(...)`` calls a run chooses between marks ``OMIT``."""

    a: int
    wrapper: object = field(default=None) if SEND_WRAPPER else field(default=None, metadata=OMIT)


@dataclass
class AgreedField(ZeroCopy):
    """Both calls mark it ``OMIT``: it is known."""

    a: int
    wrapper: object = field(default=None, metadata=OMIT) if SEND_WRAPPER else field(default=0, metadata=OMIT)


class NotADataclass(ZeroCopy):
    """An abstract base; its dataclass subclasses have the fields."""

    a: int


@dataclass
class Later(ZeroCopy):
    """Refers to classes defined after it, and to itself."""

    node: Node
    parent: Self | None = None


@dataclass
class Node:
    value: int


def declared_types(unknown: UnknownBase, metadata: UnknownMetadata, abstract: NotADataclass) -> None:
    assert_type(unknown.asdict_zerocopy(), dict[str, Any])
    assert_type(unknown.astuple_zerocopy(), tuple[Any, ...])
    assert_type(metadata.asdict_zerocopy(skip_fields={"anything"}), dict[str, Any])
    assert_type(metadata.astuple_zerocopy(), tuple[Any, ...])
    assert_type(metakit.asdict_zerocopy(metadata), dict[str, Any])
    assert_type(abstract.asdict_zerocopy(), dict[str, Any])
    assert_type(metakit.astuple_zerocopy(abstract), tuple[Any, ...])


class Plain:
    """Not a dataclass, but a subclass of it may be one."""


def plain_values(value: object, plain: Plain) -> None:
    assert_type(metakit.asdict_zerocopy(value), dict[str, Any])
    assert_type(metakit.astuple_zerocopy(plain), tuple[Any, ...])


def forward_references(later: Later) -> None:
    assert_type(later.astuple_zerocopy(), tuple[Node, Later | None])


def chosen_fields(chosen: ChosenField, agreed: AgreedField) -> None:
    assert_type(chosen.asdict_zerocopy(), dict[str, Any])
    assert_type(agreed.astuple_zerocopy(), tuple[int])
    agreed.asdict_zerocopy()["wrapper"]  # E: an OMIT field whichever call a run chooses
