"""The tensor-size sweep: ``dataclasses.asdict`` and metakit as the largest tensor grows (torch only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metakit import ZeroCopy
from metakit.bench.report import format_number
from metakit.bench.timing import Progress, Settings, best_ns, make_timer

SIZES: tuple[int, ...] = (10**3, 10**4, 10**5, 10**6, 10**7)
"""The element counts of ``slot_mapping``."""


@dataclass(frozen=True)
class SweepRow(ZeroCopy):
    """The cost of both conversions at one size of the largest tensor."""

    elements: int
    dataclasses_asdict_ns: float
    metakit_ns: float


def measure_sweep(
    make_sized: Callable[[int], Any], settings: Settings, progress: Progress
) -> tuple[list[SweepRow], int]:
    """``dataclasses.asdict`` and metakit as the largest tensor grows; and the rounds."""
    records = {size: make_sized(size) for size in SIZES}
    timers = {}
    for size, record in records.items():
        namespace = {"meta": record, "dataclasses_asdict": dataclasses.asdict}
        timers[f"asdict {size}"] = make_timer("dataclasses_asdict(meta)", namespace)
        timers[f"metakit {size}"] = make_timer("meta.asdict_zerocopy()", namespace)
    best, rounds = best_ns(timers, settings.sweep_seconds, settings, progress)
    return [SweepRow(size, best[f"asdict {size}"], best[f"metakit {size}"]) for size in SIZES], rounds


def print_sweep(rows: list[SweepRow] | None, rounds: int | None) -> None:
    """Print the sweep, or that it was skipped."""
    if rows is None:
        print("\n== Tensor-size sweep: skipped, torch is not installed")
        return
    print(f"\n== Cost by size of slot_mapping (elements), ns per call, best of {rounds} interleaved rounds")
    print(f"  {'elements':>12}  {'dataclasses.asdict':>18}  {'metakit':>9}")
    for row in rows:
        print(
            f"  {row.elements:>12,}  {format_number(row.dataclasses_asdict_ns):>18}  {format_number(row.metakit_ns):>9}"
        )
    first, last = rows[0], rows[-1]
    print(
        f"  from {first.elements:,} to {last.elements:,} elements: dataclasses.asdict"
        f" x{last.dataclasses_asdict_ns / first.dataclasses_asdict_ns:,.0f}, metakit"
        f" x{last.metakit_ns / first.metakit_ns:.2f}"
    )
