"""The side-by-side benchmark: ``python -m metakit bench [--quick] [--json PATH] [--plot PATH] [--distributed]``.

It runs on the example engine metadata (``metakit.examples.engine``).  First a
short demo (``demo``): the generated source of ``FlashAttentionMetadata``, the
``Cls(**d)`` round trip, and that the tensors in the dict are the very same
objects.  Then, in one run, each part in its own module:

- ``calls``: ns per call of every way to turn the 15-field record into a
  dict, and each one's ratio to metakit: ``dataclasses.asdict``, the
  ``fields()`` comprehension (vLLM's ``asdict_zerocopy``, first and as
  merged), attrs and msgspec on equivalent classes (where installed), a
  hand-written dict literal, metakit's method, its function form, and
  ``skip_fields`` with two names;
- ``replace``: a new record with one field changed, on the 15-field record and
  on a 23-field one modelled on vLLM V1's ``CommonAttentionMetadata``:
  ``__init__`` alone, ``dataclasses.replace``, ``copy.replace`` (3.13+),
  ``attrs.evolve``, ``msgspec.structs.replace``, a hand-written replace and
  ``metakit.replace``;
- ``sweep``: the cost of ``dataclasses.asdict`` and of metakit as the largest
  tensor grows from 10^3 to 10^7 elements;
- ``creation``: the cost of creating a ``@dataclass`` with and without
  metakit, for 5, 15 and 50 fields;
- ``wire``: ``wire.pack`` + ``wire.unpack`` against an encoder and typed
  decoder written the way vLLM V1's ``MsgpackEncoder``/``MsgpackDecoder``
  work (``msgpack_peer``), on records of 8 KB to 8 MB: times, headers and
  buffers (needs torch, msgspec and numpy);
- ``targets``: the design's targets, as ratios, each with PASS or MISS.

Each figure is measured in many rounds that interleave the contenders, so
that a slow moment of the machine hits them all alike (``timing``).  The
report gives the best and the median of the rounds, and marks a figure as
unstable, as pyperf does, when the standard deviation of its samples
exceeds 10% of their mean; ratios and targets use the best.  A missed
target is reported, never an error: the exit status is 1 only when the
benchmark itself is broken (a contender returns the wrong result), and 2
for a usage error found before anything runs.

Without torch the same measurements run on torch-free twins of the engine
classes (the same field names, plain objects as values), and only the
tensor-size sweep and the wire table are skipped.

``--json PATH`` writes the results as one JSON object::

    {
      "schema": 3,
      "completed": true,                # false never appears: a broken run writes nothing
      "quick": bool,
      "seconds": float,                 # wall time of the whole run
      "versions": {"metakit": str, "python": str, "implementation": str, "platform": str,
                   "torch": str | null, "attrs": str | null, "msgspec": str | null},
      "subject": {"class": str, "fields": int, "values": str},
      "rounds": {"calls": int, "replace": int, "sweep": int | null, "creation": int, "wire": int | null},
      "calls": [{"key": str, "label": str, "ns": float | null, "median_ns": float | null,
                 "ratio": float | null, "unstable": bool, "note": str | null}],
                                        # ns: the best round; ratio: ns / ns of the metakit method
      "replace": [{"record": str, "fields": int, "key": str, "label": str, "ns": float | null,
                   "median_ns": float | null, "ratio": float | null, "unstable": bool,
                   "note": str | null, "frozen": bool}],  # ratio: ns / ns of metakit.replace on the same record
      "sweep": [{"elements": int, "dataclasses_asdict_ns": float, "metakit_ns": float,
                 "dataclasses_asdict_median_ns": float, "metakit_median_ns": float,
                 "unstable": bool}] | null,
      "creation": [{"fields": int, "scenario": "same" | "new", "plain_us": float,
                    "metakit_us": float, "ratio": float, "plain_median_us": float,
                    "metakit_median_us": float, "median_ratio": float}],
      "wire": {"rows": [{"record": str, "step": "round_trip" | "send" | "receive",
                         "metakit_us": float, "metakit_median_us": float,
                         "peer_us": float, "peer_median_us": float,
                         "ratio": float, "median_ratio": float, "unstable": bool}],
                                        # ratio: peer_us / metakit_us (above 1: metakit is faster)
               "sizes": [{"record": str, "label": str, "tensor_bytes": int,
                          "metakit_header_bytes": int, "peer_header_bytes": int,
                          "metakit_buffers": int, "peer_buffers": int,
                          "metakit_bytes": int, "peer_bytes": int}]} | null,
      "targets": [{"key": str, "label": str, "ratio": float | null, "bound": float,
                   "at_least": bool, "status": "PASS" | "MISS" | "SKIP"}]
    }

A ``null`` ns or ratio means the contender or measurement could not run (its
``note`` says why: a peer that is not installed, or no torch).

``python -m metakit.bench.docs`` (``make docs``) writes ``docs/benchmarks.md``
from such records, the full runs that ``make bench-record`` keeps in ``.ci/``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from metakit._cli import ArgumentParser
from metakit.bench import report
from metakit.bench.calls import measure_calls, print_calls
from metakit.bench.creation import measure_creation, print_creation
from metakit.bench.demo import demo, print_header
from metakit.bench.plot import write_plot
from metakit.bench.replace import measure_replace, print_replace
from metakit.bench.subject import field_names, load_subject
from metakit.bench.sweep import measure_sweep, print_sweep
from metakit.bench.targets import print_targets
from metakit.bench.targets import targets as measure_targets
from metakit.bench.timing import FULL, QUICK, Broken, Progress
from metakit.bench.wire import measure_wire, print_wire
from metakit.bench.wire import missing as wire_missing


def _broadcast_benchmark() -> ModuleType:
    """The broadcast benchmark's module, ``metakit.bench.broadcast``: it imports torch, so only when asked for."""
    return importlib.import_module("metakit.bench.broadcast")


def _parser(prog: str) -> ArgumentParser:
    parser = ArgumentParser(
        prog=prog,
        description="Measure metakit against its peers on the example engine metadata.",
    )
    parser.add_argument("--quick", action="store_true", help="a shorter run: under 30 s")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG chart to PATH, a .png (needs matplotlib)")
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="run the broadcast benchmark instead: broadcast_metadata against vLLM's way and others (needs torch)",
    )
    return parser


def _run(quick: bool, progress: Progress) -> dict[str, Any]:
    """Demo, measure and print everything; the results as the JSON object."""
    settings = QUICK if quick else FULL
    started = time.perf_counter()
    progress.phase("loading the engine metadata")
    subject = load_subject()
    versions = report.versions()
    print_header(versions, quick)
    demo(subject)
    progress.phase("measuring the conversions, side by side")
    calls, call_rounds = measure_calls(subject, settings, progress)
    print_calls(subject, calls, call_rounds)
    progress.phase("measuring replace, side by side")
    replace, replace_rounds = measure_replace(subject, settings, progress)
    print_replace(replace, replace_rounds)
    sweep, sweep_rounds = None, None
    if subject.make_sized is not None:
        progress.phase("measuring by tensor size")
        sweep, sweep_rounds = measure_sweep(subject.make_sized, settings, progress)
    print_sweep(sweep, sweep_rounds)
    progress.phase("measuring class creation")
    creation, creation_rounds = measure_creation(settings, progress)
    print_creation(creation, creation_rounds)
    wire, wire_rounds = None, None
    if not wire_missing():
        progress.phase("measuring the wire against vLLM's msgpack method, side by side")
        wire, wire_rounds = measure_wire(settings, progress)
    print_wire(wire, wire_rounds)
    targets = measure_targets(calls, replace, sweep, creation, wire)
    print_targets(targets)
    return {
        "schema": 3,
        "completed": True,
        "quick": quick,
        "seconds": time.perf_counter() - started,
        "versions": versions,
        "subject": {
            "class": subject.cls.__qualname__,
            "fields": len(field_names(subject.cls)),
            "values": "torch tensors and ints" if subject.torch_version else "plain objects (torch is not installed)",
        },
        "rounds": {
            "calls": call_rounds,
            "replace": replace_rounds,
            "sweep": sweep_rounds,
            "creation": creation_rounds,
            "wire": wire_rounds,
        },
        "calls": [dict(row.asdict_zerocopy()) for row in calls],
        "replace": [dict(row.asdict_zerocopy()) for row in replace],
        "sweep": None if sweep is None else [dict(row.asdict_zerocopy()) for row in sweep],
        "creation": [dict(row.asdict_zerocopy()) for row in creation],
        "wire": None
        if wire is None
        else {
            "rows": [dict(row.asdict_zerocopy()) for row in wire.rows],
            "sizes": [dict(size.asdict_zerocopy()) for size in wire.sizes],
        },
        "targets": [dict(row.asdict_zerocopy()) for row in targets],
    }


def main(argv: Sequence[str], prog: str = "python -m metakit bench") -> int:
    """Run ``python -m metakit bench``; return the exit status.

    The status is 2 for a usage error, found before anything runs (an output
    path that cannot be written, a missing optional dependency); 1 only if
    the benchmark is broken, never because a target was missed.
    """
    args = _parser(prog).parse_args(list(argv))
    problem = _usage_problem(args)
    if problem:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return 2
    if args.distributed:
        status: int = _broadcast_benchmark().main(quick=args.quick, json_path=args.json)
        return status
    progress = Progress()
    try:
        results = _run(args.quick, progress)
    except Broken as error:
        print(f"error: the benchmark is broken: {error}", file=sys.stderr)
        return 1
    outputs: list[tuple[str, str | None, Callable[[str], object]]] = [
        ("--json", args.json, lambda path: report.write_json(path, results)),
        ("--plot", args.plot, lambda path: write_plot(path, results)),
    ]
    for option, path, write in outputs:
        if path:
            problem = report.write_output(option, path, write)
            if problem:
                print(f"{prog}: error: {problem}", file=sys.stderr)
                return 2
            print(f"wrote {path}")
    progress.phase(f"done; the measurements took {results['seconds']:.1f} s")
    return 0


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What makes the run impossible as asked, found before it starts; None if nothing."""
    problem = _output_problem(args.json, args.plot)
    if problem:
        return problem
    if args.distributed:
        if args.plot:
            return "--plot does not apply to --distributed"
        missing = [name for name in ("torch", "numpy") if report.installed(name) is None]
        if missing:
            return f"--distributed needs {' and '.join(missing)}: pip install 'metakit[torch,bench]'"
    elif args.plot and report.installed("matplotlib") is None:
        return "--plot needs matplotlib: pip install 'metakit[bench]' (or matplotlib)"
    return None


def _output_problem(json_path: str | None, plot: str | None) -> str | None:
    """What keeps the run from writing the files ``--json`` and ``--plot`` name; None if nothing."""
    for option, path in (("--json", json_path), ("--plot", plot)):
        problem = None if path is None else report.output_problem(path)
        if problem:
            return f"cannot write {option} {path or repr(path)}: {problem}"
    if json_path is not None and plot is not None and os.path.realpath(json_path) == os.path.realpath(plot):
        return f"--json and --plot name the same file, {json_path}: the chart would replace the results"
    if plot is not None and not plot.lower().endswith(".png"):
        return f"--plot writes a PNG chart: give it a path that ends in .png, not {plot!r}"
    return None
