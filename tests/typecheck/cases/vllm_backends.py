"""Attention-backend metadata shaped like vLLM's (2024-2025), adopted as a vLLM engineer would.

Written for these tests, not copied: the typing idioms are the ones vLLM's
modules use (``typing.Optional``, ``Dict``, ``Set``, string forward
references), and the override keeps the signature vLLM's FlashInfer
backend declares, which must type-check as it is, with the plugin or without.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Final, List, Optional, Set

from engine_base import Tensor

from metakit import OMIT, ZeroCopy


@dataclass
class BackendMetadata(ZeroCopy):
    """The fields every backend has."""

    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Tensor


@dataclass
class PagedMetadata(BackendMetadata):
    seq_lens: Optional[List[int]]
    seq_lens_tensor: Optional[Tensor]
    max_decode_seq_len: int
    block_tables: Optional[Tensor]
    use_cuda_graph: bool

    @property
    def decode_metadata(self) -> Optional["PagedMetadata"]:
        return None if self.num_decode_tokens == 0 else self


class KernelWrapper:
    """Stands in for a kernel wrapper object that cannot be broadcast."""


@dataclass
class WrapperMetadata(BackendMetadata):
    """Keeps its kernel wrappers out of the dict with an override, as vLLM's FlashInfer backend does."""

    is_prompt: bool
    page_size: int = 16
    prefill_wrapper: Optional[KernelWrapper] = None
    decode_wrapper: Optional[KernelWrapper] = None
    plan_hook: Optional[Callable[[int], None]] = None

    def asdict_zerocopy(self, skip_fields: Optional[Set[str]] = None) -> Dict[str, Any]:
        if skip_fields is None:
            skip_fields = set()
        # The wrappers hold device state that no other rank can use.
        skip_fields.add("prefill_wrapper")
        skip_fields.add("decode_wrapper")
        return super().asdict_zerocopy(skip_fields)


@dataclass
class WrapperMetadataChild(WrapperMetadata):
    """Inherits the override: its result is what the override declares."""

    sm_scale: float = 1.0


@dataclass
class SamplingBase:
    """A plain dataclass, not made by ZeroCopyFields, whose OMIT field is still left out."""

    handle: object = field(default=None, metadata=OMIT)
    temperature: float = 1.0


DOC_KEY: Final = "doc"
OMIT_MARK: Final = "metakit.omit"  # OMIT's key, as a constant


@dataclass
class SamplingMetadata(SamplingBase, ZeroCopy):
    selected: Optional[Tensor] = None
    extra: object = field(default=None, metadata={**OMIT, "doc": "merged"})
    seeds: object = field(default=None, metadata=dict(**OMIT))
    kept: object = field(default=None, metadata={**OMIT, "metakit.omit": False})
    merged: object = field(default=None, metadata={**OMIT} | {"doc": "merged with |"})
    copied: object = field(default=None, metadata=dict(OMIT, doc="a copy"))
    unmarked: object = field(default=None, metadata={"doc": "x"} | {"metakit.omit": False})
    keyed: object = field(default=None, metadata={**OMIT, DOC_KEY: "a key by a Final name"})
    kept_by_name: object = field(default=None, metadata={**OMIT, OMIT_MARK: False})
    kept_by_zero: object = field(default=None, metadata={"metakit.omit": 0})  # read by its truth, as a run reads it
    left_by_one: object = field(default=None, metadata={"metakit.omit": 1})
