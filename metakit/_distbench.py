"""``python -m metakit bench --distributed``: ``broadcast_metadata`` against torch's object broadcast.

Two processes on this machine form a gloo group, and rank 0 sends the
example engine metadata (``metakit.examples.engine``) to rank 1 in two ways:

- ``broadcast_metadata(meta)``, which sends the tensors' bytes as tensors;
- ``torch.distributed.broadcast_object_list([meta])``, which pickles the whole
  record, tensors included.

For each record, from the realistic one (a few KB) to one whose slot
mapping holds 8 million tokens, it prints the ms per broadcast of each and
their ratio.  A broadcast is done when both ranks have the record, so a
time is that of the slower rank: the median of several rounds, which
alternate the two ways so that a slow moment of the machine hits both.

``--json PATH`` writes::

    {
      "schema": 1,
      "completed": true,
      "quick": bool,
      "seconds": float,
      "versions": {...},     # as in `python -m metakit bench --json`
      "setup": {"backend": "gloo", "world_size": 2, "rounds": int},
      "rows": [{"record": str, "class": str, "tensor_bytes": int, "iterations": int,
                "broadcast_metadata_ms": float, "broadcast_object_list_ms": float,
                "ratio": float}]     # ratio: broadcast_object_list_ms / broadcast_metadata_ms
    }

The exit status is 1 only if the benchmark is broken: a record that does not
arrive equal, or a rank that fails or hangs.
"""

from __future__ import annotations

import datetime
import multiprocessing
import queue
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import torch
import torch.distributed as dist

import metakit
from metakit._meta import included_names
from metakit.bench import _versions, _write_json
from metakit.distributed import _broadcast_header, broadcast_metadata
from metakit.examples.engine import (
    AttentionMetadata,
    make_flash_attention_metadata,
    make_flashinfer_metadata,
)

_TCPStore = dist.TCPStore  # type: ignore[attr-defined]  # public, but torch's stubs do not re-export it

_WORLD: Final = 2
_TIMEOUT: Final = datetime.timedelta(seconds=120)


@dataclass(frozen=True)
class _Record:
    label: str
    make: Callable[[], AttentionMetadata]
    iterations: int
    """Broadcasts per round: enough for a round to last some milliseconds."""
    quick: bool
    """Whether ``--quick`` measures it too."""


def _flash(num_seqs: int, seq_len: int, num_tokens: int | None = None) -> Callable[[], AttentionMetadata]:
    return lambda: make_flash_attention_metadata(num_seqs=num_seqs, seq_len=seq_len, num_tokens=num_tokens)


def _flashinfer(num_seqs: int, seq_len: int) -> Callable[[], AttentionMetadata]:
    return lambda: make_flashinfer_metadata(num_seqs=num_seqs, seq_len=seq_len)


_RECORDS: Final = (
    _Record("realistic prefill (8 seqs)", _flash(8, 128), 100, quick=True),
    _Record("decode, 256 seqs (FlashInfer)", _flashinfer(256, 2048), 100, quick=False),
    _Record("prefill, 256 seqs x 1024", _flash(256, 1024), 20, quick=True),
    _Record("1M tokens", _flash(256, 1024, 1 << 20), 5, quick=True),
    _Record("8M tokens", _flash(256, 1024, 1 << 23), 2, quick=False),
)


def _chosen(quick: bool) -> tuple[_Record, ...]:
    return tuple(record for record in _RECORDS if record.quick or not quick)


def main(quick: bool, json_path: str | None) -> int:
    """Run the benchmark, print its table, write *json_path* if given; return the exit status."""
    started = time.perf_counter()
    rounds = 5 if quick else 11
    print(
        f"broadcast_metadata vs torch.distributed.broadcast_object_list([meta]): gloo, {_WORLD} ranks on this "
        f"machine, torch {torch.__version__}\nms per broadcast (median of {rounds} rounds, slower rank); "
        "ratio = broadcast_object_list / broadcast_metadata\n",
        flush=True,
    )
    print(f"starting {_WORLD} processes...", flush=True)
    print(f"{'record':<32} {'tensors':>10} {'metakit ms':>11} {'object ms':>10} {'ratio':>7}", flush=True)
    rows, error = _run_ranks(quick, rounds)
    if error is not None:
        print(f"error: the benchmark is broken: {error}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    print(f"\ndone in {seconds:.1f} s", flush=True)
    if json_path:
        report = {
            "schema": 1,
            "completed": True,
            "quick": quick,
            "seconds": seconds,
            "versions": _versions(),
            "setup": {"backend": "gloo", "world_size": _WORLD, "rounds": rounds},
            "rows": rows,
        }
        _write_json(json_path, report)
        print(f"wrote {json_path}")
    return 0


def _run_ranks(quick: bool, rounds: int) -> tuple[list[dict[str, Any]], str | None]:
    """Start the ranks and print each row as rank 0 reports it; the rows, or what broke."""
    # The parent holds the group's store, on a port the system picks: no
    # race for a free port.
    store = _TCPStore("127.0.0.1", 0, _WORLD, is_master=True, wait_for_workers=False, timeout=_TIMEOUT)
    context = multiprocessing.get_context("spawn")
    reports: multiprocessing.Queue[tuple[str, Any]] = context.Queue()
    processes = [
        context.Process(target=_rank_main, args=(rank, store.port, quick, rounds, reports), daemon=True)
        for rank in range(_WORLD)
    ]
    for process in processes:
        process.start()
    rows: list[dict[str, Any]] = []
    error: str | None = None
    try:
        while len(rows) < len(_chosen(quick)) and error is None:
            kind, payload = reports.get(timeout=_TIMEOUT.total_seconds())
            if kind == "row":
                rows.append(payload)
                _print_row(payload)
            else:
                error = payload
    except queue.Empty:
        error = f"no rank reported for {_TIMEOUT.total_seconds():.0f} s"
    for process in processes:
        process.join(_TIMEOUT.total_seconds() if error is None else 1)
        if process.is_alive():
            process.kill()
            process.join()
    return rows, error


def _print_row(row: dict[str, Any]) -> None:
    size = _format_bytes(row["tensor_bytes"])
    print(
        f"{row['record']:<32} {size:>10} {row['broadcast_metadata_ms']:>11.2f} "
        f"{row['broadcast_object_list_ms']:>10.2f} {row['ratio']:>6.1f}x",
        flush=True,
    )


def _format_bytes(count: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


# --- the ranks -------------------------------------------------------------------


def _rank_main(rank: int, port: int, quick: bool, rounds: int, reports: multiprocessing.Queue[tuple[str, Any]]) -> None:
    """One rank: measure every record, rank 0 reporting each row as it comes."""
    try:
        torch.set_num_threads(1)
        store = _TCPStore("127.0.0.1", port, _WORLD, is_master=False, timeout=_TIMEOUT)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=_WORLD, timeout=_TIMEOUT)
        for record in _chosen(quick):
            row = _measure(rank, record, rounds)
            if rank == 0:
                reports.put(("row", row))
        dist.destroy_process_group()
    except Exception:
        reports.put(("error", f"rank {rank} failed:\n{traceback.format_exc()}"))


def _by_metakit(rank: int, meta: AttentionMetadata) -> AttentionMetadata:
    received: AttentionMetadata = broadcast_metadata(meta if rank == 0 else None)
    return received


def _by_object_list(rank: int, meta: AttentionMetadata) -> AttentionMetadata:
    received: AttentionMetadata = _broadcast_header(meta if rank == 0 else None, 0, None)
    return received


def _measure(rank: int, record: _Record, rounds: int) -> dict[str, Any]:
    meta = record.make()
    ways = {"metakit": _by_metakit, "object_list": _by_object_list}
    for way, send in ways.items():
        _check_equal(send(rank, meta), meta, way)
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, send in ways.items():
            dist.barrier()
            start = time.perf_counter()
            for _ in range(record.iterations):
                send(rank, meta)
            times[way].append((time.perf_counter() - start) / record.iterations)
    # A broadcast is done when the slower rank has its record.
    medians = torch.tensor([statistics.median(times[way]) for way in ways], dtype=torch.float64)
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    metakit_ms, object_list_ms = (1e3 * value for value in medians.tolist())
    tensor_bytes = sum(
        value.numel() * value.element_size()
        for value in metakit.astuple_zerocopy(meta)
        if isinstance(value, torch.Tensor)
    )
    return {
        "record": record.label,
        "class": type(meta).__qualname__,
        "tensor_bytes": tensor_bytes,
        "iterations": record.iterations,
        "broadcast_metadata_ms": metakit_ms,
        "broadcast_object_list_ms": object_list_ms,
        "ratio": object_list_ms / metakit_ms,
    }


def _check_equal(got: AttentionMetadata, want: AttentionMetadata, way: str) -> None:
    if type(got) is not type(want):
        raise AssertionError(f"{way}: a {type(got).__qualname__} arrived instead of a {type(want).__qualname__}")
    # Not the OMIT fields, the kernel wrappers: broadcast_metadata leaves them out, pickle copies them.
    sent = zip(included_names(type(want)), metakit.astuple_zerocopy(got), metakit.astuple_zerocopy(want), strict=True)
    for name, mine, theirs in sent:
        if not (torch.equal(mine, theirs) if isinstance(theirs, torch.Tensor) else mine == theirs):
            raise AssertionError(f"{way}: field {name!r} of {type(want).__qualname__} arrived different")
