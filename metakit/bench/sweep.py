"""The tensor-size sweep: ``dataclasses.asdict`` and metakit as the largest tensor grows (torch only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metakit import ZeroCopy
from metakit.bench.report import UNSTABLE_NOTE, format_number
from metakit.bench.timing import Progress, Settings, make_timer, measure_ns

SIZES: tuple[int, ...] = (10**3, 10**4, 10**5, 10**6, 10**7)
"""The element counts of ``slot_mapping``."""


@dataclass(frozen=True)
class SweepRow(ZeroCopy):
    """The cost of both conversions at one size of the largest tensor."""

    elements: int
    dataclasses_asdict_ns: float
    """The best sample's ns per call."""
    metakit_ns: float
    dataclasses_asdict_median_ns: float
    metakit_median_ns: float
    unstable: bool
    """Whether either figure's samples varied more than pyperf allows (``timing.UNSTABLE``)."""


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
    spreads, rounds = measure_ns(timers, settings.sweep_seconds, settings, progress)
    rows = []
    for size in SIZES:
        asdict, metakit = spreads[f"asdict {size}"], spreads[f"metakit {size}"]
        rows.append(
            SweepRow(
                size, asdict.best, metakit.best, asdict.median, metakit.median, asdict.unstable or metakit.unstable
            )
        )
    return rows, rounds


def print_sweep(rows: list[SweepRow] | None, rounds: int | None) -> None:
    """Print the sweep, or that it was skipped."""
    if rows is None:
        print("\n== Tensor-size sweep: skipped, torch is not installed")
        return
    print(f"\n== Cost by size of slot_mapping (elements), ns per call, best (median) of {rounds} interleaved rounds")
    print(f"  {'elements':>12}  {'dataclasses.asdict':>26}  {'metakit':>17}")
    for row in rows:
        asdict = f"{format_number(row.dataclasses_asdict_ns)} ({format_number(row.dataclasses_asdict_median_ns)})"
        metakit = f"{format_number(row.metakit_ns)} ({format_number(row.metakit_median_ns)})"
        print(f"  {row.elements:>12,}  {asdict:>26}  {metakit:>17}{' !' if row.unstable else ''}")
    if any(row.unstable for row in rows):
        print(f"  ! {UNSTABLE_NOTE}")
    first, last = rows[0], rows[-1]
    print(
        f"  from {first.elements:,} to {last.elements:,} elements: dataclasses.asdict"
        f" x{last.dataclasses_asdict_ns / first.dataclasses_asdict_ns:,.0f}, metakit"
        f" x{last.metakit_ns / first.metakit_ns:.2f}"
    )
