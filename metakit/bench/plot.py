"""The chart: a PNG of the calls, replace, the tensor sizes, class creation and the wire (needs matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metakit.bench.creation import BOUNDS, SCENARIOS
from metakit.bench.targets import ratio_text

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


def write_plot(path: str, report: Mapping[str, Any]) -> None:
    """A PNG of the call table, the replace table, the tensor-size sweep, the creation ratios and the wire."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(27, 5.2), layout="constrained")
    calls_axes, replace_axes, sweep_axes, creation_axes, wire_axes = figure.subplots(1, 5)
    versions = report["versions"]
    quick = " - a --quick run: few rounds, rough figures" if report["quick"] else ""
    figure.suptitle(
        f"metakit {versions['metakit']}, {versions['implementation']} {versions['python']},"
        f" torch {versions['torch'] or 'not installed'}{quick}",
        color="C3" if quick else "black",
    )
    _plot_calls(calls_axes, report)
    _plot_replace(replace_axes, report["replace"])
    _plot_sweep(sweep_axes, report["sweep"])
    _plot_creation(creation_axes, report["creation"])
    _plot_wire(wire_axes, report["wire"])
    figure.savefig(path, dpi=100, format="png")


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


def replace_labels(rows: list[dict[str, Any]]) -> list[str]:
    """The replace chart's row labels: one per record and way (two records may have as many fields)."""
    return [f"{row['fields']} fields{', frozen' * row['frozen']}: {_SHORT_REPLACE[row['key']]}" for row in rows]


def _plot_replace(axes: Any, replace: list[dict[str, Any]]) -> None:
    rows = [row for row in replace if row["ns"] is not None]
    labels = replace_labels(rows)
    colors = ["C1" if row["key"] == "metakit_replace" else "C2" if row["key"] == "init" else "C0" for row in rows]
    bars = axes.barh(labels, [row["ns"] for row in rows], color=colors)
    axes.bar_label(bars, labels=[f" x{row['ratio']:.2f}" for row in rows], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlim(right=max(row["ns"] for row in rows) * 1.25)  # room for the labels
    axes.set_xlabel("ns per call; x = ratio to metakit.replace on the same record")
    axes.set_title("replace one field")


_SHORT_REPLACE = {
    "init": "__init__ alone",
    "dataclasses_replace": "dataclasses.replace",
    "copy_replace": "copy.replace",
    "attrs_evolve": "attrs.evolve",
    "msgspec_replace": "msgspec replace",
    "hand_written": "hand-written",
    "metakit_replace": "metakit.replace",
}


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
        bars = axes.bar(positions, [row["ratio"] for row in rows], width=0.4, label=SCENARIOS[scenario])
        bound = BOUNDS[scenario]
        axes.bar_label(bars, labels=[ratio_text(row["ratio"], bound, 2) for row in rows], fontsize=8)
        axes.hlines(
            bound,
            offset - 0.45,
            len(rows) - 1 + offset + 0.2,
            color=bars.patches[0].get_facecolor(),
            linestyle="--",
            label=f"target {bound:.2f}, {SCENARIOS[scenario]}",
        )
    counts = sorted({row["fields"] for row in creation})
    axes.set_xticks(range(len(counts)), [f"{n} fields" for n in counts])
    # From 0: bar heights are the ratios; room above the bars for the legend.
    axes.set_ylim(0, max(1.4, *(row["ratio"] for row in creation)) * 1.35)
    axes.set_ylabel("metakit / plain @dataclass (best of the rounds)")
    axes.set_title("class creation")
    axes.legend(loc="upper center", ncol=2, fontsize=8)


def _plot_wire(axes: Any, wire: Mapping[str, Any] | None) -> None:
    if wire is None:
        axes.text(0.5, 0.5, "torch, msgspec or numpy is not installed:\nno wire table", ha="center", va="center")
        axes.set_axis_off()
        return
    rows = [row for row in wire["rows"] if row["step"] == "round_trip"]
    labels = {size["record"]: size["label"].split(":")[0] for size in wire["sizes"]}
    positions = range(len(rows))
    axes.bar([i - 0.2 for i in positions], [row["metakit_us"] for row in rows], width=0.4, color="C1", label="metakit")
    peer = axes.bar(
        [i + 0.2 for i in positions],
        [row["peer_us"] for row in rows],
        width=0.4,
        color="C0",
        label="msgpack peer (vLLM V1's way)",
    )
    axes.bar_label(peer, labels=[f"x{row['ratio']:.2f}" for row in rows], fontsize=8)
    axes.set_xticks(list(positions), [labels[row["record"]] for row in rows])
    axes.set_ylim(0, max(max(row["metakit_us"], row["peer_us"]) for row in rows) * 1.3)  # room for the legend
    axes.set_ylabel("us per pack + unpack (best of the rounds)")
    axes.set_title("wire: pack + unpack; x = peer / metakit")
    axes.legend(loc="upper left", fontsize=8)
