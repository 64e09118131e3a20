"""The wire table: ``wire.pack`` + ``wire.unpack`` side by side with vLLM V1's msgpack method (torch only).

The peer, ``metakit.bench.msgpack_peer``, is an encoder and a typed decoder
written the way vLLM V1's ``MsgpackEncoder`` and ``MsgpackDecoder`` work
(msgspec, tensors of 256 bytes or more as out-of-band buffers).  Both turn
the example ``FlashAttentionMetadata`` into a header and buffers and back,
at the four sizes of the broadcast benchmark's records, from a realistic
8 KB step to 8 MB of tensors.  This is serialization alone: the buffers
that one side makes are the ones the other side reads, with no transport
between.

For each record, four steps are timed in the same interleaved rounds: the
round trip (what the design's targets are on), the sending side alone, the
receiving side alone, and the receiving side again from read-only ``bytes``,
as a socket or most message queues deliver them.  From those metakit copies
each tensor's data, so that the tensors it returns can be written; the peer's
tensors are views of the read-only bytes, as vLLM's are (torch warns once that
writing them would change memory it must not).  The sizes are counted once: each side's header
(the peer's message holds its small tensors inline; metakit's header holds
none), its buffers, and its bytes in all.  Each way is checked first: its
round trip must give back an equal record of the same class.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from metakit import ZeroCopy
from metakit.bench.report import UNSTABLE_NOTE, format_number, installed
from metakit.bench.timing import Broken, Progress, Settings, make_timer, measure_ns

NEEDS: Final = ("torch", "msgspec", "numpy")
"""What the wire table needs installed: torch for the records, msgspec and numpy for the peer."""


class WireRecord(NamedTuple):
    """One record of the wire table: ``make_flash_attention_metadata(**arguments)``."""

    key: str
    label: str
    arguments: dict[str, int]
    bound: float
    """The design's target: the peer's round trip over metakit's is at least this."""


RECORDS: Final = (
    WireRecord("8kb", "8 KB: prefill, 8 seqs", {"num_seqs": 8, "seq_len": 128}, 1.5),
    WireRecord("261kb", "261 KB: 8 seqs, 33,374 tokens", {"num_tokens": 33_374}, 1.5),
    WireRecord("2mb", "2 MB: prefill, 256 x 1024", {"num_seqs": 256, "seq_len": 1024}, 1.0),
    WireRecord("8mb", "8 MB: 1M tokens", {"num_seqs": 256, "seq_len": 1024, "num_tokens": 1 << 20}, 1.0),
)

STEPS: Final = {
    "round_trip": "pack + unpack",
    "send": "pack alone",
    "receive": "unpack alone",
    "receive_bytes": "unpack, bytes",
}
"""The timed steps, by key: what metakit calls; the peer encodes and decodes.  *unpack, bytes* reads
read-only ``bytes``, where the others read the writable buffers the sending side made."""

_STATEMENTS: Final = {
    "round_trip": ("unpack(*pack(meta))", "decode(encode(meta))"),
    "send": ("pack(meta)", "encode(meta)"),
    "receive": ("unpack(header, buffers)", "decode(frames)"),
    "receive_bytes": ("unpack(header, received)", "decode(frames_received)"),
}
"""Each step's timed statements: metakit's, then the peer's."""


@dataclass(frozen=True)
class WireRow(ZeroCopy):
    """One step on one record, both ways, in microseconds."""

    record: str
    """The record's key in ``RECORDS``."""
    step: str
    """The step's key in ``STEPS``."""
    metakit_us: float
    """The best sample's microseconds per record."""
    metakit_median_us: float
    peer_us: float
    peer_median_us: float
    ratio: float
    """``peer_us / metakit_us``: above 1, metakit is faster."""
    median_ratio: float
    unstable: bool
    """Whether either figure's samples varied more than pyperf allows (``timing.UNSTABLE``)."""


@dataclass(frozen=True)
class WireSize(ZeroCopy):
    """What each way makes of one record."""

    record: str
    label: str
    tensor_bytes: int
    metakit_header_bytes: int
    peer_header_bytes: int
    """The msgpack message, with the tensors of under 256 bytes inline."""
    metakit_buffers: int
    peer_buffers: int
    metakit_bytes: int
    """The header and the buffers, in all."""
    peer_bytes: int


class WireResults(NamedTuple):
    """The wire table: its timings and its sizes."""

    rows: list[WireRow]
    sizes: list[WireSize]


def missing() -> list[str]:
    """What of ``NEEDS`` is not installed."""
    return [name for name in NEEDS if installed(name) is None]


def measure_wire(settings: Settings, progress: Progress) -> tuple[WireResults, int]:
    """Every step of both ways on every record, side by side in the same rounds; and the rounds."""
    from metakit import wire
    from metakit.bench.msgpack_peer import MsgpackPeerDecoder, MsgpackPeerEncoder
    from metakit.examples.engine import FlashAttentionMetadata, make_flash_attention_metadata

    encoder, decoder = MsgpackPeerEncoder(), MsgpackPeerDecoder(FlashAttentionMetadata)
    timers = {}
    sizes = []
    for record in RECORDS:
        meta = make_flash_attention_metadata(**record.arguments)
        packed, frames = wire.pack(meta), encoder.encode(meta)
        received, frames_received = [bytes(buffer) for buffer in packed.buffers], [bytes(frame) for frame in frames]
        check_round_trip(wire.unpack(*packed), meta, "wire.pack + wire.unpack")
        check_round_trip(wire.unpack(packed.header, received), meta, "wire.unpack from bytes")
        check_round_trip(decoder.decode(frames), meta, "the msgpack peer")
        with warnings.catch_warnings():  # torch's, once a process: a tensor over read-only memory
            warnings.simplefilter("ignore", UserWarning)
            check_round_trip(decoder.decode(frames_received), meta, "the msgpack peer from bytes")
        namespace = {
            "meta": meta,
            "pack": wire.pack,
            "unpack": wire.unpack,
            "header": packed.header,
            "buffers": packed.buffers,
            "encode": encoder.encode,
            "decode": decoder.decode,
            "frames": frames,
            "received": received,
            "frames_received": frames_received,
        }
        for step, (mine, theirs) in _STATEMENTS.items():
            timers[f"{record.key} {step} metakit"] = make_timer(mine, namespace)
            timers[f"{record.key} {step} peer"] = make_timer(theirs, namespace)
        sizes.append(_size(record, meta, packed.header, packed.buffers, frames))
    spreads, rounds = measure_ns(timers, settings.wire_seconds, settings, progress)
    rows = []
    for record in RECORDS:
        for step in STEPS:
            ours, peers = spreads[f"{record.key} {step} metakit"], spreads[f"{record.key} {step} peer"]
            rows.append(
                WireRow(
                    record.key,
                    step,
                    ours.best / 1e3,
                    ours.median / 1e3,
                    peers.best / 1e3,
                    peers.median / 1e3,
                    peers.best / ours.best,
                    peers.median / ours.median,
                    ours.unstable or peers.unstable,
                )
            )
    return WireResults(rows, sizes), rounds


def _nbytes(buffer: Any) -> int:
    return memoryview(buffer).nbytes


def _size(record: WireRecord, meta: Any, header: bytes, buffers: list[memoryview], frames: list[Any]) -> WireSize:
    import torch

    tensors = [value for value in meta.astuple_zerocopy() if isinstance(value, torch.Tensor)]
    return WireSize(
        record.key,
        record.label,
        sum(tensor.nbytes for tensor in tensors),
        len(header),
        len(frames[0]),
        len(buffers),
        len(frames) - 1,
        len(header) + sum(map(_nbytes, buffers)),
        sum(map(_nbytes, frames)),
    )


def check_round_trip(got: Any, want: Any, way: str) -> None:
    """Raise ``Broken`` unless *got* is a record of *want*'s class with equal fields (tensors: dtype, shape, values)."""
    import torch

    if type(got) is not type(want):
        raise Broken(f"{way} gave a {type(got).__qualname__} for a {type(want).__qualname__}")
    for name, value in want.asdict_zerocopy().items():
        theirs = getattr(got, name)
        if isinstance(value, torch.Tensor):
            same = (
                isinstance(theirs, torch.Tensor)
                and (theirs.dtype, theirs.shape) == (value.dtype, value.shape)
                and torch.equal(theirs, value)
            )
        else:
            same = type(theirs) is type(value) and theirs == value
        if not same:
            raise Broken(f"{way}: field {name!r} of {type(want).__qualname__} came back different")


def print_wire(results: WireResults | None, rounds: int | None) -> None:
    """Print the timings and the sizes, or why the table was skipped."""
    if results is None:
        print(f"\n== Wire: skipped, it needs {' and '.join(missing())}")
        return
    print(
        "\n== Wire: wire.pack + wire.unpack and an encoder written the way vLLM V1's MsgpackEncoder/MsgpackDecoder"
        f" work, serialization only; us per record, best (median) of {rounds} interleaved rounds"
    )
    print("  ratio = the msgpack peer's time / metakit's (above 1: metakit is faster)")
    labels = {record.key: record.label for record in RECORDS}
    width = max(map(len, labels.values()))
    print(f"  {'record':<{width}}  {'step':<13}  {'metakit us':>17}  {'msgpack peer us':>17}  {'ratio':>13}")
    for row in results.rows:
        label = labels[row.record] if row.step == "round_trip" else ""
        mine = f"{format_number(row.metakit_us)} ({format_number(row.metakit_median_us)})"
        theirs = f"{format_number(row.peer_us)} ({format_number(row.peer_median_us)})"
        ratio = f"{row.ratio:.2f} ({row.median_ratio:.2f}){' !' if row.unstable else ''}"
        print(f"  {label:<{width}}  {STEPS[row.step]:<13}  {mine:>17}  {theirs:>17}  {ratio:>13}")
    if any(row.unstable for row in results.rows):
        print(f"  ! {UNSTABLE_NOTE}")
    print(f"\n  {'record':<{width}}  {'header bytes':>20}  {'buffers':>15}  {'bytes in all':>23}")
    print(f"  {'':<{width}}  {'metakit':>9}  {'peer':>9}  {'metakit':>7}  {'peer':>6}  {'metakit':>11}  {'peer':>10}")
    for size in results.sizes:
        print(
            f"  {size.label:<{width}}  {size.metakit_header_bytes:>9,}  {size.peer_header_bytes:>9,}"
            f"  {size.metakit_buffers:>7}  {size.peer_buffers:>6}  {size.metakit_bytes:>11,}  {size.peer_bytes:>10,}"
        )
    print("  the peer's header is its msgpack message, which holds the tensors of under 256 bytes")
    print(
        "  unpack, bytes: from read-only bytes, as a socket delivers them; metakit copies the tensors' data"
        " (writable tensors), the peer's tensors are views of the read-only bytes"
    )
