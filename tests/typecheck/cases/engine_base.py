"""Base engine metadata, as a user's own module would define it.

Torch-free: ``Tensor`` stands in for ``torch.Tensor``.  Other case modules
import these classes, so the plugin also reads them from another module
(and, on a second run, from mypy's cache).
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import ClassVar

import metakit
from metakit import OMIT, ZeroCopy


class Tensor:
    """Stands in for ``torch.Tensor``."""

    def numel(self) -> int:
        return 0


@dataclass
class AttentionMetadata(ZeroCopy):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Tensor


@dataclass
class FlashInferMetadata(AttentionMetadata):
    is_prompt: bool
    block_tables: Tensor | None = None
    page_size: int = 16
    kernel_version: ClassVar[str] = "2"
    workspace_size: InitVar[int] = 0
    prefill_wrapper: object = field(default=None, metadata=OMIT)
    decode_wrapper: object = field(default=None, metadata={**metakit.OMIT, "doc": "a kernel wrapper"})
    data_type: str = field(default="float16", metadata={"doc": "not OMIT"})

    def __post_init__(self, workspace_size: int) -> None:
        # Set per step; not fields, so never in the dict.
        self.is_profile_run = False
        self.attn_bias: Tensor | None = None
