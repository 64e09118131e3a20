"""How the benchmark times: settings, progress, interleaved rounds and ``timeit`` samples."""

from __future__ import annotations

import gc
import statistics
import sys
import time
import timeit
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class Settings:
    """How long each part of the benchmark measures.

    Each part runs rounds until its time is up, and at least ``least_rounds``
    of them: a busy machine gets fewer rounds, not a longer run.
    """

    sample_seconds: float
    """The length of one timed sample of a conversion (many calls)."""
    call_seconds: float
    replace_seconds: float
    sweep_seconds: float
    creation_seconds: float
    wire_seconds: float
    least_rounds: int


QUICK = Settings(
    sample_seconds=0.002,
    call_seconds=3,
    replace_seconds=2,
    sweep_seconds=2,
    creation_seconds=6,
    wire_seconds=2,
    least_rounds=3,
)
FULL = Settings(
    sample_seconds=0.004,
    call_seconds=30,
    replace_seconds=20,
    sweep_seconds=15,
    creation_seconds=45,
    wire_seconds=20,
    least_rounds=10,
)


UNSTABLE = 0.10
"""A figure is unstable when its samples' standard deviation exceeds this share of their mean.

pyperf warns on the same rule ("the standard deviation is more than 10% of the mean").
"""


class Spread(NamedTuple):
    """The spread of one figure over its samples (one per round): what the report prints."""

    best: float
    median: float
    stdev: float
    mean: float

    @property
    def unstable(self) -> bool:
        """Whether the samples vary too much for the figure to be trusted (see ``UNSTABLE``)."""
        return self.stdev > UNSTABLE * self.mean


def spread(samples: list[float]) -> Spread:
    """The best (smallest), median, standard deviation and mean of *samples*, by the ``statistics`` module."""
    stdev = statistics.stdev(samples) if len(samples) > 1 else 0.0
    return Spread(min(samples), statistics.median(samples), stdev, statistics.fmean(samples))


class Broken(Exception):
    """The benchmark cannot measure: a contender gives a wrong result."""


class Progress:
    """Progress on stderr: a line per phase; on a terminal, its rounds counted in place below it."""

    def __init__(self) -> None:
        self._live = sys.stderr.isatty()
        self._start = time.perf_counter()
        self._counting = False

    def phase(self, name: str) -> None:
        """Start a new phase: print its name on its own line."""
        if self._counting:
            print(file=sys.stderr)
            self._counting = False
        print(f"[bench {self.elapsed():5.1f}s] {name}", file=sys.stderr, flush=True)

    def round(self, done: int) -> None:
        """Count *done* rounds of the current phase, in place (on a terminal only)."""
        if self._live:
            print(f"\r[bench {self.elapsed():5.1f}s]   round {done}", end="", file=sys.stderr, flush=True)
            self._counting = True

    def elapsed(self) -> float:
        """Seconds since the benchmark started."""
        return time.perf_counter() - self._start


class Rounds:
    """Round numbers 0, 1, ... until *seconds* have passed, and at least *least* of them."""

    def __init__(self, seconds: float, least: int, progress: Progress) -> None:
        self.seconds = seconds
        self.least = least
        self.progress = progress
        self.count = 0
        """How many rounds have run."""

    def __iter__(self) -> Iterator[int]:
        end = time.perf_counter() + self.seconds
        while self.count < self.least or time.perf_counter() < end:
            yield self.count
            self.count += 1
            self.progress.round(self.count)


def make_timer(stmt: str, namespace: Mapping[str, Any]) -> timeit.Timer:
    """A timer of *stmt* that reads every name of *namespace* as a local variable."""
    setup = "\n".join(f"{name} = _namespace[{name!r}]" for name in namespace)
    return timeit.Timer(stmt, setup, globals={"_namespace": namespace})


def calls_per_sample(timer: timeit.Timer, seconds: float) -> int:
    """How many calls take about *seconds*.

    A short try is the best of three, so that one slow moment does not make
    the samples short (a short sample right after a large copy runs from a
    cold cache).
    """
    number = 1
    while True:
        took = timer.timeit(number)
        if took < seconds:
            took = min(took, *timer.repeat(2, number))
        if took >= seconds / 4 or number >= 10**7:
            return max(1, round(number * seconds / max(took, 1e-9)))
        number *= 4


def measure_ns(
    timers: Mapping[str, timeit.Timer], seconds: float, settings: Settings, progress: Progress
) -> tuple[dict[str, Spread], int]:
    """The spread of the ns per call of each timer, one sample per round; and the rounds, over *seconds*.

    Each round times every timer once, starting one further along than the
    round before, so that no timer always runs right after the same other.
    ``timeit`` turns the garbage collector off while it times.
    """
    numbers = {key: calls_per_sample(timer, settings.sample_seconds) for key, timer in timers.items()}
    samples: dict[str, list[float]] = {key: [] for key in timers}
    keys = list(timers)
    rounds = Rounds(seconds, settings.least_rounds, progress)
    for r in rounds:
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            samples[key].append(timers[key].timeit(numbers[key]) / numbers[key] * 1e9)
    return {key: spread(values) for key, values in samples.items()}, rounds.count


@contextmanager
def gc_off() -> Iterator[None]:
    """Turn the garbage collector off inside the block, after a full collection."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
