"""The design's performance targets, as ratios measured in one run, each with PASS, MISS or SKIP."""

from __future__ import annotations

from dataclasses import dataclass

from metakit import ZeroCopy
from metakit.bench.calls import METHOD, CallRow
from metakit.bench.creation import BOUNDS, SCENARIOS, CreationRow
from metakit.bench.replace import METHOD as REPLACE_METHOD
from metakit.bench.replace import ReplaceRow
from metakit.bench.sweep import SweepRow
from metakit.bench.wire import RECORDS as WIRE_RECORDS
from metakit.bench.wire import WireResults


@dataclass(frozen=True)
class TargetRow(ZeroCopy):
    """One target of the design, as measured."""

    key: str
    label: str
    ratio: float | None
    """On the best samples: what the status judges."""
    bound: float
    at_least: bool
    status: str
    median_ratio: float | None = None
    """The same ratio on the median samples, beside it: a ratio near its bound may pass on one and miss on the
    other."""


Ratios = tuple[float, float] | None
"""A ratio on the best samples and on the median ones, or None where it was not measured."""


def _target(key: str, label: str, ratios: Ratios, bound: float, *, at_least: bool = False) -> TargetRow:
    ratio, median = ratios if ratios is not None else (None, None)
    met = ratio is not None and (ratio >= bound if at_least else ratio <= bound)
    status = "SKIP" if ratio is None else "PASS" if met else "MISS"
    return TargetRow(key, label, ratio, bound, at_least, status, median)


def _over(mine: tuple[float, float], theirs: tuple[float, float]) -> tuple[float, float]:
    """*mine* over *theirs*, best over best and median over median."""
    return mine[0] / theirs[0], mine[1] / theirs[1]


def targets(
    calls: list[CallRow],
    replace: list[ReplaceRow],
    sweep: list[SweepRow] | None,
    creation: list[CreationRow],
    wire: WireResults | None,
) -> list[TargetRow]:
    """The design's performance targets (its Performance section), as measured in this run, on the best samples."""
    ns = {row.key: (row.ns, row.median_ns) for row in calls if row.ns is not None and row.median_ns is not None}
    method, literal, skip = ns[METHOD], ns["hand_written"], ns["metakit_skip_fields"]
    flat = (
        _over((sweep[-1].metakit_ns, sweep[-1].metakit_median_ns), (sweep[0].metakit_ns, sweep[0].metakit_median_ns))
        if sweep
        else None
    )
    replaced = {
        (row.record, row.key): (row.ns, row.median_ns)
        for row in replace
        if row.ns is not None and row.median_ns is not None
    }
    return [
        _target(
            "method_vs_literal", "asdict_zerocopy() / hand-written dict literal method", _over(method, literal), 1.05
        ),
        _target("flat_in_tensor_size", "asdict_zerocopy() at 10^7 / at 10^3 tensor elements", flat, 1.2),
        _target("skip_fields", "asdict_zerocopy(2 skip_fields) / asdict_zerocopy()", _over(skip, method), 1.3),
        *[
            _target(
                f"replace_{count}",
                f"dataclasses.replace / metakit.replace, {count} fields",
                _over(replaced[record, "dataclasses_replace"], replaced[record, REPLACE_METHOD]),
                2.0,
                at_least=True,
            )
            for record, count in dict.fromkeys((row.record, row.fields) for row in replace if not row.frozen)
        ],
        *[
            _target(
                f"creation_{row.fields}_{row.scenario}",
                f"class creation / plain @dataclass, wall time, {row.fields} fields, {SCENARIOS[row.scenario]}",
                (row.ratio, row.median_ratio),
                BOUNDS[row.scenario],
            )
            for row in creation
        ],
        *_wire_targets(wire),
    ]


def _wire_targets(wire: WireResults | None) -> list[TargetRow]:
    """At least the bound's times faster than the msgpack peer on each record, and a header no larger."""
    speed = {row.record: (row.ratio, row.median_ratio) for row in wire.rows if row.step == "round_trip"} if wire else {}
    headers = {}
    for size in wire.sizes if wire else ():
        header = size.peer_header_bytes / size.metakit_header_bytes
        headers[size.record] = (header, header)  # counted, not timed: one figure
    short = {record.key: record.label.split(":")[0] for record in WIRE_RECORDS}
    return [
        *[
            _target(
                f"wire_{record.key}",
                f"msgpack peer / wire.pack + wire.unpack, {short[record.key]}",
                speed.get(record.key),
                record.bound,
                at_least=True,
            )
            for record in WIRE_RECORDS
        ],
        *[
            _target(
                f"wire_header_{record.key}",
                f"msgpack peer's header / wire's header, bytes, {short[record.key]}",
                headers.get(record.key),
                1.0,
                at_least=True,
            )
            for record in WIRE_RECORDS
        ],
    ]


def ratio_text(ratio: float, bound: float, digits: int = 3, *, percent: bool = False) -> str:
    """*ratio* to *digits* decimals (as a signed percentage over 1 if *percent*), or as many more as it takes to
    tell it from *bound*: a miss never reads as the bound itself."""
    shown, limit = (ratio - 1, bound - 1) if percent else (ratio, bound)
    scale = 100 if percent else 1
    while digits < 6 and shown != limit and round(shown * scale, digits) == round(limit * scale, digits):
        digits += 1
    return f"{shown:+.{digits}%}" if percent else f"{shown:.{digits}f}"


def print_targets(rows: list[TargetRow]) -> None:
    """Print every target with its measured ratio and status, and how many were met."""
    print("\n== Targets (the design's Performance section): the ratio on the best samples (on the medians)")
    width = max(len(row.label) for row in rows)
    for row in rows:
        sign = ">=" if row.at_least else "<="
        ratio = "-" if row.ratio is None else ratio_text(row.ratio, row.bound)
        median = "" if row.median_ratio is None else f"({ratio_text(row.median_ratio, row.bound)})"
        print(f"  {row.label:<{width}}  {ratio:>7} {median:>7}  {sign} {row.bound:<5}  {row.status}")
    met = sum(row.status == "PASS" for row in rows)
    measured = sum(row.status != "SKIP" for row in rows)
    print(
        f"{met} of {measured} measured targets met, on the best samples of one run. A missed target is reported,"
        " not an error. The design bounds class creation in instructions (.ci/count-creation,"
        " docs/benchmarks.md); its wall time stands in here."
    )
