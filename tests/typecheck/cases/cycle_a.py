"""Half of an import cycle: the base class, used by the other half."""

from __future__ import annotations

from dataclasses import dataclass, field

import cycle_b
from typing_extensions import assert_type

from metakit import OMIT, ZeroCopy


@dataclass
class CycleBase(ZeroCopy):
    a: int
    link: cycle_b.CycleChild | None = None
    handle: object = field(default=None, metadata=OMIT)


def use(child: cycle_b.CycleChild) -> None:
    assert_type(child.astuple_zerocopy(), tuple[int, cycle_b.CycleChild | None, str])
