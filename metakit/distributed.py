"""Broadcast a metadata record from one rank to every rank of a ``torch.distributed`` group.

The driver of an inference engine builds a record for every step, and every
tensor-parallel worker needs an equal one::

    import torch.distributed as dist
    from metakit.distributed import broadcast_metadata
    from metakit.examples.engine import FlashAttentionMetadata, make_flash_attention_metadata

    dist.init_process_group("gloo")            # every rank, as usual
    if dist.get_rank() == 0:                   # the driver
        meta = broadcast_metadata(make_flash_attention_metadata())   # returns its argument
    else:                                      # a worker
        meta: FlashAttentionMetadata = broadcast_metadata(None)      # an equal record

What travels:

1. One object broadcast (torch's ``broadcast_object_list``, itself a size and
   a bytes broadcast) carries a header: the class's module and qualified
   name, its field names, each tensor's spec (dtype, shape, strides, buffer,
   offset, ``requires_grad``), the sizes of the data buffers, and the pickled
   field values with every tensor replaced by its index.
2. Then the tensors' bytes, as ``uint8`` tensors.  The tensors under 1 MiB
   share one buffer, each at a 64-byte aligned offset: one broadcast for all
   of them.  A dense tensor of 1 MiB or more is a broadcast of its own, sent
   straight from its memory.  The receivers' tensors are views of the
   buffers they received: no copy after the broadcast.

So a realistic record (a few KB of tensors) costs three collectives.  That
mix was measured on gloo (two ranks on one machine, the example metadata,
best of the rounds) against one broadcast per tensor, one flat buffer per
dtype and one byte buffer for everything.  At 8 KB it took 1.4 ms, against
2.6, 1.2 and 1.2 ms (there it is the byte buffer: the gap is noise); at 2 MB
2.8 ms, against 3.9, 4.8 and 3.9 ms; at 67 MB 83 ms, against 95, 142 and
184 ms.  Each broadcast has a fixed cost that
small tensors feel, and copying into a shared buffer costs more than a
broadcast once a tensor is large.  Bytes carry every dtype, so gloo's own
list of dtypes does not matter.

Only the record's class is looked up by name, and only among the live classes
made by ``ZeroCopyFields`` (``metakit.zerocopy_classes()``); nothing is imported
because of what arrives, and the values' pickle may refer only to modules the
receiving rank has already imported.  This is not a sandbox: pickled values
can run code, as in any object broadcast, so all ranks must trust each other.
"""

from __future__ import annotations

import inspect
import io
import math
import pickle
import sys
import weakref
from dataclasses import fields, is_dataclass
from typing import Any, Final, TypeVar, cast

import torch
import torch.distributed as dist

from metakit._meta import ZeroCopyFields, instance_methods, methods_of, zerocopy_classes

__all__ = ["BroadcastError", "broadcast_metadata"]

_T = TypeVar("_T")

_FORMAT: Final = 1
"""The version of the header; bumped whenever what travels changes."""

_ALIGN: Final = 64
"""Each tensor starts at a multiple of this many bytes in the data buffer."""

_CARRIERS: Final = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""An integer dtype of each element size, to copy raw elements of any dtype.

Some dtypes (``torch.uint4``, ``torch.int1``...) have no copy kernel, and a
copy between two views of the same element size is a plain move of bytes.
"""

_DTYPES: Final = {str(value): value for value in vars(torch).values() if isinstance(value, torch.dtype)}

_OWN_BUFFER: Final = 1 << 20
"""A dense tensor of this many bytes or more travels as a buffer of its own."""

_Spec = tuple[str, tuple[int, ...], tuple[int, ...], int, int, bool]
"""A tensor on the wire: dtype name, shape, strides, buffer, byte offset, ``requires_grad``."""


class BroadcastError(RuntimeError):
    """A rank could not rebuild the record that arrived, or the source could not send one.

    It is raised only once the rank has done its part of the collective, so
    the other ranks go on and the group can be used again.
    """


def broadcast_metadata(obj: _T | None, src: int = 0, group: dist.ProcessGroup | None = None) -> _T:
    """Send the record *obj* from rank *src* to every rank of *group*, and return it there.

    Every rank of the group calls this together.  On rank *src* (a global
    rank, as in ``torch.distributed.broadcast``) *obj* is the record, an
    instance of a dataclass made by ``ZeroCopyFields`` (inherit
    ``metakit.ZeroCopy``), and it is returned as it is.  Every other rank
    passes ``None`` and gets an equal instance of the same class, built
    through its ``__init__`` so that ``__post_init__`` runs; ``init=False``
    fields are set after ``__init__``, and ``OMIT`` fields never travel (they
    get their defaults).

    Tensors may be field values or sit anywhere inside them (lists, tuples,
    dicts).  They arrive with their dtype, shape and ``requires_grad``, on
    the CPU with gloo and on ``torch.cuda.current_device()`` with nccl.  A
    dense tensor keeps its strides (a transposed tensor arrives transposed);
    one with gaps or overlaps (a slice with a step, an ``expand``) arrives
    contiguous.  The same tensor object twice arrives as one tensor object.

    ::

        if dist.get_rank() == 0:
            meta = broadcast_metadata(make_flash_attention_metadata())
        else:
            meta: FlashAttentionMetadata = broadcast_metadata(None)

    On *src*, a bad record raises ``TypeError`` or ``ValueError`` and the
    other ranks raise ``BroadcastError``.  A receiver raises
    ``BroadcastError`` when it cannot rebuild the record, for instance when
    no class or more than one class made by ``ZeroCopyFields`` bears the
    name that arrived.  Every error is raised after the rank has done its
    part, so no rank is left waiting.
    """
    rank = dist.get_rank()
    if dist.get_rank(group) < 0:
        raise ValueError(f"broadcast_metadata(): rank {rank} is not a member of the group")
    device = _wire_device(group)
    if rank == src:
        _send(obj, device, src, group)
        return cast(_T, obj)
    record = _receive(device, src, group)
    if obj is not None:
        raise ValueError(
            f"broadcast_metadata() got a {type(obj).__qualname__} on rank {rank}, which is not the "
            f"source (rank {src}): only the source passes a record, the others pass None"
        )
    return cast(_T, record)


def _wire_device(group: dist.ProcessGroup | None) -> torch.device:
    """The device that carries the data: the one torch's object collectives use.

    That is CUDA for nccl alone (or any set of backends without a CPU one),
    and the CPU otherwise: gloo, or a group such as ``cpu:gloo,cuda:nccl``.
    """
    backend = str(dist.get_backend(group))
    devices = [device for device, colon, _ in (pair.partition(":") for pair in backend.split(",")) if colon]
    cuda = devices[0] == "cuda" and "cpu" not in devices if devices else backend == "nccl"
    return torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")


def _broadcast_header(header: object, src: int, group: dist.ProcessGroup | None) -> Any:
    box = [header]
    dist.broadcast_object_list(box, src=src, group=group)
    return box[0]


# --- the source --------------------------------------------------------------


def _send(obj: object, device: torch.device, src: int, group: dist.ProcessGroup | None) -> None:
    # A bad record must not leave the receivers waiting for a header: they
    # get the error instead, and raise it too.
    try:
        body, buffers = _pack(obj, device)
    except Exception as error:
        _broadcast_header((_FORMAT, (), f"{type(error).__name__}: {error}"), src, group)
        raise
    _broadcast_header((_FORMAT, tuple(buffer.numel() for buffer in buffers), body), src, group)
    for buffer in buffers:
        if buffer.numel():
            dist.broadcast(buffer, src=src, group=group)


def _pack(obj: object, device: torch.device) -> tuple[tuple[Any, ...], list[torch.Tensor]]:
    """The header's body for the record *obj*, and the byte buffers that carry its tensors."""
    if obj is None:
        raise ValueError("broadcast_metadata() got None on the source rank, which passes the record")
    methods = instance_methods(obj, "broadcast_metadata")
    cls = type(obj)
    if not isinstance(cls, ZeroCopyFields):
        raise TypeError(
            f"broadcast_metadata() sends records of classes made by ZeroCopyFields, and {cls.__qualname__} "
            "is not one, so no other rank could look it up: inherit metakit.ZeroCopy"
        )
    _check_rebuildable(cls, methods.names)
    values = methods.astuple(obj)
    labels = {
        id(value): f"field {name!r}"
        for name, value in zip(methods.names, values, strict=True)
        if isinstance(value, torch.Tensor)
    }
    blob = io.BytesIO()
    pickler = _Pickler(blob, labels, device)
    pickler.dump(values)
    shared = torch.empty(pickler.shared_nbytes, dtype=torch.uint8, device=device)
    for tensor, spec in pickler.shared:
        _copy(_place(shared, spec), tensor)
    body = (cls.__module__, cls.__qualname__, methods.names, tuple(pickler.specs), blob.getvalue())
    return body, [shared, *pickler.own]


_rebuildable: weakref.WeakSet[type] = weakref.WeakSet()


def _check_rebuildable(cls: type, names: tuple[str, ...]) -> None:
    """Raise ``TypeError`` unless ``cls(**fields that travel)`` can work on a receiver.

    *names* are the fields that travel: those the generated methods return.
    """
    if cls in _rebuildable:
        return
    sent = set(names).intersection(f.name for f in fields(cls) if f.init)
    parameters = inspect.signature(cls).parameters.values()
    missing = [
        p.name
        for p in parameters
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in sent
    ]
    if missing:
        raise TypeError(
            f"{cls.__qualname__}.__init__ requires {', '.join(map(repr, missing))}, which would not travel: "
            "the receivers call __init__ with the fields that travel, and OMIT fields and InitVars never do; "
            "give them a default"
        )
    _rebuildable.add(cls)


class _Pickler(pickle.Pickler):
    """Pickles the field values, with each tensor replaced by its index in ``specs``.

    Tensors are found wherever they sit, and none is ever pickled.  Each
    gets a spec and a place: a large dense tensor is a buffer of its own
    (buffer 1, 2...), sent as it lies in memory; the others are copied into
    the shared buffer 0, which the caller makes once their sizes are known.
    """

    def __init__(self, file: io.BytesIO, labels: dict[int, str], device: torch.device) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.labels = labels
        self.device = device
        self.specs: list[_Spec] = []
        self.indices: dict[int, int] = {}
        self.own: list[torch.Tensor] = []
        self.shared: list[tuple[torch.Tensor, _Spec]] = []
        self.shared_nbytes = 0

    def persistent_id(self, obj: object) -> int | None:
        if not isinstance(obj, torch.Tensor):
            return None
        index = self.indices.get(id(obj))
        if index is None:
            index = self.indices[id(obj)] = len(self.specs)
            self.specs.append(self._place(obj))
        return index

    def _place(self, tensor: torch.Tensor) -> _Spec:
        label = self.labels.get(id(tensor), "a tensor inside a field value")
        if tensor.is_nested:
            raise TypeError(f"{label}: cannot send a nested tensor; send its components")
        if tensor.layout != torch.strided:
            raise TypeError(f"{label}: cannot send a tensor of layout {tensor.layout}; only strided tensors travel")
        if tensor.is_quantized:
            raise TypeError(f"{label}: cannot send a quantized tensor; send its int_repr() and its quantization")
        if tensor.is_meta:
            raise TypeError(f"{label}: a tensor on the meta device has no data to send")
        dtype, shape, strides = str(tensor.dtype), tuple(tensor.shape), tuple(tensor.stride())
        nbytes = tensor.numel() * tensor.element_size()
        if not _is_dense(shape, strides):
            strides = _contiguous_strides(shape)
        elif nbytes >= _OWN_BUFFER:
            self.own.append(_span(tensor).to(self.device))
            return dtype, shape, strides, len(self.own), 0, tensor.requires_grad
        offset = -(-self.shared_nbytes // _ALIGN) * _ALIGN
        spec = dtype, shape, strides, 0, offset, tensor.requires_grad
        self.shared.append((tensor, spec))
        self.shared_nbytes = offset + nbytes
        return spec


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
    """The bytes of the dense *tensor*, as they lie in memory: a view, not a copy."""
    plain = _plain(tensor)
    return plain.as_strided((plain.numel(),), (1,)).view(torch.uint8)


def _copy(target: torch.Tensor, tensor: torch.Tensor) -> None:
    source = _plain(tensor)
    carrier = _CARRIERS.get(source.element_size())
    if carrier is None:  # complex128: 16 bytes, and a copy kernel of its own
        target.copy_(source)
    else:
        target.view(carrier).copy_(source.view(carrier))


def _dtype(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except KeyError:
        raise BroadcastError(f"the dtype {name} arrived, but this rank's torch {torch.__version__} has none") from None


def _place(buffer: torch.Tensor, spec: _Spec) -> torch.Tensor:
    """The tensor that *spec* describes, as a view of the byte buffer *buffer*."""
    name, shape, strides, _, offset, _ = spec
    dtype = _dtype(name)
    return buffer[offset : offset + math.prod(shape) * dtype.itemsize].view(dtype).as_strided(shape, strides)


# --- the receivers -----------------------------------------------------------


def _receive(device: torch.device, src: int, group: dist.ProcessGroup | None) -> object:
    # The header is (format, buffer sizes, body).  The first two keep their
    # places in every format, so that a rank that cannot read the body still
    # finishes the collective before it says so.
    header = _broadcast_header(None, src, group)
    buffers = [torch.empty(nbytes, dtype=torch.uint8, device=device) for nbytes in header[1]]
    for buffer in buffers:
        if buffer.numel():
            dist.broadcast(buffer, src=src, group=group)
    # This rank has done its part of the collective: what can go wrong from
    # here on concerns this rank alone.
    rank = dist.get_rank()
    if header[0] != _FORMAT:
        raise BroadcastError(
            f"rank {rank} got a header of format {header[0]!r} from rank {src} and reads only format {_FORMAT}: "
            "do all ranks run the same version of metakit?"
        )
    body = header[2]
    if isinstance(body, str):
        raise BroadcastError(f"rank {src}, the source, could not send its record: {body}")
    try:
        return _rebuild(body, buffers)
    except BroadcastError as error:
        raise BroadcastError(f"rank {rank}: {error}") from None


def _rebuild(body: tuple[Any, ...], buffers: list[torch.Tensor]) -> object:
    module, qualname, names, specs, blob = body
    cls = _resolve(module, qualname)
    here = methods_of(cls).names
    if here != names:
        raise BroadcastError(
            f"{qualname} has the fields {here} here, but the source sent {names}: do all ranks run the same code?"
        )
    tensors = []
    for spec in specs:
        tensor = _place(buffers[spec[3]], spec)
        tensors.append(tensor.requires_grad_() if spec[5] else tensor)
    values = _Unpickler(blob, tensors).load()
    init = {f.name: f.init for f in fields(cls)}
    record = cls(**{name: value for name, value in zip(names, values, strict=True) if init[name]})
    for name, value in zip(names, values, strict=True):
        if not init[name]:
            # Frozen classes refuse setattr; their own __init__ uses this too.
            object.__setattr__(record, name, value)
    return record


def _resolve(module: str, qualname: str) -> type:
    """The one live dataclass made by ``ZeroCopyFields`` named *module*.*qualname*.

    A module may be known by two names, so the module objects are compared,
    not only their names.  A process started by ``multiprocessing`` with
    ``spawn`` runs the main script as ``__mp_main__`` and lists it as
    ``__main__`` too; in any other process, importing ``multiprocessing``
    (torch does) lists ``__main__`` as ``__mp_main__`` too.
    """
    home = sys.modules.get(module)
    found = [
        cls
        for cls in zerocopy_classes()
        if cls.__qualname__ == qualname
        and (cls.__module__ == module or (home is not None and sys.modules.get(cls.__module__) is home))
        and is_dataclass(cls)
    ]
    found = [cls for cls in found if not _is_replaced(cls, found)]
    if not found:
        raise BroadcastError(
            f"no dataclass made by ZeroCopyFields named {module}.{qualname} is alive on this rank: "
            "import the module that defines it before receiving (metakit never imports a module named on the wire)"
        )
    if len(found) > 1:
        raise BroadcastError(
            f"{len(found)} dataclasses made by ZeroCopyFields are named {module}.{qualname} on this rank "
            "(defined in a function that ran more than once?), and nothing tells which one the source meant"
        )
    return found[0]


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


class _Unpickler(pickle.Unpickler):
    """Reads the field values back, with the received tensors in their places.

    It finds classes and functions only in modules this rank has already
    imported, and never imports one.
    """

    def __init__(self, blob: bytes, tensors: list[torch.Tensor]) -> None:
        super().__init__(io.BytesIO(blob))
        self.tensors = tensors

    def persistent_load(self, pid: Any) -> torch.Tensor:
        return self.tensors[int(pid)]

    def find_class(self, module_name: str, global_name: str, /) -> Any:
        if module_name not in sys.modules:
            raise BroadcastError(
                f"a field value refers to {module_name}.{global_name}, but {module_name} is not imported "
                "on this rank, and metakit never imports a module named on the wire: import it before receiving"
            )
        return super().find_class(module_name, global_name)
