"""``broadcast_metadata`` with GPU tensors: nccl, ``cpu_group``, and records on both devices.

Not collected without CUDA (see conftest.py).  With one GPU, two ranks share it over gloo (gloo
carries CUDA tensors too), which covers both ways a GPU tensor can travel:
through the CPU (a ``gloo`` group) and over the group itself
(``cpu:gloo,cuda:gloo``); nccl runs with one rank.  With two GPUs or more,
nccl runs with two ranks, with and without a ``cpu_group``; with fewer, those
cases are not collected.

Each case runs in freshly spawned ranks; a rank writes what it raised, or
nothing, to a file, and the processes are killed after ``_DEADLINE``.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

import torch.distributed as dist  # noqa: E402

from metakit import ZeroCopy  # noqa: E402
from metakit.distributed import broadcast_metadata  # noqa: E402

_TIMEOUT = datetime.timedelta(seconds=120)
_DEADLINE = 240.0
_GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


@dataclass
class CommonAttentionMetadata(ZeroCopy):
    """V1's shape: start locations on the GPU and their CPU twin, large tensors on both."""

    query_start_loc: torch.Tensor
    query_start_loc_cpu: torch.Tensor
    seq_lens: torch.Tensor
    num_reqs: int
    slot_mapping: torch.Tensor
    positions_cpu: torch.Tensor
    empty_on_gpu: torch.Tensor


def _record(device: torch.device) -> CommonAttentionMetadata:
    """The same record on every rank, with its GPU tensors on *device*."""
    starts = torch.tensor([0, 3, 7, 12], dtype=torch.int32)
    return CommonAttentionMetadata(
        query_start_loc=starts.to(device),
        query_start_loc_cpu=starts,
        seq_lens=torch.tensor([3, 4, 5], device=device),
        num_reqs=3,
        slot_mapping=torch.arange(1 << 18, device=device),  # 2 MiB: a buffer of its own
        positions_cpu=torch.arange(1 << 18, dtype=torch.int64).flip(0),
        empty_on_gpu=torch.empty(0, device=device),
    )


def _check(got: object, want: CommonAttentionMetadata) -> None:
    assert isinstance(got, CommonAttentionMetadata)
    for name, value in want.asdict_zerocopy().items():
        mine = getattr(got, name)
        if isinstance(value, torch.Tensor):
            assert mine.device == value.device, f"{name} arrived on {mine.device}, not {value.device}"
            assert torch.equal(mine.cpu(), value.cpu()), name
        else:
            assert mine == value, name


def _send_both_ways(rank: int, world: int, group: object = None, cpu_group: object = None) -> None:
    device = torch.device("cuda", torch.cuda.current_device())
    want = _record(device)
    for src in range(world):
        got = broadcast_metadata(want if rank == src else None, group_src=src, group=group, cpu_group=cpu_group)
        if rank == src:
            assert got is want
        else:
            _check(got, want)
    torch.cuda.synchronize()


def gpu_tensors_through_a_cpu_only_group(rank: int, world: int) -> None:
    _send_both_ways(rank, world)


def gpu_tensors_over_a_group_with_both_backends(rank: int, world: int) -> None:
    _send_both_ways(rank, world)


def nccl_with_a_cpu_group(rank: int, world: int) -> None:
    _send_both_ways(rank, world, cpu_group=dist.new_group(list(range(world)), backend="gloo"))


def nccl_alone_carries_the_frame_on_the_gpu(rank: int, world: int) -> None:
    _send_both_ways(rank, world)


def nccl_with_one_rank_costs_nothing(rank: int, world: int) -> None:
    want = _record(torch.device("cuda", 0))
    assert broadcast_metadata(want) is want
    assert broadcast_metadata(want, cpu_group=dist.new_group([0], backend="gloo")) is want


class _Job(NamedTuple):
    """What every rank of one case is given."""

    case: Callable[[int, int], None]
    backend: str
    world: int
    port: int
    out: str


def _rank_main(job: _Job, rank: int) -> None:
    outcome: str | None = None
    try:
        torch.cuda.set_device(rank % _GPUS)
        store = dist.TCPStore("127.0.0.1", job.port, job.world, is_master=False, timeout=_TIMEOUT)
        dist.init_process_group(job.backend, store=store, rank=rank, world_size=job.world, timeout=_TIMEOUT)
        job.case(rank, job.world)
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        outcome = traceback.format_exc()
    Path(job.out, f"rank{rank}.json").write_text(json.dumps(outcome))


def _run(case: Callable[[int, int], None], backend: str, world: int, out: Path) -> None:
    store = dist.TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False, timeout=_TIMEOUT)
    context = multiprocessing.get_context("spawn")
    job = _Job(case, backend, world, store.port, str(out))
    processes = [context.Process(target=_rank_main, args=(job, rank)) for rank in range(world)]
    for process in processes:
        process.start()
    deadline = time.monotonic() + _DEADLINE
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()
    failures = []
    for rank in range(world):
        path = out / f"rank{rank}.json"
        outcome = json.loads(path.read_text()) if path.exists() else f"rank {rank} never reported (hung or crashed)"
        if outcome is not None:
            failures.append(f"rank {rank}:\n{outcome}")
    assert not failures, "\n".join(failures)


_CASES = [
    (gpu_tensors_through_a_cpu_only_group, "gloo", 2, 1),
    (gpu_tensors_over_a_group_with_both_backends, "cpu:gloo,cuda:gloo", 2, 1),
    (nccl_with_one_rank_costs_nothing, "nccl", 1, 1),
    (nccl_with_a_cpu_group, "nccl", 2, 2),
    (nccl_alone_carries_the_frame_on_the_gpu, "nccl", 2, 2),
]


_RUNNABLE = [case for case in _CASES if case[3] <= _GPUS]
"""The cases this machine has GPUs enough for: the others are not collected, rather than skipped."""


@pytest.mark.parametrize(
    ("case", "backend", "world", "gpus"), _RUNNABLE, ids=[f"{case.__name__}-{world}" for case, _, world, _ in _RUNNABLE]
)
def test_devices(case: Callable[[int, int], None], backend: str, world: int, gpus: int, tmp_path: Path) -> None:
    _run(case, backend, world, tmp_path)
