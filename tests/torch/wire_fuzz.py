"""The worker side of the wire fuzzer (``test_wire_fuzz.py``): records, mutations, checks, and the supervisor.

A worker is a subprocess.  It installs an audit hook (a hook can never be
removed, so never in the pytest process), limits its address space and
answers commands read from its stdin, one JSON object a line; its answers go
out the same way on its original stdout (anything else that prints goes to
stderr)::

    {"cmd": "fuzz", "seed": 0, "first": 0, "cases": 60000}
    {"cmd": "attack"}
    {"cmd": "selftest", "fake": "pickle"}

Before each case it writes the case's name into a progress file, so that
the supervisor (``Supervisor``, in the test's process) can name the case
that hung or crashed it.

A case is one call of ``metakit.wire.unpack``: record *r* of seed *s* is
packed, and its mutation *m* (of a list that depends only on *s*, *r* and
what ``pack`` returned) changes the header, the buffers, or both.  The
records of the fuzzer and their mutations are reproducible from these three
numbers, in a fresh worker::

    python tests/torch/wire_fuzz.py repro SEED RECORD MUTATION

prints the mutation, what came back, and what the check made of it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import faulthandler
import json
import math
import os
import pickle
import queue
import random
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from metakit import OMIT, ZeroCopy, wire

if TYPE_CHECKING:
    from fractions import Fraction as Unresolved  # a name only type checkers see: the receiver cannot resolve it

HERE = os.path.dirname(os.path.abspath(__file__))

# --- the records ----------------------------------------------------------------
#
# Their names differ pairwise in more than one byte, so that no single byte
# flip turns one into another: a record of another class than the one sent
# is then always a failure (a splice may legitimately give its partner's).


@dataclass
class SeqGroup(ZeroCopy):
    """A nested record: one request's lengths and blocks."""

    request_id: str
    seq_lens: list[int]
    block_table: torch.Tensor | None = None
    is_prompt: bool = True


@dataclass
class FlashMeta(ZeroCopy):
    """A flash-attention step: counts, tensors, optional tensors, a flag, a string."""

    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: torch.Tensor
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
    scale: float = 1.0


@dataclass
class ChunkedMeta(FlashMeta):
    """A subclass with fields of its own: inherited fields first."""

    chunk_size: int = 0
    chunk_bounds: tuple[int, ...] = ()
    cu_chunk_lens: torch.Tensor | None = None


@dataclass
class InferMeta(ZeroCopy):
    """FlashInfer's shape: an OMIT wrapper, an override that drops another, post-init attributes, init=False."""

    is_prompt: bool
    slot_mapping: torch.Tensor
    paged_kv_indptr: torch.Tensor | None = None
    paged_kv_indices: torch.Tensor | None = None
    num_qo_heads: int = 0
    data_type: torch.dtype = torch.float16
    device: torch.device = torch.device("cpu")  # noqa: RUF009  # a device is immutable
    total_tokens: int = field(init=False, default=0)
    prefill_wrapper: object = field(default=None, metadata=OMIT)
    decode_wrapper: Unresolved | None = None

    def __post_init__(self) -> None:
        self.attn_bias = None
        self.total_tokens = self.slot_mapping.numel()

    def asdict_zerocopy(self, skip_fields: Any = None) -> dict[str, Any]:  # type: ignore[override]
        skip = set() if skip_fields is None else set(skip_fields)
        skip.add("decode_wrapper")
        return dict(super().asdict_zerocopy(skip))


@dataclass(frozen=True)
class StepInput(ZeroCopy):
    """A model input: frozen, nested records, and a ``__getstate__`` that drops a callback."""

    input_tokens: torch.Tensor | None = None
    input_positions: torch.Tensor | None = None
    attn_metadata: FlashMeta | None = None
    seq_groups: list[SeqGroup] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    virtual_engine: int = 0
    async_callback: Callable[[], None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["async_callback"]
        return state


@dataclass(slots=True)
class SamplingMeta(ZeroCopy):
    """A slots class of scalars, bytes, a tuple, a dict and an unresolvable annotation."""

    temperature: torch.Tensor | None
    top_p: float
    top_k: int
    seeds: tuple[int, ...]
    stop: dict[str, int]
    prompt_ids: bytes
    extra: Any = None
    hint: Unresolved | None = None


@dataclass
class CommonMeta(ZeroCopy):
    """V1's common attention metadata: tensors and their CPU twins, views of a parent, containers of tensors."""

    query_start_loc: torch.Tensor
    query_start_loc_cpu: torch.Tensor
    seq_lens: torch.Tensor
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    slot_mapping: torch.Tensor
    decode_slot_mapping: torch.Tensor
    block_table_tensor: torch.Tensor
    causal: bool = True
    logits_indices: torch.Tensor | None = None
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    chunks: list[torch.Tensor] = field(default_factory=list)
    aux: tuple[torch.Tensor | None, ...] = ()


@dataclass
class Bag(ZeroCopy):
    """Values of any plain type, in fields annotated ``Any`` and ``object``."""

    payload: Any
    more: object = None
    spare: Any = None


@dataclass
class PlainStep(ZeroCopy):
    """A record that ``pack`` and ``unpack`` read their usual, one-pass way, when its tensors are usual:
    plain values, and tensors that are each contiguous on the CPU, with a storage of its own (``Gen`` makes them
    so, but now and then)."""

    num_tokens: int
    positions: torch.Tensor
    lens: list[int] | None
    block_table: torch.Tensor | None
    scale: float
    scores: torch.Tensor | None = None
    prompt: bool = False
    cache_dtype: str = "auto"


CLASSES: tuple[type, ...] = (
    FlashMeta,
    ChunkedMeta,
    InferMeta,
    StepInput,
    SamplingMeta,
    CommonMeta,
    Bag,
    SeqGroup,
    PlainStep,
)
BY_NAME = {cls.__qualname__: cls for cls in CLASSES}
DROPPED = {"InferMeta": {"decode_wrapper"}, "StepInput": {"async_callback"}}
"""Fields the sender never sends (an override, ``__getstate__``): the fuzzer gives them values that cannot travel."""

# --- values ---------------------------------------------------------------------

DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
)
SAME_SIZE = {
    torch.int16: torch.float16,
    torch.float16: torch.bfloat16,
    torch.int32: torch.float32,
    torch.float32: torch.int32,
    torch.int64: torch.float64,
    torch.float64: torch.int64,
    torch.uint8: torch.int8,
    torch.int8: torch.uint8,
}
INTS = (0, 1, -1, 7, 255, 256, 65536, 2**31 - 1, -(2**31), 2**32, 2**63 - 1, -(2**63))
FLOATS = (0.0, -0.0, 1.5, -2.25, 1e308, 5e-324, math.inf, -math.inf, math.nan)
STRINGS = ("", "auto", "fp8_e4m3", "é", "日本語", "\x00", "a" * 40, "\U0001f600", "$.x")
BIG_ELEMENTS = (1 << 18) + 64
"""int32 elements of the large tensor: just over 1 MiB, so it travels as a buffer of its own."""


class Unsendable:
    """A value that may never travel (a kernel wrapper, a callback): only dropped fields hold one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


class Gen:
    """Random values for the annotations of the record classes, and the tensors of one record."""

    def __init__(self, rng: random.Random, big: bool) -> None:
        self.rng = rng
        self.tensors: list[torch.Tensor] = []
        self.big = big
        self.usual = False
        """Whether the tensors made are, but now and then, the usual kind: contiguous, each of its own storage."""

    def record(self, cls: type, depth: int = 0) -> Any:
        self.usual = cls is PlainStep
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if _is_omit(f) or f.name in DROPPED.get(cls.__qualname__, ()):
                kwargs[f.name] = Unsendable()
            elif _has_default(f) and self.rng.random() < 0.25:
                continue
            else:
                kwargs[f.name] = self.value(f.type, depth)
        return cls(**kwargs)

    def value(self, ann: str, depth: int) -> Any:  # noqa: PLR0911  # one return per kind of annotation
        rng = self.rng
        if ann.endswith(" | None"):
            return None if rng.random() < 0.25 else self.value(ann[: -len(" | None")], depth)
        if ann.startswith("list["):
            return [self.value(ann[5:-1], depth + 1) for _ in range(rng.randint(0, 4))]
        if ann.startswith("tuple[") and ann.endswith(", ...]"):
            return tuple(self.value(ann[6:-6], depth + 1) for _ in range(rng.randint(0, 4)))
        if ann.startswith("dict[str, "):
            return {rng.choice(STRINGS) + str(k): self.value(ann[10:-1], depth + 1) for k in range(rng.randint(0, 3))}
        maker = {
            "int": self.int,
            "bool": lambda: rng.random() < 0.5,
            "float": lambda: rng.choice(FLOATS) if rng.random() < 0.5 else rng.uniform(-1e3, 1e3),
            "str": lambda: rng.choice(STRINGS),
            "bytes": lambda: rng.randbytes(rng.randint(0, 24)),
            "torch.Tensor": self.tensor,
            "torch.dtype": lambda: rng.choice(DTYPES),
            "torch.device": self.device,
        }.get(ann)
        if maker is not None:
            return maker()
        if ann in BY_NAME:
            return self.record(BY_NAME[ann], depth + 1) if depth < 2 else None
        return self.anything(depth)

    def int(self) -> int:
        return self.rng.choice(INTS) if self.rng.random() < 0.3 else self.rng.randint(0, 5000)

    def device(self) -> torch.device:
        return self.rng.choice((torch.device("cpu"), torch.device("cuda", 0), torch.device("cuda", 3)))

    def anything(self, depth: int) -> Any:
        """A value of any plain type: a leaf, or below depth 3 a container of them, or now and then a record."""
        rng = self.rng
        kind = rng.randrange(14 if depth < 3 else 10)
        leaves: list[Callable[[], Any]] = [
            lambda: None,
            lambda: rng.random() < 0.5,
            self.int,
            lambda: rng.choice(FLOATS),
            lambda: rng.choice(STRINGS),
            lambda: rng.randbytes(rng.randint(0, 9)),
            self.tensor,
            lambda: rng.choice(DTYPES),
            self.device,
            self.tensor,
        ]
        if kind < len(leaves):
            return leaves[kind]()
        count = rng.randint(0, 3)
        if kind == 10:
            return [self.anything(depth + 1) for _ in range(count)]
        if kind == 11:
            return tuple(self.anything(depth + 1) for _ in range(count))
        if kind == 12:
            keys = [rng.choice(STRINGS) + str(k) if rng.random() < 0.7 else rng.choice(INTS) for k in range(count)]
            return {key: self.anything(depth + 1) for key in keys}
        return self.record(SeqGroup, depth + 1)

    def tensor(self) -> torch.Tensor:
        rng = self.rng
        pick = rng.random()
        if self.usual and pick < 0.9:
            dtype = rng.choice(DTYPES)
            shape = [rng.randint(1, 9) for _ in range(rng.choice((0, 1, 1, 2, 3)))]
            made = self.fresh_big() if self.big and pick < 0.2 else self.raw(dtype, math.prod(shape)).view(shape)
            self.big = self.big and pick >= 0.2
            self.tensors.append(made)
            return made
        if self.big and pick < 0.5:
            self.big = False
            made = self.fresh_big()
        elif self.tensors and pick < 0.12:
            return rng.choice(self.tensors)  # the same tensor object twice
        elif self.tensors and pick < 0.4:
            made = self.view_of(rng.choice(self.tensors))
        else:
            made = self.fresh()
        self.tensors.append(made)
        return made

    def raw(self, dtype: torch.dtype, count: int) -> torch.Tensor:
        size = torch.empty((), dtype=dtype).element_size()
        flat = torch.frombuffer(bytearray(self.rng.randbytes(count * size) or b"\0" * size), dtype=torch.uint8)
        if dtype is torch.bool:
            return (flat[:count] & 1).bool()
        return flat.view(dtype)[:count]

    def fresh_big(self) -> torch.Tensor:
        return self.raw(torch.int32, BIG_ELEMENTS).view(-1, 64)

    def fresh(self) -> torch.Tensor:
        rng = self.rng
        dtype = rng.choice(DTYPES)
        rank = rng.choice((0, 1, 1, 1, 2, 2, 3))
        shape = [rng.choice((0, 1, 2, 3, 5, 8, 17)) if rng.random() < 0.15 else rng.randint(1, 9) for _ in range(rank)]
        layout = rng.choice(("contiguous", "contiguous", "transposed", "step", "offset", "expand", "conj"))
        if layout == "transposed" and rank >= 2:
            return self.raw(dtype, math.prod(shape)).view(shape[::-1]).transpose(0, rank - 1)
        if layout == "step" and rank >= 1:
            step = [shape[0] * 2, *shape[1:]]
            return self.raw(dtype, math.prod(step)).view(step)[::2]
        if layout == "offset":
            extra = rng.randint(1, 7)
            return self.raw(dtype, math.prod(shape) + extra)[extra:].view(shape)
        if layout == "expand" and rank >= 1:
            return self.raw(dtype, math.prod(shape[1:])).view([1, *shape[1:]]).expand(shape)
        made = self.raw(dtype, math.prod(shape)).view(shape)
        if layout == "conj" and dtype.is_complex:
            return made.conj()
        return made

    def view_of(self, parent: torch.Tensor) -> torch.Tensor:
        rng = self.rng
        if parent.dim() == 0:
            return parent.view(1)
        choices: list[Callable[[], torch.Tensor]] = [lambda: parent[None]]
        length = parent.shape[0]
        if length > 1:
            start = rng.randrange(length)
            stop = rng.randint(start, length)
            choices += [lambda: parent[start:stop], lambda: parent[start:], lambda: parent[::2]]
        if parent.dim() >= 2:
            choices.append(lambda: parent.transpose(0, 1))
            if parent.shape[1]:
                choices.append(lambda: parent[:, 0])
        if length:
            choices.append(lambda: parent[length - 1])
        if parent.is_contiguous() and parent.dtype in SAME_SIZE and not parent.is_conj():
            choices += [lambda: parent.view(-1), lambda: parent.view(SAME_SIZE[parent.dtype])]
        return rng.choice(choices)()


def _is_omit(f: dataclasses.Field[Any]) -> bool:
    return all(f.metadata.get(key) == value for key, value in OMIT.items())


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


# --- records by number, packed -----------------------------------------------------

SWEEP_EVERY = 32
"""Record *r* with ``r % SWEEP_EVERY == 0`` is swept (every offset of its header), the others get random mutations."""
RANDOM_MUTATIONS = 120


class Sent(NamedTuple):
    """One record as the fuzzer sent it."""

    record: Any
    cls: type
    header: bytes
    buffers: list[memoryview]
    travelled: frozenset[str]
    """The top record's fields that should arrive with the values sent."""
    shared: frozenset[str]
    """Paths of tensors whose memory another tensor of the record shares."""


def make_record(seed: int, index: int) -> Sent:
    rng = random.Random(f"metakit-wire-fuzz {seed} {index}")
    swept = index % SWEEP_EVERY == 0
    cls = CLASSES[(index // SWEEP_EVERY) % len(CLASSES)] if swept else rng.choice(CLASSES)
    record = Gen(rng, big=rng.random() < 0.25).record(cls)
    skip = {f.name for f in dataclasses.fields(cls) if f.init and _has_default(f) and rng.random() < 0.1}
    skip -= DROPPED.get(cls.__qualname__, set())
    skip -= {f.name for f in dataclasses.fields(cls) if _is_omit(f)}
    header, buffers = wire.pack(record, skip_fields=skip or None)
    if not skip:  # pack's usual way and its general way (skip_fields=()) must make the same bytes
        general = wire.pack(record, skip_fields=())
        if bytes(header) != bytes(general.header) or list(map(bytes, buffers)) != list(map(bytes, general.buffers)):
            raise AssertionError(f"pack(record) and pack(record, skip_fields=()) differ: {record!r}")
    travelled = set(record.asdict_zerocopy()) - skip - DROPPED.get(cls.__qualname__, set())
    return Sent(record, cls, bytes(header), list(buffers), frozenset(travelled), _shared_paths(record))


def _shared_paths(record: Any) -> frozenset[str]:
    by_storage: dict[int, list[str]] = {}
    for path, tensor in _tensors_in(record, "$"):
        if tensor.numel():
            by_storage.setdefault(tensor.untyped_storage().data_ptr(), []).append(path)
    return frozenset(path for paths in by_storage.values() if len(paths) > 1 for path in paths)


def _tensors_in(value: Any, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _tensors_in(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors_in(item, f"{path}[{key!r}]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _tensors_in(getattr(value, f.name, None), f"{path}.{f.name}")


# --- mutations ----------------------------------------------------------------------
#
# A mutation is {"h": header mutation or None, "b": buffer mutation or None},
# plain JSON, applied by ``apply``.


def _le_be(value: int, width: int) -> list[bytes]:
    value %= 1 << (8 * width)
    return list(dict.fromkeys((value.to_bytes(width, "little"), value.to_bytes(width, "big"))))


WINDOWS: tuple[bytes, ...] = tuple(
    dict.fromkeys(
        pattern
        for width in (1, 2, 4, 8)
        for value in (0, -1, 2**31, 2**63, 1 << (8 * width - 1))
        for pattern in _le_be(value, width)
    )
)
"""0, -1, 2**31, 2**63 (and the sign bit of each width) as 1, 2, 4 and 8 bytes, little- and big-endian."""

MSGPACK_INTS = tuple(
    bytes.fromhex(text)
    for text in ("00", "ff", "ce80000000", "cf8000000000000000", "d3ffffffffffffffff", "d38000000000000000")
)
"""0, -1, 2**31, 2**63, -1 as int64 and -2**63, as msgpack encodes them."""

MSGPACK_OTHERS = tuple(bytes.fromhex(text) for text in ("c0", "c3", "a161", "80", "90", "c400", "cb3ff8000000000000"))
"""A value of each other type, to put where a scalar was: None, True, "a", {}, [], b"", 1.5."""

_SCALAR_TOKEN = {0xC0: 1, 0xC2: 1, 0xC3: 1, 0xCA: 5, 0xCB: 9}
_INT_TOKEN = {0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9, 0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9}
_LENGTHS = {
    "array": ("dc0000", "dcffff", "dd80000000", "ddffffffff"),
    "map": ("de0000", "deffff", "df80000000", "dfffffffff"),
    "str": ("d9ff", "daffff", "db80000000", "dbffffffff"),
    "bin": ("c4ff", "c5ffff", "c680000000", "c6ffffffff"),
    "ext": ("c7ff00", "c8ffff00", "c98000000000", "c9ffffffff00"),
}
_HEAD_LENGTH = {0xC4: 2, 0xC5: 3, 0xC6: 5, 0xD9: 2, 0xDA: 3, 0xDB: 5, 0xDC: 3, 0xDD: 5, 0xDE: 3, 0xDF: 5}
_EXT_LENGTH = {0xC7: 3, 0xC8: 4, 0xC9: 6, 0xD4: 2, 0xD5: 2, 0xD6: 2, 0xD7: 2, 0xD8: 2}


def _int_token(byte: int) -> int:
    """How long a msgpack integer starting with *byte* is, or 0."""
    if byte < 0x80 or byte >= 0xE0:
        return 1
    return _INT_TOKEN.get(byte, 0)


def _scalar_token(byte: int) -> int:
    """How long a msgpack integer, nil, bool or float starting with *byte* is, or 0."""
    return _int_token(byte) or _SCALAR_TOKEN.get(byte, 0)


def _length_token(byte: int) -> tuple[str, int] | None:
    """What a msgpack container, string or blob head *byte* starts, and how long its head is."""
    if 0x90 <= byte <= 0x9F:
        return "array", 1
    if 0x80 <= byte <= 0x8F:
        return "map", 1
    if 0xA0 <= byte <= 0xBF:
        return "str", 1
    if byte in _HEAD_LENGTH:
        kind = {0xC4: "bin", 0xC5: "bin", 0xC6: "bin", 0xD9: "str", 0xDA: "str", 0xDB: "str"}.get(byte)
        return kind or ("array" if byte in (0xDC, 0xDD) else "map"), _HEAD_LENGTH[byte]
    if byte in _EXT_LENGTH:
        return "ext", _EXT_LENGTH[byte]
    return None


def sweep_mutations(header: bytes) -> list[dict[str, Any]]:
    """Every offset of *header*: each window value; each msgpack scalar set to each integer and to a value of
    each other type; each msgpack length set huge; two flips; and every cut."""
    out: list[dict[str, Any]] = [{"h": None, "b": None}]
    for offset, byte in enumerate(header):
        out += [{"h": ["window", offset, pattern.hex()], "b": None} for pattern in WINDOWS]
        length = _scalar_token(byte)
        if length:
            tokens = (*MSGPACK_INTS, *MSGPACK_OTHERS)
            out += [{"h": ["token", offset, length, token.hex()], "b": None} for token in tokens]
        found = _length_token(byte)
        if found:
            out += [{"h": ["token", offset, found[1], token], "b": None} for token in _LENGTHS[found[0]]]
        out += [{"h": ["flip", offset, 0xFF], "b": None}, {"h": ["flip", offset, 0x01], "b": None}]
        out.append({"h": ["cut", offset], "b": None})
    return out


def random_mutations(rng: random.Random, header: bytes, partner: bytes, sizes: Sequence[int]) -> list[dict[str, Any]]:
    """The unmutated case in every buffer form, then ``RANDOM_MUTATIONS`` random ones."""
    out: list[dict[str, Any]] = [{"h": None, "b": ["form", form]} for form in FORMS]
    for _ in range(RANDOM_MUTATIONS):
        header_mutation = _random_header_mutation(rng, header, partner) if rng.random() < 0.8 else None
        buffers_mutation = None
        if header_mutation is None or rng.random() < 0.2:
            buffers_mutation = _random_buffer_mutation(rng, sizes)
        out.append({"h": header_mutation, "b": buffers_mutation})
    return out


def _random_header_mutation(rng: random.Random, header: bytes, partner: bytes) -> list[Any]:  # noqa: PLR0911  # per kind
    size = len(header)
    offset = rng.randrange(size + 1)
    kind = rng.randrange(12)
    if kind <= 1:
        return ["flip", rng.randrange(size), rng.randint(1, 255)]
    if kind == 2:
        return ["cut", rng.randrange(size)]
    if kind == 3:
        return ["insert", offset, rng.randbytes(rng.choice((1, 2, 4, 8, 33))).hex()]
    if kind == 4:
        return ["delete", offset, rng.choice((1, 2, 4, 8, 64))]
    if kind == 5:
        return ["extend", rng.choice(("zero", "ff", "random", "self")), rng.choice((1, 8, 100))]
    if kind == 6:
        return ["dup", offset, rng.choice((1, 4, 16, 64, 256))]
    if kind == 7:
        return ["splice", offset, rng.randrange(len(partner) + 1)]
    if kind == 8:
        return ["window", offset, rng.choice(WINDOWS).hex()]
    if kind == 9:
        return [
            "token",
            offset,
            max(1, _scalar_token(header[offset]) if offset < size else 1),
            rng.choice(MSGPACK_INTS + MSGPACK_OTHERS).hex(),
        ]
    if kind == 10:
        return ["nest", offset, rng.choice((100, 5000, 200000)), rng.choice((0x91, 0x81, 0xDC, 0x92))]
    return ["partner"]


FORMS = ("packed", "bytes", "bytearray", "misaligned", "tensor", "tensor_misaligned", "ring", "typed")
"""The same bytes given as: what pack returned, read-only bytes, bytearrays, memoryviews at an odd address,
uint8 tensors, tensors at an odd address, slices of one shared ring, memoryviews of 4-byte items."""
READ_ONLY_FORMS = frozenset({"bytes"})
EXACT_FORMS = frozenset(FORMS) - {"misaligned", "tensor_misaligned"}
"""Forms in which the unmutated case must arrive whole (at an odd address ``WireError`` is fine too)."""


def _random_buffer_mutation(rng: random.Random, sizes: Sequence[int]) -> list[Any]:  # noqa: PLR0911  # one per kind
    count = len(sizes)
    index = rng.randrange(count) if count else 0
    kind = rng.randrange(9)
    if kind == 0:
        return ["form", rng.choice(FORMS)]
    if kind <= 2 and count:
        size = sizes[index]
        return ["resize", index, rng.choice(sorted({0, size // 2, max(size - 1, 0), size + 1, size + 64, size * 2}))]
    if kind == 3:
        return ["drop", index]
    if kind == 4:
        return ["extra", rng.choice(("empty", "copy", "mib"))]
    if kind == 5 and count >= 2:
        return ["swap", index, (index + 1) % count]
    if kind == 6:
        return ["partner"]
    if kind == 7 and count and sizes[index]:
        return ["noise", index, rng.randrange(1 << 30), rng.choice((1, 8, 64))]
    return ["badtensor", index, rng.choice(("int32", "2d", "strided", "float32"))]


def apply_header(mutation: list[Any] | None, header: bytes, partner: bytes) -> tuple[bytes, bool]:  # noqa: PLR0911
    """The mutated header, and whether it holds bytes of the partner's."""
    if mutation is None:
        return header, False
    kind, *args = mutation
    if kind == "flip":
        offset, mask = args
        return header[:offset] + bytes([header[offset] ^ mask]) + header[offset + 1 :], False
    if kind == "cut":
        return header[: args[0]], False
    if kind in ("insert", "window", "token"):
        offset, *rest = args
        skip = {"insert": 0, "window": len(bytes.fromhex(rest[-1])), "token": rest[0]}[kind]
        return header[:offset] + bytes.fromhex(rest[-1]) + header[offset + skip :], False
    if kind == "delete":
        offset, count = args
        return header[:offset] + header[offset + count :], False
    if kind == "extend":
        how, count = args
        tail = {"zero": b"\0" * count, "ff": b"\xff" * count, "random": random.Random(count).randbytes(count)}
        return header + tail.get(how, header), False
    if kind == "dup":
        offset, count = args
        return header[: offset + count] + header[offset:], False
    if kind == "splice":
        offset, other = args
        return header[:offset] + partner[other:], True
    if kind == "nest":
        offset, count, byte = args
        return header[:offset] + bytes([byte]) * count + header[offset:], False
    if kind == "partner":
        return partner, True
    raise ValueError(f"unknown header mutation {mutation}")


def in_form(buffers: Sequence[Any], form: str) -> list[Any]:  # noqa: PLR0911  # one return per form
    """*buffers*' bytes, given in *form* (one of ``FORMS``)."""
    if form == "packed":
        return list(buffers)
    if form == "bytes":
        return [bytes(buffer) for buffer in buffers]
    if form == "bytearray":
        return [bytearray(buffer) for buffer in buffers]
    if form == "misaligned":
        out = []
        for buffer in buffers:
            room = bytearray(len(buffer) + 1)
            room[1:] = buffer
            out.append(memoryview(room)[1:])
        return out
    if form in ("tensor", "tensor_misaligned"):
        skew = form == "tensor_misaligned"
        out = []
        for buffer in buffers:
            room = torch.empty(len(buffer) + skew, dtype=torch.uint8)
            if len(buffer):
                room[skew:] = torch.frombuffer(bytearray(buffer), dtype=torch.uint8)
            out.append(room[skew:])
        return out
    if form == "ring":  # each slice 64 bytes after the last, at a multiple of 64 from the ring's start
        ring = bytearray(sum(-(-len(buffer) // 64) * 64 + 64 for buffer in buffers) + 64)
        view, out, place = memoryview(ring), [], 64
        for buffer in buffers:
            ring[place : place + len(buffer)] = buffer
            out.append(view[place : place + len(buffer)])
            place += -(-len(buffer) // 64) * 64 + 64
        return out
    if form == "typed":
        return [memoryview(bytearray(b)).cast("i") if len(b) % 4 == 0 else bytearray(b) for b in buffers]
    raise ValueError(f"unknown form {form}")


def apply_buffers(mutation: list[Any] | None, buffers: list[memoryview], partner: list[memoryview]) -> list[Any]:
    if mutation is None:
        return list(buffers)
    kind, *args = mutation
    if kind == "form":
        return in_form(buffers, args[0])
    out: list[Any] = list(buffers)
    if kind == "resize":
        index, size = args
        out[index] = (bytes(out[index]) + bytes(max(size - len(out[index]), 0)))[:size]
        out[index] = bytearray(out[index])
    elif kind == "drop":
        del out[args[0] : args[0] + 1]
    elif kind == "extra":
        out.append(
            {"empty": bytearray(), "copy": bytearray(out[0]) if out else bytearray(8), "mib": bytearray(1 << 20)}[
                args[0]
            ]
        )
    elif kind == "swap":
        out[args[0]], out[args[1]] = out[args[1]], out[args[0]]
    elif kind == "partner":
        out = list(partner)
    elif kind == "noise":
        index, noise_seed, count = args
        noisy = bytearray(out[index])
        noise = random.Random(noise_seed)
        for _ in range(count):
            noisy[noise.randrange(len(noisy))] = noise.randrange(256)
        out[index] = noisy
    elif kind == "badtensor" and out:
        index, how = args
        raw = torch.frombuffer(bytearray(bytes(out[index]) + bytes(8)), dtype=torch.uint8)
        out[index] = {
            "int32": lambda: raw[: len(raw) // 4 * 4].view(torch.int32),
            "2d": lambda: raw[: len(raw) // 2 * 2].view(2, -1),
            "strided": lambda: raw[::2],
            "float32": raw.float,
        }[how]()
    return out


def describe(mutation: dict[str, Any]) -> str:
    parts = []
    if mutation["h"] is not None:
        parts.append("header " + " ".join(map(str, mutation["h"])))
    if mutation["b"] is not None:
        parts.append("buffers " + " ".join(map(str, mutation["b"])))
    return "; ".join(parts) or "none (the record as packed)"


# --- what came back ------------------------------------------------------------------


class Ranges(NamedTuple):
    writable: list[tuple[int, int]]
    """(address, size) of each buffer given whose memory unpack may use as is."""
    read_only: list[int]
    """The size of each read-only buffer given, which unpack may copy once."""


def buffer_ranges(buffers: Sequence[Any]) -> Ranges:
    writable, read_only = [], []
    for buffer in buffers:
        if isinstance(buffer, torch.Tensor):
            writable.append((buffer.data_ptr(), buffer.numel() * buffer.element_size()))
            continue
        view = memoryview(buffer)
        if view.readonly:
            read_only.append(view.nbytes)
        elif view.nbytes:
            writable.append((torch.frombuffer(view.cast("B"), dtype=torch.uint8).data_ptr(), view.nbytes))
    return Ranges(writable, read_only)


class Problem(Exception):
    """What is wrong with a record that came back; *key* groups problems of one cause (default: the text)."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key or _unnumbered(message)


def check_record(value: Any, path: str, tensors: list[tuple[str, torch.Tensor]], references: dict[type, Any]) -> None:
    """Raise ``Problem`` unless *value* is a record of a fuzzer class, made as the receiver must make one."""
    cls = type(value)
    if BY_NAME.get(cls.__qualname__) is not cls:
        raise Problem(f"{path} is a {cls.__module__}.{cls.__qualname__}, not a record of the fuzzer's classes")
    reference = references[cls]
    if hasattr(reference, "__dict__") != hasattr(value, "__dict__") or (
        hasattr(value, "__dict__") and set(vars(value)) != set(vars(reference))
    ):
        extra = sorted(set(vars(value)) - set(vars(reference))) if hasattr(value, "__dict__") else "a __dict__"
        raise Problem(f"{path} has attributes that __init__ does not make: {extra}")
    if getattr(value, "attn_bias", None) is not None:
        raise Problem(f"{path}.attn_bias, which __post_init__ sets to None, is {type(value.attn_bias).__name__}")
    for f in dataclasses.fields(cls):
        try:
            item = getattr(value, f.name)
        except AttributeError:
            raise Problem(f"{path}.{f.name} is not set") from None
        if _is_omit(f):
            if item is not f.default:
                raise Problem(f"{path}.{f.name}, an OMIT field, is not its default but a {type(item).__name__}")
            continue
        conforms(item, f.type, f"{path}.{f.name}", tensors, references)


def conforms(value: Any, ann: str, path: str, tensors: list[tuple[str, torch.Tensor]], refs: dict[type, Any]) -> None:
    """Raise ``Problem`` unless *value* has the declared type *ann* (leniently: an int is a float, a bool an int)."""
    if ann.endswith(" | None"):
        if value is not None:
            conforms(value, ann[: -len(" | None")], path, tensors, refs)
        return
    container = next((kind for kind in (list, tuple, dict) if ann.startswith(kind.__name__ + "[")), None)
    if container is not None:
        if type(value) is not container:
            raise Problem(f"{path} is declared {ann}, but a {type(value).__name__} came")
        if container is dict:
            for key, item in value.items():
                if type(key) is not str:
                    raise Problem(f"{path} is declared {ann}, but has a key of type {type(key).__name__}")
                conforms(item, ann[10:-1], f"{path}[{key!r}]", tensors, refs)
        else:
            inner = ann[6:-6] if container is tuple else ann[5:-1]
            for index, item in enumerate(value):
                conforms(item, inner, f"{path}[{index}]", tensors, refs)
        return
    expected = {
        "int": (int,),
        "bool": (bool,),
        "float": (int, float),
        "str": (str,),
        "bytes": (bytes,),
        "torch.dtype": (torch.dtype,),
        "torch.device": (torch.device,),
        "torch.Tensor": (torch.Tensor,),
    }.get(ann) or ((BY_NAME[ann],) if ann in BY_NAME else None)
    if expected is None:  # Any, object, a Callable, a name the receiver cannot resolve: any plain value
        plain(value, path, tensors, refs)
    elif not isinstance(value, expected):
        raise Problem(f"{path} is declared {ann}, but a {type(value).__name__} came")
    else:
        plain(value, path, tensors, refs)


def plain(value: Any, path: str, tensors: list[tuple[str, torch.Tensor]], refs: dict[type, Any]) -> None:
    """Raise ``Problem`` unless *value* is plain data (walked without recursion: it may be deep)."""
    stack = [(path, value)]
    while stack:
        where, item = stack.pop()
        if item is None or type(item) in (bool, int, float, str, bytes, torch.dtype, torch.device):
            continue
        if type(item) in (list, tuple):
            stack.extend((f"{where}[{index}]", inner) for index, inner in enumerate(item))
        elif type(item) is dict:
            for key, inner in item.items():
                if type(key) not in (str, int):
                    raise Problem(f"{where} has a key of type {type(key).__name__}")
                stack.append((f"{where}[{key!r}]", inner))
        elif isinstance(item, torch.Tensor):
            if item.layout is not torch.strided or item.is_quantized or item.is_meta or item.is_nested:
                raise Problem(f"{where} is a tensor of layout {item.layout}, dtype {item.dtype}, on {item.device}")
            tensors.append((where, item))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            check_record(item, where, tensors, refs)
        else:
            raise Problem(f"{where} is a {type(item).__module__}.{type(item).__qualname__}, which is not plain data")


def extent(tensor: torch.Tensor) -> tuple[int, int]:
    """The first and one past the last byte address of a non-empty tensor's elements."""
    if any(stride < 0 for stride in tensor.stride()):
        raise Problem("a tensor with a negative stride")
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    start = tensor.data_ptr()
    return start, start + (last + 1) * tensor.element_size()


def check_extents(tensors: list[tuple[str, torch.Tensor]], ranges: Ranges, shared: frozenset[str]) -> None:
    """Raise ``Problem`` unless each tensor lies in a buffer given and two share bytes only as views may."""
    spans = []
    for path, tensor in tensors:
        if not tensor.numel():
            continue
        if tensor.device.type != "cpu":
            raise Problem(f"{path} arrived on {tensor.device}, but every buffer was on the CPU")
        if tensor.data_ptr() % tensor.element_size():
            raise Problem(
                f"{path} ({tensor.dtype}) arrived at an address {tensor.data_ptr() % 64} bytes past a multiple of 64, "
                f"not a multiple of its item size: torch's kernels may crash on it (a complex128 copy does)",
                "a tensor arrived at an address that is not a multiple of its item size",
            )
        low, high = extent(tensor)
        inside = any(start <= low and high <= start + size for start, size in ranges.writable)
        if not inside:
            storage = tensor.untyped_storage()
            base = storage.data_ptr()
            copied = (
                ranges.read_only
                and base <= low
                and high <= base + storage.nbytes()
                and storage.nbytes() <= max(ranges.read_only)
            )
            if not copied:
                raise Problem(
                    f"{path} ({tensor.dtype}, shape {tuple(tensor.shape)}, strides {tensor.stride()}) spans "
                    f"{high - low} bytes that lie outside every buffer given ({_ranges_text(ranges, low)})",
                    "a tensor's bytes lie outside every buffer given",
                )
        spans.append((low, high, path))
    for low, high, path in spans:
        for other_low, other_high, other in spans:
            if not (low < other_high and other_low < high) or path >= other:
                continue
            common = any(
                outer_low <= min(low, other_low) and max(high, other_high) <= outer_high
                for outer_low, outer_high, _ in spans
            )
            if not common and path not in shared and other not in shared:
                raise Problem(
                    f"{path} and {other} share bytes, but neither is a view of memory sent for the other",
                    "two tensors share bytes that were not sent for both",
                )


def _ranges_text(ranges: Ranges, low: int) -> str:
    parts = [f"[{start - low:+d}, {start - low + size:+d})" for start, size in ranges.writable]
    parts += [f"read-only of {size} bytes" for size in ranges.read_only]
    return "relative to its first byte: " + ", ".join(parts) if parts else "none"


def same(a: Any, b: Any, path: str) -> None:  # noqa: PLR0912  # one branch per kind of value
    """Raise ``Problem`` unless *a* (what came) equals *b* (what was sent), tensors by dtype, shape and bytes."""
    if isinstance(b, torch.Tensor):
        if not isinstance(a, torch.Tensor) or a.dtype != b.dtype or a.shape != b.shape:
            raise Problem(f"{path}: {_brief(a)} came for {_brief(b)}")
        if not torch.equal(_bytes_of(a), _bytes_of(b)):
            raise Problem(f"{path}: the tensor's values differ from those sent")
    elif type(a) is not type(b):
        raise Problem(f"{path}: a {type(a).__name__} came for a {type(b).__name__}")
    elif isinstance(b, (list, tuple)):
        if len(a) != len(b):
            raise Problem(f"{path}: {len(a)} items came for {len(b)}")
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{index}]")
    elif isinstance(b, dict):
        if list(a) != list(b):
            raise Problem(f"{path}: the keys {list(a)!r} came for {list(b)!r}")
        for key in b:
            same(a[key], b[key], f"{path}[{key!r}]")
    elif dataclasses.is_dataclass(b):
        for name in _sent_fields(b):
            same(getattr(a, name), getattr(b, name), f"{path}.{name}")
    elif isinstance(b, float):
        if not (a == b or (math.isnan(a) and math.isnan(b))) or math.copysign(1, a) != math.copysign(1, b):
            raise Problem(f"{path}: {a!r} came for {b!r}")
    elif a != b:
        raise Problem(f"{path}: {a!r} came for {b!r}")


def _raw_bytes(tensor: torch.Tensor) -> bytes:
    """The bytes of the contiguous *tensor* as they lie (any dtype: none of torch's kernels runs)."""
    return ctypes.string_at(tensor.data_ptr(), tensor.numel() * tensor.element_size())


def _lies_in(tensor: torch.Tensor, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(start <= tensor.data_ptr() < start + size for start, size in ranges)


def _sent_fields(record: Any) -> list[str]:
    return [name for name in record.asdict_zerocopy() if name not in DROPPED.get(type(record).__qualname__, ())]


def _bytes_of(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's values as bytes, in its elements' order."""
    dense = torch.empty(tuple(tensor.shape), dtype=tensor.dtype).copy_(tensor.detach().resolve_conj().resolve_neg())
    return dense.reshape(-1).view(torch.uint8)


def _brief(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


# --- the worker ----------------------------------------------------------------------

WATCHED = frozenset(
    {
        "import",
        "exec",
        "compile",
        "pickle.find_class",
        "os.system",
        "subprocess.Popen",
        "open",
        "os.exec",
        "os.spawn",
        "os.posix_spawn",
        "os.fork",
        "os.forkpty",
        "marshal.loads",
        "socket.connect",
        "urllib.Request",
    }
)
"""Audit events that must never fire while ``unpack`` runs; every ``ctypes.*`` event too."""

ADDRESS_SPACE_ROOM = 3 << 30
"""How much more address space than it holds once set up a worker may take: an allocation beyond fails."""


class Hook:
    """Records the watched audit events while armed (the hook itself can never be removed)."""

    def __init__(self) -> None:
        self.armed = False
        self.events: list[tuple[str, str]] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.armed and (event in WATCHED or event.startswith("ctypes.")):
            self.armed = False
            try:
                self.events.append((event, _short_repr(args)))
            finally:
                self.armed = True


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as error:  # a value of the attacker's making may have any repr
        text = f"<repr raised {type(error).__name__}>"
    return text if len(text) < 300 else text[:300] + "..."


class Outcome(NamedTuple):
    kind: str
    """'WireError', 'record' or 'usual record' (read by unpack's usual way; all fine), or a failure: 'audit',
    'exception', 'invalid', 'refused'."""
    detail: str
    signature: str
    """What failures of one cause have in common: the kind, the events or the exception, without numbers."""


def _unnumbered(text: str) -> str:
    return re.sub(r"\d+", "N", re.sub(r"\$[^ ,:]*", "$", text))[:200]


class Collector:
    """The failures of one command, grouped by signature: every count, the first few of each in full."""

    KEEP = 4

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: list[dict[str, Any]] = []

    def add(self, failure: dict[str, Any]) -> None:
        signature = failure["signature"]
        self.counts[signature] = self.counts.get(signature, 0) + 1
        if self.counts[signature] <= self.KEEP:
            self.examples.append(failure)

    def message(self) -> dict[str, Any]:
        return {"counts": self.counts, "examples": self.examples}


class Worker:
    """Runs cases: one unpack each, with the hook armed around it, and the checks after."""

    def __init__(self, progress_path: str | None) -> None:
        self.hook = Hook()
        self.unpack: Callable[..., Any] = wire.unpack
        self.progress_fd = os.open(progress_path, os.O_RDWR) if progress_path else None
        self.references: dict[type, Any] = {}
        self.records: dict[tuple[int, int], Sent] = {}

    def start(self) -> None:
        """Warm up (one round trip of a record of each class, unarmed), then hook in and limit memory."""
        torch.set_num_threads(1)
        for index, cls in enumerate((*CLASSES, Probe)):
            record = Gen(random.Random(f"warm-up {index}"), big=True).record(cls)
            self.references[cls] = record
            header, buffers = wire.pack(record)
            wire.unpack(header, buffers)
        sys.addaudithook(self.hook)
        warnings.simplefilter("error")  # as in the project's tests: a warning from unpack is a failure
        faulthandler.enable()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        held = _address_space()
        if held:
            resource.setrlimit(resource.RLIMIT_AS, (held + ADDRESS_SPACE_ROOM, resource.RLIM_INFINITY))

    def progress(self, text: str) -> None:
        if self.progress_fd is not None:
            os.pwrite(self.progress_fd, text.encode().ljust(120), 0)

    def record(self, seed: int, index: int) -> Sent:
        key = (seed, index)
        if key not in self.records:
            if len(self.records) > 4:
                self.records.clear()
            self.records[key] = make_record(seed, index)
        return self.records[key]

    def unpack_armed(
        self, header: bytes, buffers: list[Any]
    ) -> tuple[Any, BaseException | None, list[tuple[str, str]]]:
        self.hook.events = []
        result: Any = None
        error: BaseException | None = None
        self.hook.armed = True
        try:
            result = self.unpack(header, buffers)
        except BaseException as caught:  # everything, to tell WireError from the rest
            error = caught
        finally:
            self.hook.armed = False
        return result, error, self.hook.events

    def case(self, sent: Sent, partner: Sent, mutation: dict[str, Any]) -> Outcome:  # noqa: PLR0911  # per outcome
        header, from_partner = apply_header(mutation["h"], sent.header, partner.header)
        buffers = apply_buffers(mutation["b"], sent.buffers, partner.buffers)
        allowed = {sent.cls, partner.cls} if from_partner else {sent.cls}
        result, error, events = self.unpack_armed(header, buffers)
        if events:
            happened = f"raised {type(error).__qualname__}" if error is not None else "returned"
            names = sorted({event for event, _ in events})
            shown = [f"{event} {args}" for event, args in events[:8]]
            return Outcome("audit", f"audit events while unpack ran (it {happened}): {shown}", f"audit: {names}")
        if error is not None:
            if isinstance(error, wire.WireError):
                if _must_arrive(mutation):
                    text = f"the record as packed was refused: WireError: {error}"
                    return Outcome("refused", text, "refused: " + _unnumbered(str(error)))
                return Outcome("WireError", str(error)[:200], "")
            name = f"{type(error).__module__}.{type(error).__qualname__}"
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__, limit=-6))
            return Outcome("exception", trace[-2500:], f"exception: {name}: {_unnumbered(str(error))}")
        try:
            self.check(result, allowed, buffers, sent, mutation)
            usual = wire._unpack_usual(header, buffers) is not None
            if usual:
                self.same_as_general(result, header, buffers)
        except Problem as problem:
            return Outcome("invalid", str(problem), "invalid: " + problem.key)
        except Exception as error:
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__, limit=-4))
            return Outcome("invalid", f"checking what came raised {trace[-1500:]}", f"check raised {type(error)}")
        return Outcome("usual record" if usual else "record", type(result).__qualname__, "")

    def check(self, result: Any, allowed: set[type], buffers: list[Any], sent: Sent, mutation: dict[str, Any]) -> None:
        if type(result) not in allowed:
            names = sorted(cls.__qualname__ for cls in allowed)
            raise Problem(f"a {type(result).__module__}.{type(result).__qualname__} came back, not a {names}")
        tensors: list[tuple[str, torch.Tensor]] = []
        check_record(result, "$", tensors, self.references)
        check_extents(tensors, buffer_ranges(buffers), sent.shared)
        if _must_arrive(mutation) or (mutation["h"] is None and mutation["b"] in (["form", f] for f in FORMS)):
            for name in sorted(sent.travelled):
                same(getattr(result, name), getattr(sent.record, name), f"$.{name}")

    @staticmethod
    def same_as_general(result: Any, header: bytes, buffers: list[Any]) -> None:
        """Raise ``Problem`` unless the general way reads the record that unpack's usual way read.

        The usual way (``wire._unpack_usual``) takes only what the general
        way takes, and reads it the same: this is where that is tried.
        """
        try:
            general = wire._unpack_general(header, buffers, False)
        except wire.WireError as error:
            raise Problem(f"the usual way read a record that the general way refuses: {error}", "usual") from None
        if type(general) is not type(result):
            raise Problem(f"the usual way read a {type(result)}, the general way a {type(general)}", "usual")
        writable = buffer_ranges(buffers).writable
        for name in _sent_fields(result):
            value, read = getattr(result, name), getattr(general, name)
            if isinstance(value, torch.Tensor) and isinstance(read, torch.Tensor):
                # In a writable buffer given, both lie at the same address; a read-only one each way copies.
                placed = [
                    (t.dtype, t.shape, t.stride(), t.requires_grad, t.is_contiguous(), _lies_in(t, writable))
                    for t in (value, read)
                ]
                if placed[0] != placed[1] or not placed[0][4]:
                    raise Problem(f"$.{name}: the usual way made {placed[0]}, the general way {placed[1]}", "usual")
                if value.data_ptr() != read.data_ptr() if placed[0][5] else _raw_bytes(value) != _raw_bytes(read):
                    raise Problem(f"$.{name}: the usual way and the general way read other bytes", "usual")
            else:
                same(value, read, f"$.{name}")

    def fuzz(self, seed: int, first: int, cases: int, failures: Collector) -> dict[str, Any]:
        counts: dict[str, int] = {}
        done = 0
        index = first
        while done < cases:
            self.progress(f"{seed} {index} -1 {done}")
            try:
                sent, partner = self.record(seed, index), self.record(seed, index ^ 1)
            except Exception as error:  # pack refused a record of plain values, or the fuzzer is wrong
                trace = "".join(traceback.format_exception(type(error), error, error.__traceback__, limit=-6))
                failures.add(
                    {
                        "seed": seed,
                        "record": index,
                        "mutation": -1,
                        "what": "making and packing the record (and its partner)",
                        "kind": "pack",
                        "detail": trace[-2500:],
                        "signature": f"pack: {type(error).__qualname__}: {_unnumbered(str(error))}",
                    }
                )
                counts["pack"] = counts.get("pack", 0) + 1
                index += 1
                done += 1
                continue
            for number, mutation in enumerate(mutations_of(seed, index, sent, partner)):
                self.progress(f"{seed} {index} {number} {done}")
                outcome = self.case(sent, partner, mutation)
                done += 1
                counts[outcome.kind] = counts.get(outcome.kind, 0) + 1
                if outcome.signature:
                    failures.add(_failure((seed, index, number), sent, mutation, outcome))
            index += 1
        return {"cases": done, "records": index - first, "outcomes": counts}


def _must_arrive(mutation: dict[str, Any]) -> bool:
    """Whether the case is the record as packed, in a form in which it must arrive whole."""
    return mutation["h"] is None and (mutation["b"] is None or mutation["b"] in (["form", f] for f in EXACT_FORMS))


def mutations_of(seed: int, index: int, sent: Sent, partner: Sent) -> list[dict[str, Any]]:
    if index % SWEEP_EVERY == 0:
        return sweep_mutations(sent.header)
    rng = random.Random(f"metakit-wire-fuzz mutations {seed} {index}")
    return random_mutations(rng, sent.header, partner.header, [len(buffer) for buffer in sent.buffers])


def _failure(case: tuple[int, int, int], sent: Sent, mutation: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    """A failure as the supervisor gets it: *case* is (seed, record, mutation)."""
    seed, index, number = case
    return {
        "seed": seed,
        "record": index,
        "mutation": number,
        "class": sent.cls.__qualname__,
        "what": describe(mutation),
        "kind": outcome.kind,
        "detail": outcome.detail,
        "signature": outcome.signature,
    }


def _address_space() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# --- hand-made attacks -------------------------------------------------------------------

MARKER = "metakit-fuzz-marker-" + "x" * 120
UNIMPORTED = "colorsys"
"""A module no worker imports, until a payload does."""


class Reduce:
    """Pickles as a call of *function* with *args*: what an attacker puts where a value would be."""

    def __init__(self, function: Any, *args: Any) -> None:
        self.function = function
        self.args = args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.function, self.args


def attack_payloads() -> dict[str, bytes]:
    """Pickles that run a shell command, import a module, exec code, load a file: whole, and without their STOP."""
    import builtins
    import importlib

    calls = {
        "os.system": Reduce(os.system, "true"),
        "import_module": Reduce(importlib.import_module, UNIMPORTED),
        "exec": Reduce(builtins.exec, f"import {UNIMPORTED}"),
        "torch.load": Reduce(torch.load, "/nonexistent/metakit-fuzz"),
    }
    out = {}
    for name, call in calls.items():
        for protocol in (0, 2, 5):
            blob = pickle.dumps(call, protocol=protocol)
            out[f"{name} pickle protocol {protocol}"] = blob
            out[f"{name} pickle protocol {protocol} without STOP"] = blob[:-1]
    return out


def attack_cases() -> Iterator[tuple[str, bytes, list[Any]]]:
    """Headers whose bytes carry a pickle where a value would be (over it and its head), or after the start.

    Spliced over the value, the pickle is also padded (with opcodes that push
    and pop) to the length of what it replaces: lengths in the header, of a
    pickle frame or of a msgpack string, then still hold.
    """
    record = Bag(payload=MARKER, more=[1, 2], spare=torch.arange(4))
    header, buffers = wire.pack(record)
    header = bytes(header)
    place = header.find(MARKER.encode())
    end = place + len(MARKER)
    for name, payload in attack_payloads().items():
        if place >= 0:
            for back in range(10):
                spliced = header[: place - back] + payload + header[end:]
                yield f"{name}, over the value and the {back} bytes before it", spliced, list(buffers)
                padded = _padded(payload, end - place + back)
                if padded is not None and back:  # with no byte before it, only the string's bytes change
                    spliced = header[: place - back] + padded + header[end:]
                    yield f"{name}, padded, over the value and the {back} bytes before it", spliced, list(buffers)
            yield f"{name}, over the value and all after it", header[: place - 2] + payload, list(buffers)
        for keep in (0, 4, 5, 8, 12, 16, 24):
            yield f"{name}, after the header's first {keep} bytes", header[:keep] + payload, list(buffers)


def _padded(payload: bytes, size: int) -> bytes | None:
    """*payload* after pickle opcodes that push and pop (``N0``, ``K\\x000``), *size* bytes in all."""
    gap = size - len(payload)
    if gap < 0 or gap == 1:
        return None
    return (b"N0" * (gap // 2) if gap % 2 == 0 else b"K\x000" + b"N0" * ((gap - 3) // 2)) + payload


def run_attack(worker: Worker, failures: Collector) -> dict[str, Any]:
    sys.modules.pop(UNIMPORTED, None)
    counts: dict[str, int] = {}
    for number, (name, header, buffers) in enumerate(attack_cases()):
        worker.progress(f"attack {number}")
        result, error, events = worker.unpack_armed(header, buffers)
        kind = "audit" if events else "WireError" if isinstance(error, wire.WireError) else "other"
        counts[kind] = counts.get(kind, 0) + 1
        if kind != "WireError":
            if error is not None:
                came = f"raised {type(error).__qualname__}: {error}"
            else:
                came = f"returned a {type(result).__qualname__}"
            failures.add(
                {
                    "what": name,
                    "kind": kind,
                    "detail": f"unpack {came}" + (f"; audit events: {events[:6]}" if events else ""),
                    "signature": f"{kind}: {sorted({event for event, _ in events})}: {name.split(' pickle')[0]}",
                    "header": header.hex(),
                }
            )
    return {"cases": sum(counts.values()), "outcomes": counts}


# --- the fuzzer's own checks ----------------------------------------------------------------


@dataclass
class Probe(ZeroCopy):
    """The record the self-test's fake unpack functions return."""

    data: torch.Tensor
    count: int = 0


BY_NAME["Probe"] = Probe


def _fake_right(header: bytes, buffers: Sequence[Any]) -> Any:
    return Probe(torch.frombuffer(buffers[0], dtype=torch.uint8)[:4], 1)


def _fake_refuse(header: bytes, buffers: Sequence[Any]) -> Any:
    raise wire.WireError("refused")


def _fake_outside(header: bytes, buffers: Sequence[Any]) -> Any:
    return Probe(torch.zeros(4, dtype=torch.uint8))


def _fake_past_slice(header: bytes, buffers: Sequence[Any]) -> Any:
    return Probe(torch.frombuffer(buffers[0].obj, dtype=torch.uint8), 1)  # the whole ring, not the slice given


def _fake_pickle(header: bytes, buffers: Sequence[Any]) -> Any:
    return pickle.loads(pickle.dumps(Reduce(os.system, "true")))


def _fake_raw_error(header: bytes, buffers: Sequence[Any]) -> Any:
    return [][len(header)]


def _fake_other_class(header: bytes, buffers: Sequence[Any]) -> Any:
    return SeqGroup("x", [1])


def _fake_extra_attribute(header: bytes, buffers: Sequence[Any]) -> Any:
    probe = _fake_right(header, buffers)
    object.__setattr__(probe, "__wire_extra__", 1)
    return probe


def _fake_not_plain(header: bytes, buffers: Sequence[Any]) -> Any:
    return Probe(torch.frombuffer(buffers[0], dtype=torch.uint8)[:4], Unsendable())  # type: ignore[arg-type]


def _fake_allocate(header: bytes, buffers: Sequence[Any]) -> Any:
    torch.empty(8 << 30, dtype=torch.uint8)  # beyond the address space limit (and no page is touched)
    return _fake_right(header, buffers)


def _fake_hang(header: bytes, buffers: Sequence[Any]) -> Any:
    time.sleep(3600)


def _fake_crash(header: bytes, buffers: Sequence[Any]) -> Any:
    os.kill(os.getpid(), signal.SIGSEGV)


FAKES: dict[str, Callable[..., Any]] = {
    name[len("_fake_") :]: value for name, value in list(globals().items()) if name.startswith("_fake_")
}
"""Broken unpack functions of every kind the fuzzer must catch, and two right ones ("right", "refuse")."""


def run_selftest(worker: Worker, fake: str, failures: Collector) -> dict[str, Any]:
    """One case of the record as packed, in slices of a ring, with a fake unpack in place of the real one."""
    probe = Probe(torch.arange(16, dtype=torch.uint8), 1)
    sent = Sent(probe, Probe, b"probe", [memoryview(bytearray(16))], frozenset(), frozenset())
    mutation = {"h": ["flip", 0, 1], "b": ["form", "ring"]}
    worker.unpack = FAKES[fake]
    try:
        worker.progress(f"selftest {fake}")
        outcome = worker.case(sent, sent, mutation)
    finally:
        worker.unpack = wire.unpack
    if outcome.signature:
        failures.add(_failure((-1, 0, 0), sent, mutation, outcome))
    return {"cases": 1, "outcomes": {outcome.kind: 1}}


# --- the worker's commands -------------------------------------------------------------------


def serve(progress_path: str) -> None:
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what anything else prints goes to stderr
    worker = Worker(progress_path)
    worker.start()
    channel.write(json.dumps({"ready": True, "format": getattr(wire, "FORMAT", None)}) + "\n")
    for line in sys.stdin:
        command = json.loads(line)
        failures = Collector()
        if command["cmd"] == "fuzz":
            summary = worker.fuzz(command["seed"], command["first"], command["cases"], failures)
        elif command["cmd"] == "attack":
            summary = run_attack(worker, failures)
        else:
            summary = run_selftest(worker, command["fake"], failures)
        channel.write(json.dumps({"summary": summary, **failures.message()}) + "\n")


def repro(seed: int, index: int, number: int) -> int:
    worker = Worker(None)
    worker.start()
    sent, partner = make_record(seed, index), make_record(seed, index ^ 1)
    if number < 0:
        print(f"record {index} of seed {seed} and its partner were made and packed")
        return 0
    mutation = mutations_of(seed, index, sent, partner)[number]
    header, _ = apply_header(mutation["h"], sent.header, partner.header)
    print(f"record {index} of seed {seed}: a {sent.cls.__qualname__}, header of {len(sent.header)} bytes,")
    print(f"buffers of {[len(buffer) for buffer in sent.buffers]} bytes; the partner is a {partner.cls.__qualname__}")
    print(f"the record: {sent.record!r}"[:3000])
    print(f"mutation {number}: {describe(mutation)}")
    print(f"header sent:    {sent.header.hex()}")
    print(f"header mutated: {header.hex()}"[:5000])
    outcome = worker.case(sent, partner, mutation)
    print(f"outcome: {outcome.kind}\n{outcome.detail}")
    return 0 if not outcome.signature else 1


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "serve":
        serve(argv[1])
        return 0
    if len(argv) == 4 and argv[0] == "repro":
        return repro(int(argv[1]), int(argv[2]), int(argv[3]))
    print(__doc__)
    return 2


# --- the supervisor, in the test's process ---------------------------------------------------


class Reply(NamedTuple):
    summary: dict[str, Any]
    counts: dict[str, int]
    """How many failures of each signature."""
    examples: list[dict[str, Any]]
    """The first few failures of each signature."""
    died: str | None
    """How the worker died (a crash, a hang), on which case, and its stderr's tail; None if it did not."""
    progress: str
    """The progress line it last wrote: 'SEED RECORD MUTATION DONE' while fuzzing."""


_EOF = object()
_WAITING = b"(no case yet)"


class Supervisor:
    """Starts a worker, sends it commands, and kills it when one case takes longer than *case_timeout* seconds."""

    def __init__(self, directory: str, case_timeout: float, startup_timeout: float = 300) -> None:
        self.directory = directory
        self.case_timeout = case_timeout
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[object] = queue.Queue()
        self.starts = 0
        self.ready: dict[str, Any] = {}

    def _start(self) -> None:
        self.starts += 1
        self.progress_path = os.path.join(self.directory, f"progress-{self.starts}")
        self.stderr_path = os.path.join(self.directory, f"stderr-{self.starts}")
        with open(self.progress_path, "wb") as progress:
            progress.write(b" " * 120)
        root = os.path.dirname(os.path.dirname(HERE))
        environment = dict(os.environ, OMP_NUM_THREADS="1")
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), root, HERE]))
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "wire_fuzz.py"), "serve", self.progress_path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=environment,
                cwd=root,
            )
        self.lines = queue.Queue()
        self.reader = threading.Thread(target=self._read, args=(self.process, self.lines), daemon=True)
        self.reader.start()
        ready = self._next(self.startup_timeout)
        if not isinstance(ready, str):
            self.process.kill()
            self._reap()
            raise RuntimeError(f"the fuzz worker did not start; its stderr ends:\n{self._stderr_tail()}")
        self.ready = json.loads(ready)

    @staticmethod
    def _read(process: subprocess.Popen[str], lines: queue.Queue[object]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(_EOF)

    def _next(self, timeout: float) -> object:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def _progress(self) -> str:
        with open(self.progress_path, "rb") as progress:
            return progress.read().decode(errors="replace").strip()

    def _stderr_tail(self) -> str:
        with open(self.stderr_path, "rb") as stderr:
            return stderr.read()[-4000:].decode(errors="replace")

    def command(self, command: dict[str, Any]) -> Reply:
        if self.process is None:
            self._start()
        process = self.process
        assert process is not None
        assert process.stdin is not None
        with open(self.progress_path, "r+b") as progress:  # the case clock starts when the worker names a case
            progress.write(_WAITING.ljust(120))
        process.stdin.write(json.dumps(command) + "\n")
        process.stdin.flush()
        last, since = _WAITING.decode(), time.monotonic()
        while True:
            line = self._next(0.2)
            if isinstance(line, str):
                message = json.loads(line)
                return Reply(message["summary"], message["counts"], message["examples"], None, self._progress())
            if line is _EOF:
                process.wait()
                return self._died(f"the worker died (exit status {process.returncode})")
            now = self._progress()
            if now != last:
                last, since = now, time.monotonic()
            elif now == _WAITING.decode() and time.monotonic() - since > self.startup_timeout:
                process.send_signal(signal.SIGABRT)  # faulthandler writes every thread's stack to stderr
                return self._died(f"the worker began no case in {self.startup_timeout:g} s, so it was killed")
            elif now != _WAITING.decode() and time.monotonic() - since > self.case_timeout:
                process.send_signal(signal.SIGABRT)
                return self._died(f"one case ran for more than {self.case_timeout:g} s, so the worker was killed")

    def _died(self, how: str) -> Reply:
        self._reap()
        progress = self._progress()
        return Reply({}, {}, [], f"{how}, on case {progress!r}; its stderr ends:\n{self._stderr_tail()}", progress)

    def _reap(self) -> None:
        """Wait for the worker to end (closing its stdin asks it to), and close its pipes."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(OSError):  # a dead worker's stdin is a broken pipe
            process.stdin.close()  # type: ignore[union-attr]
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.reader.join(10)
        process.stdout.close()  # type: ignore[union-attr]

    def close(self) -> None:
        self._reap()


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import wire_fuzz  # the classes must be those of the module "wire_fuzz", as in every worker

    sys.exit(wire_fuzz.main(sys.argv[1:]))
