"""Test records in the shapes of real engine records, shared by the wire and broadcast tests.

A FlashInfer style metadata whose ``asdict_zerocopy`` override keeps its
kernel wrappers off the wire, and a GPU model input whose ``__getstate__``
drops an async callback.  Both sides of a test import this module, so the
classes resolve on the receiving side.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from metakit import ZeroCopy


class KernelWrapper:
    """Stands for a kernel wrapper: it holds a lock, so it cannot be pickled."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


@dataclass
class WrapperMetadata(ZeroCopy):
    """FlashInfer's shape: the wrappers are plain fields, and an override keeps them off the wire."""

    num_decode_tokens: int
    slot_mapping: torch.Tensor
    paged_kv_indptr: torch.Tensor | None = None
    page_size: int = 16
    prefill_wrapper: KernelWrapper | None = None
    decode_wrapper: KernelWrapper | None = None

    def asdict_zerocopy(self, skip_fields: Iterable[str] | None = None) -> dict[str, Any]:  # type: ignore[override]
        skip = set() if skip_fields is None else skip_fields
        assert isinstance(skip, set), "the override adds to the set it gets, as vLLM's does"
        skip.add("prefill_wrapper")
        skip.add("decode_wrapper")
        return dict(super().asdict_zerocopy(skip))


@dataclass(frozen=True)
class ModelInput(ZeroCopy):
    """A GPU model input's shape: ``__getstate__`` drops the callback, a closure that cannot be pickled."""

    input_tokens: torch.Tensor | None = None
    input_positions: torch.Tensor | None = None
    seq_lens: list[int] | None = None
    virtual_engine: int = 0
    async_callback: Callable[[], None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["async_callback"]
        return state
