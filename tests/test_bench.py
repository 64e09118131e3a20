"""``python -m metakit bench``: it runs to the end, writes the JSON it documents, and draws its chart.

Nothing here asserts a timing: a slow or busy machine changes the figures,
never the shape of the results.  One ``--quick`` run serves every test that
reads its output.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from metakit import bench
from metakit.bench import calls, docs, replace, report, timing, wire
from metakit.bench.targets import TargetRow, print_targets, ratio_text

HAS_TORCH = report.installed("torch") is not None
HAS_WIRE = not wire.missing()  # torch, msgspec and numpy
HAS_MATPLOTLIB = report.installed("matplotlib") is not None

CALL_KEYS = [
    "dataclasses_asdict",
    "fields_comprehension",
    "vllm_skip_fields",
    "attrs_asdict",
    "msgspec_asdict",
    "hand_written",
    "hand_written_function",
    "metakit_method",
    "metakit_function",
    "metakit_skip_fields",
]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any]
    png: Path


SHORT = {f"{part}_seconds": 0.2 for part in ("call", "replace", "sweep", "creation", "wire")}
SHORT_RUN = f"""import dataclasses, sys
from metakit import bench
bench.QUICK = dataclasses.replace(bench.QUICK, **{SHORT!r})"""


@pytest.fixture
def short_quick_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--quick`` with each part's time cut to a fifth of a second, for tests that run it in-process."""
    monkeypatch.setattr(bench, "QUICK", dataclasses.replace(bench.QUICK, **SHORT))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("bench")
    json_path, png_path = out / "bench.json", out / "bench.png"
    argv = ["--quick", "--json", str(json_path)]
    if HAS_MATPLOTLIB:
        argv += ["--plot", str(png_path)]
    # The quick run with each part's time cut to a fifth of a second: every part still runs its
    # least rounds, and the output has the same shape.  The command line itself runs in test_cli.
    command = [sys.executable, "-c", f"{SHORT_RUN}\nsys.exit(bench.main({argv!r}))"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(json_path.read_text(encoding="utf-8"))
    return Run(done.returncode, done.stdout, done.stderr, report, png_path)


def test_quick_run_completes_and_reports_every_part(run: Run) -> None:
    assert run.report["completed"] is True
    assert run.report["quick"] is True
    assert run.report["seconds"] > 0
    for heading in ("== Demo", "== Dict of", "== Class creation", "== Wire", "== Targets"):
        assert heading in run.stdout
    assert "done; the measurements took" in run.stderr  # the progress lines


def test_json_has_the_documented_top_level_shape(run: Run) -> None:
    assert set(run.report) == {
        "schema",
        "completed",
        "quick",
        "seconds",
        "versions",
        "subject",
        "rounds",
        "calls",
        "replace",
        "sweep",
        "creation",
        "wire",
        "targets",
    }
    assert run.report["schema"] == 3
    versions = run.report["versions"]
    assert set(versions) == {"metakit", "source", "python", "implementation", "platform", "torch", "attrs", "msgspec"}
    # Which code a record measured: the version number stays the same from change to change.  (Found by an
    # outside tester: the recorded runs predated changes, and nothing showed it.)
    assert versions["source"] == report.source_digest()
    assert re.fullmatch("[0-9a-f]{12}", versions["source"])
    assert f"(source {versions['source']})" in run.stdout
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert (versions["torch"] is not None) == HAS_TORCH
    assert run.report["subject"] == {
        "class": "FlashAttentionMetadata",
        "fields": 15,
        "values": "torch tensors and ints" if HAS_TORCH else "plain objects (torch is not installed)",
    }


def test_every_part_ran_several_interleaved_rounds(run: Run) -> None:
    rounds = run.report["rounds"]
    assert set(rounds) == {"calls", "replace", "sweep", "creation", "wire"}
    assert rounds["calls"] >= 3
    assert rounds["replace"] >= 3
    assert rounds["creation"] >= 3
    if HAS_TORCH:
        assert rounds["sweep"] >= 3
    else:
        assert rounds["sweep"] is None
    if HAS_WIRE:
        assert rounds["wire"] >= 3
    else:
        assert rounds["wire"] is None
    assert f"{rounds['calls']} interleaved rounds" in run.stdout


def test_call_table_has_every_contender_with_its_ratio_to_metakit(run: Run) -> None:
    calls = run.report["calls"]
    assert [row["key"] for row in calls] == CALL_KEYS
    method_ns = calls[CALL_KEYS.index("metakit_method")]["ns"]
    for row in calls:
        assert set(row) == {"key", "label", "ns", "median_ns", "ratio", "unstable", "note"}
        peer = row["key"].split("_")[0]
        installed = peer not in ("attrs", "msgspec") or report.installed(peer) is not None
        if installed:
            assert 0 < row["ns"] <= row["median_ns"]
            assert row["ratio"] == pytest.approx(row["ns"] / method_ns)
            assert row["note"] is None
        else:
            assert (row["ns"], row["median_ns"], row["ratio"], row["unstable"]) == (None, None, None, False)
            assert row["note"] == f"{peer} is not installed"
            assert f"({peer} is not installed)" in run.stdout


def test_tensor_sweep_runs_with_torch_and_is_skipped_without(run: Run) -> None:
    sweep = run.report["sweep"]
    if HAS_TORCH:
        assert [row["elements"] for row in sweep] == [10**3, 10**4, 10**5, 10**6, 10**7]
        for row in sweep:
            assert 0 < row["dataclasses_asdict_ns"] <= row["dataclasses_asdict_median_ns"]
            assert 0 < row["metakit_ns"] <= row["metakit_median_ns"]
    else:
        assert sweep is None
        assert "torch is not installed" in run.stdout
        assert "Tensor-size sweep: skipped" in run.stdout


def test_class_creation_covers_5_15_and_50_fields_in_both_scenarios(run: Run) -> None:
    creation = run.report["creation"]
    assert [(row["fields"], row["scenario"]) for row in creation] == [
        (count, scenario) for count in (5, 15, 50) for scenario in ("same", "new")
    ]
    for row in creation:
        assert 0 < row["plain_us"] <= row["plain_median_us"]
        assert 0 < row["metakit_us"] <= row["metakit_median_us"]
        assert row["ratio"] == pytest.approx(row["metakit_us"] / row["plain_us"])
        assert row["median_ratio"] == pytest.approx(row["metakit_median_us"] / row["plain_median_us"])
        assert isinstance(row["unstable"], bool)


def test_targets_are_ratios_with_a_status_that_matches_them(run: Run) -> None:
    targets = run.report["targets"]
    assert [row["key"] for row in targets[:5]] == [
        "method_vs_literal",
        "flat_in_tensor_size",
        "skip_fields",
        "replace_15",
        "replace_23",
    ]
    assert [(row["key"], row["bound"]) for row in targets[5:11]] == [
        (f"creation_{count}_{scenario}", bound)
        for count in (5, 15, 50)
        for scenario, bound in (("same", 1.10), ("new", 1.15))
    ]
    assert [(row["key"], row["bound"], row["at_least"]) for row in targets[11:]] == [
        ("wire_8kb", 1.5, True),
        ("wire_261kb", 1.5, True),
        ("wire_2mb", 1.0, True),
        ("wire_8mb", 1.0, True),
        ("wire_header_8kb", 1.0, True),
        ("wire_header_261kb", 1.0, True),
        ("wire_header_2mb", 1.0, True),
        ("wire_header_8mb", 1.0, True),
    ]
    bounds = {row["key"]: (row["bound"], row["at_least"]) for row in targets[:5]}
    assert bounds == {
        "method_vs_literal": (1.05, False),
        "flat_in_tensor_size": (1.2, False),
        "skip_fields": (1.3, False),
        "replace_15": (2.0, True),
        "replace_23": (2.0, True),
    }
    for row in targets:
        if row["ratio"] is None:
            assert row["status"] == "SKIP"
            if row["key"].startswith("wire_"):
                assert not HAS_WIRE
            else:
                assert row["key"] == "flat_in_tensor_size"
                assert not HAS_TORCH
            continue
        met = row["ratio"] >= row["bound"] if row["at_least"] else row["ratio"] <= row["bound"]
        assert row["status"] == ("PASS" if met else "MISS")
        median = ratio_text(row["median_ratio"], row["bound"])
        assert f"{ratio_text(row['ratio'], row['bound'])} ({median})" in run.stdout
    # Beside each verdict, the same ratio on the median samples.  (Found by an outside tester: the best samples
    # alone swing a ratio by more than its margin.)
    medians = {row["key"]: row["median_ns"] for row in run.report["calls"]}
    by_key = {row["key"]: row for row in targets}
    assert by_key["method_vs_literal"]["median_ratio"] == pytest.approx(
        medians["metakit_method"] / medians["hand_written"]
    )


WIRE_RECORDS = ["8kb", "261kb", "2mb", "8mb"]


def test_wire_table_times_every_step_of_both_ways_on_every_record(run: Run) -> None:
    table = run.report["wire"]
    if not HAS_WIRE:
        assert table is None
        assert f"== Wire: skipped, it needs {' and '.join(wire.missing())}" in run.stdout
        return
    assert set(table) == {"rows", "sizes"}
    assert [(row["record"], row["step"]) for row in table["rows"]] == [
        (record, step) for record in WIRE_RECORDS for step in ("round_trip", "send", "receive", "receive_bytes")
    ]
    for row in table["rows"]:
        assert 0 < row["metakit_us"] <= row["metakit_median_us"]
        assert 0 < row["peer_us"] <= row["peer_median_us"]
        assert row["ratio"] == pytest.approx(row["peer_us"] / row["metakit_us"])
        assert row["median_ratio"] == pytest.approx(row["peer_median_us"] / row["metakit_median_us"])
        assert f"{row['ratio']:.2f} ({row['median_ratio']:.2f})" in run.stdout
    assert f"best (median) of {run.report['rounds']['wire']} interleaved rounds" in run.stdout


def test_wire_sizes_count_both_headers_and_every_buffer(run: Run) -> None:
    if not HAS_WIRE:
        assert run.report["wire"] is None
        return
    sizes = run.report["wire"]["sizes"]
    assert [size["record"] for size in sizes] == WIRE_RECORDS
    # The sizes of the broadcast benchmark's records: 8 KB, 261 KB, 2 MB and 8 MB of tensors.
    assert [round(size["tensor_bytes"] / 1024) for size in sizes] == [8, 261, 2111, 8261]
    for size in sizes:
        assert size["metakit_bytes"] >= size["metakit_header_bytes"] + size["tensor_bytes"]
        # The peer sends its small tensors inside the header, each tensor's bytes once, nothing else.
        assert size["peer_bytes"] > size["tensor_bytes"]
        assert size["peer_buffers"] >= 1
        assert f"{size['metakit_header_bytes']:>9,}  {size['peer_header_bytes']:>9,}" in run.stdout


def test_wire_targets_are_the_round_trip_ratio_and_the_header_ratio(run: Run) -> None:
    targets = {row["key"]: row for row in run.report["targets"]}
    if not HAS_WIRE:
        assert all(targets[f"wire_{record}"]["status"] == "SKIP" for record in WIRE_RECORDS)
        return
    rows = {row["record"]: row for row in run.report["wire"]["rows"] if row["step"] == "round_trip"}
    sizes = {size["record"]: size for size in run.report["wire"]["sizes"]}
    for record in WIRE_RECORDS:
        assert targets[f"wire_{record}"]["ratio"] == rows[record]["ratio"]
        header = sizes[record]["peer_header_bytes"] / sizes[record]["metakit_header_bytes"]
        assert targets[f"wire_header_{record}"]["ratio"] == pytest.approx(header)
    assert "msgpack peer / wire.pack + wire.unpack, 8 KB" in run.stdout


ROOT = Path(__file__).resolve().parent.parent
RECORDED = sorted(ROOT.glob(".ci/bench-3.*.json"))
COUNTED = sorted(ROOT.glob(".ci/creation-3.*.json"))
CALLED = sorted(ROOT.glob(".ci/calls-3.*.json"))
BROADCAST = sorted(ROOT.glob(".ci/broadcast-3.*.json"))
PAGE = ROOT / "docs" / "benchmarks.md"


def test_docs_benchmarks_md_is_what_make_docs_generates_from_the_recorded_runs() -> None:
    # The sdist holds the records too (`make package` runs this test from it): a page without them failed there.
    assert RECORDED, "docs/benchmarks.md is there, but not the .ci/bench-3.X.json it is made from"
    assert BROADCAST, "docs/benchmarks.md is there, but not the .ci/broadcast-3.X.json it is made from"
    page = docs.render(
        docs.load(RECORDED), docs.load_counts(COUNTED), docs.load_call_counts(CALLED), docs.load_broadcasts(BROADCAST)
    )
    assert PAGE.read_text(encoding="utf-8") == page, "run `make docs`"


def _broadcast_row(record: str, ranks: int, metakit: float, vllm: float, three: float) -> dict[str, Any]:
    medians = {"metakit": metakit, "vllm": vllm, "three": three, "object": 9.0, "floor": 0.5}
    ratios = {way: time / metakit for way, time in medians.items()}
    met = {"vllm": ratios["vllm"] >= 1.0, **({"three": ratios["three"] >= 2.0} if record.startswith("8 KB") else {})}
    return {
        "record": record,
        "world_size": ranks,
        "median_ms": medians,
        "best_ms": {way: time / 2 for way, time in medians.items()},
        "median_ratio": ratios,
        "targets_met": met,
    }


def test_docs_page_gives_the_broadcast_benchmarks_figures_against_its_targets(tmp_path: Path) -> None:
    run = {
        "schema": 2,
        "quick": False,
        "seconds": 61.0,
        "versions": {**_versions("3.11.2"), "metakit": "0.1.0", "platform": "Linux", "torch": "2.13.0"},
        "setup": {"backend": "gloo", "world_sizes": [2, 4], "rounds": 11},
        "targets": {"vllm": 1.0, "three": 2.0},
        "rows": [_broadcast_row("8 KB: prefill", 2, 1.0, 4.0, 1.5), _broadcast_row("2 MB: prefill", 4, 4.0, 3.0, 5.0)],
    }
    path = tmp_path / "broadcast-3.11.json"
    path.write_text(json.dumps(run))
    lines = docs._broadcasts(docs.load_broadcasts([path]))
    assert "### CPython 3.11.2" in lines
    # Each way's median (best), and the two ratios the design bounds: marked only where they are targets.
    assert "| 8 KB: prefill | 2 | 1.000 (0.500) | 4.000 (2.000) | 1.500 (0.750) | 9.000 (4.500)" in lines[-3]
    assert lines[-3].endswith("| 4.00 ✓ | 1.50 ✗ |")
    assert lines[-2].endswith("| 0.75 ✗ | 1.25 |")
    assert docs._broadcasts([]) == []
    assert "[below](#broadcast_metadata-with-2-and-4-gloo-ranks)." in " ".join(docs._targets([], measured=True))
    assert "`metakit bench --distributed`: not in these records." in " ".join(docs._targets([]))
    (tmp_path / "bad.json").write_text(json.dumps({"schema": 3, "rows": []}))
    with pytest.raises(docs.RecordError, match=r"is not a record of `metakit bench --distributed --json`"):
        docs.load_broadcasts([tmp_path / "bad.json"])


def _count(python: str, rows: list[tuple[int, str, float, float]]) -> dict[str, Any]:
    return {
        "python": python,
        "classes": 100,
        "layouts": 3,
        "rows": [
            {"fields": n, "scenario": scenario, "plain": plain, "extra": extra, "extra_low": extra, "extra_high": extra}
            for n, scenario, plain, extra in rows
        ],
    }


def test_docs_page_gives_each_interpreters_instruction_counts_against_the_bounds(tmp_path: Path) -> None:
    newer = tmp_path / "creation-3.15.json"
    older = tmp_path / "creation-3.9.json"
    newer.write_text(json.dumps(_count("CPython 3.15.2", [(5, "same", 1e6, 100e3), (5, "new", 1e6, 151e3)])))
    older.write_text(json.dumps(_count("CPython 3.9.1", [(5, "same", 1e6, 101e3)])))
    counts = docs.load_counts([newer, older])
    assert [count["python"] for count in counts] == ["CPython 3.9.1", "CPython 3.15.2"]  # by version, not by name
    lines = docs._counts(counts)
    assert "| 5 | the same class again | +10% | +101 k (+10.1%) ✗ | +100 k (+10.0%) ✓ |" in lines
    assert "| 5 | new field names | +15% | - | +151 k (+15.1%) ✗ |" in lines
    assert docs._counts([]) == []
    (tmp_path / "bad.json").write_text(json.dumps({"python": "3.15"}))
    with pytest.raises(docs.RecordError, match=r"is not a record of `\.ci/count-creation --json`"):
        docs.load_counts([tmp_path / "bad.json"])


def test_docs_page_gives_each_interpreters_instructions_of_a_call_against_the_bound(tmp_path: Path) -> None:
    # The design's 3% bound on asdict_zerocopy()'s instructions had no tool that counted them: its figures
    # were typed into docs/internals.md by hand.  (Found by an outside tester.)
    for name, python, metakit in (
        ("calls-3.15.json", "CPython 3.15.0", 1031.0),
        ("calls-3.9.json", "CPython 3.9.1", 1020.0),
    ):
        record = {"python": python, "calls": 20_000, "layouts": 3, "literal": 1000.0, "signature": 1024.0}
        record["metakit"] = metakit
        (tmp_path / name).write_text(json.dumps(record))
    calls = docs.load_call_counts(sorted(tmp_path.glob("calls-*.json")))
    assert [count["python"] for count in calls] == ["CPython 3.9.1", "CPython 3.15.0"]  # by version, not by name
    lines = docs._call_counts(calls)
    assert "| `meta.asdict_zerocopy()` | | 1,020 | 1,031 |" in lines
    # What the signature alone costs, beside it: on 3.13 most of the bound.
    assert "| the same with `skip_fields=None`, unused | | 1,024 (+2.4%) | 1,024 (+2.4%) |" in lines
    assert "CPython 3.9.1 pays the most for it (+2.4%)." in " ".join(lines)
    assert "| more than the literal | ≤ +3% | +2.0% ✓ | +3.1% ✗ |" in lines
    assert docs._call_counts([]) == []
    (tmp_path / "bad.json").write_text(json.dumps({"python": "3.15", "calls": 1}))
    with pytest.raises(docs.RecordError, match=r"is not a record of `\.ci/count-calls --json`"):
        docs.load_call_counts([tmp_path / "bad.json"])
    record = {"python": "CPython 3.15.0", "calls": 1, "layouts": 3, "literal": 1.0, "metakit": 1.0}  # an old record
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(docs.RecordError, match=r"is not a record of `\.ci/count-calls --json`"):
        docs.load_call_counts([tmp_path / "bad.json"])


def test_docs_page_holds_the_wire_figures_and_every_target_of_a_run(run: Run, tmp_path: Path) -> None:
    record = tmp_path / "bench-quick.json"
    record.write_text(json.dumps(run.report), encoding="utf-8")
    page = tmp_path / "benchmarks.md"
    assert docs.main(["--output", str(page), str(record)]) == 0
    text = page.read_text(encoding="utf-8")
    assert "a --quick run: few rounds, rough figures" in " ".join(text.split())
    for target in run.report["targets"]:
        assert docs._text(target["label"]) in text
        if target["ratio"] is not None:
            shown = ratio_text(target["ratio"], target["bound"])
            assert f"{shown} {'✓' if target['status'] == 'PASS' else '✗'}" in text
    if HAS_WIRE:
        for row in run.report["wire"]["rows"]:
            assert f"| {row['metakit_us']:,.1f} ({row['metakit_median_us']:,.1f})" in text
            assert f"| {row['peer_us']:,.1f} ({row['peer_median_us']:,.1f})" in text
        for size in run.report["wire"]["sizes"]:
            assert f"| {size['metakit_header_bytes']:,} | {size['peer_header_bytes']:,} |" in text
    else:
        assert "### The wire against vLLM V1's msgpack method\n\nNot measured: " in text
    assert docs.main(["--check", "--output", str(page), str(record)]) == 0
    page.write_text(text.replace("Benchmarks", "Benchmarks, edited by hand"), encoding="utf-8")
    assert docs.main(["--check", "--output", str(page), str(record)]) == 1


def test_docs_page_judges_each_run_on_its_own_bound_when_a_bound_changed() -> None:
    def target(bound: float, ratio: float) -> dict[str, Any]:
        status = "PASS" if ratio <= bound else "MISS"
        return {"key": "k", "label": "a target", "ratio": ratio, "bound": bound, "at_least": False, "status": status}

    rows = docs._targets(
        [
            {"versions": _versions("3.10.1"), "targets": [target(1.05, 1.07)]},
            {"versions": _versions("3.11.2"), "targets": [target(1.10, 1.07)]},
        ]
    )
    assert "| a target | ≤ 1.05 | 1.070 ✗ | - |" in rows
    assert "| a target | ≤ 1.1 | - | 1.070 ✓ |" in rows


def _versions(python: str) -> dict[str, str]:
    return {"python": python, "implementation": "CPython"}


REPLACE_KEYS = [
    "init",
    "dataclasses_replace",
    "copy_replace",
    "attrs_evolve",
    "msgspec_replace",
    "hand_written",
    "metakit_replace",
]


def test_replace_table_has_every_way_on_the_15_and_the_23_field_record_and_a_frozen_one(run: Run) -> None:
    replace = run.report["replace"]
    records = [("FlashAttentionMetadata", 15), ("CommonAttentionRecord", 23), ("FrozenFlashAttentionMetadata", 15)]
    assert [(row["record"], row["fields"], row["key"], row["frozen"]) for row in replace] == [
        (*record, key, record[0].startswith("Frozen")) for record in records for key in REPLACE_KEYS
    ]
    for record, _ in records:
        rows = {row["key"]: row for row in replace if row["record"] == record}
        assert rows["metakit_replace"]["ratio"] == 1.0
        for key, row in rows.items():
            peer = {"attrs_evolve": "attrs", "msgspec_replace": "msgspec"}.get(key)
            if key == "copy_replace" and sys.version_info < (3, 13):
                assert row["note"] == "copy.replace is new in Python 3.13"
            elif peer is not None and report.installed(peer) is None:
                assert row["note"] == f"{peer} is not installed"
            else:
                assert 0 < row["ns"] <= row["median_ns"], key
                assert row["ratio"] == pytest.approx(row["ns"] / rows["metakit_replace"]["ns"])
    assert "== Replace one field of CommonAttentionRecord (23 fields)" in run.stdout
    assert "== Replace one field of FrozenFlashAttentionMetadata (15 fields)" in run.stdout


def test_every_figure_has_its_median_and_unstable_ones_are_flagged(run: Run) -> None:
    # Class creation's figures were never marked, however they varied.  (Found by an outside tester.)
    flagged = [row for row in run.report["calls"] + run.report["replace"] + run.report["creation"] if row["unstable"]]
    assert ("! unstable: the standard deviation" in run.stdout) == bool(
        flagged or any(row["unstable"] for row in run.report["sweep"] or [])
    )
    assert "median ns" in run.stdout


def test_the_charts_replace_rows_are_one_per_record_and_way(run: Run) -> None:
    # The frozen twin has 15 fields too: its bars were drawn over the plain record's.  (Found by an outside tester.)
    from metakit.bench import plot

    labels = plot.replace_labels(run.report["replace"])
    assert len(set(labels)) == len(labels) == len(run.report["replace"])
    assert "15 fields, frozen: metakit.replace" in labels


@pytest.mark.parametrize(
    ("ratio", "bound", "at_least", "shown"),
    [
        (1.05043, 1.05, False, "1.0504"),
        (1.9996, 2.0, True, "1.9996"),
        (1.0496, 1.05, False, "1.0496"),
        (1.2, 1.3, False, "1.200"),
    ],
)
def test_a_target_that_misses_its_bound_by_less_than_a_digit_never_reads_as_the_bound(
    ratio: float, bound: float, at_least: bool, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # "1.050 <= 1.05 MISS" read as a miss exactly on the bound.  (Found by an outside tester.)
    row = TargetRow("key", "a target", ratio, bound, at_least, "?", 1.25)
    print_targets([row])
    assert f"a target  {shown:>7} (1.250)  {'>=' if at_least else '<='} {bound:<5}" in capsys.readouterr().out
    assert ratio_text(ratio, bound) == shown


def test_the_instruction_tables_and_the_chart_never_show_a_miss_as_its_bound() -> None:
    # The same, in the tables of counted instructions (a share of +15.04% read "+15.0% ✗") and the chart's
    # labels of two digits.  (Found by an outside tester.)
    assert ratio_text(1.1504, 1.15, 1, percent=True) == "+15.04%"
    assert ratio_text(1.0304, 1.03, 1, percent=True) == "+3.04%"
    assert ratio_text(1.0296, 1.03, 1, percent=True) == "+2.96%"
    assert ratio_text(1.02, 1.03, 1, percent=True) == "+2.0%"
    assert ratio_text(1.1502, 1.15, 2) == "1.1502"
    counts = [{"python": "CPython 3.15.0", "calls": 1, "layouts": 3, "literal": 10_000.0, "signature": 10_100.0}]
    counts[0]["metakit"] = 10_304.0
    assert "| more than the literal | ≤ +3% | +3.04% ✗ |" in docs._call_counts(counts)
    creation = [_count("CPython 3.15.2", [(5, "new", 1e6, 150.4e3)])]
    assert "| 5 | new field names | +15% | +150 k (+15.04%) ✗ |" in docs._counts(creation)


def test_plot_is_a_png_when_matplotlib_is_installed(run: Run) -> None:
    if HAS_MATPLOTLIB:
        assert run.png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    else:  # the run was not asked for one: see test_usage_errors_exit_with_status_2_before_running
        assert not run.png.exists()


def test_a_peer_installed_but_raising_on_import_is_left_out_as_a_missing_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A half-upgraded attrs ended the benchmark with a traceback (an outside tester). pluggy stands
    # in for it here: installed wherever pytest is.
    (tmp_path / "pluggy").mkdir()
    (tmp_path / "pluggy" / "__init__.py").write_text("raise ImportError('half-upgraded')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [name for name in sys.modules if name.partition(".")[0] == "pluggy"]:
        monkeypatch.delitem(sys.modules, name)
    report.installed.cache_clear()
    try:
        assert report.installed("pluggy") is None
        assert report.installed("pluggy") is None  # said once
    finally:
        report.installed.cache_clear()
    err = capsys.readouterr().err
    assert err.count("is installed but cannot be imported: ImportError: half-upgraded)") == 1
    assert err.startswith("(pluggy ")


def _without(*names: str) -> Any:
    """``report.installed`` as if only the distributions *names* were not installed."""
    return lambda name: None if name in names else "1.0"


@pytest.mark.parametrize(
    ("argv", "missing", "message"),
    [
        (
            ["--json", "/no/such/dir/x.json"],
            (),
            "cannot write --json /no/such/dir/x.json: there is no directory /no/such/dir",
        ),
        (
            ["--plot", "/no/such/dir/x.png"],
            (),
            "cannot write --plot /no/such/dir/x.png: there is no directory /no/such/dir",
        ),
        (["--json", "."], (), "cannot write --json .: . is a directory"),
        (["--plot", "x.png"], ("matplotlib",), "--plot needs matplotlib: pip install 'metakit[bench]' (or matplotlib)"),
        (["--distributed"], ("torch",), "--distributed needs torch: pip install 'metakit[torch,bench]'"),
        (["--distributed"], ("numpy",), "--distributed needs numpy: pip install 'metakit[torch,bench]'"),
        (["--distributed", "--plot", "x.png"], (), "--plot does not apply to --distributed"),
        # matplotlib chose the format by the name: a traceback after the run, or chart.png for "chart".
        (["--plot", "chart.txt"], (), "--plot writes a PNG chart: give it a path that ends in .png, not 'chart.txt'"),
        (["--plot", "chart"], (), "--plot writes a PNG chart: give it a path that ends in .png, not 'chart'"),
        (
            ["--json", "out.png", "--plot", "./out.png"],
            (),
            "--json and --plot name the same file, out.png: the chart would replace the results",
        ),
    ],
    ids=[
        "json dir",
        "plot dir",
        "json is a dir",
        "no matplotlib",
        "no torch",
        "no numpy",
        "plot distributed",
        "plot not png",
        "plot no suffix",
        "json and plot one file",
    ],
)
def test_usage_errors_exit_with_status_2_before_running(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    missing: tuple[str, ...],
    message: str,
) -> None:
    monkeypatch.setattr(report, "installed", _without(*missing))
    monkeypatch.setattr(bench, "_run", lambda quick, progress: pytest.fail("the benchmark ran"))
    monkeypatch.setattr(bench, "_broadcast_benchmark", lambda: pytest.fail("the broadcast benchmark ran"))
    assert bench.main(argv, prog="metakit bench") == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"metakit bench: error: {message}\n")


@pytest.mark.usefixtures("short_quick_run")
def test_a_contender_with_a_wrong_result_makes_the_benchmark_fail(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression guard for the exit status: it reflects a broken benchmark,
    # found before anything is timed.
    wrong = calls.Contender("wrong", "a contender that copies", "dict(comprehension(meta), seq_lens=[])")
    monkeypatch.setattr(calls, "CONTENDERS", (*calls.CONTENDERS, wrong))
    assert bench.main(["--quick"]) == 1
    assert "the benchmark is broken: a contender that copies did not return the record's own objects" in (
        capsys.readouterr().err
    )


def test_distributed_delegates_to_the_broadcast_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bool, str | None]] = []

    def main(quick: bool, json_path: str | None) -> int:
        calls.append((quick, json_path))
        return 7

    monkeypatch.setitem(sys.modules, "metakit.bench.broadcast", types.SimpleNamespace(main=main))
    monkeypatch.setattr(report, "installed", lambda name: "1.0")  # torch and numpy, as far as the check sees
    assert bench.main(["--distributed", "--quick", "--json", "out.json"]) == 7
    assert bench.main(["--distributed"]) == 7
    assert calls == [(True, "out.json"), (False, None)]


def test_spread_is_best_median_and_flags_what_pyperf_would() -> None:
    steady = timing.spread([100.0, 101.0, 99.0, 100.0])
    assert (steady.best, steady.median) == (99.0, 100.0)
    assert not steady.unstable
    noisy = timing.spread([100.0, 150.0, 100.0, 100.0])  # standard deviation 25, mean 112.5
    assert noisy.unstable
    assert timing.spread([5.0]) == timing.Spread(5.0, 5.0, 0.0, 5.0)


@pytest.mark.usefixtures("short_quick_run")
def test_a_wrong_replace_makes_the_benchmark_fail(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def copying(obj: Any, /, **changes: Any) -> Any:
        return dataclasses.replace(obj, **changes, slot_mapping=object())  # not the record's own object

    monkeypatch.setattr(replace.metakit, "replace", copying)
    assert bench.main(["--quick"]) == 1
    assert "metakit.replace(meta, ...) on FlashAttentionMetadata: field 'slot_mapping' is not the old object" in (
        capsys.readouterr().err
    )


def test_a_json_path_through_a_dangling_symbolic_link_exits_with_status_2_before_running(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Writing follows the link: its target's directory is the one that must exist.
    link = tmp_path / "results.json"
    link.symlink_to(tmp_path / "missing" / "results.json")
    monkeypatch.setattr(bench, "_run", lambda quick, progress: pytest.fail("the benchmark ran"))
    assert bench.main(["--json", str(link)], prog="metakit bench") == 2
    assert capsys.readouterr().err == (
        f"metakit bench: error: cannot write --json {link}: there is no directory {tmp_path / 'missing'}\n"
    )


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_an_output_in_a_directory_where_no_file_can_be_made_exits_with_status_2_before_running(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str
) -> None:
    # Its permissions allow it (as they do for the superuser), but making a file there fails.
    def refuse(*args: object, **kwargs: object) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(report.tempfile, "TemporaryFile", refuse)
    monkeypatch.setattr(bench, "_run", lambda quick, progress: pytest.fail("the benchmark ran"))
    path = tmp_path / "results.out"
    assert bench.main([option, str(path)], prog="metakit bench") == 2
    assert capsys.readouterr().err == (
        f"metakit bench: error: cannot write {option} {path}: no file can be made in {tmp_path}: Permission denied\n"
    )
    assert not path.exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_proc_is_a_directory_where_no_file_can_be_made() -> None:
    assert report.output_problem("/proc/results.json") is not None


# The wire table's peer needs torch, msgspec and numpy: without them these are not defined (not skipped).
if HAS_WIRE:
    import msgspec
    import torch

    from metakit.bench import msgpack_peer
    from metakit.examples import engine

    def _peer_round_trip(record: Any) -> Any:
        frames = msgpack_peer.MsgpackPeerEncoder().encode(record)
        return msgpack_peer.MsgpackPeerDecoder(type(record)).decode(frames)

    def _without_wrappers(record: Any) -> Any:
        # The peer sends every field: a kernel wrapper (an OMIT field) must be cleared first.
        if isinstance(record, engine.FlashInferMetadata):
            return dataclasses.replace(record, prefill_wrapper=None, decode_wrapper=None)
        return record

    @pytest.mark.parametrize("record", engine.example_records(), ids=lambda record: type(record).__name__)
    def test_msgpack_peer_round_trips_each_example_record_equal(record: Any) -> None:
        sent = _without_wrappers(record)
        wire.check_round_trip(_peer_round_trip(sent), sent, "the msgpack peer")

    @pytest.mark.parametrize("record", [key for key, *_ in wire.RECORDS])
    def test_msgpack_peer_round_trips_each_benchmark_record_equal(record: str) -> None:
        arguments = next(entry.arguments for entry in wire.RECORDS if entry.key == record)
        sent = engine.make_flash_attention_metadata(**arguments)
        wire.check_round_trip(_peer_round_trip(sent), sent, "the msgpack peer")

    def test_msgpack_peer_sends_tensors_of_256_bytes_or_more_as_views_of_their_memory() -> None:
        record = engine.make_flash_attention_metadata(8, 128)
        frames = msgpack_peer.MsgpackPeerEncoder().encode(record)
        # slot_mapping (8,024 bytes) and block_tables (288 bytes) out of band; four of 32 and 36 bytes inline.
        assert [memoryview(frame).nbytes for frame in frames[1:]] == [8024, 288]
        assert [torch.frombuffer(frame, dtype=torch.uint8).data_ptr() for frame in frames[1:]] == [
            record.slot_mapping.data_ptr(),
            record.block_tables.data_ptr(),
        ]
        received = msgpack_peer.MsgpackPeerDecoder(type(record)).decode(frames)
        assert received.slot_mapping.data_ptr() == record.slot_mapping.data_ptr()  # a view, no copy
        assert received.seq_lens_tensor.data_ptr() != record.seq_lens_tensor.data_ptr()  # inline: a copy

    def test_msgpack_peer_checks_values_against_the_annotations() -> None:
        frames = msgpack_peer.MsgpackPeerEncoder().encode(engine.make_flash_attention_metadata())
        decoder = msgpack_peer.MsgpackPeerDecoder(engine.FlashInferMetadata)
        with pytest.raises(msgspec.ValidationError, match="Object missing required field `is_prompt`"):
            decoder.decode(frames)

    def test_msgpack_peer_cannot_send_an_omit_field_nor_decode_a_union_with_a_tensor() -> None:
        # What the peer cannot do, where metakit's wire can (see metakit.bench.msgpack_peer).
        with pytest.raises(TypeError, match="the msgpack peer cannot send a value of type 'object'"):
            msgpack_peer.MsgpackPeerEncoder().encode(engine.make_flashinfer_metadata())

        @dataclass
        class Mixed:
            causal: bool | torch.Tensor

        with pytest.raises(TypeError, match="Type unions containing a custom type may not contain"):
            msgpack_peer.MsgpackPeerDecoder(Mixed)

    def test_a_wire_way_that_does_not_give_the_record_back_makes_the_benchmark_fail(
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        def decode(self: Any, frames: Any) -> Any:
            return dataclasses.replace(original(self, frames), max_query_len=-1)

        original = msgpack_peer.MsgpackPeerDecoder.decode
        monkeypatch.setattr(msgpack_peer.MsgpackPeerDecoder, "decode", decode)
        message = "the msgpack peer: field 'max_query_len' of FlashAttentionMetadata came back different"
        with pytest.raises(timing.Broken, match=message):
            wire.measure_wire(timing.QUICK, timing.Progress())


def test_an_output_that_fails_after_the_run_names_its_option_and_leaves_no_part_behind(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # (Found by an outside tester: a full disk gave "[Errno 28] No space left on device", naming
    # neither the option nor the path, and left an empty file.)
    def full_disk(path: str, results: object) -> None:
        Path(path).write_text("{")  # part of it, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bench, "_run", lambda quick, progress: {"seconds": 0.0})
    monkeypatch.setattr(report, "write_json", full_disk)
    path = tmp_path / "results.json"
    assert bench.main(["--quick", "--json", str(path)], prog="metakit bench") == 2
    assert capsys.readouterr().err == f"metakit bench: error: cannot write --json {path}: No space left on device\n"
    assert not path.exists()
    path.write_text("an earlier run's\n")  # a file that was there before stays (written over, in part)
    assert bench.main(["--quick", "--json", str(path)], prog="metakit bench") == 2
    assert path.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read {path}: "),
        ("{", "cannot read {path}: "),
        ('{"schema": 2, "rows": []}', "{path} is not a record of `metakit bench --json` (schema 3)"),
    ],
    ids=["missing", "not JSON", "a broadcast record"],
)
def test_the_docs_generator_names_a_record_it_cannot_use_and_writes_nothing(
    content: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (Found by an outside tester: these ended in tracebacks.)
    record, page = tmp_path / "record.json", tmp_path / "page.md"
    if content is not None:
        record.write_text(content)
    with pytest.raises(SystemExit) as exit:
        docs.main([str(record), "--output", str(page)])
    assert exit.value.code == 2
    assert message.format(path=record) in capsys.readouterr().err
    assert not page.exists()
