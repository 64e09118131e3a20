"""The side-by-side benchmark: ``python -m metakit bench [--quick] [--json PATH] [--plot PATH] [--distributed]``.

It runs on the example engine metadata (``metakit.examples.engine``).  First a
short demo: the generated source of ``FlashAttentionMetadata``, the
``Cls(**d)`` round trip, and that the tensors in the dict are the very same
objects.  Then, in one run:

- ns per call of every way to turn the 15-field record into a dict, and each
  one's ratio to metakit: ``dataclasses.asdict``, the ``fields()``
  comprehension (vLLM's ``asdict_zerocopy``, first and as merged), attrs and
  msgspec on equivalent classes (where installed), a hand-written dict
  literal, metakit's method, its function form, and ``skip_fields`` with two
  names;
- the cost of ``dataclasses.asdict`` and of metakit as the largest tensor
  grows from 10^3 to 10^7 elements;
- the cost of creating a ``@dataclass`` with and without metakit, for 5, 15
  and 50 fields;
- the targets of the design, as ratios, each with PASS or MISS.

Every timing is the best of many rounds, and the rounds interleave the
contenders, so that a slow moment of the machine hits them all alike.  A
missed target is reported, never an error: the exit status is 1 only when
the benchmark itself is broken (a contender returns the wrong dict).

Without torch the same measurements run on torch-free twins of the engine
classes (the same field names, plain objects as values), and only the
tensor-size sweep is skipped.

``--json PATH`` writes the results as one JSON object::

    {
      "schema": 1,
      "completed": true,                # false never appears: a broken run writes nothing
      "quick": bool,
      "seconds": float,                 # wall time of the whole run
      "versions": {"metakit": str, "python": str, "implementation": str, "platform": str,
                   "torch": str | null, "attrs": str | null, "msgspec": str | null},
      "subject": {"class": str, "fields": int, "values": str},
      "rounds": {"calls": int, "sweep": int | null, "creation": int},  # how many each part ran
      "calls": [{"key": str, "label": str, "ns": float | null, "ratio": float | null,
                 "note": str | null}],  # ratio: ns / ns of the metakit method
      "sweep": [{"elements": int, "dataclasses_asdict_ns": float, "metakit_ns": float}] | null,
      "creation": [{"fields": int, "scenario": "same" | "new",
                    "plain_us": float, "metakit_us": float, "ratio": float}],
      "targets": [{"key": str, "label": str, "ratio": float | null, "bound": float,
                   "at_least": bool, "status": "PASS" | "MISS" | "SKIP"}]
    }

A ``null`` ns or ratio means the contender or measurement could not run (its
``note`` says why: a peer that is not installed, or no torch).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import gc
import importlib
import importlib.metadata
import importlib.util
import json
import platform
import sys
import time
import timeit
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import metakit
from metakit import ZeroCopy

_ENGINE: str = "metakit.examples.engine"
_SUBJECT: str = "FlashAttentionMetadata"
_SKIP: frozenset[str] = frozenset({"seq_lens", "block_tables"})
"""The two names passed as ``skip_fields``."""

_SWEEP_SIZES: tuple[int, ...] = (10**3, 10**4, 10**5, 10**6, 10**7)
_CREATION_FIELDS: tuple[int, ...] = (5, 15, 50)
_CREATION_BOUND = 1.10
"""Class creation with metakit may cost at most this many times a plain ``@dataclass``."""
_SCENARIOS: dict[str, str] = {"same": "the same class again", "new": "new field names"}
"""The scenarios of class creation, and how the report names them."""


@dataclass(frozen=True)
class _Settings:
    """How long each part of the benchmark measures.

    Each part runs rounds until its time is up, and at least ``least_rounds``
    of them: a busy machine gets fewer rounds, not a longer run.
    """

    sample_seconds: float
    """The length of one timed sample of a conversion (many calls)."""
    call_seconds: float
    sweep_seconds: float
    creation_seconds: float
    least_rounds: int


_QUICK = _Settings(sample_seconds=0.002, call_seconds=3, sweep_seconds=2, creation_seconds=6, least_rounds=3)
_FULL = _Settings(sample_seconds=0.004, call_seconds=30, sweep_seconds=15, creation_seconds=45, least_rounds=10)


class _Broken(Exception):
    """The benchmark cannot measure: a contender gives a wrong result."""


# --- results ---------------------------------------------------------------
# The rows are themselves ZeroCopy dataclasses: ``asdict_zerocopy()`` is what
# goes into the JSON.


@dataclass(frozen=True)
class CallRow(ZeroCopy):
    """One contender of the call table."""

    key: str
    label: str
    ns: float | None
    ratio: float | None
    note: str | None


@dataclass(frozen=True)
class SweepRow(ZeroCopy):
    """The cost of both conversions at one size of the largest tensor."""

    elements: int
    dataclasses_asdict_ns: float
    metakit_ns: float


@dataclass(frozen=True)
class CreationRow(ZeroCopy):
    """The cost of creating one class, with and without metakit."""

    fields: int
    scenario: str
    plain_us: float
    metakit_us: float
    ratio: float


@dataclass(frozen=True)
class TargetRow(ZeroCopy):
    """One target of the design, as measured."""

    key: str
    label: str
    ratio: float | None
    bound: float
    at_least: bool
    status: str


# --- progress ---------------------------------------------------------------


class _Progress:
    """Progress on stderr: a line per phase; on a terminal, its rounds counted in place below it."""

    def __init__(self) -> None:
        self._live = sys.stderr.isatty()
        self._start = time.perf_counter()
        self._counting = False

    def phase(self, name: str) -> None:
        if self._counting:
            print(file=sys.stderr)
            self._counting = False
        print(f"[bench {self.elapsed():5.1f}s] {name}", file=sys.stderr, flush=True)

    def round(self, done: int) -> None:
        if self._live:
            print(f"\r[bench {self.elapsed():5.1f}s]   round {done}", end="", file=sys.stderr, flush=True)
            self._counting = True

    def elapsed(self) -> float:
        return time.perf_counter() - self._start


class _Rounds:
    """Round numbers 0, 1, ... until *seconds* have passed, and at least *least* of them."""

    def __init__(self, seconds: float, least: int, progress: _Progress) -> None:
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


# --- what is measured ---------------------------------------------------------


@dataclass
class _Subject:
    """The records the benchmark measures: the engine's, or torch-free twins."""

    cls: type
    record: Any
    torch_version: str | None
    make_sized: Callable[[int], Any] | None
    """Builds a record whose ``slot_mapping`` has that many elements (torch only)."""


def _load_subject() -> _Subject:
    """The engine's ``FlashAttentionMetadata`` with real tensors, or its twin without torch."""
    torch_version = _installed("torch")
    if torch_version is None:
        cls = _twin_class(_SUBJECT)
        return _Subject(cls, cls(**{name: object() for name in _field_names(cls)}), None, None)
    from metakit.examples import engine

    return _Subject(
        engine.FlashAttentionMetadata,
        engine.make_flash_attention_metadata(),
        torch_version,
        lambda elements: engine.make_flash_attention_metadata(num_tokens=elements),
    )


def _twin_class(name: str) -> type:
    """A torch-free ``ZeroCopy`` dataclass with the fields of the engine class *name*.

    The engine module imports torch, so its classes are read from its source:
    each class's annotated names, after those of the engine classes it derives
    from.  The twin derives from twins in the same way.
    """
    spec = importlib.util.find_spec(_ENGINE)
    if spec is None or spec.origin is None:
        raise _Broken(f"cannot find the source of {_ENGINE}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    nodes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def build(node: ast.ClassDef) -> type:
        bases = tuple(build(nodes[b.id]) for b in node.bases if isinstance(b, ast.Name) and b.id in nodes)
        own = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
        return dataclasses.make_dataclass(
            node.name, [(n, Any) for n in own], bases=bases or (ZeroCopy,), namespace={"__module__": __name__}
        )

    if name not in nodes:
        raise _Broken(f"{_ENGINE} has no class {name}")
    return build(nodes[name])


def _field_names(cls_or_record: Any) -> list[str]:
    return [f.name for f in fields(cls_or_record)]


# --- the contenders -------------------------------------------------------------


def _hand_written(self: Any) -> dict[str, Any]:
    """``FlashAttentionMetadata``'s dict written out by hand: the code metakit generates.

    The benchmark calls it both as a method of the record's class (see
    ``_with_hand_written``) and as a function: on Python 3.10 a method call
    alone costs several percent more than a function call.
    """
    return {
        "num_prefills": self.num_prefills,
        "num_prefill_tokens": self.num_prefill_tokens,
        "num_decode_tokens": self.num_decode_tokens,
        "slot_mapping": self.slot_mapping,
        "seq_lens": self.seq_lens,
        "seq_lens_tensor": self.seq_lens_tensor,
        "max_query_len": self.max_query_len,
        "max_prefill_seq_len": self.max_prefill_seq_len,
        "max_decode_seq_len": self.max_decode_seq_len,
        "query_start_loc": self.query_start_loc,
        "seq_start_loc": self.seq_start_loc,
        "context_lens_tensor": self.context_lens_tensor,
        "block_tables": self.block_tables,
        "use_cuda_graph": self.use_cuda_graph,
        "kv_cache_dtype": self.kv_cache_dtype,
    }


def _with_hand_written(cls: type) -> type:
    """A subclass of *cls* that adds the hand-written literal as its method ``to_dict``, and nothing else."""
    namespace = {"__module__": __name__, "__qualname__": cls.__qualname__, "to_dict": _hand_written}
    return type(cls)(cls.__name__, (cls,), namespace)


def _fields_comprehension(self: Any) -> dict[str, Any]:
    """vLLM's ``asdict_zerocopy`` as first merged."""
    return {f.name: getattr(self, f.name) for f in fields(self)}


def _vllm_asdict_zerocopy(self: Any, skip_fields: set[str] | None = None) -> dict[str, Any]:
    """vLLM's ``asdict_zerocopy`` as it stayed, with ``skip_fields``."""
    if skip_fields is None:
        skip_fields = set()
    return {field.name: getattr(self, field.name) for field in fields(self) if field.name not in skip_fields}


@dataclass(frozen=True)
class _Contender:
    """One way to turn the record into a dict, as the call table times it."""

    key: str
    label: str
    stmt: str
    """The timed statement; it sees the names of the call namespace as locals."""
    copies: bool = False
    """Whether it copies the values (then only the keys are checked)."""


_CONTENDERS: tuple[_Contender, ...] = (
    _Contender("dataclasses_asdict", "dataclasses.asdict(meta)", "dataclasses_asdict(meta)", copies=True),
    _Contender("fields_comprehension", "{f.name: getattr(meta, f.name) for f in fields(meta)}", "comprehension(meta)"),
    _Contender("vllm_skip_fields", "the same, if f.name not in skip_fields (vLLM, merged)", "vllm(meta)"),
    _Contender("attrs_asdict", "attrs.asdict(a, recurse=False)", "attrs_asdict(attrs_record, recurse=False)"),
    _Contender("msgspec_asdict", "msgspec.structs.asdict(s)", "msgspec_asdict(struct_record)"),
    _Contender("hand_written", "hand-written dict literal, a method: meta.to_dict()", "hand.to_dict()"),
    # Both on ``hand``: Python 3.10 caches attribute lookups per code object,
    # and a literal that met two classes would lose that cache.
    _Contender("hand_written_function", "the same, a function: to_dict(meta)", "to_dict(hand)"),
    _Contender("metakit_method", "metakit: meta.asdict_zerocopy()", "meta.asdict_zerocopy()"),
    _Contender("metakit_function", "metakit: metakit.asdict_zerocopy(meta)", "asdict_zerocopy(meta)"),
    _Contender("metakit_skip_fields", "metakit: meta.asdict_zerocopy(skip) (2 names)", "meta.asdict_zerocopy(skip)"),
)
_METHOD = "metakit_method"


def _call_namespace(subject: _Subject) -> tuple[dict[str, Any], dict[str, str]]:
    """The names the contenders' statements use, and why a peer is missing."""
    record = subject.record
    namespace: dict[str, Any] = {
        "meta": record,
        "dataclasses_asdict": dataclasses.asdict,
        "comprehension": _fields_comprehension,
        "vllm": _vllm_asdict_zerocopy,
        "to_dict": _hand_written,
        "asdict_zerocopy": metakit.asdict_zerocopy,
        "skip": _SKIP,
    }
    missing = {}
    values = {name: getattr(record, name) for name in _field_names(record)}
    namespace["hand"] = _with_hand_written(subject.cls)(**values)
    if _installed("attrs") is None:
        missing["attrs_asdict"] = "attrs is not installed"
    else:
        import attrs

        attrs_class = attrs.make_class(subject.cls.__name__, {name: attrs.field() for name in values})
        namespace.update(attrs_asdict=attrs.asdict, attrs_record=attrs_class(**values))
    if _installed("msgspec") is None:
        missing["msgspec_asdict"] = "msgspec is not installed"
    else:
        import msgspec

        struct = msgspec.defstruct(subject.cls.__name__, [(name, Any) for name in values])
        namespace.update(msgspec_asdict=msgspec.structs.asdict, struct_record=struct(**values))
    return namespace, missing


def _check_contender(contender: _Contender, namespace: dict[str, Any], record: Any) -> None:
    """Raise ``_Broken`` unless *contender* returns the record's fields, in order, uncopied."""
    result = eval(contender.stmt, {}, namespace)  # the very statement that is timed
    names = _field_names(record)
    if contender.key == "metakit_skip_fields":
        names = [n for n in names if n not in _SKIP]
    if list(result) != names:
        raise _Broken(f"{contender.label} returned the keys {list(result)}, not {names}")
    if not contender.copies and any(result[n] is not getattr(record, n) for n in names):
        raise _Broken(f"{contender.label} did not return the record's own objects")


# --- timing -------------------------------------------------------------------


def _timer(stmt: str, namespace: Mapping[str, Any]) -> timeit.Timer:
    """A timer of *stmt* that reads every name of *namespace* as a local variable."""
    setup = "\n".join(f"{name} = _namespace[{name!r}]" for name in namespace)
    return timeit.Timer(stmt, setup, globals={"_namespace": namespace})


def _calls_per_sample(timer: timeit.Timer, seconds: float) -> int:
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


def _best_ns(
    timers: Mapping[str, timeit.Timer], seconds: float, settings: _Settings, progress: _Progress
) -> tuple[dict[str, float], int]:
    """The best ns per call of each timer, and the number of rounds, over *seconds*.

    Each round times every timer once, starting one further along than the
    round before, so that no timer always runs right after the same other.
    ``timeit`` turns the garbage collector off while it times.
    """
    numbers = {key: _calls_per_sample(timer, settings.sample_seconds) for key, timer in timers.items()}
    best = dict.fromkeys(timers, float("inf"))
    keys = list(timers)
    rounds = _Rounds(seconds, settings.least_rounds, progress)
    for r in rounds:
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            best[key] = min(best[key], timers[key].timeit(numbers[key]) / numbers[key] * 1e9)
    return best, rounds.count


def _measure_calls(subject: _Subject, settings: _Settings, progress: _Progress) -> tuple[list[CallRow], int]:
    """The call table: every contender on the subject record, ns per call; and the rounds."""
    namespace, missing = _call_namespace(subject)
    present = [c for c in _CONTENDERS if c.key not in missing]
    for contender in present:
        _check_contender(contender, namespace, subject.record)
    timers = {c.key: _timer(c.stmt, namespace) for c in present}
    best, rounds = _best_ns(timers, settings.call_seconds, settings, progress)
    rows = [
        CallRow(
            c.key,
            c.label,
            best.get(c.key),
            best[c.key] / best[_METHOD] if c.key in best else None,
            missing.get(c.key),
        )
        for c in _CONTENDERS
    ]
    return rows, rounds


def _measure_sweep(
    make_sized: Callable[[int], Any], settings: _Settings, progress: _Progress
) -> tuple[list[SweepRow], int]:
    """``dataclasses.asdict`` and metakit as the largest tensor grows; and the rounds."""
    records = {size: make_sized(size) for size in _SWEEP_SIZES}
    timers = {}
    for size, record in records.items():
        namespace = {"meta": record, "dataclasses_asdict": dataclasses.asdict}
        timers[f"asdict {size}"] = _timer("dataclasses_asdict(meta)", namespace)
        timers[f"metakit {size}"] = _timer("meta.asdict_zerocopy()", namespace)
    best, rounds = _best_ns(timers, settings.sweep_seconds, settings, progress)
    return [SweepRow(size, best[f"asdict {size}"], best[f"metakit {size}"]) for size in _SWEEP_SIZES], rounds


# --- class creation ----------------------------------------------------------------


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


def _measure_creation(settings: _Settings, progress: _Progress) -> tuple[list[CreationRow], int]:
    """Class creation with and without metakit, per field count and scenario; and the rounds.

    - ``same``: the same class statement again, each class collected before
      the next (a class statement in a loop, a module imported again).
    - ``new``: new field names every time, as when a program imports its
      classes.

    Each class is timed on its own; the class statements for new names are
    compiled between the timings.
    """
    same = {(n, zc): _class_factory(n, zc, "field") for n in _CREATION_FIELDS for zc in (False, True)}
    for count, zerocopy in same:
        # metakit compiles its template for a field count once, at the first
        # class with that many fields: not timed.
        _class_factory(count, zerocopy, "warm")()
    samples: _Samples = {(n, scenario, zc): [] for n, zc in same for scenario in _SCENARIOS}
    rounds = _Rounds(settings.creation_seconds, settings.least_rounds, progress)
    with _gc_off():
        for r in rounds:
            _creation_round(r, same, samples)
    rows = []
    for count in _CREATION_FIELDS:
        for scenario in _SCENARIOS:
            plain = min(samples[count, scenario, False]) / 1e3
            meta = min(samples[count, scenario, True]) / 1e3
            rows.append(CreationRow(count, scenario, plain, meta, meta / plain))
    return rows, rounds.count


_PAIRS = 3
"""Plain and metakit classes created in turn, per kind of class and round.

What ran just before changes the cost of creating a class by several
percent (the processor's caches): so each kind is created a few times in a
row, plain and metakit taking turns to go first, as a loop would.
"""


def _creation_round(r: int, same: _Makers, samples: _Samples) -> None:
    """One round: ``_PAIRS`` plain and metakit classes of each field count and scenario."""
    for count in _CREATION_FIELDS:
        for scenario in _SCENARIOS:
            for pair in range(_PAIRS):
                for zerocopy in (False, True) if (r + pair) % 2 == 0 else (True, False):
                    if scenario == "same":
                        make = same[count, zerocopy]
                    else:
                        make = _class_factory(count, zerocopy, f"new{r}_{pair}")
                    samples[count, scenario, zerocopy].append(_creation_ns(make))


@contextmanager
def _gc_off() -> Iterator[None]:
    """Turn the garbage collector off inside the block, after a full collection."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# --- targets --------------------------------------------------------------------


def _target(key: str, label: str, ratio: float | None, bound: float, *, at_least: bool = False) -> TargetRow:
    met = ratio is not None and (ratio >= bound if at_least else ratio <= bound)
    status = "SKIP" if ratio is None else "PASS" if met else "MISS"
    return TargetRow(key, label, ratio, bound, at_least, status)


def _targets(calls: list[CallRow], sweep: list[SweepRow] | None, creation: list[CreationRow]) -> list[TargetRow]:
    """The design's performance targets, as measured in this run."""
    ns = {row.key: row.ns for row in calls if row.ns is not None}
    method, literal, skip = ns[_METHOD], ns["hand_written"], ns["metakit_skip_fields"]
    comprehension = ns["fields_comprehension"]
    flat = sweep[-1].metakit_ns / sweep[0].metakit_ns if sweep else None
    return [
        _target("method_vs_literal", "asdict_zerocopy() / hand-written dict literal method", method / literal, 1.05),
        _target(
            "comprehension_vs_method",
            "fields() comprehension / asdict_zerocopy(), 15 fields",
            comprehension / method,
            8.0,
            at_least=True,
        ),
        _target("flat_in_tensor_size", "asdict_zerocopy() at 10^7 / at 10^3 tensor elements", flat, 1.2),
        _target("skip_fields", "asdict_zerocopy(2 skip_fields) / asdict_zerocopy()", skip / method, 1.4),
        *[
            _target(
                f"creation_{row.fields}_{row.scenario}",
                f"class creation / plain @dataclass, {row.fields} fields, {_SCENARIOS[row.scenario]}",
                row.ratio,
                _CREATION_BOUND,
            )
            for row in creation
        ],
    ]


# --- the report -----------------------------------------------------------------


def _installed(name: str) -> str | None:
    """The version of the distribution *name*, or None if it is not installed.

    Asks the installed metadata, not the import system: a directory named
    ``torch`` on ``sys.path`` (a test folder) would import as an empty
    namespace package.
    """
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _versions() -> dict[str, str | None]:
    return {
        "metakit": metakit.__version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": f"{platform.system()} {platform.machine()}",
        "torch": _installed("torch"),
        "attrs": _installed("attrs"),
        "msgspec": _installed("msgspec"),
    }


def _print_header(versions: Mapping[str, str | None], quick: bool) -> None:
    peers = ", ".join(f"{name} {versions[name] or 'not installed'}" for name in ("torch", "attrs", "msgspec"))
    mode = " (--quick)" if quick else ""
    print(
        f"metakit {versions['metakit']} benchmark{mode}: {versions['implementation']} {versions['python']}"
        f" on {versions['platform']}; {peers}"
    )
    if versions["torch"] is None:
        print(
            "torch is not installed: measuring torch-free twins of the engine classes (the same field names,"
            " plain objects as values); the tensor-size sweep is skipped."
        )


def _demo(subject: _Subject) -> None:
    """Show what metakit does on the subject; raise ``_Broken`` if it does not do it."""
    cls, meta = subject.cls, subject.record
    names = _field_names(cls)
    print(f"\n== Demo: {cls.__qualname__}, {len(names)} fields")
    print("What metakit generated for it, metakit.generated_source(cls):\n")
    print("\n".join(f"    {line}" for line in metakit.generated_source(cls).splitlines()))
    d = meta.asdict_zerocopy()
    facts = {
        "list(d) == [f.name for f in fields(meta)]": list(d) == names,
        "all(d[k] is getattr(meta, k) for k in d)": all(d[name] is getattr(meta, name) for name in names),
        f"{cls.__name__}(**d) == meta": cls(**d) == meta,
    }
    print("With d = meta.asdict_zerocopy():")
    for fact, holds in facts.items():
        print(f"    {fact:<62}  {holds}")
    if not all(facts.values()):
        raise _Broken(f"{cls.__qualname__}.asdict_zerocopy() is wrong")
    if subject.torch_version is not None:
        copy = dataclasses.asdict(meta)["slot_mapping"]
        fact = "dataclasses.asdict(meta)['slot_mapping'] is meta.slot_mapping"
        print(f"    {fact:<62}  {copy is meta.slot_mapping}  (it copied {copy.numel():,} elements)")
        _demo_omit()


def _demo_omit() -> None:
    from metakit.examples import engine

    meta = engine.make_flashinfer_metadata()
    d = meta.asdict_zerocopy()
    names = _field_names(meta)
    omitted = [name for name in names if name not in d]
    post_init = [name for name in vars(meta) if name not in names]
    print(
        f"FlashInferMetadata: {len(d)} of its {len(names)} fields are in its dict; not the OMIT fields"
        f" {', '.join(omitted)}, nor the attributes set in __post_init__, {', '.join(post_init)}."
    )
    if any(name in d for name in post_init):
        raise _Broken("FlashInferMetadata.asdict_zerocopy() holds an attribute that is not a field")


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _print_calls(subject: _Subject, rows: list[CallRow], rounds: int) -> None:
    values = "torch tensors and ints" if subject.torch_version else "plain objects"
    print(
        f"\n== Dict of {subject.cls.__qualname__} ({len(_field_names(subject.cls))} fields, {values}),"
        f" best of {rounds} interleaved rounds"
    )
    width = max(len(row.label) for row in rows)
    print(f"  {'':<{width}}  {'ns/call':>10}  {'x metakit':>9}")
    for row in rows:
        note = f"  ({row.note})" if row.note else ""
        print(f"  {row.label:<{width}}  {_number(row.ns):>10}  {_number(row.ratio, 2):>9}{note}")


def _print_sweep(rows: list[SweepRow] | None, rounds: int | None) -> None:
    if rows is None:
        print("\n== Tensor-size sweep: skipped, torch is not installed")
        return
    print(f"\n== Cost by size of slot_mapping (elements), ns per call, best of {rounds} interleaved rounds")
    print(f"  {'elements':>12}  {'dataclasses.asdict':>18}  {'metakit':>9}")
    for row in rows:
        print(f"  {row.elements:>12,}  {_number(row.dataclasses_asdict_ns):>18}  {_number(row.metakit_ns):>9}")
    first, last = rows[0], rows[-1]
    print(
        f"  from {first.elements:,} to {last.elements:,} elements: dataclasses.asdict"
        f" x{last.dataclasses_asdict_ns / first.dataclasses_asdict_ns:,.0f}, metakit"
        f" x{last.metakit_ns / first.metakit_ns:.2f}"
    )


def _print_creation(rows: list[CreationRow], rounds: int) -> None:
    print(f"\n== Class creation, us per class, best of {rounds} interleaved rounds")
    print(f"  {'fields':>6}  {'scenario':<22}  {'@dataclass':>10}  {'+ metakit':>10}  {'ratio':>6}")
    for row in rows:
        print(
            f"  {row.fields:>6}  {_SCENARIOS[row.scenario]:<22}  {row.plain_us:>10,.1f}"
            f"  {row.metakit_us:>10,.1f}  {row.ratio:>6.3f}"
        )


def _print_targets(rows: list[TargetRow]) -> None:
    print("\n== Targets (the design's Performance section)")
    width = max(len(row.label) for row in rows)
    for row in rows:
        sign = ">=" if row.at_least else "<="
        print(f"  {row.label:<{width}}  {_number(row.ratio, 3):>7}  {sign} {row.bound:<5}  {row.status}")
    met = sum(row.status == "PASS" for row in rows)
    measured = sum(row.status != "SKIP" for row in rows)
    print(
        f"{met} of {measured} measured targets met. A missed target is reported, not an error:"
        " timings on a busy machine vary by about 10%."
    )


# --- outputs --------------------------------------------------------------------


def _write_json(path: str, report: Mapping[str, Any]) -> None:
    Path(path).write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")


_SHORT = {
    "dataclasses_asdict": "dataclasses.asdict",
    "fields_comprehension": "fields() comprehension",
    "vllm_skip_fields": "fields() + skip_fields (vLLM)",
    "attrs_asdict": "attrs.asdict",
    "msgspec_asdict": "msgspec.structs.asdict",
    "hand_written": "hand-written, method",
    "hand_written_function": "hand-written, function",
    "metakit_method": "metakit method",
    "metakit_function": "metakit function",
    "metakit_skip_fields": "metakit, 2 skip_fields",
}


def _write_plot(path: str, report: Mapping[str, Any]) -> None:
    """A PNG of the call table, the tensor-size sweep and the creation ratios."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(17, 5.2), layout="constrained")
    calls_axes, sweep_axes, creation_axes = figure.subplots(1, 3)
    versions = report["versions"]
    figure.suptitle(
        f"metakit {versions['metakit']}, {versions['implementation']} {versions['python']},"
        f" torch {versions['torch'] or 'not installed'}"
    )
    _plot_calls(calls_axes, report)
    _plot_sweep(sweep_axes, report["sweep"])
    _plot_creation(creation_axes, report["creation"])
    figure.savefig(path, dpi=100)


def _plot_calls(axes: Any, report: Mapping[str, Any]) -> None:
    calls = [row for row in report["calls"] if row["ns"] is not None]
    colors = ["C1" if row["key"].startswith("metakit") else "C0" for row in calls]
    bars = axes.barh([_SHORT[row["key"]] for row in calls], [row["ns"] for row in calls], color=colors)
    ratios = [f" x{row['ratio']:.0f}" if row["ratio"] >= 10 else f" x{row['ratio']:.2f}" for row in calls]
    axes.bar_label(bars, labels=ratios, fontsize=8)
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.set_xlim(right=max(row["ns"] for row in calls) * 5)  # room for the labels
    axes.set_xlabel("ns per call (log); x = ratio to the metakit method")
    axes.set_title(f"dict of {report['subject']['class']} ({report['subject']['fields']} fields)")


def _plot_sweep(axes: Any, sweep: list[dict[str, Any]] | None) -> None:
    if sweep is None:
        axes.text(0.5, 0.5, "torch is not installed:\nno tensor-size sweep", ha="center", va="center")
        axes.set_axis_off()
        return
    elements = [row["elements"] for row in sweep]
    axes.loglog(elements, [row["dataclasses_asdict_ns"] for row in sweep], "o-", label="dataclasses.asdict")
    axes.loglog(elements, [row["metakit_ns"] for row in sweep], "o-", label="metakit asdict_zerocopy()")
    axes.set_xlabel("elements in slot_mapping")
    axes.set_ylabel("ns per call (log)")
    axes.set_title("cost by tensor size")
    axes.legend()


def _plot_creation(axes: Any, creation: list[dict[str, Any]]) -> None:
    for offset, scenario in ((-0.2, "same"), (0.2, "new")):
        rows = [row for row in creation if row["scenario"] == scenario]
        positions = [i + offset for i in range(len(rows))]
        bars = axes.bar(positions, [row["ratio"] for row in rows], width=0.4, label=_SCENARIOS[scenario])
        axes.bar_label(bars, fmt="%.2f", fontsize=8)
    axes.axhline(_CREATION_BOUND, color="red", linestyle="--", label=f"target {_CREATION_BOUND:.2f}")
    counts = sorted({row["fields"] for row in creation})
    axes.set_xticks(range(len(counts)), [f"{n} fields" for n in counts])
    axes.set_ylim(0.9, max(1.3, *(row["ratio"] + 0.05 for row in creation)))
    axes.set_ylabel("metakit / plain @dataclass")
    axes.set_title("class creation")
    axes.legend()


# --- the command ----------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m metakit bench",
        description="Measure metakit against its peers on the example engine metadata.",
    )
    parser.add_argument("--quick", action="store_true", help="a shorter run: under 30 s")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG chart to PATH (needs matplotlib)")
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="measure broadcast_metadata against broadcast_object_list instead (needs torch)",
    )
    return parser


def _run(quick: bool, progress: _Progress) -> dict[str, Any]:
    """Demo, measure and print everything; the results as the JSON object."""
    settings = _QUICK if quick else _FULL
    started = time.perf_counter()
    progress.phase("loading the engine metadata")
    subject = _load_subject()
    versions = _versions()
    _print_header(versions, quick)
    _demo(subject)
    progress.phase("measuring the conversions, side by side")
    calls, call_rounds = _measure_calls(subject, settings, progress)
    _print_calls(subject, calls, call_rounds)
    sweep, sweep_rounds = None, None
    if subject.make_sized is not None:
        progress.phase("measuring by tensor size")
        sweep, sweep_rounds = _measure_sweep(subject.make_sized, settings, progress)
    _print_sweep(sweep, sweep_rounds)
    progress.phase("measuring class creation")
    creation, creation_rounds = _measure_creation(settings, progress)
    _print_creation(creation, creation_rounds)
    targets = _targets(calls, sweep, creation)
    _print_targets(targets)
    return {
        "schema": 1,
        "completed": True,
        "quick": quick,
        "seconds": time.perf_counter() - started,
        "versions": versions,
        "subject": {
            "class": subject.cls.__qualname__,
            "fields": len(_field_names(subject.cls)),
            "values": "torch tensors and ints" if subject.torch_version else "plain objects (torch is not installed)",
        },
        "rounds": {"calls": call_rounds, "sweep": sweep_rounds, "creation": creation_rounds},
        "calls": [dict(row.asdict_zerocopy()) for row in calls],
        "sweep": None if sweep is None else [dict(row.asdict_zerocopy()) for row in sweep],
        "creation": [dict(row.asdict_zerocopy()) for row in creation],
        "targets": [dict(row.asdict_zerocopy()) for row in targets],
    }


def main(argv: Sequence[str]) -> int:
    """Run ``python -m metakit bench``; return the exit status.

    The status is 1 only if the benchmark is broken, never because a target
    was missed.
    """
    parser = _parser()
    args = parser.parse_args(list(argv))
    if args.distributed:
        if args.plot:
            parser.error("--plot does not apply to --distributed")
        # Written separately, and it needs torch: imported only here.
        distbench = importlib.import_module("metakit._distbench")
        status: int = distbench.main(quick=args.quick, json_path=args.json)
        return status
    can_plot = _installed("matplotlib") is not None
    if args.plot and not can_plot:
        print(f"matplotlib is not installed: no chart will be written to {args.plot}", file=sys.stderr)
    progress = _Progress()
    try:
        report = _run(args.quick, progress)
    except _Broken as error:
        print(f"error: the benchmark is broken: {error}", file=sys.stderr)
        return 1
    if args.json:
        _write_json(args.json, report)
        print(f"wrote {args.json}")
    if args.plot and can_plot:
        _write_plot(args.plot, report)
        print(f"wrote {args.plot}")
    progress.phase(f"done in {report['seconds']:.1f} s")
    return 0
