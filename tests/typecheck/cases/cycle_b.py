"""The other half of an import cycle: a subclass of a class from cycle_a."""

from __future__ import annotations

from dataclasses import dataclass

from cycle_a import CycleBase
from typing_extensions import assert_type


@dataclass
class CycleChild(CycleBase):
    b: str = ""


def use(base: CycleBase) -> None:
    assert_type(base.astuple_zerocopy(), tuple[int, CycleChild | None])
