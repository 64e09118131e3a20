"""The wire benchmark's peer: a record encoder and decoder written the way vLLM V1's work.

vLLM V1 sends its engine messages with msgspec's msgpack
(``MsgpackEncoder`` and ``MsgpackDecoder`` in ``vllm/v1/serial_utils.py``).
This is the same method, written here for metakit's example records:

- one ``msgspec.msgpack.Encoder`` encodes the record itself, and its
  ``enc_hook`` turns each tensor into ``(dtype name, shape, data)``.  A
  tensor of under 256 bytes carries its bytes inline, as a msgpack extension
  value; a larger one carries the index of an out-of-band buffer, a
  ``memoryview`` of the tensor's own memory (through numpy, as vLLM does).
  ``encode`` returns the msgpack message first, then those buffers;
- one typed ``msgspec.msgpack.Decoder(cls, dec_hook=..., ext_hook=...)``
  rebuilds the record: every value is checked against the class's
  annotations, and ``dec_hook`` rebuilds a tensor with
  ``torch.frombuffer(...).view(dtype).view(shape)``, a view of the out-of-band
  buffer, or of a copy of the inline bytes.

What this peer cannot do, where metakit's wire can:

- It sends every field of a dataclass: msgspec knows no ``OMIT``, so a
  record whose kernel wrappers are set (``FlashInferMetadata``) is refused
  by ``enc_hook``.  vLLM would pickle such values, behind its opt-in flag for
  insecure serialization.
- It cannot decode a class with a field annotated as a tensor or something
  else but ``None`` (``bool | torch.Tensor``, as in vLLM V1's own
  ``CommonAttentionMetadata``): msgspec refuses to build the decoder.
- A received record is not made by its ``__init__``: msgspec sets the fields
  and then calls ``__post_init__``.
- A tensor arrives contiguous and with memory of its own: views of one
  tensor, and the same tensor twice, arrive as separate tensors.  It must be
  on the CPU (``.numpy()``).
- vLLM has no hook for ``torch.dtype``; this one sends a dtype by name and
  reads it back through a fixed table, as it does a tensor's dtype.

Like vLLM's, an encoder and a decoder keep the buffers of the message in
hand while it is encoded or decoded (the hooks have no other way to reach
them), so neither may be shared between threads.

This module imports torch, numpy and msgspec.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
import torch

__all__ = ["INLINE_BELOW", "MsgpackPeerDecoder", "MsgpackPeerEncoder"]

INLINE_BELOW: Final = 256
"""A tensor of fewer bytes travels inside the message (vLLM's default threshold)."""

_RAW_BYTES: Final = 3
"""The msgpack extension code of a tensor's inline bytes."""

_DTYPES: Final = {
    str(value).removeprefix("torch."): value for value in vars(torch).values() if isinstance(value, torch.dtype)
}
_DTYPE_NAMES: Final = {dtype: name for name, dtype in _DTYPES.items()}

Frames = Sequence["bytes | memoryview"]
"""A message as ``encode`` returns it: the msgpack bytes, then the out-of-band buffers."""


class MsgpackPeerEncoder:
    """Encodes a record into a msgpack message and the out-of-band buffers of its larger tensors."""

    def __init__(self, inline_below: int = INLINE_BELOW) -> None:
        self._encoder = msgspec.msgpack.Encoder(enc_hook=self._enc_hook)
        self._inline_below = inline_below
        self._frames: list[bytes | memoryview] | None = None

    def encode(self, record: object) -> list[bytes | memoryview]:
        """The msgpack message of *record*, then one buffer per tensor of ``INLINE_BELOW`` bytes or more."""
        frames: list[bytes | memoryview] = [b""]
        self._frames = frames
        try:
            frames[0] = self._encoder.encode(record)
        finally:
            self._frames = None
        return frames

    def _enc_hook(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        if isinstance(value, torch.dtype):
            return _DTYPE_NAMES[value]
        raise TypeError(f"the msgpack peer cannot send a value of type {type(value).__qualname__!r}")

    def _tensor(self, tensor: torch.Tensor) -> tuple[str, tuple[int, ...], Any]:
        assert self._frames is not None
        data = tensor.flatten().contiguous().view(torch.uint8).numpy().data
        payload: Any
        if tensor.nbytes < self._inline_below:
            payload = msgspec.msgpack.Ext(_RAW_BYTES, data)
        else:
            payload = len(self._frames)
            self._frames.append(data)
        return _DTYPE_NAMES[tensor.dtype], tensor.shape, payload


class MsgpackPeerDecoder:
    """Decodes what ``MsgpackPeerEncoder`` made of a *cls* record into a new *cls* record, typed."""

    def __init__(self, cls: type) -> None:
        self._decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(
            cls, dec_hook=self._dec_hook, ext_hook=self._ext_hook
        )
        self._frames: Frames = ()

    def decode(self, frames: Frames) -> Any:
        """The record; its tensors of ``INLINE_BELOW`` bytes or more are views of *frames*' buffers."""
        self._frames = frames
        try:
            return self._decoder.decode(frames[0])
        finally:
            self._frames = ()

    def _dec_hook(self, kind: type, value: Any) -> Any:
        if kind is torch.Tensor:
            return self._tensor(value)
        if kind is torch.dtype:
            return _DTYPES[value]
        return value  # msgspec then checks that it is a *kind* (a field annotated ``object`` takes None)

    def _ext_hook(self, code: int, data: memoryview) -> memoryview:
        if code != _RAW_BYTES:
            raise NotImplementedError(f"msgpack extension code {code}")
        return data

    def _tensor(self, spec: Any) -> torch.Tensor:
        dtype_name, shape, payload = spec
        dtype = _DTYPES[dtype_name]
        # Inline bytes are copied: a view of the message would keep all of it alive, and be read-only.
        data = self._frames[payload] if isinstance(payload, int) else bytearray(payload)
        if not len(data):  # torch.frombuffer refuses an empty buffer
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(data, dtype=torch.uint8).view(dtype).view(shape)
