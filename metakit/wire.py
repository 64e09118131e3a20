"""A metadata record as a header and byte buffers: the format any transport can carry.

``pack(record)`` turns a record into a ``Packed(header, buffers)``: the header
is ``bytes`` (the class's name, the field values, every tensor's dtype, shape,
strides and place), and each buffer holds tensor bytes.  ``unpack(header,
buffers)`` rebuilds an equal record on the other side, with its tensors as
views of the buffers it was given::

    from metakit import wire

    header, buffers = wire.pack(meta)                    # the sender
    conn.send_bytes(header)
    for buffer in buffers:
        conn.send_bytes(buffer)

    header = conn.recv_bytes()                           # the receiver
    buffers = [conn.recv_bytes() for _ in range(wire.buffer_count(header))]
    meta = wire.unpack(header, buffers)

``metakit.distributed.broadcast_metadata`` carries the same format over
``torch.distributed``.

What travels is what the record says should: the fields that its own
``asdict_zerocopy()`` returns (an override that leaves some out is honoured),
less the names in ``skip_fields``, with the values that a custom
``__getstate__`` gives where the class defines one.  A field that does not
travel gets its default, or what ``__post_init__`` makes, on the receiver,
which rebuilds the record through its class's ``__init__``.  A record inside
a field value (a model input's attention metadata) travels by the same rules.

The tensors under 1 MiB share one buffer, each at a 64-byte aligned offset;
a larger one is a buffer of its own, sent straight from the tensor's memory
(``pack`` returns a ``memoryview`` of it, not a copy).  A dense tensor keeps
its strides; one with gaps or overlaps (a slice with a step, an ``expand``)
arrives contiguous.  The same tensor object twice arrives as one object.  A
tensor whose memory lies within that of a dense tensor sent before it (a
slice of a parent's ``slot_mapping``) arrives as a view of that tensor's
memory, with its own strides, and costs no bytes; other tensors arrive with
memory of their own.

Only the record's class is looked up by name, and only among the live
classes made by ``ZeroCopyFields`` (``metakit.zerocopy_classes()``).  The
values' pickle may refer only to modules the receiver has already imported:
nothing is ever imported because of what arrives.  This is not a sandbox:
pickled values can run code, so both sides must trust each other.

This module imports torch, and needs no numpy.
"""

from __future__ import annotations

import ctypes
import inspect
import io
import pickle
import struct
import sys
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import Any, Final, NamedTuple, NoReturn

import torch

from metakit._meta import ZeroCopyFields, zerocopy_classes

__all__ = ["FORMAT", "Packed", "WireError", "buffer_count", "pack", "unpack"]

FORMAT: Final = 2
"""The version of the format; bumped whenever what a header says changes."""

_MAGIC: Final = b"MKW"

_TABLE_HEAD: Final = struct.Struct("<3sBI")
"""Magic, format and buffer count: the start of every header, in every format.

The buffer table that follows (a ``u64`` size and a ``u8`` lane per buffer)
keeps its layout in every format too, so that a receiver of another version
can still take its part in a collective before it says what is wrong.
"""

ALIGN: Final = 64
"""Each tensor in a shared buffer starts at a multiple of this many bytes."""

OWN_BUFFER: Final = 1 << 20
"""A tensor of this many bytes or more travels as a buffer of its own."""

_CARRIERS: Final = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""An integer dtype of each element size, to copy raw elements of any dtype.

Some dtypes (``torch.uint4``, ``torch.int1``...) have no copy kernel, and a
copy between two views of the same element size is a plain move of bytes.
"""

_DTYPES: Final = {str(value)[6:]: value for value in vars(torch).values() if isinstance(value, torch.dtype)}
"""Every dtype of this torch by the name it travels under (``"float32"``)."""

_DTYPE_NAMES: Final = {dtype: name for name, dtype in _DTYPES.items()}


class WireError(RuntimeError):
    """A header and buffers that cannot be read back into a record on this side."""


class Packed(NamedTuple):
    """A record as it travels: what ``pack`` returns and ``unpack`` takes."""

    header: bytes
    """The class, the field values and every tensor's spec."""
    buffers: list[memoryview]
    """The tensors' bytes: the shared buffer first, then one per large tensor."""


class BufferSpec(NamedTuple):
    """One buffer, as the header's table lists it."""

    nbytes: int
    lane: int
    """Which way it travels: 0 with the header, 1 over a device group (see ``metakit.distributed``)."""


class _Body(NamedTuple):
    """What the pickled part of a header holds (pickled as a plain tuple)."""

    module: str
    qualname: str
    fields: tuple[str, ...]
    """Every field of the class on the sender, to notice classes that differ."""
    names: tuple[str, ...]
    """The fields that travel."""
    values: tuple[Any, ...]


# --- what travels --------------------------------------------------------------


class _ClassInfo(NamedTuple):
    """What the sender and the receiver need to know of a record class; computed once per class."""

    fields: tuple[str, ...]
    names: frozenset[str]
    init: frozenset[str]
    required: frozenset[str]
    """The ``__init__`` parameters with no default: they must travel."""


_class_infos: weakref.WeakKeyDictionary[type, _ClassInfo] = weakref.WeakKeyDictionary()


def _class_info(cls: type) -> _ClassInfo:
    info = _class_infos.get(cls)
    if info is None:
        all_fields = fields(cls)
        parameters = inspect.signature(cls).parameters.values()
        required = frozenset(
            p.name for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )
        names = tuple(f.name for f in all_fields)
        info = _ClassInfo(names, frozenset(names), frozenset(f.name for f in all_fields if f.init), required)
        _class_infos[cls] = info
    return info


_OBJECT_GETSTATE: Final = getattr(object, "__getstate__", None)


def _custom_getstate(cls: type) -> Any:
    """The class's own ``__getstate__``, or ``None`` if it has only Python's or dataclasses' one.

    ``@dataclass(frozen=True, slots=True)`` writes one that lists every
    field, which says nothing about what should travel.
    """
    getstate = getattr(cls, "__getstate__", None)
    if getstate is None or getstate is _OBJECT_GETSTATE or getattr(getstate, "__module__", None) == "dataclasses":
        return None
    return getstate


def _check_record(obj: object, caller: str) -> type:
    if isinstance(obj, type):
        raise TypeError(f"{caller} takes a dataclass instance, but got the class {obj.__qualname__} itself")
    cls: type = type(obj)
    if not is_dataclass(obj):
        raise TypeError(f"{caller} takes a dataclass instance, but {cls.__qualname__} is not a dataclass")
    if not isinstance(cls, ZeroCopyFields):
        raise TypeError(
            f"{caller} sends records of classes made by ZeroCopyFields, and {cls.__qualname__} is not one, "
            "so the receiver could not look it up: inherit metakit.ZeroCopy"
        )
    return cls


def travelling(obj: object, skip_fields: Iterable[str] | None, caller: str) -> tuple[type, _Body]:
    """The class of the record *obj* and what travels of it: names and values, not yet pickled."""
    cls = _check_record(obj, caller)
    info = _class_info(cls)
    # A fresh set each call: vLLM's FlashInfer override adds its wrappers' names to the one it gets.
    chosen = obj.asdict_zerocopy(None if skip_fields is None else _name_set(skip_fields))  # type: ignore[attr-defined]
    if not isinstance(chosen, dict):
        raise TypeError(f"{cls.__qualname__}.asdict_zerocopy() returned a {type(chosen).__name__}, not a dict")
    if not info.names.issuperset(chosen):
        strangers = [name for name in chosen if name not in info.names]
        raise TypeError(
            f"{cls.__qualname__}.asdict_zerocopy() returned {', '.join(map(repr, strangers))}, which "
            "is not a field: the receiver rebuilds the record from its fields"
        )
    getstate = _custom_getstate(cls)
    if getstate is None:
        names, values = tuple(chosen), tuple(chosen.values())
    else:
        state = _state_dict(cls, getstate(obj))
        names = tuple(name for name in chosen if name in state)
        values = tuple(state[name] for name in names)
    missing = info.required.difference(names)
    if missing:
        raise TypeError(
            f"{cls.__qualname__}.__init__ requires {', '.join(sorted(map(repr, missing)))}, which would not travel "
            "(left out by asdict_zerocopy(), skip_fields or __getstate__, or an InitVar): the receiver calls "
            "__init__ with the fields that travel; give it a default"
        )
    return cls, _Body(cls.__module__, cls.__qualname__, info.fields, names, values)


def _name_set(skip_fields: Iterable[str]) -> set[str]:
    if isinstance(skip_fields, (str, bytes)):
        raise TypeError(f"skip_fields must be an iterable of field names, not a {type(skip_fields).__name__}")
    try:
        names = set(skip_fields)
    except TypeError:
        raise TypeError(f"skip_fields must be an iterable of field names, not {skip_fields!r}") from None
    return names


def _state_dict(cls: type, state: object) -> Mapping[str, Any]:
    """The values a custom ``__getstate__`` returned, by name."""
    if isinstance(state, tuple) and len(state) == 2 and all(part is None or isinstance(part, dict) for part in state):
        return {**(state[0] or {}), **(state[1] or {})}  # (__dict__ state, __slots__ state), as copyreg has it
    if not isinstance(state, dict):
        raise TypeError(
            f"{cls.__qualname__}.__getstate__() returned a {type(state).__name__}; what travels is read "
            "from a dict of field values (or a (dict, slots dict) pair)"
        )
    return state


# --- the sender ----------------------------------------------------------------


class Placement(NamedTuple):
    """Where one tensor's bytes go in a shared buffer."""

    tensor: torch.Tensor
    offset: int
    nbytes: int
    strides: tuple[int, ...]
    """The strides it arrives with: its own if dense, else contiguous ones."""
    raw: bool
    """Whether its bytes can be moved as they lie in memory (a dense CPU tensor with no lazy bits)."""


class OwnBuffer(NamedTuple):
    """A large tensor that travels as a buffer of its own."""

    span: torch.Tensor
    """Its bytes, as a flat ``uint8`` tensor: a view of its memory where it is dense."""
    lane: int


class Outgoing(NamedTuple):
    """A packed record before its buffers are filled: ``pack`` fills them one way, a broadcast another."""

    header: bytes
    pools: list[list[Placement]]
    """The tensors that share a buffer, per lane: buffer *i* is lane *i*'s."""
    pool_nbytes: list[int]
    own: list[OwnBuffer]
    """The large tensors: buffers ``len(pools)`` on."""


def pack_outgoing(obj: object, skip_fields: Iterable[str] | None, lanes: Mapping[str, int], caller: str) -> Outgoing:
    """Pack *obj*; the tensors on a device type that *lanes* maps to 1 go in lane 1's buffers, the rest in lane 0's.

    Raises ``TypeError`` (naming the field) or ``ValueError`` for a record
    that cannot travel.
    """
    cls, body = travelling(obj, skip_fields, caller)
    packer = _Packer(lanes)
    try:
        blob = packer.dumps(tuple(body))
    except Exception as error:
        raise _field_error(cls, body, lanes, error) from error
    table = [BufferSpec(nbytes, lane) for lane, nbytes in enumerate(packer.pool_nbytes)]
    table += [BufferSpec(own.span.numel(), own.lane) for own in packer.own]
    return Outgoing(_table_bytes(table) + blob, packer.pools, packer.pool_nbytes, packer.own)


def _field_error(cls: type, body: _Body, lanes: Mapping[str, int], error: Exception) -> TypeError:
    """The ``TypeError`` that names the first field whose value cannot be sent."""
    for name, value in zip(body.names, body.values, strict=True):
        try:
            _Packer(lanes).dumps(value)
        except Exception as found:
            reason = str(found) if isinstance(found, _TensorRefused) else f"{type(found).__name__}: {found}"
            return TypeError(f"field {name!r} of {cls.__qualname__} cannot be sent: {reason}")
    return TypeError(f"{cls.__qualname__} cannot be sent: {type(error).__name__}: {error}")


def _table_bytes(table: Sequence[BufferSpec]) -> bytes:
    count = len(table)
    return _TABLE_HEAD.pack(_MAGIC, FORMAT, count) + struct.pack(
        f"<{count}Q{count}B", *(spec.nbytes for spec in table), *(spec.lane for spec in table)
    )


class _TensorRefused(TypeError):
    """A tensor that cannot travel (sparse, quantized, nested, on the meta device)."""


def _tensor(*spec: object) -> torch.Tensor:
    """Stands for a tensor in a header's pickle; only ``unpack`` knows the buffers to read it from."""
    raise WireError("a metakit header can only be read by metakit.wire.unpack")


def _record(*body: object) -> object:
    """Stands for a record inside a field value in a header's pickle; ``unpack`` rebuilds it."""
    raise WireError("a metakit header can only be read by metakit.wire.unpack")


class _Packer(pickle.Pickler):
    """Pickles the values with each tensor replaced by its spec, and lays out the buffers.

    ``reducer_override`` is called only for objects that are not of the
    builtin types, so the plain values cost what a plain pickle costs.
    """

    def __init__(self, lanes: Mapping[str, int]) -> None:
        self._file = io.BytesIO()
        super().__init__(self._file, pickle.HIGHEST_PROTOCOL)
        self.lanes = lanes
        self.pools: list[list[Placement]] = [[], []] if lanes else [[]]
        self.pool_nbytes = [0, 0] if lanes else [0]
        self.own: list[OwnBuffer] = []
        self.regions: dict[tuple[str, int, int], list[_Region]] = {}

    def dumps(self, value: object) -> bytes:
        self.dump(value)
        return self._file.getvalue()

    def reducer_override(self, obj: object) -> Any:
        if isinstance(obj, torch.Tensor):
            return _tensor, self._place(obj)
        if isinstance(type(obj), ZeroCopyFields) and is_dataclass(obj) and not isinstance(obj, type):
            # A record inside a field value (a model input's attention metadata)
            # travels by the same rules as the record itself.
            _, body = travelling(obj, None, "a record inside a field value")
            return _record, tuple(body)
        return NotImplemented

    def _place(self, tensor: torch.Tensor) -> tuple[object, ...]:
        device = tensor.device.type
        if tensor.layout is not torch.strided or tensor.is_nested or tensor.is_quantized or device == "meta":
            _refuse(tensor)
        lane = self.lanes.get(device, 0) if self.lanes else 0
        shape = tuple(tensor.shape)
        strides = tuple(tensor.stride())
        itemsize = tensor.element_size()
        nbytes = tensor.numel() * itemsize
        address = tensor.data_ptr()
        storage = (device, tensor.get_device(), address - int(tensor.storage_offset()) * itemsize)
        exact = not tensor.is_conj() and not tensor.is_neg()
        if nbytes and exact and storage in self.regions:
            inside = self._inside(self.regions[storage], address, _extent(shape, strides, itemsize), itemsize)
            if inside is not None:
                buffer, offset = inside
                return _DTYPE_NAMES[tensor.dtype], shape, strides, buffer, offset, tensor.requires_grad, device
        dense = tensor.is_contiguous() or _is_dense(shape, strides)
        buffer, offset = self._next_place(lane, nbytes)
        if not dense:
            strides = _contiguous_strides(shape)
        elif exact and nbytes:
            # Its bytes travel as they lie in memory: a later view of them can point into them.
            self.regions.setdefault(storage, []).append(_Region(address, nbytes, buffer, offset))
        if nbytes >= OWN_BUFFER:
            self.own.append(OwnBuffer(_span(tensor) if dense else _span(_plain(tensor).contiguous()), lane))
        else:
            self.pools[lane].append(Placement(tensor, offset, nbytes, strides, dense and device == "cpu" and exact))
            self.pool_nbytes[lane] = -(-(offset + nbytes) // ALIGN) * ALIGN
        return _DTYPE_NAMES[tensor.dtype], shape, strides, buffer, offset, tensor.requires_grad, device

    def _next_place(self, lane: int, nbytes: int) -> tuple[int, int]:
        """The buffer and offset of the next tensor of *nbytes* in *lane* that travels on its own."""
        if nbytes >= OWN_BUFFER:
            return len(self.pools) + len(self.own), 0
        return lane, -(-self.pool_nbytes[lane] // ALIGN) * ALIGN

    @staticmethod
    def _inside(regions: list[_Region], address: int, extent: int, itemsize: int) -> tuple[int, int] | None:
        """The buffer and offset of a tensor whose memory lies in one of *regions*, already on the wire."""
        for region in regions:
            offset = region.offset + address - region.address
            if (
                region.address <= address
                and address + extent <= region.address + region.nbytes
                and not offset % itemsize
            ):
                return region.buffer, offset
        return None


class _Region(NamedTuple):
    """Memory whose bytes travel as they lie: a view of it travels as a view of them."""

    address: int
    nbytes: int
    buffer: int
    offset: int


def _extent(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """How many bytes from its first element a non-empty tensor reaches."""
    return (sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True)) + 1) * itemsize


def _refuse(tensor: torch.Tensor) -> NoReturn:
    """Raise the error that says why *tensor* cannot travel."""
    if tensor.is_nested:
        raise _TensorRefused("a nested tensor cannot travel; send its components")
    if tensor.layout != torch.strided:
        raise _TensorRefused(f"a tensor of layout {tensor.layout} cannot travel; only strided tensors do")
    if tensor.is_quantized:
        raise _TensorRefused("a quantized tensor cannot travel; send its int_repr() and its quantization")
    if tensor.is_meta:
        raise _TensorRefused("a tensor on the meta device has no data to send")
    raise _TensorRefused(f"a tensor on {tensor.device} cannot travel")


def _is_dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether the elements fill a block of memory with no gap and no overlap, in some order."""
    if 0 in shape:
        return True
    expected = 1
    for stride, size in sorted((stride, size) for size, stride in zip(shape, strides, strict=True) if size != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides: list[int] = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _plain(tensor: torch.Tensor) -> torch.Tensor:
    """*tensor*'s values with no autograd history and no lazy conjugation or negation."""
    return tensor.detach().resolve_conj().resolve_neg()


def _span(tensor: torch.Tensor) -> torch.Tensor:
    """The bytes of the dense *tensor*, as they lie in memory: a view, not a copy (but for lazy bits)."""
    plain = _plain(tensor)
    return plain.as_strided((plain.numel(),), (1,)).view(torch.uint8)


def fill(buffer: torch.Tensor, placements: Iterable[Placement]) -> None:
    """Copy each placed tensor into the ``uint8`` tensor *buffer*, at its offset.

    A dense CPU tensor into a CPU buffer is one ``memmove`` of its bytes, with
    no torch dispatch; anything else is a torch copy.
    """
    host = buffer.device.type == "cpu"
    base = buffer.data_ptr()
    for placement in placements:
        if not placement.nbytes:
            continue
        if host and placement.raw:
            ctypes.memmove(base + placement.offset, placement.tensor.data_ptr(), placement.nbytes)
            continue
        source = _plain(placement.tensor)
        target = _view(buffer, source.dtype, tuple(source.shape), placement.strides, placement.offset)
        carrier = _CARRIERS.get(source.element_size())
        if carrier is None:  # complex128: 16 bytes, and a copy kernel of its own
            target.copy_(source)
        else:
            target.view(carrier).copy_(source.view(carrier))


def _view(
    buffer: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...], strides: tuple[int, ...], offset: int
) -> torch.Tensor:
    """The tensor at byte *offset* of the ``uint8`` tensor *buffer*: a view of it."""
    typed = buffer.view(dtype)
    return typed.as_strided(shape, strides, typed.storage_offset() + offset // dtype.itemsize)


def pack(obj: object, *, skip_fields: Iterable[str] | None = None) -> Packed:
    """The record *obj*, an instance of a dataclass made by ``ZeroCopyFields``, as a header and buffers.

    The first buffer holds the tensors under 1 MiB (a new ``bytearray``),
    each larger tensor is a buffer of its own: a ``memoryview`` of its CPU
    memory, which stays alive as long as the view (a GPU tensor is copied to
    the CPU first).  *skip_fields* leaves more fields out, as in
    ``asdict_zerocopy``.

    A record that cannot travel raises ``TypeError`` naming the field (a
    value that cannot be pickled, a sparse tensor) or the reason.
    """
    outgoing = pack_outgoing(obj, skip_fields, {}, "metakit.wire.pack()")
    (placements,) = outgoing.pools
    (nbytes,) = outgoing.pool_nbytes
    shared = bytearray(nbytes)
    if nbytes:
        fill(torch.frombuffer(shared, dtype=torch.uint8), placements)
    own = [_memoryview(own.span if own.span.device.type == "cpu" else own.span.cpu()) for own in outgoing.own]
    return Packed(outgoing.header, [memoryview(shared), *own])


def _memoryview(span: torch.Tensor) -> memoryview:
    """The bytes of the contiguous CPU ``uint8`` tensor *span*, keeping it alive."""
    array = (ctypes.c_char * span.numel()).from_address(span.data_ptr())
    array.owner = span  # type: ignore[attr-defined]  # ctypes instances take attributes: the view's life is the tensor's
    return memoryview(array).cast("B")


# --- the receiver --------------------------------------------------------------


def buffer_table(header: bytes | bytearray | memoryview) -> list[BufferSpec]:
    """The sizes and lanes of the buffers that travel with *header*, read without unpickling it.

    This part has the same layout in every format.
    """
    try:
        magic, _, count = _TABLE_HEAD.unpack_from(header)
        if magic != _MAGIC:
            raise WireError("this is not a metakit header")
        values = struct.unpack_from(f"<{count}Q{count}B", header, _TABLE_HEAD.size)
    except struct.error:
        raise WireError("the header is cut short") from None
    return [BufferSpec(nbytes, lane) for nbytes, lane in zip(values[:count], values[count:], strict=True)]


def buffer_count(header: bytes | bytearray | memoryview) -> int:
    """How many buffers travel with *header*."""
    return len(buffer_table(header))


def unpack(header: bytes | bytearray | memoryview, buffers: Sequence[Any]) -> object:
    """The record that ``pack`` turned into *header* and *buffers*.

    *buffers* are bytes-like objects (``bytearray``, ``memoryview``,
    ``bytes``...) or ``uint8`` tensors.  The record's tensors are views of
    them: no copy, as long as a buffer is writable; a read-only one (such as
    ``bytes``) is copied once, since tensors may be written to.  A tensor
    that was on a GPU arrives on this process's current device of that kind.

    Raises ``WireError`` when the record cannot be rebuilt here: no class or
    more than one class made by ``ZeroCopyFields`` bears the name that
    arrived, the class has other fields here, a value refers to a module
    this process has not imported, or the buffers do not match the header.
    """
    table = buffer_table(header)
    if len(buffers) != len(table):
        raise WireError(f"the header lists {len(table)} buffers, but {len(buffers)} were given")
    tensors = [_as_tensor(buffer) for buffer in buffers]
    for index, (tensor, spec) in enumerate(zip(tensors, table, strict=True)):
        if tensor.numel() != spec.nbytes:
            raise WireError(f"buffer {index} holds {tensor.numel()} bytes, but the header says {spec.nbytes}")
    return unpack_tensors(header, tensors)


def _as_tensor(buffer: Any) -> torch.Tensor:
    if isinstance(buffer, torch.Tensor):
        if buffer.dtype != torch.uint8 or buffer.dim() != 1 or not buffer.is_contiguous():
            raise WireError("a buffer given as a tensor must be a contiguous 1-D uint8 tensor")
        return buffer
    view = memoryview(buffer).cast("B")
    if not view.nbytes:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(view) if view.readonly else view, dtype=torch.uint8)


def unpack_tensors(header: bytes | bytearray | memoryview, buffers: Sequence[torch.Tensor]) -> object:
    """``unpack`` for buffers that are already ``uint8`` tensors, checked against the table."""
    _, version, count = _TABLE_HEAD.unpack_from(header)
    if version != FORMAT:
        raise WireError(
            f"a header of format {version} arrived, and this metakit reads only format {FORMAT}: "
            "do both sides run the same version of metakit?"
        )
    start = _TABLE_HEAD.size + 9 * count  # a u64 and a u8 per buffer
    unpickler = _Unpacker(memoryview(header)[start:], buffers)
    try:
        body = _Body._make(unpickler.load())
    except WireError:
        raise
    except Exception as error:
        raise WireError(f"the header cannot be read: {type(error).__name__}: {error}") from error
    return _rebuild(body)


class _Unpacker(pickle.Unpickler):
    """Reads the values back, building each tensor as a view of the buffer it was placed in.

    It finds classes and functions only in modules this process has already
    imported, and never imports one.
    """

    def __init__(self, blob: memoryview, buffers: Sequence[torch.Tensor]) -> None:
        super().__init__(io.BytesIO(blob))
        # Not a method of this object: the memo holds what find_class returns,
        # and a cycle through it would keep the buffers alive until the
        # collector runs (metakit.distributed reuses buffers once free).
        self.tensors = _TensorMaker(buffers)

    def find_class(self, module_name: str, global_name: str, /) -> Any:
        if module_name == __name__ and global_name in {"_tensor", "_record"}:
            return self.tensors.make if global_name == "_tensor" else _rebuild_nested
        if module_name not in sys.modules:
            raise WireError(
                f"a field value refers to {module_name}.{global_name}, but {module_name} is not imported "
                "here, and metakit never imports a module named on the wire: import it before receiving"
            )
        return super().find_class(module_name, global_name)


class _TensorMaker:
    """Builds the tensors of one header as views of its buffers."""

    def __init__(self, buffers: Sequence[torch.Tensor]) -> None:
        self.buffers = buffers
        self.moved: dict[tuple[int, str], torch.Tensor] = {}
        self.typed: dict[tuple[int, str, torch.dtype], torch.Tensor] = {}

    def make(  # noqa: PLR0917  # pickle calls it with the spec's values in order
        self,
        dtype_name: str,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        buffer: int,
        offset: int,
        requires_grad: bool,
        device: str,
    ) -> torch.Tensor:
        dtype = _DTYPES.get(dtype_name)
        if dtype is None:
            raise WireError(f"a tensor of dtype {dtype_name} arrived, but torch {torch.__version__} has none")
        key = (buffer, device, dtype)
        typed = self.typed.get(key)
        if typed is None:
            typed = self.typed[key] = self._buffer_on(buffer, device).view(dtype)
        tensor = typed.as_strided(shape, strides, typed.storage_offset() + offset // dtype.itemsize)
        return tensor.requires_grad_() if requires_grad else tensor

    def _buffer_on(self, index: int, device: str) -> torch.Tensor:
        """Buffer *index* on this process's current device of the kind *device*: moved once, if it must be."""
        buffer = self.buffers[index]
        if buffer.device.type == device:
            return buffer
        key = (index, device)
        if key not in self.moved:
            self.moved[key] = buffer.to(local_device(device))
        return self.moved[key]


def local_device(kind: str) -> torch.device:
    """This process's current device of the kind *kind* (``"cuda"``: ``torch.cuda.current_device()``)."""
    if kind == "cpu":
        return torch.device("cpu")
    module = getattr(torch, kind, None)
    current = getattr(module, "current_device", None)
    if current is None or not getattr(module, "is_available", lambda: False)():
        raise WireError(f"a tensor on a {kind} device arrived, but this process has no {kind} device")
    return torch.device(kind, current())


def _rebuild_nested(*body: Any) -> object:
    return _rebuild(_Body._make(body))


def _rebuild(body: _Body) -> object:
    cls = resolve(body.module, body.qualname)
    info = _class_info(cls)
    if info.fields != body.fields:
        raise WireError(
            f"{body.qualname} has the fields {info.fields} here, but the sender's has {body.fields}: "
            "do both sides run the same code?"
        )
    init = {name: value for name, value in zip(body.names, body.values, strict=True) if name in info.init}
    try:
        record = cls(**init)
    except Exception as error:
        raise WireError(f"{body.qualname}(...) raised {type(error).__name__}: {error}") from error
    if len(init) != len(body.names):
        for name, value in zip(body.names, body.values, strict=True):
            if name not in info.init:
                # Frozen classes refuse setattr; their own __init__ uses this too.
                object.__setattr__(record, name, value)
    return record


def resolve(module: str, qualname: str) -> type:
    """The one live dataclass made by ``ZeroCopyFields`` named *module*.*qualname*.

    A module may be known by two names, so the module objects are compared,
    not only their names.  A process started by ``multiprocessing`` with
    ``spawn`` runs the main script as ``__mp_main__`` and lists it as
    ``__main__`` too; in any other process, importing ``multiprocessing``
    (torch does) lists ``__main__`` as ``__mp_main__`` too.

    A class that its module's namespace holds under its qualified name (read
    from the namespaces' dicts, with no import and no ``__getattr__``) is
    that class, as for pickle; only the others (a class defined in a
    function) are searched for among all live classes, which costs time in
    proportion to their number.
    """
    home = sys.modules.get(module)
    named = _named_in(home, qualname)
    if isinstance(named, ZeroCopyFields) and named.__qualname__ == qualname and hasattr(named, "__dataclass_fields__"):
        return named
    found = [
        cls
        for cls in zerocopy_classes()
        if cls.__qualname__ == qualname
        and (cls.__module__ == module or (home is not None and sys.modules.get(cls.__module__) is home))
        and is_dataclass(cls)
    ]
    found = [cls for cls in found if not _is_replaced(cls, found)]
    if not found:
        raise WireError(
            f"no dataclass made by ZeroCopyFields named {module}.{qualname} is alive here: import the "
            "module that defines it before receiving (metakit never imports a module named on the wire)"
        )
    if len(found) > 1:
        raise WireError(
            f"{len(found)} dataclasses made by ZeroCopyFields are named {module}.{qualname} here "
            "(defined in a function that ran more than once?), and nothing tells which one the sender meant"
        )
    return found[0]


def _named_in(module: object, qualname: str) -> object:
    """What *module*'s namespace holds under the dotted *qualname*, or None."""
    found = module
    for part in qualname.split("."):
        namespace = getattr(found, "__dict__", None)
        if not isinstance(namespace, Mapping):
            return None
        found = namespace.get(part)
    return found


def _is_replaced(cls: type, others: list[type]) -> bool:
    """Whether ``@dataclass(slots=True)`` replaced *cls* by one of *others*.

    That decorator builds a new class from the old one's namespace, and the
    old class lives on until it is collected.  Both hold the very same
    ``__dataclass_fields__`` dict; the new one, unlike the old, has
    ``__slots__`` of its own.
    """
    own = cls.__dict__.get("__dataclass_fields__")
    return (
        own is not None
        and "__slots__" not in cls.__dict__
        and any(other.__dict__.get("__dataclass_fields__") is own and "__slots__" in other.__dict__ for other in others)
    )
