"""Class creation: a ``@dataclass`` with and without metakit, for 5, 15 and 50 fields."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metakit import ZeroCopy
from metakit.bench.report import UNSTABLE_NOTE
from metakit.bench.timing import Progress, Rounds, Settings, gc_off, spread

FIELD_COUNTS: tuple[int, ...] = (5, 15, 50)
SCENARIOS: dict[str, str] = {"same": "the same class again", "new": "new field names"}
"""The scenarios of class creation, and how the report names them."""
BOUNDS: dict[str, float] = {"same": 1.10, "new": 1.15}
"""Class creation with metakit may cost at most this many times a plain ``@dataclass``, by scenario.

DESIGN sets these bounds on instruction counts (``.ci/count-creation``); the wall
times here are checked against the same numbers.
"""


@dataclass(frozen=True)
class CreationRow(ZeroCopy):
    """The cost of creating one class, with and without metakit."""

    fields: int
    scenario: str
    plain_us: float
    """The best sample's us per class."""
    metakit_us: float
    ratio: float
    """``metakit_us / plain_us``."""
    plain_median_us: float
    metakit_median_us: float
    median_ratio: float
    """``metakit_median_us / plain_median_us``."""
    unstable: bool
    """Whether either figure's samples varied more than pyperf allows (``timing.UNSTABLE``)."""


def _class_factory(count: int, zerocopy: bool, prefix: str) -> Callable[[], type]:
    """A function whose every call runs one ``@dataclass`` class statement of *count* fields."""
    lines = [
        "def make():",
        "    @dataclass",
        f"    class Record{'(ZeroCopy)' if zerocopy else ''}:",
        *[f"        {prefix}_{i}: int" for i in range(count)],
        "    return Record",
    ]
    namespace: dict[str, Any] = {"__name__": __name__, "dataclass": dataclass, "ZeroCopy": ZeroCopy}
    exec("\n".join(lines), namespace)
    make: Callable[[], type] = namespace["make"]
    return make


def _creation_ns(make: Callable[[], type]) -> int:
    """The ns one call of *make* takes, with the garbage collector off.

    The class is then collected, so that the next one is created as if for
    the first time: it is garbage in a cycle (with its methods and its MRO),
    and would otherwise stay alive until the next collection.
    """
    start = time.perf_counter_ns()
    cls = make()
    took = time.perf_counter_ns() - start
    del cls
    gc.collect(0)
    return took


_Makers = dict[tuple[int, bool], Callable[[], type]]
_Samples = dict[tuple[int, str, bool], list[int]]


def measure_creation(settings: Settings, progress: Progress) -> tuple[list[CreationRow], int]:
    """Class creation with and without metakit, per field count and scenario; and the rounds.

    - ``same``: the same class statement again, each class collected before
      the next (a class statement in a loop, a module imported again).
    - ``new``: new field names every time, as when a program imports its
      classes.

    Each class is timed on its own; the class statements for new names are
    compiled between the timings.
    """
    same = {(n, zc): _class_factory(n, zc, "field") for n in FIELD_COUNTS for zc in (False, True)}
    for count, zerocopy in same:
        # metakit compiles its template for a field count once, at the first
        # class with that many fields: not timed.
        _class_factory(count, zerocopy, "warm")()
    samples: _Samples = {(n, scenario, zc): [] for n, zc in same for scenario in SCENARIOS}
    rounds = Rounds(settings.creation_seconds, settings.least_rounds, progress)
    with gc_off():
        for r in rounds:
            _creation_round(r, same, samples)
    rows = []
    for count in FIELD_COUNTS:
        for scenario in SCENARIOS:
            plain = spread([ns / 1e3 for ns in samples[count, scenario, False]])
            meta = spread([ns / 1e3 for ns in samples[count, scenario, True]])
            rows.append(
                CreationRow(
                    count,
                    scenario,
                    plain.best,
                    meta.best,
                    meta.best / plain.best,
                    plain.median,
                    meta.median,
                    meta.median / plain.median,
                    plain.unstable or meta.unstable,
                )
            )
    return rows, rounds.count


_PAIRS = 3
"""Plain and metakit classes created in turn, per kind of class and round.

What ran just before changes the cost of creating a class by several
percent (the processor's caches): so each kind is created a few times in a
row, plain and metakit taking turns to go first, as a loop would.
"""


def _creation_round(r: int, same: _Makers, samples: _Samples) -> None:
    """One round: ``_PAIRS`` plain and metakit classes of each field count and scenario."""
    for count in FIELD_COUNTS:
        for scenario in SCENARIOS:
            for pair in range(_PAIRS):
                for zerocopy in (False, True) if (r + pair) % 2 == 0 else (True, False):
                    if scenario == "same":
                        make = same[count, zerocopy]
                    else:
                        make = _class_factory(count, zerocopy, f"new{r}_{pair}")
                    samples[count, scenario, zerocopy].append(_creation_ns(make))


def print_creation(rows: list[CreationRow], rounds: int) -> None:
    """Print the class-creation table: best and median."""
    print(f"\n== Class creation, us per class, {rounds} interleaved rounds; ratio = + metakit / @dataclass")
    print(
        f"  {'fields':>6}  {'scenario':<22}  {'@dataclass':>10}  {'+ metakit':>10}  {'ratio':>6}"
        f"  {'median: @dataclass':>18}  {'+ metakit':>10}  {'ratio':>6}"
    )
    for row in rows:
        print(
            f"  {row.fields:>6}  {SCENARIOS[row.scenario]:<22}  {row.plain_us:>10,.1f}  {row.metakit_us:>10,.1f}"
            f"  {row.ratio:>6.3f}  {row.plain_median_us:>18,.1f}  {row.metakit_median_us:>10,.1f}"
            f"  {row.median_ratio:>6.3f}{' !' if row.unstable else ''}"
        )
    if any(row.unstable for row in rows):
        print(f"  ! {UNSTABLE_NOTE}")
