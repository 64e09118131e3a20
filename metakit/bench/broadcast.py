"""``python -m metakit bench --distributed``: ``broadcast_metadata`` side by side with the other ways.

Groups of 2 and of 4 gloo ranks on this machine send the example engine
metadata (``metakit.examples.engine``) from rank 0 to the others, at five
sizes from a realistic 8 KB record to one of 64 MB (``--quick``: the four up
to 8 MB, and it says so), in five ways:

- ``metakit``: ``broadcast_metadata(meta)``;
- ``vllm``: vLLM's ``broadcast_tensor_dict`` algorithm, written here from
  its description: the dict's non-tensor values and the tensors' specs in
  one object broadcast, then one ``broadcast(..., async_op=True)`` per
  tensor, all waited together; the receivers allocate with ``torch.empty``
  and call ``Cls(**d)``;
- ``three``: three synchronous collectives, the header by object broadcast
  (a size and a bytes broadcast) and every tensor's bytes in one buffer;
- ``object``: ``broadcast_object_list([meta])``, which pickles the tensors;
- ``floor``: one broadcast of a preallocated buffer as large as the record,
  which rebuilds nothing: no way can be faster.

A broadcast is done when every rank has the record, so the time of a round
is that of the slowest rank.  The rounds alternate the ways, so that a slow
moment of the machine hits all of them; the table shows the median and, in
brackets, the best round, in ms per broadcast, and the ratios of the
others' times to metakit's (above 1: metakit is faster).

``--json PATH`` writes::

    {
      "schema": 2, "completed": true, "quick": bool, "seconds": float,
      "versions": {...},                      # as in `python -m metakit bench --json`
      "setup": {"backend": "gloo", "world_sizes": [2, 4], "rounds": int},
      "targets": {"vllm": 1.0, "three": 2.0}, # the design's: at least these ratios
      "rows": [{"record": str, "world_size": int, "tensor_bytes": int, "iterations": int,
                "median_ms": {way: float}, "best_ms": {way: float},
                "median_ratio": {way: float}, "best_ratio": {way: float},  # way / metakit
                "targets_met": {"vllm": bool, "three": bool}}]  # judged on medians; three only at 8 KB and 261 KB
    }

The exit status is 1 only if the benchmark is broken (a record that does not
arrive equal, a rank that fails or hangs), never because a target was missed.
"""

from __future__ import annotations

import contextlib
import datetime
import multiprocessing
import queue
import signal
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import torch
import torch.distributed as dist

import metakit
from metakit import wire
from metakit.bench import report
from metakit.distributed import broadcast_metadata
from metakit.examples.engine import AttentionMetadata, make_flash_attention_metadata, make_flashinfer_metadata

_TCPStore = dist.TCPStore  # type: ignore[attr-defined]  # public, but torch's stubs do not re-export it

_TIMEOUT: Final = datetime.timedelta(seconds=120)
_WAYS: Final = ("metakit", "vllm", "three", "object", "floor")
_TARGETS: Final = {"vllm": 1.0, "three": 2.0}
_THREE_UP_TO: Final = 300_000
"""The design's target against three collectives holds for records up to 261 KB."""


@dataclass(frozen=True)
class _Record:
    label: str
    make: Callable[[], AttentionMetadata]
    iterations: int
    """Broadcasts per round in a full run: enough for a round to last some milliseconds."""
    quick: bool


_RECORDS: Final = (
    _Record("8 KB: prefill, 8 seqs", lambda: make_flash_attention_metadata(8, 128), 40, quick=True),
    _Record("261 KB: decode, 256 seqs", lambda: make_flashinfer_metadata(256, 2048), 20, quick=True),
    _Record("2 MB: prefill, 256 x 1024", lambda: make_flash_attention_metadata(256, 1024), 8, quick=True),
    _Record("8 MB: 1M tokens", lambda: make_flash_attention_metadata(256, 1024, num_tokens=1 << 20), 3, quick=True),
    _Record("64 MB: 8M tokens", lambda: make_flash_attention_metadata(256, 1024, num_tokens=1 << 23), 1, quick=False),
)


class _Plan(NamedTuple):
    """What one run measures; the same on every rank."""

    quick: bool
    rounds: int


def main(quick: bool, json_path: str | None) -> int:
    """Run the benchmark, print its table, write *json_path* if given; return the exit status."""
    started = time.perf_counter()
    plan = _Plan(quick, 7 if quick else 11)
    worlds = (2, 4)
    print(
        f"broadcast_metadata side by side: gloo on this machine, torch {torch.__version__}; ms per broadcast, "
        f"median of {plan.rounds} interleaved rounds [best], slowest rank\n"
        "ratio = the other way's time / metakit's (above 1: metakit is faster); "
        f"targets: vllm >= {_TARGETS['vllm']}x everywhere, three >= {_TARGETS['three']}x at 8 KB and 261 KB\n"
        + ("--quick: records up to 8 MB (the full run adds one of 64 MB)\n" if quick else ""),
        flush=True,
    )
    print(_header_line(), flush=True)
    rows: list[dict[str, Any]] = []
    for world in worlds:
        got, error = _run_group(world, plan)
        rows += got
        if error is not None:
            print(f"error: the benchmark is broken: {error}", file=sys.stderr)
            return 1
    missed = [
        f"{row['record']} x{row['world_size']}: {way}"
        for row in rows
        for way, ok in row["targets_met"].items()
        if not ok
    ]
    seconds = time.perf_counter() - started
    print(f"\ntargets missed (on medians): {', '.join(missed) if missed else 'none'}")
    print(f"done in {seconds:.1f} s", flush=True)
    if json_path:
        results = {
            "schema": 2,
            "completed": True,
            "quick": quick,
            "seconds": seconds,
            "versions": report.versions(),
            "setup": {"backend": "gloo", "world_sizes": list(worlds), "rounds": plan.rounds},
            "targets": _TARGETS,
            "rows": rows,
        }
        problem = report.write_output("--json", json_path, lambda path: report.write_json(path, results))
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        print(f"wrote {json_path}")
    return 0


def _chosen(quick: bool) -> tuple[_Record, ...]:
    return tuple(record for record in _RECORDS if record.quick or not quick)


def _header_line() -> str:
    ways = "".join(f"{way + ' ms':>16}" for way in _WAYS)
    ratios = "".join(f"{'/' + way:>14}" for way in _WAYS[1:4])
    return f"{'record':<27}{'ranks':>6}{ways}{ratios}"


def _print_row(row: dict[str, Any]) -> None:
    times = "".join(f"{row['median_ms'][way]:>8.3f} [{row['best_ms'][way]:.3f}]".rjust(16) for way in _WAYS)
    ratios = "".join(f"{row['median_ratio'][way]:>5.2f} [{row['best_ratio'][way]:.2f}]".rjust(14) for way in _WAYS[1:4])
    print(f"{row['record']:<27}{row['world_size']:>6}{times}{ratios}", flush=True)


def _run_group(world: int, plan: _Plan) -> tuple[list[dict[str, Any]], str | None]:
    """Start *world* ranks and print each row as rank 0 reports it; the rows, or what broke."""
    # The parent holds the group's store, on a port the system picks: no race for a free port.
    store = _TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False, timeout=_TIMEOUT)
    context = multiprocessing.get_context("spawn")
    reports: multiprocessing.Queue[tuple[str, Any]] = context.Queue()
    processes = [
        context.Process(target=_rank_main, args=(rank, world, store.port, plan, reports), daemon=True)
        for rank in range(world)
    ]
    rows: list[dict[str, Any]] = []
    error: str | None = None
    try:
        with _ctrl_c_held():
            for process in processes:
                process.start()
        while len(rows) < len(_chosen(plan.quick)) and error is None:
            kind, payload = reports.get(timeout=_TIMEOUT.total_seconds())
            if kind == "row":
                rows.append(payload)
                _print_row(payload)
            else:
                error = payload
    except queue.Empty:
        error = f"no rank reported for {_TIMEOUT.total_seconds():.0f} s"
    except BaseException:
        # A Ctrl-C: the ranks end before this process does.  A rank that is still starting reads its
        # arguments from this process, and would print a traceback once they were gone.
        _end(processes, 0)
        raise
    _end(processes, _TIMEOUT.total_seconds() if error is None else 1)
    return rows, error


def _end(processes: Sequence[multiprocessing.process.BaseProcess], wait: float) -> None:
    """Wait up to *wait* seconds for each process that was started to end, then kill it."""
    for process in processes:
        if process.is_alive():
            process.join(wait)
        if process.is_alive():
            process.kill()
            process.join()


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[None]:
    """Start the ranks in this block: they inherit Ctrl-C blocked, and a Ctrl-C that comes here meanwhile is
    raised once the block is done.

    A terminal sends Ctrl-C to every process of its group, the ranks too;
    only this process answers it, ending the ranks as it exits.  A blocked
    signal stays blocked through ``fork`` and ``exec``, so a rank cannot hear
    it while it starts (and imports torch); it then ignores it
    (``_rank_main``).  Ignoring it here instead, for the ranks to inherit,
    would lose one that came to this process meanwhile.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield  # signals are the main thread's; pthread_sigmask is POSIX's
        return
    came: list[int] = []
    answer = signal.signal(signal.SIGINT, lambda number, frame: came.append(number))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one held comes now, to the lambda
        signal.signal(signal.SIGINT, answer)
    if came:
        signal.raise_signal(signal.SIGINT)  # answered as this process answers it


# --- the ranks -------------------------------------------------------------------


def _rank_main(rank: int, world: int, port: int, plan: _Plan, reports: multiprocessing.Queue[tuple[str, Any]]) -> None:
    """One rank: measure every record, rank 0 reporting each row as it comes."""
    if hasattr(signal, "pthread_sigmask"):  # Ctrl-C is the parent's to answer (see _ctrl_c_held)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # which drops one held since the rank started
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        torch.set_num_threads(1)
        store = _TCPStore("127.0.0.1", port, world, is_master=False, timeout=_TIMEOUT)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=_TIMEOUT)
        for record in _chosen(plan.quick):
            row = _measure(rank, world, record, plan)
            if rank == 0:
                reports.put(("row", row))
        dist.destroy_process_group()
    except Exception:
        reports.put(("error", f"rank {rank} failed:\n{traceback.format_exc()}"))


_Way = Callable[[bool, AttentionMetadata], object]
"""One way to broadcast: called on every rank with whether it is the source, and the record."""


def _by_metakit(is_source: bool, meta: AttentionMetadata) -> object:
    return broadcast_metadata(meta if is_source else None)


def _object_broadcast(value: object, is_source: bool) -> Any:
    box = [value if is_source else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class _TensorSpec(NamedTuple):
    """What vLLM's algorithm sends of a tensor in its object broadcast."""

    device: str
    dtype: torch.dtype
    size: torch.Size


def _by_vllm(is_source: bool, meta: AttentionMetadata) -> object:
    """vLLM's ``broadcast_tensor_dict`` algorithm, from its description; the class is known to the receivers."""
    if is_source:
        values = meta.asdict_zerocopy()
        items = [
            (
                key,
                _TensorSpec(value.device.type, value.dtype, value.size()) if isinstance(value, torch.Tensor) else value,
            )
            for key, value in values.items()
        ]
        tensors = [value for value in values.values() if isinstance(value, torch.Tensor)]
        _object_broadcast(items, True)
        works = [dist.broadcast(tensor, src=0, async_op=True) for tensor in tensors if tensor.numel()]
        for work in works:
            work.wait()
        return meta
    received: dict[str, Any] = {}
    works = []
    for key, value in _object_broadcast(None, False):
        if isinstance(value, _TensorSpec):
            tensor = torch.empty(value.size, dtype=value.dtype, device=value.device)
            if tensor.numel():
                works.append(dist.broadcast(tensor, src=0, async_op=True))
            received[key] = tensor
        else:
            received[key] = value
    for work in works:
        work.wait()
    return type(meta)(**received)


def _by_three_collectives(is_source: bool, meta: AttentionMetadata) -> object:
    """The header by object broadcast, then every tensor's bytes in one synchronous broadcast."""
    if is_source:
        header, buffers = wire.pack(meta)
        sizes = [buffer.nbytes for buffer in buffers]
        data = torch.empty(sum(sizes), dtype=torch.uint8)
        offset = 0
        for buffer, size in zip(buffers, sizes, strict=True):
            if size:
                data[offset : offset + size] = torch.frombuffer(buffer, dtype=torch.uint8)
            offset += size
        _object_broadcast((header, sizes), True)
        dist.broadcast(data, src=0)
        return meta
    header, sizes = _object_broadcast(None, False)
    data = torch.empty(sum(sizes), dtype=torch.uint8)
    dist.broadcast(data, src=0)
    starts = [sum(sizes[:index]) for index in range(len(sizes))]
    return wire.unpack(header, [data[start : start + size] for start, size in zip(starts, sizes, strict=True)])


def _by_object_list(is_source: bool, meta: AttentionMetadata) -> object:
    return _object_broadcast(meta, is_source)


def _floor(buffer: torch.Tensor) -> _Way:
    def send(is_source: bool, meta: AttentionMetadata) -> object:
        dist.broadcast(buffer, src=0)
        return meta

    return send


def _tensor_bytes(meta: AttentionMetadata) -> int:
    return sum(
        value.numel() * value.element_size()
        for value in metakit.astuple_zerocopy(meta)
        if isinstance(value, torch.Tensor)
    )


def _measure(rank: int, world: int, record: _Record, plan: _Plan) -> dict[str, Any]:
    meta = record.make()
    is_source = rank == 0
    header, _ = wire.pack(meta)
    ways: dict[str, _Way] = {
        "metakit": _by_metakit,
        "vllm": _by_vllm,
        "three": _by_three_collectives,
        "object": _by_object_list,
        "floor": _floor(torch.zeros(_tensor_bytes(meta) + len(header), dtype=torch.uint8)),
    }
    for way, send in ways.items():
        for _ in range(2):  # the second call is the steady state: metakit's frame has its size
            got = send(is_source, meta)
        if way != "floor":
            _check_equal(got, meta, way)
    iterations = max(1, record.iterations // (2 if plan.quick else 1))
    times = torch.zeros(len(ways), plan.rounds, dtype=torch.float64)
    for round_index in range(plan.rounds):
        for index, send in enumerate(ways.values()):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iterations):
                send(is_source, meta)
            times[index, round_index] = (time.perf_counter() - start) / iterations
    # A round is done when the slowest rank has its record.
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    medians = {way: 1e3 * statistics.median(times[index].tolist()) for index, way in enumerate(ways)}
    bests = {way: 1e3 * min(times[index].tolist()) for index, way in enumerate(ways)}
    tensor_bytes = _tensor_bytes(meta)
    median_ratio = {way: medians[way] / medians["metakit"] for way in ways}
    met = {"vllm": median_ratio["vllm"] >= _TARGETS["vllm"]}
    if tensor_bytes <= _THREE_UP_TO:
        met["three"] = median_ratio["three"] >= _TARGETS["three"]
    return {
        "record": record.label,
        "world_size": world,
        "tensor_bytes": tensor_bytes,
        "iterations": iterations,
        "median_ms": medians,
        "best_ms": bests,
        "median_ratio": median_ratio,
        "best_ratio": {way: bests[way] / bests["metakit"] for way in ways},
        "targets_met": met,
    }


def _check_equal(got: object, want: AttentionMetadata, way: str) -> None:
    if type(got) is not type(want):
        raise AssertionError(f"{way}: a {type(got).__qualname__} arrived instead of a {type(want).__qualname__}")
    for name, theirs in want.asdict_zerocopy().items():
        mine = getattr(got, name)
        if not (torch.equal(mine, theirs) if isinstance(theirs, torch.Tensor) else mine == theirs):
            raise AssertionError(f"{way}: field {name!r} of {type(want).__qualname__} arrived different")
