"""Broadcast a metadata record from one rank to every rank of a ``torch.distributed`` group.

The driver of an inference engine builds a record for every step, and every
tensor-parallel worker needs an equal one::

    import torch.distributed as dist
    from metakit.distributed import broadcast_metadata
    from metakit.examples.engine import FlashAttentionMetadata, make_flash_attention_metadata

    dist.init_process_group("gloo")            # every rank, as usual
    meta: FlashAttentionMetadata
    if dist.get_rank() == 0:                   # the driver
        meta = broadcast_metadata(make_flash_attention_metadata())   # returns its argument
    else:                                      # a worker
        meta = broadcast_metadata(None)                              # an equal record

The record travels in the format of ``metakit.wire`` (what travels, and how
the receivers look up its class, are described there), in as few
collectives as it can:

1. One frame, a ``uint8`` broadcast of a size every rank agrees on before it
   starts, carries a short prefix, the header and the bytes of every tensor
   under 1 MiB.  A small record costs this one collective.  When a record
   does not fit, the frame says how large it is and a second broadcast
   carries the rest; every rank then grows the frame for the next calls
   (and shrinks it again once records have stayed small for a while), so
   an engine whose records keep their size pays one collective per step.
2. Each tensor of 1 MiB or more is a broadcast of its own, sent straight
   from its memory and received into a new tensor.  These, and the GPU
   tensors' shared buffer, are issued together with ``async_op=True`` and
   waited for together.

Tensors keep their device kind.  With a group that carries only GPU tensors
(nccl), pass ``cpu_group``, a gloo group of the same ranks, as vLLM's
``GroupCoordinator`` does: the frame and the CPU tensors travel over it, and
the GPU tensors over ``group``.  A group with both (``cpu:gloo,cuda:nccl``)
serves for both.  Without a CPU-capable group the frame travels on the GPU;
with a group that has no GPU backend, GPU tensors are copied through the
CPU.  Either way a GPU tensor arrives on ``torch.cuda.current_device()`` and
a CPU tensor on the CPU.

No numpy is needed: torch's object collectives, which call
``Tensor.numpy()`` on the receivers, are not used.
"""

from __future__ import annotations

import collections
import operator
import struct
import sys
import weakref
from collections.abc import Iterable
from typing import Final, TypeVar, cast

try:
    import torch
    import torch.distributed as dist
except ModuleNotFoundError as missing:  # the extra is not installed: say which
    if missing.name != "torch":
        raise
    raise ModuleNotFoundError(
        "metakit.distributed needs torch: pip install 'metakit[torch]'", name="torch"
    ) from missing

from metakit._errors import describe
from metakit._source import printable
from metakit.wire import (
    ALIGN,
    PACK_OWN_BUFFER,
    AllowPickle,
    BufferSpec,
    Outgoing,
    Placement,
    WireError,
    allowed_globals,
    buffer_table,
    cpu_bytes,
    fill,
    local_device,
    pack_outgoing,
    unpack_tensors,
)

__all__ = ["DEFAULT_MAX_BYTES", "BroadcastError", "broadcast_metadata"]

_T = TypeVar("_T")

_PREFIX: Final = struct.Struct("<HHIQ8s")
"""What opens every message: status, layout, header bytes, message bytes, and the last bytes of the rest of
the message (see ``_tail``).

The message is the prefix, the header, the last bytes of each buffer after
the first (``_TAIL`` each), and the shared buffer of lane 0, at an aligned
offset.  The frame carries its first bytes, then ``_TRAILER``.
"""

_LAYOUT: Final = 1
"""The frame's layout, the prefix's second field: a receiver refuses any other."""

_TAIL: Final = 8
"""How many of the last bytes of the frame, of the rest of the message and of each buffer a receiver knows
before they arrive, and checks on the CPU (see ``_mark``)."""

_TRAILER: Final = b"metakit\x01"
"""The last bytes of every frame."""

_OK: Final = 0
_SOURCE_FAILED: Final = 1
"""The source could not pack its record: the header is the error's text, in UTF-8."""

_FIRST_FRAME: Final = 16 << 10
"""The frame's size before any record has travelled: a realistic record fits."""

_SMALLEST_FRAME: Final = 4 << 10
_LARGEST_FRAME: Final = 16 << 20
_FRAME_MEMORY: Final = 16
"""How many recent records the frame's size follows."""

DEFAULT_MAX_BYTES: Final = 1 << 30
"""``broadcast_metadata``'s default *max_bytes*: what one record may bring, 1 GiB."""

_ERROR_TEXT: Final = 4000
"""How much of the source's error text travels, in bytes."""

_RECYCLED: Final = 64 << 10
"""Receive buffers on the CPU of this many bytes or more are reused once free (see ``_Recycler``)."""


class BroadcastError(WireError):
    """A rank could not rebuild the record that arrived, or the source could not send one.

    It is raised only once the rank has done its part of the collective, so
    the other ranks go on and the group can be used again.
    """


def broadcast_metadata(
    obj: _T | None,
    src: int | None = None,
    group: dist.ProcessGroup | None = None,
    *,
    group_src: int | None = None,
    cpu_group: dist.ProcessGroup | None = None,
    skip_fields: Iterable[str] | None = None,
    allow_pickle: AllowPickle = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> _T:
    """Send the record *obj* from the source rank to every rank of *group*, and return it there.

    Every rank of the group calls this together, with the same *group* and
    *cpu_group*.  The source is *src*, a global rank (0 when neither is
    given, but in a group of one rank, that rank), or *group_src*, its rank
    in *group*, as in ``torch.distributed.broadcast``.  There *obj* is the
    record, an instance of a dataclass made by ``ZeroCopyFields`` (inherit
    ``metakit.ZeroCopy``), and it is returned as it is.  Every other rank passes ``None`` and gets
    an equal instance of the same class, built through its ``__init__`` so
    that ``__post_init__`` runs.

    What travels is what the record's own ``asdict_zerocopy()`` returns, less
    *skip_fields*, with the values of a custom ``__getstate__``; a field that
    does not travel gets its default on the receivers.  Tensors may be field
    values or sit anywhere inside them (lists, dicts).  They arrive with
    their dtype, shape, strides (if dense) and ``requires_grad``, on their
    own kind of device (see the module's docstring for *cpu_group*).

    ::

        meta: FlashAttentionMetadata
        if dist.get_rank() == 0:
            meta = broadcast_metadata(make_flash_attention_metadata())
        else:
            meta = broadcast_metadata(None)

    A group of one rank issues no collective: its one rank is the source,
    and gets *obj* back, checked as a source checks it.

    What a receiver accepts is what ``metakit.wire.unpack`` accepts: plain
    data, checked against the fields' annotations, with no pickle unless
    *allow_pickle* says so on every rank (on the source it lets values that
    are not plain data travel pickled; on a receiver it lets them be read,
    see ``metakit.wire.unpack``: only for peers you trust).  *max_bytes*, the
    same on every rank, bounds what one record may bring (its header and
    every buffer together; the frame that carries a small record is at least
    4 KiB): the source refuses a larger record before it copies any tensor,
    and a receiver refuses, before it allocates anything, a frame that
    declares more.

    On the source, a bad record raises ``TypeError`` (naming the field whose
    value cannot be sent) or ``ValueError``, and the other ranks raise
    ``BroadcastError``.  A receiver raises ``BroadcastError`` when it cannot
    rebuild the record, whatever the bytes that arrived: every length in a
    frame is checked against what arrived before it is used, and every
    buffer received on the CPU is checked to have come whole (gloo takes a
    source's short send without a word).  Every error is raised after the
    rank has done its part, so no rank is left waiting (a frame whose table
    cannot be read ends a receiver's part there); a bad *allow_pickle*, which
    each rank passes for itself, too.  The arguments every rank passes alike
    (*max_bytes*, *src*, *group_src*, *group*, *cpu_group*) are checked
    before any collective.
    """
    # An argument that every rank passes alike fails before any collective, on every rank.  Each
    # rank may pass its own allow_pickle: a bad one fails once the rank has done its part.
    if type(max_bytes) is not int:
        raise TypeError(f"max_bytes takes an int, not {max_bytes!r}")
    if max_bytes < 1:
        raise ValueError(f"max_bytes takes a number of bytes of at least 1, not {max_bytes}")
    src, group_src = _rank_argument("src", src), _rank_argument("group_src", group_src)
    for name, given in (("group", cast(object, group)), ("cpu_group", cast(object, cpu_group))):
        if not isinstance(given, (dist.ProcessGroup, type(None))):
            if given == dist.GroupMember.NON_GROUP_MEMBER:  # what new_group() returns on a rank left out
                raise ValueError(f"broadcast_metadata(): rank {dist.get_rank()} is not a member of the {name}")
            raise TypeError(f"broadcast_metadata(): {name} takes a torch.distributed.ProcessGroup, not {given!r}")
    route = _route(dist.group.WORLD if group is None else group, cpu_group)
    source = route.source(src, group_src)
    if route.size == 1:
        # No collective, but the source's checks: a record that one rank
        # accepts is one that a group of many sends.
        _outgoing(route, obj, skip_fields, allow_pickle, max_bytes)
        return cast(_T, obj)
    if route.rank == source:
        _send(route, obj, skip_fields, allow_pickle, max_bytes)
        return cast(_T, obj)
    record = _receive(route, source, allow_pickle, max_bytes)
    if obj is not None:
        raise ValueError(
            f"broadcast_metadata() got a {type(obj).__qualname__} on rank {dist.get_rank()}, which is not the "
            f"source (rank {route.ranks[source]}): only the source passes a record, the others pass None"
        )
    return cast(_T, record)


def _rank_argument(name: str, rank: int | None) -> int | None:
    """*rank*, an int or ``None``: an integer of another type (numpy's) is taken, a ``bool`` or a ``str`` is not."""
    if rank is None:
        return None
    if isinstance(rank, bool) or not hasattr(type(rank), "__index__"):
        raise TypeError(f"broadcast_metadata(): {name} takes a rank, an int, not {rank!r}")
    return operator.index(rank)


# --- the groups --------------------------------------------------------------


_BACKEND_DEVICES: Final = {"gloo": ("cpu",), "mpi": ("cpu",), "nccl": ("cuda",), "ucc": ("cpu", "cuda")}


def _devices(group: dist.ProcessGroup) -> tuple[str, ...]:
    """The device types whose tensors *group* carries: ``gloo`` the CPU's, ``cpu:gloo,cuda:nccl`` both."""
    backend = str(dist.get_backend(group)).lower()
    if backend == "undefined":  # made with no backend named: torch chose one for each device it has
        backend = str(dist.get_backend_config(group)).lower()
    pairs = [pair.partition(":") for pair in backend.split(",")]
    if all(colon for _, colon, _ in pairs):
        return tuple(device for device, _, _ in pairs)
    return _BACKEND_DEVICES.get(backend, ("cuda",))


class _Route:
    """How records travel over one group (with one ``cpu_group``), and the frame size its ranks agree on.

    Built once per group on each rank; every rank updates its frame size
    from what every rank sees, so they stay equal.
    """

    def __init__(self, group: dist.ProcessGroup, cpu_group: dist.ProcessGroup | None) -> None:
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise ValueError(f"broadcast_metadata(): rank {dist.get_rank()} is not a member of the group")
        self.ranks: tuple[int, ...] = tuple(dist.get_process_group_ranks(group))
        self.size = len(self.ranks)
        devices = _devices(group)
        if cpu_group is not None:
            if "cpu" not in _devices(cpu_group):
                raise ValueError(
                    f"broadcast_metadata(): cpu_group has the backend {dist.get_backend(cpu_group)}, not gloo"
                )
            cpu_ranks = tuple(dist.get_process_group_ranks(cpu_group))
            if sorted(cpu_ranks) != sorted(self.ranks):
                raise ValueError(
                    f"broadcast_metadata(): cpu_group has the ranks {cpu_ranks} and group {self.ranks}: "
                    "they must be the same"
                )
            header_group = cpu_group
            self.header_src = tuple(dist.get_group_rank(cpu_group, rank) for rank in self.ranks)
        else:
            header_group = group
            self.header_src = tuple(range(self.size))
        cpu_header = cpu_group is not None or "cpu" in devices
        self.header_device = torch.device("cpu") if cpu_header else local_device("cuda")
        self.lanes = {"cuda": 1} if cpu_header and "cuda" in devices else {}
        # Weak: the groups are the keys this route is cached under, and the
        # caller passes them in every call, so they are alive while it runs.
        self._lane_groups = (weakref.ref(header_group), weakref.ref(group))
        # A process with no GPU has no GPU tensor to send; one that arrives for it is received here
        # and then refused, after the rank has done its part.
        gpu = bool(self.lanes) and torch.cuda.is_available()
        self.lane_devices = (self.header_device, local_device("cuda") if gpu else self.header_device)
        self.frame_nbytes = _FIRST_FRAME
        self.recent: collections.deque[int] = collections.deque(maxlen=_FRAME_MEMORY)
        self.recycler = _Recycler()
        self.outbox = torch.empty(0, dtype=torch.uint8)
        """The source's message buffer, kept for the next call: fresh pages would cost a fault each."""

    def message_buffer(self, nbytes: int) -> torch.Tensor:
        """A host buffer of at least *nbytes* for a message this rank sends; free again once it returns."""
        if self.outbox.numel() < nbytes or self.outbox.numel() > 4 * max(nbytes, _FIRST_FRAME):
            # Zeros: a frame carries its message's bytes, then what this buffer held (never this
            # process's other memory).
            self.outbox = torch.zeros(nbytes, dtype=torch.uint8)
        return self.outbox[:nbytes]

    @property
    def lane_groups(self) -> tuple[dist.ProcessGroup, dist.ProcessGroup]:
        """The group of lane 0 (the frame, and ``cpu_group`` if given) and of lane 1 (``group``)."""
        return cast(dist.ProcessGroup, self._lane_groups[0]()), cast(dist.ProcessGroup, self._lane_groups[1]())

    def source(self, src: int | None, group_src: int | None) -> int:
        """The source's rank in the group."""
        if group_src is None:
            if src is None and self.size == 1:
                return 0  # its one rank, whichever it is
            global_src = 0 if src is None else src
            if global_src not in self.ranks:
                raise ValueError(
                    f"broadcast_metadata(): the source, rank {global_src}, is not in the group {self.ranks}"
                )
            return self.ranks.index(global_src)
        if src is not None:
            raise ValueError("broadcast_metadata() takes src or group_src, not both")
        if not 0 <= group_src < self.size:
            raise ValueError(f"broadcast_metadata(): group_src={group_src}, but the group has {self.size} ranks")
        return group_src

    def saw(self, nbytes: int) -> None:
        """Follow the frame sizes that the records travelling need: every rank calls this with the same sizes."""
        self.recent.append(nbytes)
        peak = max(self.recent)
        if nbytes > self.frame_nbytes or self.frame_nbytes > 4 * peak:
            wanted = -(-(peak + peak // 8) // _SMALLEST_FRAME) * _SMALLEST_FRAME
            self.frame_nbytes = min(max(wanted, _SMALLEST_FRAME), _LARGEST_FRAME)

    def start_again(self) -> None:
        """Forget the sizes seen: after a call that failed on the source, or a frame that did not arrive whole.

        A source given another *max_bytes* than the receivers sends a frame
        of another size, which they refuse unread, and the sizes that each
        rank saw part: every rank that knows the call failed starts again
        from the first frame's size, so that the next call is in step.
        """
        self.frame_nbytes = _FIRST_FRAME
        self.recent.clear()

    def frame(self, max_bytes: int) -> int:
        """The size of the next frame: the one the ranks follow, within *max_bytes* (which every rank is given
        the same) but for the smallest frame."""
        return max(min(self.frame_nbytes, max_bytes // _SMALLEST_FRAME * _SMALLEST_FRAME), _SMALLEST_FRAME)


def _use_count(buffer: torch.Tensor) -> int:
    """How many tensors share *buffer*'s storage, by torch's own count; -1 if this torch cannot say."""
    try:
        return int(torch._C._storage_Use_Count(buffer.untyped_storage()._cdata))
    except Exception:  # a private function: any failure means "do not reuse"
        return -1


class _Recycler:
    """The large CPU buffers a receiver got on its previous call, reused once nothing else holds them.

    A fresh buffer of some hundred KB or more costs a page fault per 4 KB
    page while the collective writes into it, as much as the transfer
    itself; an engine drops each step's record before the next arrives, so
    the same memory can serve again.  A buffer is reused only when torch's
    count of the tensors that share its storage is back to what it was
    when the buffer was new: no view of it (no tensor of a record) is
    alive.  torch does not count a storage object that Python holds (a
    received tensor's ``untyped_storage()``, kept after the tensor went), so
    the references to the buffer's storage object are compared too.  Only
    the previous call's buffers are kept.
    """

    def __init__(self) -> None:
        self.kept: list[tuple[torch.Tensor, int, int]] = []
        self.taken: list[tuple[torch.Tensor, int, int]] = []

    def take(self, nbytes: int, device: torch.device) -> torch.Tensor:
        """A ``uint8`` tensor of *nbytes* on *device*: recycled if one is free, else new."""
        if device.type != "cpu" or nbytes < _RECYCLED:
            return torch.empty(nbytes, dtype=torch.uint8, device=device)
        for index, (buffer, alone, storage_refs) in enumerate(self.kept):
            if (
                nbytes <= buffer.numel() <= 2 * nbytes
                and alone >= 0
                and _use_count(buffer) == alone
                and sys.getrefcount(buffer.untyped_storage()) == storage_refs
            ):
                self.taken.append(self.kept.pop(index))
                return buffer[:nbytes]
        buffer = torch.empty(nbytes, dtype=torch.uint8)
        self.taken.append((buffer, _use_count(buffer), sys.getrefcount(buffer.untyped_storage())))
        return buffer[:nbytes]

    def done(self) -> None:
        """The call is over: keep what it took for the next one, and let the rest go."""
        self.kept, self.taken = self.taken, []


_routes: weakref.WeakKeyDictionary[dist.ProcessGroup, _Route] = weakref.WeakKeyDictionary()
"""The route of each group used without a ``cpu_group``."""

_routes_with_cpu_group: weakref.WeakKeyDictionary[
    dist.ProcessGroup, weakref.WeakKeyDictionary[dist.ProcessGroup, _Route]
] = weakref.WeakKeyDictionary()
"""The route of each group and ``cpu_group`` used together.

Neither cache keeps a group alive: a group that torch has destroyed goes,
and its route with it.
"""


def _route(group: dist.ProcessGroup | None, cpu_group: dist.ProcessGroup | None) -> _Route:
    if group is None:
        raise RuntimeError("broadcast_metadata(): torch.distributed is not initialized (init_process_group)")
    if not isinstance(group, dist.ProcessGroup):  # what new_group() returns on the ranks it leaves out
        raise ValueError(f"broadcast_metadata(): rank {dist.get_rank()} is not a member of the group")
    if cpu_group is None:
        route = _routes.get(group)
        if route is None:
            route = _routes[group] = _Route(group, None)
        return route
    by_cpu_group = _routes_with_cpu_group.get(group)
    if by_cpu_group is None:
        by_cpu_group = _routes_with_cpu_group[group] = weakref.WeakKeyDictionary()
    route = by_cpu_group.get(cpu_group)
    if route is None:
        route = by_cpu_group[cpu_group] = _Route(group, cpu_group)
    return route


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


# --- the source --------------------------------------------------------------


def _send(
    route: _Route, obj: object, skip_fields: Iterable[str] | None, allow_pickle: AllowPickle, max_bytes: int
) -> None:
    # Everything that can fail on a bad record happens before the first
    # collective; the receivers then get the error instead of a record.
    try:
        outgoing = _outgoing(route, obj, skip_fields, allow_pickle, max_bytes)
        # A tensor on another device than its lane's is copied there (a GPU tensor over gloo alone).
        spans = [(own.span(), own.lane) for own in outgoing.own]
        own = [
            (span if span.device == route.lane_devices[lane] else span.to(route.lane_devices[lane]), lane)
            for span, lane in spans
        ]
    except BaseException as error:  # even Ctrl-C: the receivers must hear of it, or take the next record for this one
        text = describe(error).encode(errors="replace")[:_ERROR_TEXT]
        for work in _send_message(route, _SOURCE_FAILED, text, 0, (), [], max_bytes):
            work.wait()
        route.start_again()
        raise
    device_pool = None
    if len(outgoing.pools) > 1 and outgoing.pool_nbytes[1]:
        device_pool = torch.empty(outgoing.pool_nbytes[1], dtype=torch.uint8, device=route.lane_devices[1])
        fill(device_pool, outgoing.pools[1])
    # The last bytes of each buffer after the first, as the table lists them: lane 1's pool, then the large ones.
    tails = [*([_tail(device_pool)] if len(outgoing.pools) > 1 else []), *(_tail(span) for span, _ in own)]
    works = _send_message(route, _OK, outgoing.header, outgoing.pool_nbytes[0], outgoing.pools[0], tails, max_bytes)
    group_src = route.rank
    if device_pool is not None:
        works.append(dist.broadcast(device_pool, group=route.lane_groups[1], group_src=group_src, async_op=True))
    for span, lane in own:
        group = route.lane_groups[lane]
        works.append(dist.broadcast(span, group=group, group_src=_src_in(route, lane, group_src), async_op=True))
    for work in works:
        work.wait()


def _outgoing(
    route: _Route, obj: object, skip_fields: Iterable[str] | None, allow_pickle: AllowPickle, max_bytes: int
) -> Outgoing:
    """The source's record packed, its buffers not yet filled: ``TypeError`` or ``ValueError`` for a bad one."""
    pickling = allowed_globals(allow_pickle) is not False
    if obj is None:
        raise ValueError("broadcast_metadata() got None on the source rank, which passes the record")
    outgoing = pack_outgoing(obj, skip_fields, route.lanes, "broadcast_metadata()", allow_pickle=pickling)
    buffers = len(outgoing.pool_nbytes) - 1 + len(outgoing.own)
    total = _aligned(_PREFIX.size + len(outgoing.header) + _TAIL * buffers) + sum(outgoing.pool_nbytes)
    total += sum(own.nbytes for own in outgoing.own)
    if total > max_bytes:
        raise ValueError(
            f"broadcast_metadata(): the record takes {total} bytes, over max_bytes={max_bytes}, "
            "which every rank must be given the same"
        )
    return outgoing


def _src_in(route: _Route, lane: int, group_src: int) -> int:
    """The rank in *lane*'s group of the rank *group_src* of the group."""
    return route.header_src[group_src] if lane == 0 else group_src


def _send_message(  # noqa: PLR0917  # the parts of a message, in its order
    route: _Route,
    status: int,
    header: bytes,
    pool_nbytes: int,
    placements: Iterable[Placement],
    tails: list[bytes],
    max_bytes: int,
) -> list[dist.Work]:
    """Issue the frame (and the rest of the message if it overflows); the works to wait for.

    *tails* are the last bytes of each buffer sent after the message, which
    a receiver checks (see ``_mark``).
    """
    tails_offset = _PREFIX.size + len(header)
    pool_offset = _aligned(tails_offset + _TAIL * len(tails))
    message_nbytes = pool_offset + pool_nbytes
    carried = route.frame(max_bytes) - _TAIL  # the message's bytes that the frame carries, before _TRAILER
    message = route.message_buffer(max(message_nbytes, carried + _TAIL))
    view = cpu_bytes(message)
    view[_PREFIX.size : tails_offset] = header
    view[tails_offset : tails_offset + _TAIL * len(tails)] = b"".join(tails)
    if pool_nbytes:
        fill(message[pool_offset:message_nbytes], placements)
    rest = message[carried:message_nbytes]
    _PREFIX.pack_into(view, 0, status, _LAYOUT, len(header), message_nbytes, _tail(rest))
    if message_nbytes <= carried:
        view[carried : carried + _TAIL] = _TRAILER
        frame = message[: carried + _TAIL]
    else:
        frame = torch.empty(carried + _TAIL, dtype=torch.uint8)
        frame[:carried].copy_(message[:carried])
        frame[carried:].copy_(torch.frombuffer(bytearray(_TRAILER), dtype=torch.uint8))
    if route.header_device.type != "cpu":
        frame, rest = frame.to(route.header_device), rest.to(route.header_device)
    src = route.header_src[route.rank]
    group = route.lane_groups[0]
    works = [dist.broadcast(frame, group=group, group_src=src, async_op=True)]
    if message_nbytes > carried:
        works.append(dist.broadcast(rest, group=group, group_src=src, async_op=True))
    route.saw(message_nbytes + _TAIL)
    return works


# --- the receivers -----------------------------------------------------------


def _receive(route: _Route, source: int, allow_pickle: AllowPickle, max_bytes: int) -> object:
    try:
        return _receive_with(route, source, allow_pickle, max_bytes)
    finally:
        route.recycler.done()


def _check_prefix(status: int, layout: int, header_nbytes: int, message_nbytes: int, tail: bytes | None) -> None:
    """Refuse a prefix that no source of this layout writes (*tail*: what it gives as the last bytes of the
    rest of a message that the frame carries whole, or ``None`` where a rest follows)."""
    if layout != _LAYOUT:
        raise _refused(f"a frame of layout {layout} arrived, and this metakit reads layout {_LAYOUT}")
    if status not in (_OK, _SOURCE_FAILED) or _PREFIX.size + header_nbytes > message_nbytes:
        raise _refused(
            f"a frame arrived whose prefix says status {status}, a header of {header_nbytes} bytes and a message of "
            f"{message_nbytes}: not a frame of this format"
        )
    if tail is not None and tail != bytes(_TAIL):
        raise _refused("a frame arrived whose prefix gives the last bytes of a rest of the message, but none follows")


def _receive_with(route: _Route, source: int, allow_pickle: AllowPickle, max_bytes: int) -> object:
    carried = route.frame(max_bytes) - _TAIL
    src = route.header_src[source]
    group = route.lane_groups[0]
    frame = route.recycler.take(carried + _TAIL, route.header_device)
    marked = _mark(frame, _TRAILER)
    dist.broadcast(frame, group=group, group_src=src)
    _check_frame(route, frame, marked)
    host = frame if frame.device.type == "cpu" else frame.cpu()
    # The frame is at least _SMALLEST_FRAME bytes: the prefix lies inside it.
    status, layout, header_nbytes, message_nbytes, rest_tail = _PREFIX.unpack(_read(host, 0, _PREFIX.size))
    _check_prefix(status, layout, header_nbytes, message_nbytes, rest_tail if message_nbytes <= carried else None)
    # The source's error fits in the frame, and is read whatever max_bytes says.
    if message_nbytes > (max(max_bytes, carried) if status == _SOURCE_FAILED else max_bytes):
        raise _refused(f"a frame arrived whose message of {message_nbytes} bytes is over max_bytes={max_bytes}")
    if message_nbytes > carried:
        message = route.recycler.take(message_nbytes, route.header_device)
        message[:carried].copy_(frame[:carried])
        rest = message[carried:]
        marked = _mark(rest, rest_tail)
        dist.broadcast(rest, group=group, group_src=src)
        _check_whole(rest, marked, rest_tail, "the rest of the message")
        host = message if message.device.type == "cpu" else message.cpu()
    route.saw(message_nbytes + _TAIL)
    header = _read(host, _PREFIX.size, header_nbytes)
    if status == _SOURCE_FAILED:
        raise _source_failed(route, source, header)
    # The table's layout is the same in every format: this rank can take
    # its part in the collectives before it reads the rest.
    try:
        table = buffer_table(header, 2 + (max_bytes - message_nbytes) // PACK_OWN_BUFFER)
    except WireError as error:
        raise _refused(str(error)) from None
    tails_offset = _PREFIX.size + header_nbytes
    pool_offset = _aligned(tails_offset + _TAIL * (len(table) - 1))
    problem = _table_problem(table, route, message_nbytes - pool_offset, max_bytes - message_nbytes)
    if problem:
        raise _refused(problem)
    tails = bytes(_read(host, tails_offset, _TAIL * (len(table) - 1)))
    received = [route.recycler.take(spec.nbytes, route.lane_devices[spec.lane]) for spec in table[1:]]
    marks = [_mark(buffer, tails[_TAIL * index : _TAIL * (index + 1)]) for index, buffer in enumerate(received)]
    works = [_receive_buffer(route, spec, source, buffer) for spec, buffer in zip(table[1:], received, strict=True)]
    for work in works:
        if work is not None:
            work.wait()
    # This rank has done its part: what goes wrong from here on concerns it alone.
    for index, (buffer, marked) in enumerate(zip(received, marks, strict=True), start=1):
        _check_whole(buffer, marked, tails[_TAIL * (index - 1) : _TAIL * index], f"buffer {index}")
    allowed = allowed_globals(allow_pickle)  # this rank's own argument: a TypeError, not the peer's fault
    try:
        return unpack_tensors(header, [host[pool_offset : pool_offset + table[0].nbytes], *received], allowed)
    except WireError as error:
        raise _refused(str(error)) from None
    except Exception as error:  # a receiving class's own __init__ is wrapped by unpack; this is a defect of metakit's
        raise _refused(describe(error)) from error


def _tail(buffer: torch.Tensor | None) -> bytes:
    """The last bytes of *buffer* (``_TAIL``, or all of a shorter one, then zeros), as a receiver checks them.

    Zeros for a buffer on a GPU, whose end no receiver checks (nccl takes no short sends).
    """
    if buffer is None or buffer.device.type != "cpu":
        return bytes(_TAIL)
    count = min(_TAIL, buffer.numel())
    return bytes(_read(buffer, buffer.numel() - count, count)).ljust(_TAIL, b"\0")


def _mark(buffer: torch.Tensor, tail: bytes) -> bool:
    """Set the last bytes of the CPU *buffer*, about to receive a broadcast that should end in *tail*, to
    others; whether it did.

    gloo lets a source send fewer bytes than a receiver posted, and says
    nothing: the rest of the buffer would keep what it held (a previous
    record's bytes, or memory never written).  Where gloo relays the
    broadcast through other ranks, a relay even passes on the whole buffer
    it posted, its own memory included.  So a receiver knows, before each
    buffer arrives, how it ends (the frame in ``_TRAILER``, the others as
    the message says) and marks its last bytes with others, each unlike the
    byte it should be: a send that stops short by any number of bytes
    leaves at least the last of them, on this rank and on any it relays to,
    and ``_check_whole`` refuses the buffer on every rank alike.  Not on a
    GPU (nccl takes no short sends), nor for an empty buffer.
    """
    if buffer.device.type != "cpu" or not buffer.numel():
        return False
    count = min(_TAIL, buffer.numel())
    mark = bytes(byte ^ 0xFF for byte in tail[:count])
    buffer[-count:].copy_(torch.frombuffer(bytearray(mark), dtype=torch.uint8))
    return True


def _source_failed(route: _Route, source: int, header: bytearray) -> BroadcastError:
    """The error that the source sent in *header*; this rank starts again, as the source did."""
    route.start_again()
    text = printable(header[:_ERROR_TEXT].decode(errors="replace"))
    return BroadcastError(f"rank {route.ranks[source]}, the source, could not send its record: {text}")


def _check_frame(route: _Route, frame: torch.Tensor, marked: bool) -> None:
    """Refuse a *frame* that did not arrive whole; then start again, as a source does when it fails (a source
    given another ``max_bytes`` sends a frame of another size)."""
    try:
        _check_whole(frame, marked, _TRAILER, "the frame", " (does every rank pass the same max_bytes?)")
    except BroadcastError:
        route.start_again()
        raise


def _check_whole(buffer: torch.Tensor, marked: bool, tail: bytes, what: str, hint: str = "") -> None:
    """Refuse the *marked* *buffer* unless it ends in *tail*: it did not arrive whole, or not as the source said."""
    if marked and _tail(buffer) != tail:
        raise _refused(
            f"{what} ({buffer.numel()} bytes) does not end as the source said it would: it did not arrive whole{hint}"
        )


def _read(host: torch.Tensor, start: int, nbytes: int) -> bytearray:
    """Bytes *start* to *start* + *nbytes* of the CPU ``uint8`` tensor *host*, checked to lie inside it.

    A torch copy into a ``bytearray``: a receiver reads no memory by address.
    """
    if start + nbytes > host.numel():
        raise _refused(f"bytes {start} to {start + nbytes} of a frame of {host.numel()} were to be read")
    copy = bytearray(nbytes)
    if nbytes:
        torch.frombuffer(copy, dtype=torch.uint8).copy_(host[start : start + nbytes])
    return copy


def _refused(reason: str) -> BroadcastError:
    return BroadcastError(f"rank {dist.get_rank()}: {reason}")


def _table_problem(table: list[BufferSpec], route: _Route, pool_room: int, room: int) -> str:
    """What is wrong with a buffer table that arrived, or ``""``: checked before anything is allocated.

    The first buffer is the frame's own pool, which must lie inside the
    message; the rest are received, each over its lane's group, and
    together must fit in *room* bytes.
    """
    if not table:
        return "a header arrived whose table lists no buffer"
    lanes = 2 if route.lanes else 1
    if any(spec.lane >= lanes for spec in table):
        carried = "lanes 0 and 1 only" if route.lanes else "lane 0 only (lane 1 is a device group's, with cpu_group)"
        lane = max(spec.lane for spec in table)
        return f"the header lists a buffer on lane {lane}, but this broadcast carries {carried}"
    if table[0].lane != 0 or table[0].nbytes > pool_room:
        return f"the header's first buffer ({table[0]}) does not lie in the frame ({pool_room} bytes are left)"
    if sum(spec.nbytes for spec in table[1:]) > room:
        return f"the header lists {sum(spec.nbytes for spec in table[1:])} bytes of buffers, over max_bytes"
    return ""


def _receive_buffer(route: _Route, spec: BufferSpec, source: int, buffer: torch.Tensor) -> dist.Work | None:
    if not spec.nbytes:
        return None
    group = route.lane_groups[spec.lane]
    work: dist.Work = dist.broadcast(buffer, group=group, group_src=_src_in(route, spec.lane, source), async_op=True)
    return work
