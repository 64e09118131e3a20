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
``torch.distributed``.  The format is described in ``docs/wire-format.md``.

What travels is what the record says should: the fields that its own
``asdict_zerocopy()`` returns (an override that leaves some out is honoured),
less the names in ``skip_fields``, with the values that a custom
``__getstate__`` gives where the class defines one.  A field that does not
travel gets its default, or what ``__post_init__`` makes, on the receiver,
which rebuilds the record through its class's ``__init__``.

**What a peer can do.**  The values that travel are plain data: ``None``,
``bool``, ``int`` (64-bit), ``float``, ``str``, ``bytes``, lists, tuples and
dicts of them (keys ``str`` or ``int``), tensors (as bytes), ``torch.dtype``,
``torch.device`` and records of classes made by ``ZeroCopyFields``, by the
same rules as the record itself.  The header is msgpack, read by msgspec into
those types and no others; a class is looked up by name among the live
classes made by ``ZeroCopyFields``, never imported.  Where a field's
annotation resolves, its value must match it, on both sides.  Only the
fields that travel are set, each once, through ``__init__``; which those are
is the sender's to say (a receiver cannot know what an ``asdict_zerocopy()``
override or ``__getstate__`` leaves out), so a peer can set any field that is
not ``OMIT``: make a field that no peer may set ``OMIT``.  Every tensor's
dtype comes from a fixed table, and its shape, strides and extent are checked
against the buffer it lies in before a view of it is made.  So a hostile or
broken peer can make ``unpack`` raise ``WireError``, and nothing else: no
code runs, nothing is imported, no memory outside the buffers given is read.
(Like any sender, it can still send a record that is valid and wrong; and
the header's values take memory in proportion to its size, as with any
decoder.)

**Pickle, an explicit opt-in.**  Any other value is refused by ``pack`` with
a ``TypeError`` naming the field.  ``pack(..., allow_pickle=True)`` sends such
values pickled instead, and the receiver reads them only if it says so too:
``unpack(..., allow_pickle=True)`` unpickles them (finding globals only in
modules already imported), or ``allow_pickle={"module.Name", ...}`` only
those globals.  Either trusts the peer: a pickle can run code.

The small tensors share one buffer, each at a 64-byte aligned offset; a
larger one (64 KiB in ``pack``, 1 MiB on a broadcast) is a buffer of its
own, sent straight from the tensor's memory (``pack`` returns a
``memoryview`` of it, not a copy).  A dense tensor keeps
its strides; one with gaps or overlaps (a slice with a step, an ``expand``)
arrives contiguous.  The same tensor object twice arrives as one object.  A
tensor whose memory lies within that of a dense tensor sent before it (a
slice of a parent's ``slot_mapping``) arrives as a view of that tensor's
memory, and costs no bytes.

This module imports torch and msgspec, and needs no numpy.
"""

from __future__ import annotations

import contextlib
import copyreg
import ctypes
import datetime
import functools
import hashlib
import inspect
import io
import math
import pickle
import pickletools
import re
import struct
import sys
import threading
import types
import warnings
import weakref
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, ClassVar, Final, NamedTuple, NoReturn, cast

try:
    import msgspec
    import torch
except ModuleNotFoundError as missing:  # the extra is not installed: say which
    if missing.name not in ("msgspec", "torch"):
        raise
    raise ModuleNotFoundError(
        f"metakit.wire needs {missing.name}: pip install 'metakit[torch]'", name=missing.name
    ) from missing

from metakit._codegen import STATE, holds_generated
from metakit._errors import _check_skipped, _skip_fields_failed, _skip_fields_text, describe
from metakit._fields import CLASS_DICT, MODULE_DICT, QUALNAME, is_omitted, stranded
from metakit._meta import ZeroCopyFields, zerocopy_classes
from metakit._source import printable, writable
from metakit._wire_plan import OBJECT_NEW, TYPE_CALL, Builder, Encoder, make_builder, make_encoder, positional_init
from metakit._wire_plan import Refused as _Refused
from metakit._wire_types import FieldChecks, field_checks, key_step, mismatch, mismatch_at, type_name

__all__ = ["FORMAT", "Packed", "WireError", "buffer_count", "pack", "unpack"]

FORMAT: Final = 6
"""The version of the format; bumped whenever what a header says changes."""

_MAGIC: Final = b"MKW"

_TABLE_HEAD: Final = struct.Struct("<3sBI")
"""Magic, format and buffer count: the start of every header, in every format.

The buffer table that follows (a ``u64`` size per buffer, then a ``u8`` lane
per buffer) keeps its layout in every format too, so that a receiver of
another version can still take its part in a collective before it says what
is wrong.
"""

ALIGN: Final = 64
"""Each tensor in a shared buffer starts at a multiple of this many bytes."""

OWN_BUFFER: Final = 1 << 20
"""On a broadcast, a tensor of this many bytes or more travels as a buffer of its own.

Below it, copying the bytes into the frame costs less than a collective.
"""

PACK_OWN_BUFFER: Final = 64 << 10
"""In ``pack``, a tensor of this many bytes or more is a buffer of its own: a view of its memory.

Below it, copying the bytes costs less than making that view.
"""

MAX_DEPTH: Final = 64
"""How deep lists, tuples, dicts and records may nest in a value that travels: a sender refuses a deeper value,
and a receiver a field's lists, tuples and dicts, or tuples and records in one another, nested deeper."""

_MAX_INT: Final = (1 << 64) - 1
_MIN_INT: Final = -(1 << 63)

# --- the fixed tables --------------------------------------------------------------

_TENSOR_DTYPE_NAMES: Final = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex32",
    "complex64",
    "complex128",
    "uint16",
    "uint32",
    "uint64",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "bits8",
    "bits16",
    "bits1x8",
    "bits2x4",
    "bits4x2",
    *(f"int{bits}" for bits in range(1, 8)),
    *(f"uint{bits}" for bits in range(1, 8)),
    "bcomplex32",
)
"""The dtypes a tensor may have on the wire, by their code (the index); never reordered, only added to.

Every dtype of torch but the quantized ones, whose values need a scale and
a zero point that a buffer does not hold.  (torch's sub-byte dtypes take a
byte per element.)
"""

_TENSOR_DTYPES: Final[list[torch.dtype | None]] = [
    *(getattr(torch, name, None) for name in _TENSOR_DTYPE_NAMES),
    *[None] * (256 - len(_TENSOR_DTYPE_NAMES)),
]
"""The dtype of each code a spec's byte can hold: ``None`` for a code not in the table, or whose dtype this
torch lacks."""
_TENSOR_DTYPE_CODES: Final = {dtype: code for code, dtype in enumerate(_TENSOR_DTYPES) if dtype is not None}
_ITEMSIZES: Final = [dtype.itemsize if dtype is not None else 0 for dtype in _TENSOR_DTYPES]
"""The item size of each dtype code's dtype (0 for an unknown code)."""

_DTYPES: Final = {str(value)[6:]: value for value in vars(torch).values() if isinstance(value, torch.dtype)}
"""Every ``torch.dtype`` value by its name (``"float32"``), read once from torch: a dtype *value* travels by name."""

_DEVICE_KINDS: Final = ("cpu", "cuda", "xpu", "mps")
"""The kinds of device a tensor may come from, by their code."""
_DEVICE_CODES: Final = {kind: code for code, kind in enumerate(_DEVICE_KINDS)}

_DEVICE_TEXT: Final = re.compile(r"[a-z][a-z0-9_]{0,31}(:[0-9]{1,6})?")

# msgpack extension codes: what a value is, where plain msgpack has no word for it.
_TENSOR: Final = 1
_TUPLE: Final = 2
_RECORD: Final = 3
_DTYPE: Final = 4
_DEVICE: Final = 5
_PICKLE: Final = 6
_RECORD_AGAIN: Final = 7

_NUMBER: Final = struct.Struct("<I")


_NEW: Final = 0
"""Bytes of its own, at *offset* of buffer *reference*."""
_VIEW: Final = 1
"""A view of tensor *reference*'s bytes (one sent before it, of kind ``_NEW``), *offset* bytes in."""
_SAME: Final = 2
"""The very tensor *reference*, sent before it."""

_REQUIRES_GRAD: Final = 1
_WIDE: Final = 2
"""The offset, sizes and strides are ``u64``, not ``u32``: a spec is as short as its numbers allow."""
_STRIDES: Final = 4
"""The strides follow the sizes; without this flag the tensor is contiguous (row-major) and they are left out."""
_DEVICE_SHIFT: Final = 4
_KNOWN_FLAGS: Final = _REQUIRES_GRAD | _WIDE | _STRIDES | 0xF0
_LAYOUT: Final = _WIDE | _STRIDES

_MAX_DIMS: Final = 64


def _spec_structs(flags: int) -> list[struct.Struct]:
    number = "Q" if flags & _WIDE else "I"
    return [
        struct.Struct(f"<BBBBI{number}{(2 if flags & _STRIDES else 1) * ndim}{number}") for ndim in range(_MAX_DIMS + 1)
    ]


_SPECS: Final = {flags: _spec_structs(flags) for flags in (0, _WIDE, _STRIDES, _WIDE | _STRIDES)}
"""A tensor's whole spec, by its flags of layout (wide, with strides) and its number of dimensions:
dtype code, flags, ndim, kind, reference (``u32``), offset, then the sizes and the strides, if any."""

_USUAL_SPECS: Final = {
    struct.calcsize(f"<B3sII{ndim}I"): struct.Struct(f"<B3sII{ndim}I") for ndim in range(_MAX_DIMS + 1)
}
"""The usual tensor's spec, by its length: dtype code, then flags 0, ndim and kind ``_NEW`` as three bytes
(``_USUAL_TAGS[ndim]``), then its buffer, its offset and its sizes, each a ``u32``."""
_USUAL_TAGS: Final = [bytes((0, ndim, _NEW)) for ndim in range(_MAX_DIMS + 1)]
_USUAL_SIZE: Final = struct.calcsize("<B3sII")
"""The length of the usual spec of a tensor with no dimensions; each dimension adds 4 bytes."""
_USUAL_1D: Final = _USUAL_SPECS[_USUAL_SIZE + 4]
_U32: Final = 1 << 32


def _spec(  # noqa: PLR0917  # a spec's fields, in its order
    code: int, flags: int, kind: int, reference: int, offset: int, shape: Sequence[int], strides: Sequence[int] | None
) -> msgspec.msgpack.Ext:
    """A tensor's spec as the extension that stands for it in a header; *strides* ``None`` for a contiguous one.

    Refuses what no receiver takes: torch makes an empty tensor of any shape
    (``torch.empty(0, 2**62)``), and a view with strides of any size.
    """
    ndim = len(shape)
    if max(shape, default=0) >= _MAX_SIZE or max(strides or _contiguous_strides(tuple(shape)), default=0) >= _MAX_SIZE:
        raise _Refused(f"a tensor of shape {tuple(shape)} has sizes or strides of 2**62 or more, past the format's")
    if strides is None:
        numbers: Sequence[int] = shape
    else:
        flags |= _STRIDES
        numbers = (*shape, *strides)
    try:
        return _Ext(_TENSOR, _SPECS[flags & _STRIDES][ndim].pack(code, flags, ndim, kind, reference, offset, *numbers))
    except struct.error:  # a number of 4 GiB or more
        flags |= _WIDE
        return _Ext(_TENSOR, _SPECS[flags & _LAYOUT][ndim].pack(code, flags, ndim, kind, reference, offset, *numbers))


_MAX_SIZE: Final = 1 << 62
"""A size or stride at least this large is one no tensor of this process could have."""

_CARRIERS: Final = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""An integer dtype of each element size, to copy raw elements of any dtype.

A copy between two views of the same element size is a plain move of bytes,
and some dtypes (the float8 kinds) have no copy kernel of their own.
"""

_encoder: Final = msgspec.msgpack.Encoder()
_Ext: Final = msgspec.msgpack.Ext
_STRIDED: Final = torch.strided
_Tensor: Final = torch.Tensor
_frombuffer: Final = torch.frombuffer
_tuple_new: Final = tuple.__new__
_MEMORY: Final = memoryview((ctypes.c_char * sys.maxsize).from_address(0)).cast("B")
"""This process's memory as one flat byte view: ``_MEMORY[address : address + n]`` is the *n* bytes at *address*.

Assigning one slice to another copies bytes between two addresses at a
third of the cost of ``ctypes.memmove``, a foreign function call.  Like
``memmove``, it trusts the addresses: only a live tensor's ``data_ptr()``
and a buffer of known size are ever read or written through it.
"""
_BYTES: Final = frozenset({memoryview, bytearray})
_USUAL_TABLES: Final = {
    "real_codes": {dtype: code for dtype, code in _TENSOR_DTYPE_CODES.items() if not dtype.is_complex},
    "specs": [_USUAL_SPECS[_USUAL_SIZE + 4 * ndim] for ndim in range(_MAX_DIMS + 1)],
    "tags": _USUAL_TAGS,
    "one": _USUAL_1D,
    "tag1": _USUAL_TAGS[1],
    "Ext": _Ext,
    "TENSOR": _TENSOR,
    "strided": _STRIDED,
    "U32": _U32,
    "MAX_DIMS": _MAX_DIMS,
    "ALIGN": ALIGN,
    "MEMORY": _MEMORY,
    "PADS": [bytes(size) for size in range(ALIGN)],
}
"""What the generated ``usual`` reads to send the usual tensor as ``_Packer.tensor`` does (see ``make_encoder``)."""


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


# --- what travels --------------------------------------------------------------


class _Codec:
    """What the sender and the receiver need to know of a record class; made once per class.

    It holds no reference to the class but a weak one (``lifetime``), and is made (the
    annotations resolved) only when a record of the class first travels.
    """

    __slots__ = (
        "_builder",
        "_call",
        "_encoder",
        "checks",
        "default_names",
        "digest",
        "fields",
        "init",
        "later",
        "lifetime",
        "made_for",
        "name",
        "position",
        "travelling",
        "unset",
    )

    def __init__(self, cls: type) -> None:
        # First: a change to the class that comes while this is made leaves the codec stale, never current.
        self.made_for = _made_for(cls)
        all_fields = fields(cls)
        self.name = f"{cls.__module__}:{cls.__qualname__}"
        self.fields = tuple(f.name for f in all_fields)
        self.position = {name: index for index, name in enumerate(self.fields)}
        self.default_names = tuple(f.name for f in all_fields if not is_omitted(f))
        self.travelling = frozenset(self.default_names)
        # Which fields travel is part of the class: two sides that mark other fields OMIT would
        # read the values in other places.
        self.digest = zlib.crc32(
            "\n".join(name if name in self.travelling else f"{name} OMIT" for name in self.fields).encode()
        )
        self.init = frozenset(f.name for f in all_fields if f.init)
        self.later = any(not f.init for f in all_fields)
        """Whether the class has ``init=False`` fields, set after ``__init__``."""
        self.unset = tuple(
            f.name for f in all_fields if not f.init and f.default is MISSING and f.default_factory is MISSING
        )
        """The ``init=False`` fields without a default: a record has them only if they arrive or
        ``__post_init__`` sets them."""
        self._call: _Call | None = None
        self.checks: FieldChecks = field_checks(cls, all_fields)  # of the same fields as the names above
        self._encoder: Encoder | bool | None = False
        self._builder: Builder | bool | None = False
        key = id(cls)
        self.lifetime = weakref.ref(cls, lambda _: _codecs.pop(key, None))
        """A weak reference to the class, whose callback drops this codec from ``_codecs``."""

    def call(self, cls: type) -> _Call:
        """What calling *cls* requires and takes, read the first time a record of it is sent.

        Only the sender asks: a receiver never reads a signature, whose text
        ``inspect`` may compile.  One that cannot be read requires nothing
        here and takes anything: the receiver's call of the class then says
        what is wrong.
        """
        if self._call is None:
            try:
                parameters = _signature(cls).parameters.values()
            except (TypeError, ValueError):  # a builtin __init__, a __signature__ that is not one
                self._call = _Call(frozenset(), None)
            else:
                named = [p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
                self._call = _Call(
                    frozenset(
                        p.name
                        for p in parameters
                        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                    ),
                    None if any(p.kind is p.VAR_KEYWORD for p in parameters) else frozenset(p.name for p in named),
                )
        return self._call

    def callable_with(self, cls: type, names: Collection[str]) -> bool:
        """Whether the receiver can call *cls* with the fields *names* (those of them set in ``__init__``)."""
        return self.call(cls).requires.issubset(names) and not self.untaken(cls, names)

    def untaken(self, cls: type, names: Collection[str]) -> list[str]:
        """The fields of *names* that the receiver's call of *cls* cannot give (a ``*args`` takes none).

        The receiver passes them by keyword, or, for the usual names of a
        class without ``init=False`` fields, by position where ``__init__``
        takes them in order (``positional_init``).
        """
        takes = self.call(cls).takes
        if takes is None or (
            tuple(names) == self.default_names and not self.later and positional_init(cls, self.default_names)
        ):
            return []
        return [name for name in names if name in self.init and name not in takes]

    def stranded(self, cls: type, names: Collection[str]) -> list[str]:
        """The ``init=False`` fields without a default that do not travel with *names*, where no ``__post_init__``
        can set them: every receiver would refuse the record."""
        if not self.unset:
            return []
        return [name for name in stranded(cls) if name not in names]

    def encoder(self, cls: type) -> Encoder | None:
        """The class's generated ``encode``, made the first time it is asked for; ``None`` where it has none.

        What a record sends is what its own ``asdict_zerocopy()`` returns: the
        generated one returns the fields that are not ``OMIT``, read as attributes.
        """
        if self._encoder is False:
            asdict = vars(cls).get("asdict_zerocopy")
            names = self.default_names
            self._encoder = (
                make_encoder(
                    cls.__qualname__,
                    names,
                    self.checks,
                    asdict,
                    getattr(cls, "__getstate__", None),
                    usual=_USUAL_TABLES,
                )
                if holds_generated(vars(cls), asdict)
                and _custom_getstate(cls) is None
                and self.callable_with(cls, names)
                and not self.stranded(cls, names)
                and writable(names)  # the names are written into the encoder's source
                else None
            )
        return self._encoder  # type: ignore[return-value]

    def builder(self, cls: type) -> Builder | None:
        """How the receiver reads the class's usual values, made the first time; ``None`` with ``init=False`` fields."""
        if self._builder is False:
            names = self.default_names
            self._builder = (
                None if self.later else make_builder(names, self.checks, _extension, positional_init(cls, names))
            )
        return self._builder  # type: ignore[return-value]


if sys.version_info >= (3, 14):
    import annotationlib

    def _signature(cls: type) -> inspect.Signature:
        """The signature of *cls*, with no annotation evaluated where that can be: the parameters are wanted,
        not their types.

        ``inspect.signature`` asks a function's ``__annotate__``, which in any
        format may run it for real (3.14 tries ``VALUE`` first, or checks that
        ``VALUE_WITH_FAKE_GLOBALS`` works): a module's lazy ``__getattr__``, or
        any code an annotation holds, would run.  So where calling *cls* runs a
        plain function, its ``__new__`` or ``__init__`` as ``inspect`` picks it
        (through ``functools.wraps`` wrappers too), the signature is read from
        a copy of that function without annotations.  Otherwise ``FORWARDREF``,
        which takes the annotations that ``dataclasses`` evaluated, where it could.
        """
        constructor = _constructor(cls)
        if (
            type(cls).__call__ is TYPE_CALL
            and type(constructor) is types.FunctionType
            and not hasattr(cls, "__signature__")
        ):
            function = inspect.unwrap(constructor, stop=lambda f: hasattr(f, "__signature__"))
            if type(function) is types.FunctionType and not (
                hasattr(function, "__signature__") or hasattr(function, "__partialmethod__")
            ):
                bare = types.FunctionType(
                    function.__code__, {}, function.__name__, function.__defaults__, function.__closure__
                )
                bare.__kwdefaults__ = function.__kwdefaults__
                return _bound(inspect.signature(bare))
        return inspect.signature(cls, annotation_format=annotationlib.Format.FORWARDREF)

    def _bound(signature: inspect.Signature) -> inspect.Signature:
        """*signature* less the parameter that takes the class or the instance, as ``inspect`` drops it."""
        parameters = list(signature.parameters.values())
        if not parameters or parameters[0].kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            raise ValueError("invalid method signature")
        if parameters[0].kind is not inspect.Parameter.VAR_POSITIONAL:  # ``(*args)`` takes it in its stride
            del parameters[0]
        return signature.replace(parameters=parameters)

    def _constructor(cls: type) -> object:
        """What ``inspect`` reads the signature of *cls* from, as the class holds it: the ``__new__`` or the
        ``__init__`` of the first class in its MRO that defines one that is not ``object``'s (an ``__init__``
        as its class's dict holds it: a ``staticmethod`` takes no instance to drop)."""
        new = cls.__new__
        for base in cls.__mro__[:-1]:
            if new is not OBJECT_NEW and "__new__" in base.__dict__:
                return new
            if "__init__" in base.__dict__:
                return base.__dict__["__init__"]
        return None

else:

    def _signature(cls: type) -> inspect.Signature:
        return inspect.signature(cls)


class _Call(NamedTuple):
    """What calling a record class takes, as its signature says."""

    requires: frozenset[str]
    """The parameters without a default (a positional-only one too: no keyword can give it)."""
    takes: frozenset[str] | None
    """The parameters a keyword can give; ``None`` for any (a ``**kwargs``)."""


_codecs: Final[dict[int, _Codec]] = {}
"""Each record class's codec, by the class's ``id`` (never by ``==``, which a metaclass may define); an entry
leaves when its class is collected."""


def _codec(cls: type) -> _Codec:
    """The codec of the record class *cls*, made now if it has none that is current."""
    codec = _current_codec(cls)
    if codec is None:
        codec = _codecs[id(cls)] = _Codec(cls)
    return codec


def _current_codec(cls: type) -> _Codec | None:
    """The codec of *cls*, if it has one made for the class as it is now (``_made_for``); else ``None``.

    The usual record's ``pack`` and ``unpack`` write the test out: they run it on every record, and there a
    call costs more than the test."""
    codec = _codecs.get(id(cls))
    return None if codec is None or codec.made_for != _made_for(cls) else codec


def _made_for(cls: Any) -> tuple[object, ...]:
    """What a class's codec is made from: its fields, its name and its ``__init__``.  A class decorated again,
    renamed (a factory's class often is) or given another ``__init__`` gets a new codec the next time it travels.

    Each is told by an object that refers to no class, or the codec would keep its class alive: the fields by
    the class's generated methods, which are made anew for new fields; ``__init__`` by its code.
    """
    init = cls.__init__
    return (getattr(cls, STATE, None), cls.__module__, cls.__qualname__, getattr(init, "__code__", init))


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


def _travelling(obj: object, cls: type, codec: _Codec, skip_fields: Iterable[str] | None) -> dict[str, Any]:
    """The fields of *obj* that travel, and their values."""
    skipped = None if skip_fields is None else _name_set(skip_fields)
    # A fresh set each call: vLLM's FlashInfer override adds its wrappers' names to the one it gets.
    chosen = obj.asdict_zerocopy(None if skipped is None else set(skipped))  # type: ignore[attr-defined]
    if not isinstance(chosen, dict):
        raise TypeError(f"{cls.__qualname__}.asdict_zerocopy() returned a {type(chosen).__name__}, not a dict")
    if skipped:
        # The names skipped never travel, and must be fields, whatever an override does with them.
        for name in skipped:
            _check_skipped(obj, name, skipped)
        chosen = {name: value for name, value in chosen.items() if name not in skipped}
    if not codec.travelling.issuperset(chosen):
        strangers = [name for name in chosen if name not in codec.travelling]
        raise TypeError(
            f"{cls.__qualname__}.asdict_zerocopy() returned {', '.join(map(repr, strangers))}, which is not "
            "a field or is an OMIT field: the receiver rebuilds the record from its fields that travel"
        )
    getstate = _custom_getstate(cls)
    if getstate is not None:
        state = _state_dict(cls, getstate(obj))
        chosen = {name: state[name] for name in chosen if name in state}
    missing = codec.call(cls).requires.difference(chosen)
    strangers = sorted(missing.difference(codec.fields))
    if strangers:
        raise TypeError(
            f"{cls.__qualname__}.__init__ requires {', '.join(map(repr, strangers))}, which "
            f"{'is not a field' if len(strangers) == 1 else 'are not fields'}: the receiver calls __init__ with "
            "the fields that travel, by keyword; give the parameters defaults, or the class an __init__ that takes "
            "its fields"
        )
    if missing:
        raise TypeError(
            f"{cls.__qualname__}.__init__ requires {', '.join(sorted(map(repr, missing)))}, which would not travel "
            "(left out by asdict_zerocopy(), skip_fields or __getstate__, or an InitVar): the receiver calls "
            "__init__ with the fields that travel; give it a default"
        )
    stranded = codec.stranded(cls, chosen)
    if stranded:
        raise TypeError(
            f"{cls.__qualname__} cannot be sent: its field {stranded[0]!r} (init=False, with no default) would not "
            "travel, and the receiver has no __post_init__ to set it: give it a default, or let it travel"
        )
    untaken = codec.untaken(cls, chosen)
    if untaken:
        raise TypeError(
            f"{cls.__qualname__}.__init__ takes no keyword {', '.join(map(repr, untaken))}: the receiver calls "
            "__init__ with the fields that travel, by keyword"
        )
    return chosen


def _name_set(skip_fields: Iterable[str]) -> set[str]:
    """*skip_fields* as a new set, refused as ``asdict_zerocopy`` refuses it (``SkipFieldsError``)."""
    if isinstance(skip_fields, (str, bytes)):
        raise _skip_fields_text(skip_fields)
    try:
        return set(skip_fields)
    except TypeError as error:
        _skip_fields_failed(skip_fields, error)


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
    strides: tuple[int, ...] | None
    """The strides it arrives with: its own if dense, ``None`` for contiguous ones."""
    address: int
    """The CPU address its bytes lie at, as they are, if they can be moved from there (a dense CPU tensor with
    no lazy bits); else 0."""
    storage: object
    """What keeps the bytes at *address* alive until they are moved: the tensor's storage, which a ``set_``
    of the tensor meanwhile (from a finalizer, or another thread) would otherwise free; ``None`` with no
    *address*."""


class OwnBuffer(NamedTuple):
    """A large tensor that travels as a buffer of its own."""

    tensor: torch.Tensor
    nbytes: int
    """How many bytes it takes, contiguous."""
    lane: int
    raw: bool
    """Whether its bytes lie in CPU memory from its ``data_ptr()`` on, as they are (contiguous, no lazy bits)."""
    dense: bool
    """Whether its bytes travel as they lie; if not, a contiguous copy of its values does."""

    def span(self) -> torch.Tensor:
        """Its bytes, as a flat ``uint8`` tensor: a view of its memory, or of the copy made now (not while
        packing: a broadcast refuses a record over ``max_bytes`` before it copies anything)."""
        return _span(self.tensor if self.dense else _contiguous(self.tensor))


class Outgoing(NamedTuple):
    """A packed record before its buffers are filled: ``pack`` fills them one way, a broadcast another."""

    header: bytes
    pools: list[list[Placement]]
    """The tensors that share a buffer, per lane: buffer *i* is lane *i*'s."""
    pool_nbytes: list[int]
    own: list[OwnBuffer]
    """The large tensors: buffers ``len(pools)`` on."""


def pack_outgoing(
    obj: object,
    skip_fields: Iterable[str] | None,
    lanes: Mapping[str, int],
    caller: str,
    *,
    allow_pickle: bool = False,
    own_buffer: int = OWN_BUFFER,
) -> Outgoing:
    """Pack *obj*; the tensors on a device type that *lanes* maps to 1 go in lane 1's buffers, the rest in lane 0's.

    Raises ``TypeError`` (naming the field) or ``ValueError`` for a record
    that cannot travel.
    """
    cls = _check_record(obj, caller)
    packer = _Packer(lanes, allow_pickle, own_buffer)
    packer.writing.add(id(obj))
    try:
        body = _encoder.encode(packer.record(obj, cls, skip_fields))
    except (OverflowError, UnicodeEncodeError):
        # An int beyond 64 bits, or a str that is not UTF-8: the strict way
        # names the field that holds it, or with the opt-in sends it pickled.
        packer = _Packer(lanes, allow_pickle, own_buffer, strict=True)
        packer.writing.add(id(obj))
        body = _encoder.encode(packer.record(obj, cls, skip_fields))
    sizes = [*packer.pool_nbytes, *(own.nbytes for own in packer.own)]
    lanes_used = [*range(len(packer.pool_nbytes)), *(own.lane for own in packer.own)]
    return Outgoing(_table_bytes(sizes, lanes_used) + body, packer.pools, packer.pool_nbytes, packer.own)


def _table_bytes(sizes: Sequence[int], lanes: Sequence[int]) -> bytes:
    """The start of a header: magic, format, the buffer count, then the buffer table."""
    table = _TABLES.get(len(sizes))
    if table is None:
        table = _table_struct(len(sizes))
    return table.pack(_MAGIC, FORMAT, len(sizes), *sizes, *lanes)


def _table_struct(count: int) -> struct.Struct:
    """The start of a header with *count* buffers (``_TABLE_HEAD``), then their sizes, then their lanes."""
    return struct.Struct(f"{_TABLE_HEAD.format}{count}Q{count}B")


_TABLES: Final = {count: _table_struct(count) for count in range(8)}
"""The usual tables' structs, made once."""


_PLAIN: Final = frozenset({int, float, str, bytes, bool, type(None)})
"""The types msgpack carries as they are (``int`` within 64 bits)."""

_SCALARS: Final = _PLAIN - {int}
"""The plain types that need no check: a list of them travels as it is."""

_INTS: Final = frozenset({int, bool})

_PLAIN_BASES: Final = _PLAIN | {list, tuple, dict}
"""The plain types and containers: a value of a subclass of one (an ``IntEnum``, a ``defaultdict``) matches its
annotation, but is not plain data; converted to its base, it is."""


class _TooDeep(_Refused):
    """A value nested more than ``MAX_DEPTH`` levels deep: said once, with no path (it would be as deep)."""


_TOO_DEEP: Final = f"it is nested more than {MAX_DEPTH} levels deep, or holds itself"


_LEAVE_OUT: Final = "leave it out with skip_fields, an asdict_zerocopy() override or __getstate__"
"""The last advice of a refusal; inside a record in the field's value, where ``skip_fields`` cannot reach,
``_Packer.refused`` names that record's class instead."""


class _NotPlain(_Refused):
    """A value of a type that is not plain data; *plain* is the plain type it derives from, if any."""

    def __init__(self, kind: type, plain: type | None) -> None:
        super().__init__(
            f"a value of type {kind.__module__}.{kind.__qualname__} is not plain data (None, bool, int, float, "
            "str, bytes, lists, tuples and dicts of them, tensors, torch.dtype, torch.device, records); "
            + ("send value.item(), its Python value (a numpy scalar), or " if _numpy_scalar(kind) else "")
            + (f"send {plain.__name__}(value) if the annotation takes {_a(plain.__name__)}, or " if plain else "")
            + f"send it pickled with allow_pickle=True on both sides if the peers trust each other, or {_LEAVE_OUT}"
        )
        self.plain = plain

    def converts(self, check: Callable[[object], bool], value: object) -> bool:
        """Whether *value*, made its plain type, passes *check*."""
        if self.plain is None:
            return False
        try:
            return check(self.plain(value))
        except Exception:  # a value that its plain type cannot take: no advice to give
            return False


def _a(noun: str) -> str:
    return f"{'an' if noun[0].lower() in 'aeiou' else 'a'} {noun}"


def _numpy_scalar(kind: type) -> bool:
    """Whether *kind* is a numpy scalar type (``numpy.int64``), told by its base, with no import of numpy."""
    return any(base.__module__ == "numpy" and base.__name__ == "generic" for base in kind.__mro__)


class _Unmatched(_Refused):
    """A value in a record inside a field's value that does not match its own field's annotation.

    *reason* is msgspec's words, naming the value at *at*, its path in that
    record (``$.name``); ``path`` grows from there on the way out.
    """

    def __init__(self, reason: str, at: str) -> None:
        super().__init__(reason)
        self.at = at
        self.path = at[1:]


class _Packer:
    """Turns one record into msgpack-ready values, placing its tensors' bytes in buffers as it goes."""

    __slots__ = (
        "allow_pickle",
        "cpu_lane",
        "depth",
        "lanes",
        "own",
        "own_buffer",
        "pool_nbytes",
        "pools",
        "records",
        "regions",
        "sent",
        "strict",
        "tensors",
        "writing",
    )

    def __init__(self, lanes: Mapping[str, int], allow_pickle: bool, own_buffer: int, *, strict: bool = False) -> None:
        self.strict = strict
        """Whether to check every int's range and every str's text in Python, to name the field of one that
        msgspec refused."""
        self.lanes = lanes
        self.cpu_lane = lanes.get("cpu", 0)
        self.own_buffer = own_buffer
        self.allow_pickle = allow_pickle
        self.pools: list[list[Placement]] = [[], []] if lanes else [[]]
        self.pool_nbytes = [0, 0] if lanes else [0]
        self.own: list[OwnBuffer] = []
        self.tensors: list[torch.Tensor] = []
        """The tensors sent so far, in order (a tensor sent again too): their numbers, and their ``id``s kept taken."""
        self.sent: dict[int, int] = {}
        """The number of each tensor object sent, by ``id``."""
        self.depth = 0
        """How many containers and records the value being written lies in."""
        self.records: dict[int, tuple[int, object]] = {}
        """The records inside field values sent so far, by ``id``: their number, and the record."""
        self.writing: set[int] = set()
        """The records being written, by ``id``: the record packed and those it lies in."""
        self.regions: dict[object, list[tuple[int, int, int]]] = {}
        """The dense tensors whose bytes travel as they lie, by storage: their address, size and number."""

    def record(self, obj: object, cls: type, skip_fields: Iterable[str] | None) -> list[Any]:
        """The body of one record: ``[class, digest, names, values]``."""
        try:
            return self.body(obj, cls, skip_fields)
        except AttributeError as error:
            unset = [name for name in _codec(cls).unset if not hasattr(obj, name)]
            # The field the error names (an override may leave out another that is not set either).
            missing = error.name if error.name in unset else unset[0] if unset and error.name is None else None
            if missing is None:
                raise
            raise TypeError(
                f"{cls.__qualname__} cannot be sent: its field {missing!r} (init=False, with no default) was never set"
            ) from None

    def body(self, obj: object, cls: type, skip_fields: Iterable[str] | None) -> list[Any]:
        codec = _codec(cls)
        encoder = codec.encoder(cls)
        if encoder is not None and not self.strict and skip_fields is None and encoder.serves(obj):
            return [codec.name, codec.digest, None, encoder.encode(obj, self)]
        chosen = _travelling(obj, cls, codec, skip_fields)
        values = [self.field(obj, name, value) for name, value in chosen.items()]
        if len(chosen) == len(codec.default_names) and tuple(chosen) == codec.default_names:
            return [codec.name, codec.digest, None, values]
        return [codec.name, codec.digest, [codec.position[name] for name in chosen], values]

    def field(self, obj: object, name: str, value: object) -> Any:
        """The value of the field *name* of *obj* as it travels, checked against the field's annotation."""
        kind = type(value)
        cls = type(obj)
        codec = _codec(cls)
        check = codec.checks.checks.get(name)
        if check is None:  # the class got other fields while this call ran
            raise TypeError(f"{cls.__qualname__} changed while a record of it was sent: {name!r} is no field of it now")
        try:
            matches = check(value)
        except RecursionError:  # a recursive annotation (``Tree = int | list["Tree"]``) on a value that holds itself
            self.refused(obj, name, _TooDeep(_TOO_DEEP))
        except Exception:  # an object that claims a type it is not (a mock, a __class__ property)
            matches = False
        if not matches:
            if self.depth:  # a record inside a field's value: the field of the record packed is named
                raise _Unmatched(*mismatch_at(codec.checks, name, value))
            raise TypeError(f"{cls.__qualname__} cannot be sent: {mismatch(codec.checks, name, value)}")
        if kind in _PLAIN and not self.strict and (kind is not int or _MIN_INT <= value <= _MAX_INT):  # type: ignore[operator]
            return value
        try:
            return self.tensor(value) if kind is _Tensor else self.value(value)  # type: ignore[arg-type]
        except _Refused as error:
            if type(error) is _NotPlain and not error.path and not error.converts(check, value):
                error = _NotPlain(kind, None)  # the field's annotation refuses it as its plain type too
            self.refused(obj, name, error)

    def refused(self, obj: object, name: str, error: _Refused) -> NoReturn:
        """Raise *error*, refused in the field *name* of *obj*: as a ``TypeError`` naming its path from the
        record packed, or, in a record inside a field's value, on its way there."""
        if self.depth:
            if type(error) is not _TooDeep:
                error.path = f".{name}{error.path}"
            raise error
        path = f"$.{name}{error.path}"
        if type(error) is _Unmatched:
            reason = str(error).replace(f"`{error.at}`", f"`{path}`", 1)
            raise TypeError(f"{type(obj).__qualname__} cannot be sent: {reason}") from None
        reason = str(error)
        if error.within is not None:
            where = (
                f"leave it out of {error.within.__qualname__} with OMIT, an asdict_zerocopy() override or __getstate__"
            )
            reason = reason.replace(_LEAVE_OUT, where)
        raise TypeError(f"field {name!r} of {type(obj).__qualname__} cannot be sent ({path}): {reason}") from None

    def value(self, value: object) -> Any:  # noqa: PLR0911  # one return per kind of value
        kind = type(value)
        if kind in _PLAIN:
            problem = _unwritable(value, self.strict) if self.strict or kind is int else None
            return value if problem is None else self.pickled_instead(value, problem)
        if issubclass(kind, torch.Tensor):  # by its type: an object's __class__ may claim to be a tensor
            return self.tensor(value) if kind is _Tensor else self.tensor_subclass(value)  # type: ignore[arg-type]
        if kind is torch.dtype or kind is torch.device:
            return self.other(value, kind)
        # A container, a record or a pickle: one level deeper.
        if self.depth == MAX_DEPTH:
            raise _TooDeep(_TOO_DEEP)
        self.depth += 1
        try:
            if kind is list:
                return self.plain_list(value)  # type: ignore[arg-type]
            if kind is tuple:
                return _Ext(_TUPLE, _encoder.encode(self.items(enumerate(value))))  # type: ignore[arg-type]
            if kind is dict:
                return self.plain_dict(value)  # type: ignore[arg-type]
            return self.other(value, kind)
        finally:
            self.depth -= 1

    def plain_list(self, value: list[Any]) -> list[Any]:
        # The usual list, of ints or of other plain values, is checked in C and travels as it is.
        kinds = set(map(type, value))
        if not self.strict and (
            kinds <= _SCALARS or (kinds <= _INTS and min(value) >= _MIN_INT and max(value) <= _MAX_INT)
        ):
            return value
        return self.items(enumerate(value))

    def items(self, pairs: Iterable[tuple[object, object]]) -> list[Any]:
        """The values of *pairs* as they travel; one refused is named by its key in the error's path."""
        values = []
        for key, item in pairs:
            try:
                values.append(self.value(item))
            except _Refused as error:
                if type(error) is not _TooDeep:
                    error.path = f"{key_step(key)}{error.path}"
                raise
        return values

    def plain_dict(self, value: dict[Any, Any]) -> dict[str | int, Any] | msgspec.msgpack.Ext:
        for key in value:
            if type(key) is str:
                problem = _unwritable(key, strict=True) if self.strict else None
                if problem is not None:
                    return self.pickled_instead(value, problem)
            elif type(key) is not int or not _MIN_INT <= key <= _MAX_INT:
                if self.allow_pickle:  # msgpack's keys are plain: the dict travels pickled, as a whole
                    return msgspec.msgpack.Ext(_PICKLE, self.pickled(value))
                what = (
                    f"the int dict key {key}, which does not fit in 64 bits,"
                    if type(key) is int
                    else f"a dict key of type {type(key).__module__}.{type(key).__qualname__}"
                )
                scalar = "send key.item(), its Python value (a numpy scalar), or " if _numpy_scalar(type(key)) else ""
                raise _Refused(
                    f"{what} is not plain data (a dict's keys travel as str and int); {scalar}send the dict pickled "
                    f"with allow_pickle=True on both sides if the peers trust each other, or {_LEAVE_OUT}"
                )
        return dict(zip(value, self.items(value.items()), strict=True))

    def pickled_instead(self, value: object, problem: str) -> msgspec.msgpack.Ext:
        """*value*, which msgspec cannot write for *problem*, pickled if the sender opted in; else refused."""
        if not self.allow_pickle:
            raise _Refused(
                f"{problem}; send it pickled with allow_pickle=True on both sides if the peers trust each other"
            )
        return msgspec.msgpack.Ext(_PICKLE, self.pickled(value))

    def pickled(self, value: object) -> bytes:
        """*value* pickled, each tensor in it sent as any tensor of the record is: its pickle holds the spec, as a
        persistent id, never torch's own pickle of it (which the receiver would unpickle with no limit)."""
        stream = io.BytesIO()
        pickler = pickle.Pickler(stream, pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = self.persistent_id  # type: ignore[method-assign]
        try:
            pickler.dump(value)
        except _Refused:
            raise
        except Exception as error:
            raise _Refused(f"it cannot be pickled: {describe(error)}") from None
        return stream.getvalue()

    def persistent_id(self, item: object) -> bytes | None:
        """What a pickle holds in place of *item*: a tensor's spec; a record is refused (see below)."""
        kind = type(item)
        if kind is torch.Tensor:
            return bytes(self.tensor(item).data)  # type: ignore[arg-type]
        if isinstance(kind, ZeroCopyFields) and is_dataclass(item):
            # Pickled, a record would skip every rule that it travels by: its
            # OMIT fields would go too, its values unchecked, and it would not
            # be made by its __init__.
            raise _Refused(
                f"it holds {_a(kind.__qualname__)} record in a value that travels pickled, where a record cannot "
                "travel by its rules; hold the record in a list, a tuple or a dict with str or int keys"
            )
        return None

    def other(self, value: object, kind: type) -> Any:
        """A value that msgpack has no word for: a dtype, a device, a record, or a pickle if allowed."""
        if kind is torch.dtype:
            return msgspec.msgpack.Ext(_DTYPE, str(value)[6:].encode())
        if kind is torch.device:
            text = str(value)
            if not _DEVICE_TEXT.fullmatch(text):  # torch.device("cuda:128"), whose index wraps to -128
                raise _Refused(f"the torch.device {value!r} has an index that torch cannot read back")
            return msgspec.msgpack.Ext(_DEVICE, text.encode())
        if isinstance(kind, ZeroCopyFields) and is_dataclass(value):
            # A record inside a field value (a model input's attention
            # metadata) travels by the same rules as the record itself, and
            # one record object twice arrives as one object.  Records are
            # numbered once their body is written, as the receiver numbers
            # them once it has rebuilt them.
            sent = self.records.get(id(value))
            if sent is not None:
                return msgspec.msgpack.Ext(_RECORD_AGAIN, _NUMBER.pack(sent[0]))
            if id(value) in self.writing:
                raise _Refused(
                    f"it holds the {kind.__qualname__} record it lies in, and a record cannot travel inside itself"
                )
            self.writing.add(id(value))
            try:
                body = _encoder.encode(self.record(value, kind, None))
            except _Refused as error:  # a value in it, named by its path
                if error.within is None:
                    error.within = kind
                raise
            except TypeError as error:  # the record itself: what its asdict_zerocopy() or __getstate__ gives
                raise _Refused(f"a record inside it: {error}") from None
            finally:
                self.writing.discard(id(value))
            self.records[id(value)] = (len(self.records), value)
            return msgspec.msgpack.Ext(_RECORD, body)
        if self.allow_pickle:
            return msgspec.msgpack.Ext(_PICKLE, self.pickled(value))
        raise _NotPlain(kind, next((base for base in kind.__mro__ if base in _PLAIN_BASES), None))

    def tensor_subclass(self, tensor: torch.Tensor) -> msgspec.msgpack.Ext:
        """``tensor`` for an instance of a subclass of ``torch.Tensor``, refused where its data cannot be read: a
        wrapper subclass (a ``DTensor``, a ``TwoTensor``) or a fake tensor has no storage of its own."""
        try:
            return self.tensor(tensor)
        except _Refused:
            raise
        except Exception as error:  # torch's, whatever the subclass raises
            kind = type(tensor)
            raise _Refused(
                f"a {kind.__module__}.{kind.__qualname__}, whose data cannot be read ({type(error).__name__}), "
                "cannot travel; send a plain tensor"
            ) from None

    def tensor(self, tensor: torch.Tensor) -> msgspec.msgpack.Ext:
        """The spec of *tensor*; its bytes are placed in a buffer, unless it is a view of bytes placed before."""
        index = len(self.tensors)
        self.tensors.append(tensor)
        first = self.sent.setdefault(id(tensor), index)
        if first != index:
            return _spec(0, 0, _SAME, first, 0, (), None)
        code = _TENSOR_DTYPE_CODES.get(tensor.dtype)
        if (
            code is not None
            and tensor.is_cpu
            and tensor.layout is _STRIDED
            and not tensor.is_nested
            and not tensor.requires_grad
            and tensor.is_contiguous()
            and not tensor.is_conj()
            and not tensor.is_neg()
        ):
            # The usual tensor: its bytes, as they lie, go in the CPU lane's shared buffer, unless they are
            # large, empty or hold those of a tensor sent before.
            shape = tensor.shape
            nbytes = tensor.nbytes
            address = tensor.data_ptr()
            held = tensor.untyped_storage()
            storage = held.data_ptr()
            lane = self.cpu_lane
            offset = self.pool_nbytes[lane]
            if 0 < nbytes < _U32 and offset < _U32 and storage not in self.regions and len(shape) <= _MAX_DIMS:
                self.regions[storage] = [(address, nbytes, index)]
                if nbytes < self.own_buffer:
                    buffer = lane
                    self.pools[lane].append(_tuple_new(Placement, (tensor, offset, nbytes, None, address, held)))
                    self.pool_nbytes[lane] = offset + nbytes + (-nbytes % ALIGN)
                else:
                    buffer, offset = self.add_own(tensor, nbytes, lane, True, raw=True)
                usual = _USUAL_SPECS[_USUAL_SIZE + 4 * len(shape)]
                return _Ext(_TENSOR, usual.pack(code, _USUAL_TAGS[len(shape)], buffer, offset, *shape))
        return self.any_tensor(tensor, index, code)

    def any_tensor(self, tensor: torch.Tensor, index: int, code: int | None) -> msgspec.msgpack.Ext:
        """The spec of tensor number *index*, of dtype *code*, checked against every rule; placed as ``tensor`` says."""
        device = "cpu" if tensor.is_cpu else "cuda" if tensor.is_cuda else tensor.device.type
        if code is None or tensor.layout is not _STRIDED or tensor.is_nested or device not in _DEVICE_CODES:
            _refuse(tensor)
        shape = tensor.shape
        if len(shape) > _MAX_DIMS:
            _refuse(tensor)
        contiguous = tensor.is_contiguous()
        # A dimension of size 1 may have any stride (torch leaves some at 2**63 - 1): it sends its contiguous one.
        strides = None if contiguous else _sent_strides(shape, tensor.stride())
        nbytes = tensor.nbytes
        flags = (_DEVICE_CODES[device] << _DEVICE_SHIFT if device != "cpu" else 0) | tensor.requires_grad
        if not nbytes:
            return _spec(code, flags, _NEW, 0, 0, shape, strides)
        address = tensor.data_ptr()
        itemsize = _ITEMSIZES[code]
        start = address - tensor.storage_offset() * itemsize
        storage = start if device == "cpu" else (device, start)  # where its storage starts, on its kind of device
        exact = not tensor.is_conj() and not tensor.is_neg()
        regions = self.regions.get(storage)
        if regions is not None and exact:
            view = self.view(regions, address, shape, strides or tensor.stride(), itemsize)
            if view is not None:
                parent, offset = view
                return _spec(code, flags, _VIEW, parent, offset, shape, strides)
        dense = contiguous or _is_dense(shape, strides)  # type: ignore[arg-type]
        lane = self.lanes.get(device, 0) if self.lanes else 0
        if not dense:
            strides = None  # it arrives contiguous
        elif exact:  # its bytes travel as they lie in memory: a later view of them can point into them
            self.regions.setdefault(storage, []).append((address, nbytes, index))
        if nbytes >= self.own_buffer:
            buffer, offset = self.add_own(tensor, nbytes, lane, dense, raw=contiguous and exact and device == "cpu")
        else:
            buffer = lane
            offset = self.pool_nbytes[lane]
            raw = address if dense and exact and device == "cpu" else 0
            held = tensor.untyped_storage() if raw else None
            self.pools[lane].append(_tuple_new(Placement, (tensor, offset, nbytes, strides, raw, held)))
            self.pool_nbytes[lane] = offset + nbytes + (-nbytes % ALIGN)
        return _spec(code, flags, _NEW, buffer, offset, shape, strides)

    def add_own(self, tensor: torch.Tensor, nbytes: int, lane: int, dense: bool, *, raw: bool) -> tuple[int, int]:
        """Give the large *tensor* a buffer of its own; return its number and the tensor's offset there."""
        self.own.append(_tuple_new(OwnBuffer, (tensor, nbytes, lane, raw, dense)))
        return len(self.pools) + len(self.own) - 1, 0

    @staticmethod
    def view(
        regions: list[tuple[int, int, int]], address: int, shape: torch.Size, strides: tuple[int, ...], itemsize: int
    ) -> tuple[int, int] | None:
        """The tensor whose bytes, sent before, hold those of a view, and the view's offset in them; or ``None``."""
        if not _no_overlap(shape, strides):
            return None
        extent = _extent(shape, strides, itemsize)
        for start, nbytes, index in regions:
            offset = address - start
            if offset >= 0 and offset + extent <= nbytes and not offset % itemsize:
                return index, offset
        return None


def _unwritable(value: object, strict: bool) -> str | None:
    """Why msgspec cannot write the plain *value*, or ``None``: an int beyond 64 bits, or (the strict way,
    which runs once msgspec has failed) a str that is not UTF-8 text."""
    if type(value) is int and not _MIN_INT <= value <= _MAX_INT:
        return f"the int {value} does not fit in 64 bits"
    if strict and type(value) is str:
        try:
            value.encode()
        except UnicodeEncodeError as error:
            return f"the str {value[:40]!r} is not UTF-8 text: {error.reason}"
    return None


def _sent_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """*strides*, each of a dimension of size 1 written as a contiguous tensor has it."""
    if 1 not in shape:
        return strides
    return tuple(
        usual if size == 1 else stride
        for size, stride, usual in zip(shape, strides, _contiguous_strides(shape), strict=True)
    )


def _check_strides(index: int, shape: tuple[int, ...], strides: tuple[int, ...], nbytes: int) -> None:
    """Refuse the *strides* written for tensor *index* where a sender would have written others (or none)."""
    if not nbytes and strides != _contiguous_strides(shape):  # torch takes every empty tensor as contiguous
        raise WireError(f"tensor {index} has strides {strides} that a sender never sends for shape {shape}")
    if 1 in shape and _sent_strides(shape, strides) != strides:
        raise WireError(
            f"tensor {index} has strides {strides} that a sender never sends for shape {shape}: a dimension of "
            "size 1 has the stride a contiguous tensor gives it"
        )


def _extent(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """How many bytes from its first element a non-empty tensor reaches."""
    return (sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True)) + 1) * itemsize


def _refuse(tensor: torch.Tensor) -> NoReturn:
    """Raise the error that says why *tensor* cannot travel."""
    if tensor.is_nested:
        raise _Refused("a nested tensor cannot travel; send its components")
    if tensor.layout != torch.strided:
        raise _Refused(f"a tensor of layout {tensor.layout} cannot travel; only strided tensors do")
    if tensor.is_quantized:
        raise _Refused("a quantized tensor cannot travel; send its int_repr() and its quantization")
    if tensor.is_meta:
        raise _Refused("a tensor on the meta device has no data to send")
    if tensor.dtype not in _TENSOR_DTYPE_CODES:
        raise _Refused(f"a tensor of dtype {tensor.dtype} cannot travel")
    if tensor.dim() > _MAX_DIMS:
        raise _Refused(f"a tensor of {tensor.dim()} dimensions cannot travel; the format allows {_MAX_DIMS}")
    raise _Refused(f"a tensor on {tensor.device} cannot travel")


def _dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """``_is_dense``, with the usual one and two dimensions first: it runs for every tensor that arrives."""
    if len(shape) == 1:
        return strides[0] == 1 or shape[0] == 1
    if len(shape) == 2 and strides[1] == 1 and (strides[0] == shape[1] or shape[0] == 1):
        return True
    return _is_dense(shape, strides)


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


def _no_overlap(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether no two elements share memory, by the rule that each stride, in increasing order, passes the
    furthest element that the dimensions of smaller strides reach.

    Every slice of a dense tensor passes, with steps and in any order of
    its dimensions; an ``expand`` does not.  A view that passes reads no
    more elements than its extent holds bytes.
    """
    furthest = 0
    for stride, size in sorted((stride, size) for size, stride in zip(shape, strides, strict=True) if size != 1):
        if stride <= furthest:
            return False
        furthest += stride * (size - 1)
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


def _contiguous(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of *tensor*'s values, copied as integers of its item size, as ``fill`` copies: torch
    has no copy kernel for the sub-byte dtypes, and the bytes of any other travel as they lie."""
    plain = _plain(tensor)
    carrier = _CARRIERS.get(plain.element_size())
    return plain.contiguous() if carrier is None else plain.view(carrier).contiguous()


def _span(tensor: torch.Tensor) -> torch.Tensor:
    """The bytes of the dense *tensor*, as they lie in memory: a view, not a copy (but for lazy bits)."""
    plain = _plain(tensor)
    return plain.as_strided((plain.numel(),), (1,)).view(torch.uint8)


def fill(buffer: torch.Tensor, placements: Iterable[Placement]) -> None:
    """Copy each placed tensor into the ``uint8`` tensor *buffer*, at its offset.

    A dense CPU tensor into a CPU buffer is one copy of its bytes (a slice of ``_MEMORY``), with
    no torch dispatch; anything else is a torch copy.
    """
    if buffer.device.type == "cpu":
        placements = _move_raw(cpu_bytes(buffer), placements)
    for placement in placements:
        source = _plain(placement.tensor)
        typed = buffer.view(source.dtype)
        target = typed.as_strided(
            tuple(source.shape),
            placement.strides or _contiguous_strides(source.shape),
            typed.storage_offset() + placement.offset // source.element_size(),
        )
        carrier = _CARRIERS.get(source.element_size())
        if carrier is None:  # complex128: 16 bytes, and a copy kernel of its own
            target.copy_(source)
        else:
            target.view(carrier).copy_(source.view(carrier))


def cpu_bytes(buffer: torch.Tensor) -> memoryview:
    """The bytes of the contiguous CPU tensor *buffer*, as a flat view; the view does not keep *buffer* alive."""
    address = buffer.data_ptr()
    return _MEMORY[address : address + buffer.nbytes]


def _move_raw(target: memoryview, placements: Iterable[Placement]) -> list[Placement]:
    """Copy the raw placements' bytes into the CPU memory *target*, each at its offset; return the others."""
    others = []
    for placement in placements:
        _, offset, nbytes, _, address, _ = placement
        if address:
            target[offset : offset + nbytes] = _MEMORY[address : address + nbytes]
        else:
            others.append(placement)
    return others


def pack(obj: object, *, skip_fields: Iterable[str] | None = None, allow_pickle: bool = False) -> Packed:
    """The record *obj*, an instance of a dataclass made by ``ZeroCopyFields``, as a header and buffers.

    The first buffer holds the tensors under 64 KiB (a new ``bytearray``),
    each larger tensor is a buffer of its own: a ``memoryview`` of its CPU
    memory, which keeps the tensor alive as long as the view (a GPU tensor
    is copied to the CPU first).  The view is numpy's, so torch refuses to
    resize that storage while the view lives (``resize_`` raises, and leaves
    the tensor with the new shape over the old storage: do not read it after).
    *skip_fields* leaves more fields out, as in ``asdict_zerocopy``.

    A value that is not plain data (see the module's docstring) raises
    ``TypeError`` naming the field, unless *allow_pickle* sends it pickled
    (the receiver must opt in too).  So does a value that does not match its
    field's annotation, and a tensor that cannot travel (sparse, quantized,
    nested, on the meta device).
    """
    if allow_pickle is not False and allow_pickle is not True:
        raise TypeError(f"pack()'s allow_pickle takes True or False, not {allow_pickle!r}")
    if skip_fields is None:
        packed = _pack_usual(obj)
        if packed is not None:
            return packed
    outgoing = pack_outgoing(
        obj, skip_fields, {}, "metakit.wire.pack()", allow_pickle=allow_pickle, own_buffer=PACK_OWN_BUFFER
    )
    (placements,) = outgoing.pools
    (nbytes,) = outgoing.pool_nbytes
    shared = bytearray(nbytes)
    others = _move_raw(memoryview(shared), placements)
    if others:
        fill(torch.frombuffer(shared, dtype=torch.uint8), others)
    own = [
        _memoryview(own.tensor, own.nbytes) if own.raw else _memoryview(own.span().cpu(), own.nbytes)
        for own in outgoing.own
    ]
    return Packed(outgoing.header, [memoryview(shared), *own])


def _pack_usual(obj: object) -> Packed | None:
    """``pack`` of the usual record, by its class's generated ``usual``; ``None`` for any other.

    A record whose class has no codec yet has never been sent: the general
    way checks it is a record, and makes its codec.
    """
    cls = type(obj)
    codec = _codecs.get(id(cls))
    if codec is None or codec.made_for != _made_for(cls):  # _current_codec, written out: every pack asks it
        return None
    encoder = codec.encoder(cls)
    if encoder is None or not encoder.serves(obj):
        return None
    try:
        usual = encoder.usual(obj, PACK_OWN_BUFFER)
        if usual is None:
            return None
        body = _encoder.encode([codec.name, codec.digest, None, usual.values])
    except (AttributeError, OverflowError, UnicodeEncodeError):  # the general way says which field
        return None
    _, parts, _, nbytes, own = usual
    sizes = [nbytes, *[size for _, size in own]]
    header = _table_bytes(sizes, bytes(len(sizes))) + body  # every buffer in lane 0
    shared = memoryview(bytearray().join(parts))  # one copy of each tensor's bytes, in C
    return Packed(header, [shared, *[_memoryview(tensor, size) for tensor, size in own]])


_NUMPY_DTYPES: Final = frozenset([
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32,
    torch.uint64, torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128,
])  # fmt: skip
"""The dtypes whose tensors ``Tensor.numpy()`` takes as they are."""


def _memoryview(tensor: torch.Tensor, nbytes: int) -> memoryview:
    """The *nbytes* bytes of the contiguous CPU *tensor*, all of them, as a flat view that keeps it alive.

    Through numpy, where torch has it: ctypes would make a new array type
    for each size (about 16 µs), and an engine's tensors change size every step.
    """
    plain = tensor.detach() if tensor.requires_grad else tensor
    if plain.dtype not in _NUMPY_DTYPES:  # bfloat16, the float8 types...: its bytes
        plain = plain.view(torch.uint8)
    try:
        array: Any = plain.numpy()  # an ndarray, which exports its buffer (numpy's stubs say so from 3.12 only)
    except RuntimeError:  # torch without numpy
        raw = (ctypes.c_char * nbytes).from_address(tensor.data_ptr())
        raw.owner = tensor  # type: ignore[attr-defined]  # ctypes instances take attributes: the view's life is the tensor's
        return memoryview(raw).cast("B")
    return memoryview(array).cast("B")


# --- the receiver --------------------------------------------------------------


def _header_bytes(header: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    """*header* as bytes that ``len`` and indexing count one by one: a memoryview of wider items or of more
    dimensions, or an object of another bytes-like type, is read as a flat view of its bytes."""
    if type(header) is bytes:
        return header
    try:
        view = memoryview(header)  # held: a bytearray cannot be resized while it is read
        return view if view.format == "B" and view.ndim == 1 and view.c_contiguous else view.cast("B")
    except (TypeError, ValueError) as error:  # not bytes-like, not contiguous, or released
        raise WireError(f"the header is not a contiguous bytes-like object: {error}") from None


def buffer_table(header: bytes | bytearray | memoryview, most: int | None = None) -> list[BufferSpec]:
    """The sizes and lanes of the buffers that travel with *header*, read without reading the rest.

    This part has the same layout in every format.  A table of more than
    *most* buffers is refused before it is read; so is one that breaks the
    sender's rules: lanes 0 and 1 only, and every buffer after the first
    two (the lanes' shared buffers) at least ``PACK_OWN_BUFFER`` bytes, as
    only a large tensor has a buffer of its own.
    """
    sizes, lanes = _table(_header_bytes(header), most)
    return [BufferSpec(nbytes, lane) for nbytes, lane in zip(sizes, lanes, strict=True)]


def _table(header: bytes | bytearray | memoryview, most: int | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``buffer_table``'s sizes and lanes, of a header ``_header_bytes`` made."""
    count = _count(header)
    if most is not None and count > most:
        raise WireError(f"the header lists {count} buffers, more than the {most} that can be given here")
    return _sizes_and_lanes(header, count)


def _sizes_and_lanes(header: bytes | bytearray | memoryview, count: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The sizes and lanes in the table of *header*, which ``buffer_count`` says lists *count* buffers."""
    values = (_TABLES.get(count) or _table_struct(count)).unpack_from(header)
    sizes, lanes = values[3 : 3 + count], values[3 + count :]
    # Buffer 1 is lane 1's shared buffer where it is in lane 1; any other after the first holds one large tensor.
    own = sizes[2:] if count > 1 and lanes[1] else sizes[1:]
    if (lanes and (lanes[0] or max(lanes) > 1)) or (own and min(own) < PACK_OWN_BUFFER):
        raise WireError(
            "the header's buffer table lists a lane other than 0 and 1, buffer 0 (lane 0's shared buffer) in "
            "another lane, or a small buffer of its own"
        )
    return sizes, lanes


def buffer_count(header: bytes | bytearray | memoryview) -> int:
    """How many buffers travel with *header* (read from its first bytes, checked to hold their table)."""
    return _count(_header_bytes(header))


def _count(header: bytes | bytearray | memoryview) -> int:
    """``buffer_count`` of a header ``_header_bytes`` made."""
    try:
        magic, _, count = _TABLE_HEAD.unpack_from(header)
    except struct.error:
        raise WireError("the header is cut short") from None
    if magic != _MAGIC:
        raise WireError("this is not a metakit header")
    if _TABLE_HEAD.size + 9 * count > len(header):
        raise WireError(f"the header lists {count} buffers, but is cut short before their table ends")
    return int(count)


AllowPickle = bool | Collection[str]
"""``unpack``'s *allow_pickle*: ``False``, ``True``, or the ``"module.qualname"`` of each global a pickle may use."""


def unpack(
    header: bytes | bytearray | memoryview, buffers: Sequence[Any], *, allow_pickle: AllowPickle = False
) -> object:
    """The record that ``pack`` turned into *header* and *buffers*.

    *header* is any contiguous bytes-like object, read by its bytes (a
    memoryview of wider items too).  *buffers* are bytes-like objects (``bytearray``, ``memoryview``,
    ``bytes``...) or contiguous 1-D ``uint8`` tensors.  The record's tensors
    are views of them: no copy, as long as a buffer is writable; a read-only
    one (such as ``bytes``) is copied once, since tensors may be written to.
    A buffer that holds tensors of items wider than a byte must start at an
    address that is a multiple of their item size (torch's kernels assume
    it); one that does not is refused.
    A tensor that was on a GPU arrives on this process's current device of
    that kind.

    Nothing that arrives runs code or imports a module (see the module's
    docstring).  Pickled values are refused unless *allow_pickle* is
    ``True`` (trust the peer: globals from modules already imported) or a
    collection of the ``"module.qualname"`` names of the globals a pickle
    may use.

    Raises ``WireError`` when the record cannot be rebuilt here: the bytes do
    not follow the format, no class or more than one class made by
    ``ZeroCopyFields`` bears the name that arrived, the class has other
    fields here, a value does not match its field's annotation, a tensor
    does not lie within its buffer, or ``__init__`` refuses the values.
    *buffers* that are no sequence (``None``, a dict, a set, one bytes-like object) raise ``TypeError``: the
    caller's mistake, not the peer's.
    """
    if type(buffers) is not list and type(buffers) is not tuple and not _a_sequence(buffers):
        raise TypeError(
            f"unpack() takes the buffers that came with the header as a sequence, not {type(buffers).__qualname__}"
        )
    count = len(buffers)
    if (type(header) is bytes or type(header) is bytearray) and count < len(_TABLES):
        record = _unpack_usual(header, buffers)
        if record is not None:
            return record
    return _unpack_general(header, buffers, allow_pickle)


def _a_sequence(buffers: object) -> bool:
    """Whether *buffers* can be a sequence of buffers: indexed by position, and neither a mapping nor bytes itself."""
    kind = type(buffers)
    return (
        hasattr(kind, "__len__")
        and hasattr(kind, "__getitem__")
        and not issubclass(kind, (Mapping, str, bytes, bytearray, memoryview))
    )


def _unpack_general(
    header: bytes | bytearray | memoryview, buffers: Sequence[Any], allow_pickle: AllowPickle
) -> object:
    """``unpack`` of any record, each value and tensor checked as it is read; raises ``WireError`` naming what is
    wrong."""
    header = _header_bytes(header)
    allowed = allowed_globals(allow_pickle)
    count = _count(header)
    if len(buffers) != count:
        raise WireError(f"the header lists {count} buffers, but {len(buffers)} were given")
    sizes, _ = _sizes_and_lanes(header, count)
    sources = [
        _source(index, buffer, nbytes) for index, (buffer, nbytes) in enumerate(zip(buffers, sizes, strict=True))
    ]
    return _read(header, sources, sizes, allowed)


def _unpack_usual(header: bytes | bytearray, buffers: Sequence[Any]) -> object:
    """``unpack`` of the usual record, in one pass; ``None`` for any other, which the general way reads.

    The usual record is what ``pack`` makes of a record that its class's
    generated ``usual`` packs: one lane, every buffer ``bytes``, a
    ``bytearray`` or a flat byte ``memoryview`` of the size the table gives, every
    value read by the class's typed decoder, and every tensor a field's
    value, in the usual spec.  Each check is the general way's; anything
    else, an error included, goes the general way, which says what is wrong.
    Only the class's ``__init__`` is not tried twice: an error it raises is
    the ``WireError`` the general way would raise.
    """
    whole = memoryview(header)  # held: a bytearray cannot be resized while it is read
    held = _usual_buffers(whole, buffers)
    if held is None:
        return None
    sizes, views = held
    read = _usual_values(header, whole, _TABLES[len(buffers)].size)
    if read is None:
        return None
    cls, builder, values = read
    # As the general way: a read-only buffer is copied once, since tensors may be written to.
    sources = [bytearray(view) if view.readonly else view for view in views]
    if not _usual_tensors(values, builder.tensors, sources, sizes):
        return None
    try:
        return builder.call(cls, values)
    except Exception as error:
        raise WireError(f"{cls.__qualname__}(...) raised {_first_line(error)}") from None


class _Named(NamedTuple):
    """The class that the last usual record ``unpack`` read named, and the bytes that named it."""

    start: bytes
    """The body's first bytes, before its values: ``[class, digest, None,`` in msgpack."""
    module: str
    qualname: str
    cls: weakref.ref[type]
    codec: _Codec


_last_named: _Named | None = None
"""An engine receives records of one class step after step: a body that starts with the same bytes as the last
names the same class, while its module still holds that class under that name and its codec is the same.  Then its
values are read at once, without reading the class's name, its digest and, to find where they end, the values
again (a list of 256 ints takes as long to pass over as to read)."""


def _usual_values(header: bytes | bytearray, whole: memoryview, start: int) -> tuple[type, Builder, list[Any]] | None:
    """The class of the usual record whose body lies at *start* of *header* (held by *whole*), its builder, and
    its values as the builder's ``usual`` decoder reads them; else ``None``."""
    named = _named_again(header, whole, start) or _named(whole[start:])
    if named is None:
        return None
    cls, codec, raw = named
    builder = codec.builder(cls)
    if builder is None or builder.usual is None:
        return None
    try:
        return cls, builder, list(builder.usual.decode(raw))
    except Exception:  # msgspec's ValidationError or DecodeError
        return None


def _named_again(header: bytes | bytearray, whole: memoryview, start: int) -> tuple[type, _Codec, memoryview] | None:
    """The class and codec of the usual record whose body lies at *start* of *header* (held by *whole*), and the
    bytes of its values, if the body starts as the last one did (``_last_named``) and names the same class still;
    else ``None``."""
    named = _last_named
    if named is None or not header.startswith(named.start, start):
        return None
    cls = named.cls()
    if (
        cls is None
        or _named_in(sys.modules.get(named.module), named.qualname) is not cls
        or _codecs.get(id(cls)) is not named.codec
        or named.codec.made_for != _made_for(cls)  # _current_codec, written out: every unpack asks it
    ):
        return None
    return cls, named.codec, whole[start + len(named.start) :]


def _named(body: memoryview) -> tuple[type, _Codec, msgspec.Raw] | None:
    """The class and codec of the usual record *body*, and the bytes of its values; else ``None``.  Remembered as
    ``_last_named``."""
    global _last_named  # noqa: PLW0603  # replaced whole, which no other thread can see half done
    try:
        name, digest, positions, raw = _BODY.decode(body)
        module, colon, qualname = name.partition(":")
        cls = resolve(module, qualname) if positions is None and colon else None
    except Exception:  # bytes that are not the format, or no such class: the general way says which
        return None
    codec = None if cls is None else _current_codec(cls)
    if cls is None or codec is None or digest != codec.digest:
        return None
    _last_named = _Named(bytes(body[: len(body) - len(raw)]), module, qualname, weakref.ref(cls), codec)
    return cls, codec, raw


def _usual_buffers(header: memoryview, buffers: Sequence[Any]) -> tuple[tuple[int, ...], list[memoryview]] | None:
    """The buffer sizes that *header*'s table gives, if it is the usual one (one lane, every buffer after the
    first large), and *buffers* held, if they are bytes of those sizes (``bytes``, a ``bytearray`` or a flat
    byte ``memoryview``); else ``None``.

    Each buffer is held by a memoryview of its own, taken before its size
    is read: its export keeps the memory given from being resized, freed or
    unmapped (a ``SharedMemory`` closed, the caller's memoryview released)
    until the size is checked and for as long as a tensor made of it lives (``torch.frombuffer`` keeps what it is
    given, but holds no export of it).
    """
    count = len(buffers)
    table = _TABLES[count]
    if len(header) < table.size:
        return None
    values = table.unpack_from(header)
    if values[:3] != (_MAGIC, FORMAT, count) or any(values[3 + count :]):
        return None
    sizes = values[3 : 3 + count]
    views: list[memoryview] = []
    for buffer, size in zip(buffers, sizes, strict=True):
        view = _held(buffer)
        if view is None or len(view) != size or (views and size < PACK_OWN_BUFFER):
            return None
        views.append(view)
    return sizes, views


def _held(buffer: object) -> memoryview | None:
    """*buffer* as ``_usual_buffers`` holds it: ``bytes``, a ``bytearray`` or a flat byte memoryview, through a
    memoryview of its own; ``None`` for anything else."""
    if type(buffer) is not bytes and type(buffer) is not bytearray and type(buffer) is not memoryview:
        return None
    try:
        view = memoryview(buffer)
    except ValueError:  # a released memoryview: the general way says so
        return None
    return view if view.format == "B" and view.ndim == 1 and view.contiguous else None


def _usual_tensors(values: list[Any], positions: tuple[int, ...], buffers: Sequence[Any], sizes: Sequence[int]) -> bool:
    """Put in *values*, at *positions*, the tensor of each usual spec there, a view of *buffers*; ``False`` at
    the first spec that is not usual or breaks a rule (then the general way reads the header again)."""
    ends = [0] * len(buffers)
    for position in positions:
        spec = values[position]
        if spec is None:
            continue
        try:
            placed = _usual_tensor(spec.data, buffers, sizes, ends, 1) if spec.code == _TENSOR else None
        except WireError:  # at an address its items cannot start at: the general way names the field
            return False
        if placed is None:
            return False
        values[position] = placed[2]
    return True


def _usual_tensor(
    data: bytes | memoryview, sources: Sequence[Any], sizes: Sequence[int], ends: list[int], shared: int
) -> tuple[int, int, torch.Tensor] | None:
    """The buffer, offset and tensor of the usual spec *data*, a view of *sources*; ``None`` if *data* is not a
    usual spec, or breaks a rule of the format (the long form's reading then says which).

    The usual tensor lies on the CPU, contiguous, after the tensor before it
    in its buffer (*ends*, which this updates), inside the bytes given: in
    one of the first *shared* buffers at a multiple of ``ALIGN``, else alone
    at the start of a large buffer of its own.  *sizes* gives each buffer's
    size, or -1 where no usual tensor may lie (a buffer given as a tensor).
    A buffer at an address the tensor's items cannot start at raises
    ``WireError`` (torch's kernels assume aligned elements).
    """
    shape: list[int] | None = None
    if len(data) == _USUAL_SIZE + 4:  # one dimension, the most usual: no list of sizes to make
        code, tag, buffer, offset, count = _USUAL_1D.unpack(data)
        usual_tag = tag == _USUAL_TAGS[1]
    else:
        usual = _USUAL_SPECS.get(len(data))
        if usual is None:
            return None
        code, tag, buffer, offset, *shape = usual.unpack(data)
        usual_tag = tag == _USUAL_TAGS[len(shape)]
        count = math.prod(shape)
    itemsize = _ITEMSIZES[code]
    end = offset + count * itemsize
    if not (
        usual_tag
        and buffer < len(sizes)
        and ends[buffer] <= offset < end <= sizes[buffer]
        and not offset % ALIGN
        and (buffer < shared or (not offset and end >= PACK_OWN_BUFFER))
    ):
        return None
    tensor = _frombuffer(sources[buffer], dtype=_TENSOR_DTYPES[code], count=count, offset=offset)
    if tensor.data_ptr() % itemsize:
        raise WireError(f"buffer {buffer} does not start at an address that is a multiple of {itemsize}")
    ends[buffer] = end
    if shape is not None:
        tensor = tensor.view(*shape) if shape else tensor.view(())  # sizes as arguments: faster than a tuple
    return buffer, offset, tensor


def allowed_globals(allow_pickle: AllowPickle) -> AllowPickle:
    """*allow_pickle* as a receiver uses it: a ``bool``, or a frozenset of names (a ``str`` is refused)."""
    if isinstance(allow_pickle, bool):
        return allow_pickle
    if isinstance(allow_pickle, (str, bytes)) or not isinstance(allow_pickle, Iterable):
        raise TypeError(
            f"allow_pickle takes True, False, or a collection of 'module.qualname' names, not {allow_pickle!r}"
        )
    names = frozenset(allow_pickle)
    strangers = [name for name in names if type(name) is not str or "." not in name]
    if strangers:
        raise TypeError(f"allow_pickle's names must be 'module.qualname' strings, not {strangers[0]!r}")
    unlimited = sorted(names & _UNPICKLERS)
    if unlimited:
        raise ValueError(
            f"allow_pickle lists {unlimited[0]}, which unpickles bytes with no list at all: a pickle could then "
            "call any global; a tensor in a pickled value needs no name (it travels as the record's tensors do)"
        )
    return names


_UNPICKLERS: Final = frozenset({
    "torch.storage._load_from_bytes", "torch.load", "torch.serialization.load",
    "pickle.loads", "pickle.load", "pickle._loads", "pickle._load", "_pickle.loads", "_pickle.load",
})  # fmt: skip
"""The globals that unpickle what they are given with no limit (torch's pickle of a tensor names the first)."""

_READERS: Final = _UNPICKLERS | {
    "torch.serialization._load", "torch.serialization._legacy_load", "marshal.loads", "marshal.load",
    "numpy.load", "numpy.lib.npyio.load", "numpy.lib._npyio_impl.load",
    "numpy.lib.format.read_array", "numpy.lib._format_impl.read_array",  # numpy.load's reader
    "pandas.read_pickle", "pandas.io.pickle.read_pickle", "joblib.load", "joblib.numpy_pickle.load",
    "dill.load", "dill.loads", "dill._dill.load", "dill._dill.loads", "shelve.open",
}  # fmt: skip
"""The functions known to read objects from bytes with no list, by the names they have in their modules: a
pickle may give one any other name (``ForkingPickler.loads`` is ``pickle.loads``), so each is matched by
identity."""


Source = torch.Tensor | memoryview | bytearray
"""A buffer as the receiver reads it: a 1-D ``uint8`` tensor, or writable bytes."""


def _source(index: int, buffer: Any, nbytes: int) -> Source:
    """*buffer* as a ``uint8`` tensor or writable bytes, checked to hold the *nbytes* the header says."""
    if isinstance(buffer, torch.Tensor):
        if buffer.dtype != torch.uint8 or buffer.dim() != 1 or not buffer.is_contiguous():
            raise WireError(f"buffer {index} is a tensor, but not a contiguous 1-D uint8 tensor")
        if buffer.is_meta:
            raise WireError(f"buffer {index} is a tensor on the meta device, which holds no bytes")
        size = buffer.numel()
        source: Source = buffer
    else:
        try:
            view = memoryview(buffer).cast("B")
        except (TypeError, ValueError) as error:  # not bytes-like, not contiguous, or released
            raise WireError(f"buffer {index} is not a bytes-like object or a uint8 tensor: {error}") from None
        size = view.nbytes
        source = bytearray(view) if view.readonly else view
    if size != nbytes:
        raise WireError(f"buffer {index} holds {size} bytes, but the header says {nbytes}")
    return source


def unpack_tensors(
    header: bytes | bytearray | memoryview, buffers: Sequence[Source], allow_pickle: AllowPickle = False
) -> object:
    """``unpack`` for buffers already checked against the table: ``uint8`` tensors, or writable bytes."""
    sizes = [source.numel() if isinstance(source, _Tensor) else len(source) for source in buffers]
    return _read(_header_bytes(header), buffers, sizes, allowed_globals(allow_pickle))


def _read(
    header: bytes | bytearray | memoryview, sources: Sequence[Source], sizes: Sequence[int], allow_pickle: AllowPickle
) -> object:
    _, version, count = _TABLE_HEAD.unpack_from(header)
    if version != FORMAT:
        raise WireError(
            f"a header of format {version} arrived, and this metakit reads only format {FORMAT}: "
            "do both sides run the same version of metakit?"
        )
    # The lanes' shared buffers come first: buffer 0, and buffer 1 if it is lane 1's (a broadcast's).
    shared = 2 if count >= 2 and header[_TABLE_HEAD.size + 8 * count + 1] == 1 else 1
    reader = _Reader(sources, sizes, shared, allow_pickle)
    outer = getattr(_reading, "reader", None)  # an __init__ of a record that unpacks another record
    _reading.reader = reader
    try:
        return reader.record(memoryview(header)[_TABLE_HEAD.size + 9 * count :], "$")
    except _Mismatched as error:  # its path served the records around the value; the caller gets a WireError
        raise WireError(*error.args) from None
    finally:
        _reading.reader = outer


_reading: Final = threading.local()
"""The ``_Reader`` of the header this thread is reading: the one decoder's extension hook works for it."""


def _extension(code: int, data: memoryview) -> Any:
    if code == _TENSOR:
        return _reading.reader.tensor(data)
    return _reading.reader.extension(code, data)


_decoder: Final = msgspec.msgpack.Decoder(ext_hook=_extension)
_ITEMS: Final = msgspec.msgpack.Decoder(list[msgspec.Raw])
"""Reads an array's items, each left unread: no extension hook runs."""
_BODY: Final = msgspec.msgpack.Decoder(tuple[str, int, Any, msgspec.Raw])
"""Reads a record's body, ``[class, digest, names, values]``, leaving its values to be read once the class is known."""


_UNMADE: Final = object()
"""What ``_Reader.made_before`` gives for a record that the reading being replayed never made."""


class _Reader:
    """Reads one header: msgpack into plain values, each tensor a checked view of the buffer it lies in."""

    def __init__(self, sources: Sequence[Source], sizes: Sequence[int], shared: int, allow_pickle: AllowPickle) -> None:
        self.sources = sources
        self.sizes = sizes
        self.shared = shared
        """How many buffers are shared by small tensors, each at a multiple of ``ALIGN``; the rest hold one large
        tensor each, from their start."""
        self.buffers: dict[int, torch.Tensor] = {}
        """The buffers read as ``uint8`` tensors, made when a tensor first needs one."""
        self.allow_pickle = allow_pickle
        self.tensors: list[torch.Tensor] = []
        self.regions: dict[int, tuple[int, int, int, str]] = {}
        """The tensors that sent bytes of their own, by number: their buffer, offset, size and device."""
        self.records: list[object] = []
        """The records inside field values, in the order they were rebuilt."""
        self.pickled: dict[int, object] = {}
        """The values that arrived pickled, by ``id``: what the receiver opted in to, plain data or not."""
        self.nesting = 0
        """How many tuples and records the bytes being read lie in: at most ``MAX_DEPTH``, so that a header
        of a few hundred bytes cannot make this thread's stack as deep as it likes."""
        self.ends = [0] * len(sources)
        """Where the bytes of the last tensor placed in each buffer end: the next one starts there or later."""
        self.usual = [size if type(source) in _BYTES else -1 for source, size in zip(sources, sizes, strict=True)]
        """The size of each buffer given as bytes, where the usual tensor is read without more checks; -1 for
        one given as a tensor."""
        self.typed: dict[tuple[int, str, torch.dtype], tuple[torch.Tensor, int]] = {}
        """Each buffer as elements of each dtype, on each kind of device, and its storage offset in them."""
        self.classes: dict[str, type] = {}
        """The record classes found so far, by the name that arrived."""
        self.live: dict[str, list[type]] | None = None
        """The live record classes by qualified name, listed once a header, when a class must be searched for."""
        self.replaying: tuple[list[object], WireError | None] | None = None
        """While ``locate`` or ``refuse_typed`` reads values again: the records that the reading which failed
        made of them, last first, each handed out again where it was made instead of being made a second time;
        and that reading's error, for the record it could not make (``None``: make the records it did not)."""

    def live_classes(self) -> dict[str, list[type]]:
        if self.live is None:
            self.live = live_classes()
        return self.live

    @staticmethod
    def decode(data: memoryview | bytes) -> Any:
        try:
            return _decoder.decode(data)
        except WireError:
            raise
        except Exception as error:  # msgspec's DecodeError, a RecursionError: bytes that are not the format
            raise WireError(f"the header cannot be read: {_first_line(error)}") from None

    def extension(self, code: int, data: memoryview) -> Any:  # one return per kind of value
        if code == _TENSOR:
            return self.tensor(data)
        if code in {_TUPLE, _RECORD}:
            if self.nesting == MAX_DEPTH:
                raise WireError(f"a value arrived nested in more than {MAX_DEPTH} tuples and records")
            self.nesting += 1
            try:
                return self.nested(code, data)
            finally:
                self.nesting -= 1
        if code == _RECORD_AGAIN:
            if len(data) != _NUMBER.size:
                raise WireError(f"a record is said to arrive again, but its number is not 4 bytes long ({len(data)})")
            number = _NUMBER.unpack(data)[0]
            if number >= len(self.records):
                raise WireError(f"a record is said to be record {number} again, which did not arrive before it")
            return self.records[number]
        if code == _DTYPE:
            dtype = _DTYPES.get(bytes(data).decode("ascii", "replace"))
            if dtype is None:
                raise WireError(f"a torch.dtype arrived that this torch does not have: {bytes(data[:40])!r}")
            return dtype
        if code == _DEVICE:
            return _device(bytes(data))
        if code == _PICKLE:
            return self.unpickle(data)
        raise WireError(f"a value of an unknown kind ({code}) arrived")

    def nested(self, code: int, data: memoryview) -> tuple[Any, ...] | object:
        """A tuple or a record inside a field value."""
        if code == _TUPLE:
            items = self.decode(data)
            if type(items) is not list:
                raise WireError("a tuple arrived that is not an array")
            return tuple(items)
        try:
            record = self.record(data, "a record inside a field value")
        except _Mismatched as error:
            error.fingerprint = _fingerprint(data)  # for the record that holds this one, to say where it lies
            raise
        self.records.append(record)
        return record

    def unpickle(self, data: memoryview) -> Any:
        if self.allow_pickle is False:
            raise WireError(
                "a pickled value arrived, and this receiver does not read pickles: pass allow_pickle=True "
                "(or the names of the globals it may use) only if you trust the sender, since a pickle can run code"
            )
        try:
            extra = len(data) - _pickle_end(data)
            if extra:
                raise WireError(f"a pickled value is followed by {extra} bytes that are not part of it")
            unpickler = _Unpickler if self.allow_pickle is True else _ListedUnpickler
            value = unpickler(data, self.allow_pickle, self.tensor).load()
            self.pickled[id(value)] = value  # kept, so that the id stays its own while the header is read
            return value
        except WireError:
            raise
        except Exception as error:
            raise WireError(f"a pickled value cannot be read: {_first_line(error)}") from None

    def tensor(self, data: memoryview) -> torch.Tensor:
        """The tensor of one spec: the usual one made here, any other by ``placed``."""
        index = len(self.tensors)
        placed = _usual_tensor(data, self.sources, self.usual, self.ends, self.shared)
        if placed is not None:
            buffer, offset, tensor = placed
            self.regions[index] = (buffer, offset, tensor.nbytes, "cpu")
            self.tensors.append(tensor)
            return tensor
        if len(data) < 3:
            raise WireError(f"tensor {index}'s spec is cut short")
        ndim = data[2]
        if ndim > _MAX_DIMS:
            raise WireError(f"tensor {index} has {ndim} dimensions, and the format allows {_MAX_DIMS}")
        size = _SPECS[data[1] & _LAYOUT][ndim].size
        if len(data) != size:
            dimensions = f"{ndim} dimension{'s' * (ndim != 1)}"
            raise WireError(
                f"tensor {index}'s spec is {len(data)} bytes long, not the {size} of its flags and {dimensions}"
            )
        spec = _SPECS[data[1] & _LAYOUT][ndim].unpack(data)
        return self.placed(index, spec, math.prod(spec[6 : 6 + ndim]) * _ITEMSIZES[spec[0]])

    def placed(self, index: int, spec: tuple[int, ...], nbytes: int) -> torch.Tensor:
        """Tensor *index* of any spec, checked against every rule of the format."""
        code, flags, ndim, kind, reference, offset = spec[:6]
        if kind == _SAME:
            return self.same(index, reference, spec)
        shape = spec[6 : 6 + ndim]
        written = flags & _STRIDES
        strides = spec[6 + ndim :] if written else _contiguous_strides(shape)
        dtype = _TENSOR_DTYPES[code]
        if dtype is None or flags & ~_KNOWN_FLAGS or flags >> _DEVICE_SHIFT >= len(_DEVICE_KINDS):
            raise WireError(f"tensor {index} has a dtype code ({code}) or flags ({flags}) that are not in the tables")
        device = _DEVICE_KINDS[flags >> _DEVICE_SHIFT]
        itemsize = dtype.itemsize
        if max(spec) >= _MAX_SIZE or max(strides, default=0) >= _MAX_SIZE:  # those left out too
            raise WireError(f"tensor {index} has a size, stride or offset out of range: {spec[5:]}")
        if not nbytes and (kind != _NEW or reference or offset):
            raise WireError(f"tensor {index} has no elements, so lies in no buffer, but its spec places it")
        if written:
            _check_strides(index, shape, strides, nbytes)
        if not nbytes:
            return self.empty(index, device, dtype, shape, strides, flags)
        if kind == _NEW:
            buffer = reference
            self.check_place(index, buffer, offset, nbytes)
            if written and not _dense(shape, strides):
                raise WireError(f"tensor {index} has strides {strides} that a sender never sends for shape {shape}")
            end = self.ends[buffer] = offset + nbytes
            self.regions[index] = (buffer, offset, nbytes, device)
        else:
            buffer, offset, end = self.view_of(index, kind, reference, offset, device, shape, strides, itemsize)
        if offset % itemsize or end > self.sizes[buffer]:
            raise WireError(
                f"tensor {index} of dtype {dtype} lies at bytes {offset} to {end} of buffer {buffer}, "
                f"which holds {self.sizes[buffer]}: not inside it, or not at a multiple of {itemsize}"
            )
        typed = self.typed.get((buffer, device, dtype))
        if typed is None:
            typed = self._typed(buffer, device, dtype)
        tensor = typed[0].as_strided(shape, strides, typed[1] + offset // itemsize)
        if flags & _REQUIRES_GRAD:
            _require_grad(index, tensor)
        self.tensors.append(tensor)
        return tensor

    def check_place(self, index: int, buffer: int, offset: int, nbytes: int) -> None:
        """Refuse tensor *index*'s own bytes at *offset* of *buffer* unless a sender could have put them there."""
        if buffer >= len(self.sizes):
            raise WireError(f"tensor {index} lies in buffer {buffer}, but the header lists {len(self.sizes)} buffers")
        if offset < self.ends[buffer]:
            raise WireError(f"tensor {index} lies in buffer {buffer}, not after the tensors before it there")
        # In a shared buffer: at a multiple of ALIGN.  In one of its own: at its start, and large.
        if offset % ALIGN if buffer < self.shared else offset or nbytes < PACK_OWN_BUFFER:
            raise WireError(
                f"tensor {index} of {nbytes} bytes lies at byte {offset} of buffer {buffer}: a small tensor shares"
                f" a lane's first buffer at a multiple of {ALIGN}, a large one starts a buffer of its own"
            )

    def buffer(self, index: int) -> torch.Tensor:
        """Buffer *index* as a ``uint8`` tensor."""
        buffer = self.buffers.get(index)
        if buffer is None:
            source = self.sources[index]
            if isinstance(source, _Tensor):
                buffer = source
            elif len(source):
                buffer = torch.frombuffer(source, dtype=torch.uint8)
            else:  # torch.frombuffer refuses an empty buffer
                buffer = torch.empty(0, dtype=torch.uint8)
            self.buffers[index] = buffer
        return buffer

    def same(self, index: int, reference: int, spec: tuple[int, ...]) -> torch.Tensor:
        """The tensor *reference* again: a tensor object that was sent twice."""
        if any(spec[:3]) or spec[5] or len(spec) != 6:
            raise WireError(f"tensor {index} is said to be tensor {reference} again, but its spec says more")
        if reference >= index:
            raise WireError(f"tensor {index} is said to be tensor {reference}, which did not arrive before it")
        self.tensors.append(self.tensors[reference])
        return self.tensors[reference]

    def view_of(  # noqa: PLR0917  # the parts of a spec, already unpacked
        self,
        index: int,
        kind: int,
        reference: int,
        offset: int,
        device: str,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        itemsize: int,
    ) -> tuple[int, int, int]:
        """The buffer, offset and end of a view of the bytes of tensor *reference*, sent before it."""
        if kind != _VIEW:
            raise WireError(f"tensor {index} is of an unknown kind ({kind})")
        region = self.regions.get(reference)
        if region is None:
            raise WireError(f"tensor {index} is said to be a view of tensor {reference}, which sent no bytes")
        buffer, start, parent_nbytes, parent_device = region
        extent = _extent(shape, strides, itemsize)
        if device != parent_device:
            raise WireError(
                f"tensor {index} is said to be a view of tensor {reference}, but lies on another kind of device "
                f"({device}, not {parent_device})"
            )
        if not _no_overlap(shape, strides):
            raise WireError(
                f"tensor {index} is said to be a view of tensor {reference}, but its strides {strides} for shape "
                f"{shape} are not a slice's (in increasing order, each must pass the furthest element the smaller "
                "reach)"
            )
        if offset + extent > parent_nbytes:
            raise WireError(f"tensor {index} is said to be a view of tensor {reference}, but lies outside it")
        return buffer, start + offset, start + offset + extent

    def empty(  # noqa: PLR0917  # the parts of a spec, already unpacked
        self, index: int, device: str, dtype: torch.dtype, shape: tuple[int, ...], strides: tuple[int, ...], flags: int
    ) -> torch.Tensor:
        """A tensor with no elements, which lies in no buffer."""
        # torch warns when it makes a complex32 tensor: made as int32, of the same size, it warns no one.
        made = torch.int32 if dtype is torch.complex32 else dtype
        try:
            tensor = torch.empty_strided(shape, strides, dtype=made, device=local_device(device)).view(dtype)
        except (RuntimeError, TypeError, ValueError):  # sizes whose product does not fit torch's int64
            raise WireError(f"tensor {index} of shape {shape} cannot be made here") from None
        if flags & _REQUIRES_GRAD:
            _require_grad(index, tensor)
        self.tensors.append(tensor)
        return tensor

    def _typed(self, index: int, device: str, dtype: torch.dtype) -> tuple[torch.Tensor, int]:
        """Buffer *index* as *dtype* elements on this process's current *device*: moved there once, if it must be."""
        buffer = self.buffer(index)
        if buffer.device.type != device:
            moved = self.typed.get((index, device, torch.uint8))
            buffer = moved[0] if moved is not None else buffer.to(local_device(device))
            self.typed[index, device, torch.uint8] = (buffer, int(buffer.storage_offset()))
        if buffer.data_ptr() % dtype.itemsize:  # torch's kernels may assume aligned elements
            raise WireError(f"buffer {index} does not start at an address that is a multiple of {dtype.itemsize}")
        try:
            typed = buffer[: buffer.numel() - buffer.numel() % dtype.itemsize].view(dtype)
        except RuntimeError as error:  # an offset in its storage that the dtype cannot take
            raise WireError(f"buffer {index} cannot hold {dtype} elements: {error}") from None
        self.typed[index, device, dtype] = (typed, int(typed.storage_offset()))
        return self.typed[index, device, dtype]

    def record(self, data: memoryview, where: str) -> object:
        """Rebuild one record from its body, the msgpack array ``[class, digest, names, values]``."""
        try:
            name, digest, positions, raw = _BODY.decode(data)
        except msgspec.ValidationError:
            raise WireError(f"{where}: a record's body is not [class, digest, names, values]") from None
        except Exception as error:  # msgspec's DecodeError, a RecursionError: bytes that are not the format
            raise WireError(f"the header cannot be read: {_first_line(error)}") from None
        module, colon, qualname = name.partition(":")
        if not colon:
            raise WireError(f"{where}: the class name {name[:200]!r} is not module:qualname")
        cls = self.classes.get(name)
        if cls is None:
            cls = self.classes[name] = resolve(module, qualname, self.live_classes)
        codec = _codec(cls)
        if digest != codec.digest:
            raise WireError(
                f"{qualname} has the fields {codec.fields} here, {_omitted(codec)}, but the sender's differ: "
                "do both sides run the same code?"
            )
        builder = codec.builder(cls) if positions is None else None
        if builder is not None:
            return self.typed_record(builder, raw, cls, where)
        names = codec.default_names if positions is None else self._names(codec, positions, qualname)
        return self.general_record(cls, codec, names, raw, where)

    def general_record(self, cls: type, codec: _Codec, names: tuple[str, ...], raw: msgspec.Raw, where: str) -> object:
        """Rebuild a record of *cls* whose fields *names* travel, each value checked and set one by one."""
        qualname = cls.__qualname__
        before = self.mark()
        try:
            values = _one_per_name(self.decode(raw), names, cls, where)
        except _Mismatched as error:
            raise _inside(error, raw, names, cls) from None
        except WireError as error:
            raise self.locate(error, before, raw, names, cls) from None
        for field_name, value in zip(names, values, strict=True):
            _field(cls, field_name, value)
        if self.replaying is not None and (made := self.made_before()) is not _UNMADE:
            return made
        arguments = dict(zip(names, values, strict=True))
        later = [name for name in names if name not in codec.init] if codec.later else ()
        for name in later:
            del arguments[name]
        try:
            record = cls(**arguments)
        except Exception as error:
            raise WireError(f"{qualname}(...) raised {_first_line(error)}") from None
        for name in later:
            # Frozen classes refuse setattr; their own __init__ uses this too.
            object.__setattr__(record, name, values[names.index(name)])
        for name in codec.unset:
            if name not in names and not hasattr(record, name):
                raise WireError(
                    f"{qualname}: the field {name!r} (init=False, with no default) did not arrive, and "
                    f"{qualname}.__post_init__ did not set it"
                )
        return record

    def typed_record(self, builder: Builder, raw: msgspec.Raw, cls: type, where: str) -> object:
        """A record of *cls* whose values its typed decoder reads; any it refuses are read again the general way."""
        before = self.mark()
        try:
            values = builder.values.decode(raw)
        except msgspec.ValidationError:
            self.refuse_typed(builder, raw, cls, where, before)
            return self.general_record(cls, _codec(cls), builder.names, raw, where)  # if typed reading was stricter
        except _Mismatched as error:
            raise _inside(error, raw, builder.names, cls) from None
        except WireError as error:
            raise self.locate(error, before, raw, builder.names, cls) from None
        except Exception as error:  # msgspec's DecodeError, a RecursionError: bytes that are not the format
            raise WireError(f"the header cannot be read: {_first_line(error)}") from None
        if self.replaying is not None and (made := self.made_before()) is not _UNMADE:
            return made
        try:
            return builder.build(cls, values, _field)
        except _Mismatched:
            raise
        except Exception as error:
            raise WireError(f"{cls.__qualname__}(...) raised {_first_line(error)}") from None

    def refuse_typed(
        self, builder: Builder, raw: msgspec.Raw, cls: type, where: str, mark: tuple[int, list[int], int]
    ) -> None:
        """Raise the general way's error for the values of *cls* that the typed reading refused; reading stands
        at *mark* again when it returns.

        As in ``locate``, the values are read again in order from *mark*, so
        that a value can name a tensor or a record that one before it brought,
        and a record made in the typed reading is handed out again, not made a
        second time; one in the value it refused, which it never read, is made
        now.  The first value that does not match raises; if none does (the
        typed reading was stricter than this one), this returns, and the
        general way reads them.
        """
        unchecked = {checked.position for checked in builder.checked}
        try:
            with self.replay(mark, None):
                try:
                    items: object = _ITEMS.decode(raw)
                except msgspec.ValidationError:
                    items = None  # not an array
                values = _one_per_name(items, builder.names, cls, where)
                for position, (name, item) in enumerate(zip(builder.names, values, strict=True)):
                    try:
                        value = self.decode(item)
                    except _Mismatched:
                        raise
                    except WireError as error:
                        raise _Mismatched.at(cls, name, error) from None
                    if position not in unchecked:
                        _field(cls, name, value)
        finally:
            self.rewind(mark)

    def locate(
        self, error: WireError, mark: tuple[int, list[int], int], raw: msgspec.Raw, names: tuple[str, ...], cls: type
    ) -> WireError:
        """*error*, raised while the values *raw* of a *cls* record were read, as the error of the field that raised it.

        Reading stands at *mark* again, and each value is read on its own
        until one raises: the same error, now named by its field.  A record
        made in the first reading is not made again (its ``__init__`` runs once).
        """
        with self.replay(mark, error):
            try:
                items = _ITEMS.decode(raw)
            except Exception:  # not an array of values: no field to name
                return error
            for name, item in zip(names, items, strict=False):
                try:
                    self.decode(item)
                except _Mismatched:
                    return error
                except WireError as again:
                    return _Mismatched.at(cls, name, again)
            return error

    @contextlib.contextmanager
    def replay(self, mark: tuple[int, list[int], int], error: WireError | None) -> Iterator[None]:
        """Read again from *mark*: each record made since is handed out again where it was made (see
        ``replaying``, which *error* completes)."""
        made = self.records[mark[2] :]
        self.rewind(mark)
        outer, self.replaying = self.replaying, (made[::-1], error)
        try:
            yield
        finally:
            self.replaying = outer

    def made_before(self) -> object:
        """The record that the reading which failed made here; where it made none, its error, or ``_UNMADE``
        if it has none (``refuse_typed``: the record is made now, once)."""
        assert self.replaying is not None  # only while locate or refuse_typed reads again
        made, error = self.replaying
        if made:
            return made.pop()
        if error is None:  # a value the typed reading refused without reading it
            return _UNMADE
        raise error  # the reading failed making this one: nothing was made after it

    def mark(self) -> tuple[int, list[int], int]:
        """Where reading stands: the tensors and records read so far, and where each buffer's bytes are taken to."""
        return len(self.tensors), list(self.ends), len(self.records)

    def rewind(self, mark: tuple[int, list[int], int]) -> None:
        """Forget what was read since *mark*."""
        tensors, ends, records = mark
        for index in range(tensors, len(self.tensors)):
            self.regions.pop(index, None)
        del self.tensors[tensors:], self.records[records:]
        self.ends[:] = ends

    @staticmethod
    def _names(codec: _Codec, positions: object, qualname: str) -> tuple[str, ...]:
        if type(positions) is not list or not all(type(p) is int and 0 <= p < len(codec.fields) for p in positions):
            raise WireError(f"{qualname}: the fields that travel are not a list of field numbers")
        names = tuple(codec.fields[p] for p in positions)
        if len(set(names)) != len(names):
            twice = next(name for index, name in enumerate(names) if name in names[:index])
            raise WireError(f"{qualname}: the field {twice!r} arrived twice")
        strangers = [name for name in names if name not in codec.travelling]
        if strangers:
            raise WireError(f"{qualname}: the field {strangers[0]!r} never travels (an OMIT field), but arrived")
        return names


def _omitted(codec: _Codec) -> str:
    """Which fields of *codec*'s class are ``OMIT``, as a message says it."""
    omitted = [name for name in codec.fields if name not in codec.travelling]
    return f"with OMIT on {', '.join(map(repr, omitted))}" if omitted else "none of them OMIT"


def _one_per_name(values: object, names: tuple[str, ...], cls: type, where: str) -> list[Any]:
    """*values*, as they arrived for a record of *cls*; ``WireError`` unless they are a list of one per name."""
    if type(values) is not list:
        raise WireError(f"{where}: a record's body is not [class, digest, names, values]")
    if len(values) != len(names):
        raise WireError(f"{cls.__qualname__}: {len(names)} fields travel, but {len(values)} values arrived")
    return values


class _Mismatched(WireError):
    """A field value that is not plain data, does not match the field's annotation, or cannot be read.

    Its *reason* names the value's *path* in the record of class *qualname*
    (``$.name``).  A record inside another one's value sets *fingerprint*,
    the ``_fingerprint`` of its bytes, on the way out, so that the record that
    holds it can say where it lies (``$.inner.name``), as msgspec would.
    """

    def __init__(self, qualname: str, reason: str, path: str) -> None:
        super().__init__(f"{qualname}: {reason}")
        self.reason = reason
        self.path = path
        self.fingerprint: tuple[int, bytes] | None = None

    @classmethod
    def at(cls, record: type, name: str, error: WireError) -> _Mismatched:
        """*error*, raised while the value of the field *name* of a *record* was read, naming that field."""
        path = f"$.{name}"
        return cls(record.__qualname__, f"{error} - at `{path}`", path)

    def within(self, qualname: str, place: str) -> _Mismatched:
        """This error as the record of class *qualname* tells it: the value lies at *place* (``$.inner``) there."""
        path = place + self.path[1:]
        return _Mismatched(qualname, self.reason.replace(f"`{self.path}`", f"`{path}`", 1), path)


def _field(cls: type, name: str, value: object) -> None:
    """Raise ``WireError`` unless *value*, which arrived for the field *name* of *cls*, may be its value."""
    try:
        plain = type(value) not in _SUSPECT or _plain_data(value, MAX_DEPTH, _reading.reader.pickled)
    except _TooDeepArrived:
        raise _Mismatched(
            cls.__qualname__, f"the value at `$.{name}` is nested more than {MAX_DEPTH} levels deep", f"$.{name}"
        ) from None
    if not plain:
        what, path = _not_plain_data(value, f"$.{name}", _reading.reader.pickled)
        raise _Mismatched(cls.__qualname__, what, path)
    checks = _codec(cls).checks
    check = checks.checks.get(name)
    if check is None:  # the class got other fields while the record was read
        what = f"{cls.__qualname__} changed while the record was read: {name!r} is no field of it now"
        raise _Mismatched(cls.__qualname__, what, f"$.{name}")
    try:
        if not check(value):
            raise _Mismatched(cls.__qualname__, *mismatch_at(checks, name, value))
    except RecursionError:  # a recursive annotation on a pickled value that holds itself, or is too deep
        reason = f"the value at `$.{name}` is nested too deep to check, or holds itself"
        raise _Mismatched(cls.__qualname__, reason, f"$.{name}") from None


def _inside(error: _Mismatched, raw: msgspec.Raw, names: tuple[str, ...], cls: type) -> _Mismatched:
    """*error*, raised while the values *raw* of a *cls* record were read, as that record tells it.

    From a record inside one of them, its path becomes the path from this
    record; one of this record's own is as it was.
    """
    place = None if error.fingerprint is None else _place_of(error.fingerprint, raw, names)
    return error if place is None else error.within(cls.__qualname__, place)


def _fingerprint(body: memoryview) -> tuple[int, bytes]:
    """What tells a record's bytes *body* from others: its size and a digest of them.

    Not a copy: an error passes it out through every record that holds the
    one it came from, and a copy at each level would hold dozens of times
    the header.
    """
    return len(body), hashlib.sha256(body).digest()  # sha256 is done in hardware on most CPUs: the fastest here


def _place_of(fingerprint: tuple[int, bytes], raw: msgspec.Raw, names: tuple[str, ...]) -> str | None:
    """Where the record whose bytes have the *fingerprint* lies in the values *raw* of fields *names*:
    ``$.name[2]``.

    The values are read again with no record made and no tensor placed:
    each record is its bytes, and the first with these bytes is the one
    (it was read first).  ``None`` if none is.
    """
    found = object()
    size = fingerprint[0]

    def extension(code: int, data: memoryview) -> object:
        if code == _RECORD:
            return found if len(data) == size and _fingerprint(data) == fingerprint else None
        if code == _TUPLE:
            items = reading.decode(data)
            return tuple(items) if type(items) is list else None
        return None

    reading = msgspec.msgpack.Decoder(ext_hook=extension)
    try:
        values = reading.decode(raw)
        for name, value in zip(names, values if type(values) is list else (), strict=False):
            inside = _path_to(value, found)
            if inside is not None:
                return f"$.{name}{inside}"
    except Exception:  # bytes read once already; a value nested too deep to walk
        return None
    return None


def _path_to(value: object, found: object) -> str | None:
    """The path from *value* to the object *found* inside it (``""``, ``[2]``, ``['key'][0]``), or ``None``."""
    if value is found:
        return ""
    items: Iterable[tuple[object, object]] = ()
    if type(value) is list or type(value) is tuple:
        items = enumerate(value)
    elif type(value) is dict:
        items = value.items()
    for key, item in items:
        inside = _path_to(item, found)
        if inside is not None:
            return f"{key_step(key)}{inside}"
    return None


def _require_grad(index: int, tensor: torch.Tensor) -> None:
    if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise WireError(f"tensor {index} is said to require grad, but its dtype {tensor.dtype} cannot")
    tensor.requires_grad_()


def _plain_data(value: object, room: int, pickled: Mapping[int, object]) -> bool:
    """Whether *value* holds only what ``pack`` sends, as far as msgpack alone could say otherwise.

    msgpack allows dict keys of any type, and msgspec reads its timestamp
    extension as a ``datetime`` by itself; nothing else that it reads can be
    other than plain data.  The usual list, of numbers, is looked at in C.
    Lists, tuples and dicts nested more than *room* levels deep raise
    ``_TooDeepArrived``, before the walk goes deeper than that.  A value
    that arrived *pickled* (a ``datetime`` too) is what the receiver opted in to.
    """
    if pickled and id(value) in pickled:
        return True
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return kind is not datetime.datetime
    if room == 0:
        raise _TooDeepArrived
    if kind is dict:
        mapping = cast("dict[object, object]", value)
        if not _KEYS.issuperset(map(type, mapping)):
            return False
        value = mapping.values()
    items = cast("Iterable[object]", value)
    return _SUSPECT.isdisjoint(map(type, items)) or all(_plain_data(item, room - 1, pickled) for item in items)


def _not_plain_data(value: object, path: str, pickled: Mapping[int, object]) -> tuple[str, str]:
    """What in *value*, which ``_plain_data`` refused, is not plain data (a message), and its path from *path*."""
    kind = type(value)
    if kind is datetime.datetime:
        return f"a msgpack timestamp at `{path}` is not plain data", path
    if kind is dict:
        mapping = cast("dict[object, object]", value)
        for key in mapping:
            if type(key) not in _KEYS:
                message = f"a dict key of type `{type_name(key)}` in `{path}` is not plain data (keys are str or int)"
                return message, path
        items: Iterable[tuple[str, object]] = ((path + key_step(key), item) for key, item in mapping.items())
    else:
        items = ((f"{path}[{index}]", item) for index, item in enumerate(cast("Iterable[object]", value)))
    for place, item in items:
        if type(item) in _SUSPECT and not _plain_data(item, MAX_DEPTH, pickled):
            return _not_plain_data(item, place, pickled)
    raise AssertionError(f"{path} holds only plain data")  # pragma: no cover  # _plain_data said otherwise


class _TooDeepArrived(Exception):
    """A field value of lists, tuples and dicts nested more than ``MAX_DEPTH`` levels deep."""


_KEYS: Final = frozenset({str, int})
_SUSPECT: Final = frozenset({dict, list, tuple, datetime.datetime})


@functools.lru_cache(maxsize=64)  # a header may name one device thousands of times; what it names never changes
def _device(text: bytes) -> torch.device:
    """The ``torch.device`` that *text*, as ``str(device)`` wrote it, names."""
    try:
        decoded = text.decode("ascii")
    except UnicodeDecodeError:
        decoded = ""
    if not _DEVICE_TEXT.fullmatch(decoded):
        raise WireError(f"a torch.device arrived that is not one: {text[:40]!r}")
    try:
        with warnings.catch_warnings():  # torch warns of old kinds ("mkldnn"); showing it would read a file
            warnings.simplefilter("ignore")
            device = torch.device(decoded)
    except RuntimeError:
        raise WireError(f"a torch.device arrived that this torch does not know: {decoded!r}") from None
    if str(device) != decoded:  # an index past torch's, which it wraps: "cuda:256" reads as cuda:0
        raise WireError(f"a torch.device arrived whose index this torch cannot hold: {decoded!r}")
    return device


class _Globals:
    """How the receiver's unpicklers read *data* and find a global: only one that is listed and already
    imported."""

    def __init__(self, data: memoryview, allowed: AllowPickle, tensor: Callable[[memoryview], torch.Tensor]) -> None:
        self.stream = io.BytesIO(data)
        super().__init__(self.stream)  # type: ignore[call-arg]  # the unpickler's, next in the MRO
        self.allowed = allowed
        self.tensor = tensor
        """Reads a tensor's spec as the record's reader does (``_Reader.tensor``)."""

    def persistent_load(self, pid: object) -> torch.Tensor:
        """A tensor in the pickled value: its spec, read as any tensor of the record is."""
        if type(pid) is not bytes:
            raise WireError(f"a pickled value holds a persistent id that is no tensor's spec: a {type(pid).__name__}")
        return self.tensor(memoryview(pid))

    def find_class(self, module_name: str, global_name: str, /) -> Any:
        name = f"{module_name}.{global_name}"
        if self.allowed is not True and name not in self.allowed:  # type: ignore[operator]
            raise WireError(f"a pickled value refers to {_shown(name)}, which allow_pickle does not list")
        if module_name not in sys.modules:
            raise WireError(
                f"a pickled value refers to {_shown(name)}, but {_shown(module_name)} is not imported "
                "here, and metakit never imports a module named on the wire: import it before receiving"
            )
        sys.audit("pickle.find_class", module_name, global_name)
        # Read from the namespaces' dicts, as a record's class is: a module's
        # ``__getattr__`` (torch's lazy submodules) would import modules.
        found = _named_in(sys.modules[module_name], global_name)
        if found is None:
            raise WireError(f"a pickled value refers to {_shown(name)}, which its module does not define")
        return found


class _Unpickler(_Globals, pickle.Unpickler):
    """Reads a pickled value from a peer the receiver trusts (``allow_pickle=True``); never imports a module."""


class _ListedUnpickler(_Globals, pickle._Unpickler):  # the stdlib's own reference unpickler
    """Reads a pickled value that may use only the globals the receiver listed, and may not change them.

    A pickle that may only use some globals could still change one of them
    in place, for the rest of the receiver's life: ``BUILD`` on a function sets
    its ``__defaults__``, on a class its methods, and ``SETITEM`` or
    ``APPEND`` on a dict or list changes it.  The stdlib's Python unpickler
    (slower than its C one, which has no hook per opcode) refuses each such
    opcode whose target is a global it found.
    """

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)

    def __init__(self, data: memoryview, allowed: AllowPickle, tensor: Callable[[memoryview], torch.Tensor]) -> None:
        super().__init__(data, allowed, tensor)
        self.found: dict[int, tuple[object, str]] = {}
        """The globals found so far, and their names, by identity: each once, however often a pickle
        names it (a chain of a global's instances names it at every link)."""

    def find_class(self, module_name: str, global_name: str, /) -> Any:
        found = super().find_class(module_name, global_name)
        name = f"{module_name}.{global_name}"
        if _unpickles(found):  # by what it is: one object has many names (ForkingPickler.loads is pickle.loads)
            raise WireError(
                f"a pickled value refers to {_shown(name)}, which unpickles bytes with no list at all: "
                "allow_pickle's list cannot let it through"
            )
        if isinstance(found, ZeroCopyFields) and is_dataclass(found):
            # A pickle would make the record without its __init__, OMIT fields and all.
            raise WireError(
                f"a pickled value refers to the record class {_shown(name)}: a record travels by its own rules, "
                "never pickled, and allow_pickle's list cannot let one through"
            )
        self.found.setdefault(id(found), (found, name))
        return found

    def get_extension(self, code: int) -> None:
        """The global that copyreg's extension registry names by *code* (opcodes ``EXT1``, ``EXT2``, ``EXT4``),
        found as any other global is: the stdlib's way hands out what its cache holds, unlisted and unseen."""
        key = copyreg._inverted_registry.get(code)  # type: ignore[attr-defined]  # the stdlib's own reader uses it
        if key is None:
            raise WireError(f"a pickled value names the extension code {code}, which copyreg does not register here")
        self.append(self.find_class(*key))  # type: ignore[attr-defined]  # the stdlib's unpickler's

    def unchanged(self, target: object, opcode: bytes) -> None:
        """Refuse *opcode* if it would change *target*, a global of this process, an object a call handed out
        that something else holds too, or a tensor."""
        found = self.found.get(id(target))  # kept in the dict, a global's id is its own
        if found is not None:
            raise WireError(
                f"a pickled value would change {_shown(found[1])} in place (opcode {opcode!r}): "
                "allow_pickle lets a pickle use the globals it lists, never change what this process holds"
            )
        if isinstance(target, torch.Tensor):  # BUILD is Tensor.__setstate__: set_() to any place in any storage
            raise WireError(
                f"a pickled value would change a tensor in place (opcode {opcode!r}): a tensor arrives as its spec "
                "says, checked, and a pickle may not move it"
            )


def _unpickles(found: object) -> bool:
    """Whether *found* is one of the functions or classes that unpickle (or unmarshal) what they are given:
    an ``Unpickler`` class, or one of ``_READERS`` where its module is imported (looked up with no
    ``__getattr__`` run)."""
    if isinstance(found, type):
        return issubclass(found, (pickle.Unpickler, pickle._Unpickler))
    if found is None:  # what a module lacks reads as None below
        return False
    for name in _READERS:
        module_name, _, attribute = name.rpartition(".")
        module = sys.modules.get(module_name)
        if module is not None and MODULE_DICT(module).get(attribute) is found:
            return True
    return False


def _guarded(opcode: bytes, target: Callable[[Any], object]) -> Callable[[Any], None]:
    """The stdlib's loader of *opcode*, once the object it changes, ``target(unpickler)``, is no global."""
    load = _PYTHON_LOADERS[opcode[0]]

    def guarded(unpickler: _ListedUnpickler) -> None:
        unpickler.unchanged(target(unpickler), opcode)
        load(unpickler)

    return guarded


def _build(unpickler: Any) -> None:  # a _ListedUnpickler, whose stack typeshed does not declare
    """The stdlib's ``BUILD``, once neither the instance nor the ``__dict__`` it writes into is kept from change;
    and refused after, if it made such an object the instance's ``__dict__`` (slot state ``{"__dict__": D}``), which
    a second ``BUILD``, or any attribute set on the value once it arrived, would then write into."""
    instance = unpickler.stack[-2]
    unpickler.unchanged(instance, pickle.BUILD)
    unpickler.unchanged(_dict_of(instance), pickle.BUILD)
    _PYTHON_LOADERS[pickle.BUILD[0]](unpickler)
    unpickler.unchanged(_dict_of(instance), pickle.BUILD)


def _dict_of(instance: object) -> object:
    """The ``__dict__`` of *instance*, the dict that ``BUILD`` writes its state into; ``None`` where it has none."""
    try:
        return object.__getattribute__(instance, "__dict__")
    except Exception:  # slots, or a listed class's own __dict__ that raises
        return None


def _held_too(opcode: bytes) -> Callable[[Any], None]:
    """The stdlib's loader of *opcode*, which calls a global and pushes what it returns; if that is held by
    something else too (an enum's member, an instance a class hands out to every caller), it is kept from
    change as a global is."""
    load = _PYTHON_LOADERS[opcode[0]]

    def checked(unpickler: Any) -> None:  # a _ListedUnpickler, whose stack typeshed does not declare
        load(unpickler)
        if _references(unpickler.stack) > _ALONE:
            made = unpickler.stack[-1]
            unpickler.found.setdefault(id(made), (made, "what a call returned (something else holds it too)"))

    return checked


def _references(stack: list[object]) -> int:
    """How many references the object on top of *stack* has, the stack's and this call's included."""
    return sys.getrefcount(stack[-1])


_ALONE: Final = _references([object()])
"""What ``_references`` counts for an object that only the stack holds: read as it reads, on this Python."""

_PYTHON_LOADERS: Final[dict[int, Callable[[Any], None]]] = pickle._Unpickler.dispatch
_ListedUnpickler.dispatch.update(
    {
        opcode[0]: _held_too(opcode)
        for opcode in (pickle.REDUCE, pickle.NEWOBJ, pickle.NEWOBJ_EX, pickle.OBJ, pickle.INST)
    }
)
# What each opcode that changes an object in place changes: an object on the stack, or the one below its mark.
_ListedUnpickler.dispatch.update({
    pickle.BUILD[0]: _build,
    pickle.SETITEM[0]: _guarded(pickle.SETITEM, lambda unpickler: unpickler.stack[-3]),
    pickle.APPEND[0]: _guarded(pickle.APPEND, lambda unpickler: unpickler.stack[-2]),
    pickle.SETITEMS[0]: _guarded(pickle.SETITEMS, lambda unpickler: unpickler.metastack[-1][-1]),
    pickle.APPENDS[0]: _guarded(pickle.APPENDS, lambda unpickler: unpickler.metastack[-1][-1]),
    pickle.ADDITEMS[0]: _guarded(pickle.ADDITEMS, lambda unpickler: unpickler.metastack[-1][-1]),
})  # fmt: skip


def _pickle_end(data: memoryview) -> int:
    """Where the pickle in *data* ends: after its ``STOP``, read by the stdlib's opcode parser, which runs
    nothing.  (The unpicklers read a frame whole, so bytes after ``STOP`` in its last frame go unseen.)"""
    stream = io.BytesIO(data)
    for _ in pickletools.genops(stream):
        pass
    return stream.tell()


_MOST_SHOWN: Final = 200
"""How many characters of a name that arrived an error message shows."""


def _shown(text: str) -> str:
    """*text*, a name that arrived, as an error message shows it: one printable line, cut short."""
    return printable(text[:_MOST_SHOWN]) + ("..." if len(text) > _MOST_SHOWN else "")


def _first_line(error: BaseException) -> str:
    """``describe(error)``'s first line, printable and cut short: to some messages torch appends its C++
    backtrace, which holds this process's addresses, and a message may quote a value that arrived (as long
    as its header, holding control characters that would forge lines in a log)."""
    line = printable(describe(error).partition("\n")[0])
    return line if len(line) <= _MOST_LINE else f"{line[:_MOST_LINE]}..."


_MOST_LINE: Final = 1000


def local_device(kind: str) -> torch.device:
    """This process's current device of the kind *kind* (``"cuda"``: ``torch.cuda.current_device()``)."""
    if kind == "cpu":
        return torch.device("cpu")
    module = getattr(torch, kind, None)
    current = getattr(module, "current_device", None)
    if current is None or not getattr(module, "is_available", lambda: False)():
        raise WireError(f"a tensor on a {kind} device arrived, but this process has no {kind} device")
    return torch.device(kind, current())


def resolve(module: str, qualname: str, live: Callable[[], Mapping[str, list[type]]] | None = None) -> type:
    """The one live dataclass made by ``ZeroCopyFields`` named *module*.*qualname*.

    A module may be known by two names, so the module objects are compared,
    not only their names.  A process started by ``multiprocessing`` with
    ``spawn`` runs the main script as ``__mp_main__`` and lists it as
    ``__main__`` too; in any other process, importing ``multiprocessing``
    (torch does) lists ``__main__`` as ``__mp_main__`` too.

    A class that its module's namespace holds under its qualified name (read
    from the namespaces' dicts, with no import and no ``__getattr__``) is
    that class, as for pickle; only the others (a class defined in a
    function) are searched for among all live classes, as *live* gives them
    (``live_classes`` by default), which costs time in proportion to their number.
    """
    home = sys.modules.get(module)
    named = _named_in(home, qualname)
    if issubclass(type(named), ZeroCopyFields) and named.__qualname__ == qualname and is_dataclass(named):  # type: ignore[attr-defined]
        return named  # type: ignore[return-value]
    found = [
        cls
        for cls in (live or live_classes)().get(qualname, ())
        if (cls.__module__ == module or (home is not None and sys.modules.get(cls.__module__) is home))
        and is_dataclass(cls)
    ]
    replacing = {id(own) for cls in found if "__slots__" in cls.__dict__ and (own := _fields_of(cls)) is not None}
    found = [cls for cls in found if not _is_replaced(cls, replacing)]
    shown = printable(f"{module[:200]}.{qualname[:200]}")
    if not found:
        raise WireError(
            f"no dataclass made by ZeroCopyFields named {shown} is alive here: import the "
            "module that defines it before receiving (metakit never imports a module named on the wire)"
        )
    if len(found) > 1:
        raise WireError(
            f"{len(found)} dataclasses made by ZeroCopyFields are named {shown} here "
            "(defined in a function that ran more than once?), and nothing tells which one the sender meant"
        )
    return found[0]


def live_classes() -> dict[str, list[type]]:
    """The live dataclasses made by ``ZeroCopyFields``, by qualified name."""
    classes: dict[str, list[type]] = {}
    for cls in zerocopy_classes():
        classes.setdefault(QUALNAME(cls), []).append(cls)  # type's own: no metaclass's code runs
    return classes


def _named_in(module: object, qualname: str) -> object:
    """What *module*'s namespace holds under the dotted *qualname*, or None.

    Only namespaces are read: the module's dict, then the dicts of the
    classes on the way, each through the descriptor of its kind, so that
    no name from the wire runs an object's ``__getattr__`` or property.
    """
    if not issubclass(type(module), types.ModuleType):
        return None
    first, dot, rest = qualname.partition(".")
    found = MODULE_DICT(module).get(first)
    for part in rest.split(".") if dot else ():
        if not issubclass(type(found), type):
            return None
        found = CLASS_DICT(found).get(part)
    return found


def _is_replaced(cls: type, replacing: set[int]) -> bool:
    """Whether ``@dataclass(slots=True)`` replaced *cls* by a class whose fields' dict has its ``id`` in *replacing*.

    That decorator builds a new class from the old one's namespace, and the
    old class lives on until it is collected.  Both hold the very same
    ``__dataclass_fields__`` dict; the new one, unlike the old, has
    ``__slots__`` of its own.
    """
    own = _fields_of(cls)
    return own is not None and "__slots__" not in cls.__dict__ and id(own) in replacing


def _fields_of(cls: type) -> object:
    """The ``__dataclass_fields__`` dict that *cls* holds itself, or None."""
    return cls.__dict__.get("__dataclass_fields__")
