"""Attention metadata of an inference engine, modelled on vLLM's.

An engine builds one of these records for every step.  The driver turns it
into a dict to call the model (``forward(**meta.asdict_zerocopy())``) or to
broadcast it to the tensor-parallel workers, who rebuild it with
``Cls(**d)``.  The benchmark, the stubs in ``stubs/`` and the tests use these
classes.

- ``AttentionMetadata``: the fields every attention backend needs.
- ``FlashAttentionMetadata``: a flash-attention backend's record, 15 fields.
- ``FlashInferMetadata``: a backend that also holds kernel wrappers, which
  cannot be broadcast (``OMIT`` fields), and attributes set per step in
  ``__post_init__``, which are not fields.

This module imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from metakit import OMIT, ZeroCopy

__all__ = [
    "AttentionMetadata",
    "FlashAttentionMetadata",
    "FlashInferMetadata",
    "example_records",
    "make_attention_metadata",
    "make_flash_attention_metadata",
    "make_flashinfer_metadata",
]


@dataclass
class AttentionMetadata(ZeroCopy):
    """What every attention backend needs for one step."""

    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: torch.Tensor
    """Where each token's key and value go in the paged cache."""


@dataclass
class FlashAttentionMetadata(AttentionMetadata):
    """A flash-attention backend's metadata: 15 fields."""

    seq_lens: list[int] | None
    seq_lens_tensor: torch.Tensor | None
    max_query_len: int | None
    max_prefill_seq_len: int
    max_decode_seq_len: int
    query_start_loc: torch.Tensor | None
    seq_start_loc: torch.Tensor | None
    context_lens_tensor: torch.Tensor | None
    block_tables: torch.Tensor | None
    use_cuda_graph: bool
    kv_cache_dtype: str = "auto"


@dataclass
class FlashInferMetadata(AttentionMetadata):
    """A backend whose record also holds its kernel wrappers.

    The wrappers are fields, so ``__init__`` takes them, but they are
    ``OMIT`` fields: they cannot be broadcast and never appear in
    ``asdict_zerocopy()``.
    """

    is_prompt: bool
    block_tables: torch.Tensor | None = None
    paged_kv_indptr: torch.Tensor | None = None
    paged_kv_indices: torch.Tensor | None = None
    paged_kv_last_page_len: torch.Tensor | None = None
    num_qo_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    page_size: int = 16
    data_type: torch.dtype = torch.float16
    use_cuda_graph: bool = False
    prefill_wrapper: object = field(default=None, metadata=OMIT)
    decode_wrapper: object = field(default=None, metadata=OMIT)

    def __post_init__(self) -> None:
        # Set per step by the backend; not fields, so they never travel.
        self.is_profile_run = False
        self.attn_bias: torch.Tensor | None = None


def _seq_lens(num_seqs: int, seq_len: int) -> list[int]:
    return [seq_len - i % 7 for i in range(num_seqs)]


def _start_locs(lens: list[int]) -> torch.Tensor:
    return torch.tensor([0, *lens], dtype=torch.int32).cumsum(0, dtype=torch.int32)


def _block_tables(lens: list[int], block_size: int) -> torch.Tensor:
    width = max(lens) // block_size + 1
    return torch.arange(len(lens) * width, dtype=torch.int32).reshape(len(lens), width)


def make_attention_metadata(num_tokens: int = 1024) -> AttentionMetadata:
    """A prefill step of *num_tokens* tokens."""
    return AttentionMetadata(
        num_prefills=1,
        num_prefill_tokens=num_tokens,
        num_decode_tokens=0,
        slot_mapping=torch.arange(num_tokens, dtype=torch.int64),
    )


def make_flash_attention_metadata(
    num_seqs: int = 8, seq_len: int = 128, block_size: int = 16, num_tokens: int | None = None
) -> FlashAttentionMetadata:
    """A prefill step of *num_seqs* sequences of about *seq_len* tokens.

    *num_tokens* sets the length of ``slot_mapping`` on its own, to vary the
    size of the largest tensor without changing the rest.
    """
    lens = _seq_lens(num_seqs, seq_len)
    tokens = sum(lens) if num_tokens is None else num_tokens
    return FlashAttentionMetadata(
        num_prefills=num_seqs,
        num_prefill_tokens=tokens,
        num_decode_tokens=0,
        slot_mapping=torch.arange(tokens, dtype=torch.int64),
        seq_lens=lens,
        seq_lens_tensor=torch.tensor(lens, dtype=torch.int32),
        max_query_len=max(lens),
        max_prefill_seq_len=max(lens),
        max_decode_seq_len=0,
        query_start_loc=_start_locs(lens),
        seq_start_loc=_start_locs(lens),
        context_lens_tensor=torch.zeros(num_seqs, dtype=torch.int32),
        block_tables=_block_tables(lens, block_size),
        use_cuda_graph=False,
    )


def make_flashinfer_metadata(num_seqs: int = 8, seq_len: int = 128, page_size: int = 16) -> FlashInferMetadata:
    """A decode step of *num_seqs* sequences, with stand-ins for the kernel wrappers."""
    lens = _seq_lens(num_seqs, seq_len)
    pages = [n // page_size + 1 for n in lens]
    return FlashInferMetadata(
        num_prefills=0,
        num_prefill_tokens=0,
        num_decode_tokens=num_seqs,
        slot_mapping=torch.arange(num_seqs, dtype=torch.int64),
        is_prompt=False,
        block_tables=_block_tables(lens, page_size),
        paged_kv_indptr=_start_locs(pages),
        paged_kv_indices=torch.arange(sum(pages), dtype=torch.int32),
        paged_kv_last_page_len=torch.tensor([n % page_size + 1 for n in lens], dtype=torch.int32),
        num_qo_heads=32,
        num_kv_heads=8,
        head_dim=128,
        page_size=page_size,
        data_type=torch.bfloat16,
        prefill_wrapper=object(),
        decode_wrapper=object(),
    )


def example_records() -> list[AttentionMetadata]:
    """One record of each class, as tests and the benchmark use them."""
    return [make_attention_metadata(), make_flash_attention_metadata(), make_flashinfer_metadata()]
