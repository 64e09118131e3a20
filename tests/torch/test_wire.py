"""``metakit.wire``: what travels of a record, and ``pack``/``unpack`` in one process and between two.

The records are written in the shapes of real engine records: a FlashInfer
style metadata whose ``asdict_zerocopy`` override leaves its kernel wrappers
out, a GPU model input whose ``__getstate__`` drops an async callback, and a
V1 style common attention metadata holding tensors and their CPU twins.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import enum
import gc
import multiprocessing
import re
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, make_dataclass
from multiprocessing.connection import Connection
from typing import Any, Dict, Final, List, Optional  # noqa: UP035  # vLLM V0's spelling, on purpose

import numpy as np
import pytest
import torch
from engine_records import KernelWrapper, ModelInput, WrapperMetadata

from metakit import OMIT, SkipFieldsError, ZeroCopy, ZeroCopyFields, wire, zerocopy_classes
from metakit.examples.engine import example_records, make_flash_attention_metadata
from metakit.wire import WireError


@dataclass
class CommonAttentionMetadata(ZeroCopy):
    """V1's shape: the start locations on the device and their CPU twin, plus a view of a parent tensor."""

    query_start_loc: torch.Tensor
    query_start_loc_cpu: torch.Tensor
    seq_lens: torch.Tensor
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    slot_mapping: torch.Tensor
    decode_slot_mapping: torch.Tensor


@dataclass
class Derived(ZeroCopy):
    """A required field, a defaulted one, and one that ``__post_init__`` makes."""

    lens: list[int]
    label: str = "default"
    total: int = field(init=False, default=0)
    omitted: object = field(default="kept out", metadata=OMIT)

    def __post_init__(self) -> None:
        self.total = sum(self.lens)


@dataclass
class Bag(ZeroCopy):
    values: dict[str, Any]


@dataclass
class PlainRecord:
    x: int


@dataclass
class V0FlashAttentionMetadata(ZeroCopy):
    """vLLM V0's spelling: typing's generics, a forward reference to its own class, a cached child record."""

    num_prefills: int
    slot_mapping: torch.Tensor
    seq_lens: Optional[List[int]]  # noqa: UP006, UP045  # as the engine writes it
    seq_lens_tensor: Optional[torch.Tensor]  # noqa: UP045
    block_tables: Optional[torch.Tensor]  # noqa: UP045
    use_cuda_graph: bool
    multi_modal_placeholder_index_maps: Optional[Dict[str, torch.Tensor]] = None  # noqa: UP006, UP045
    enable_kv_scales_calculation: bool = True
    _cached_prefill_metadata: Optional["V0FlashAttentionMetadata"] = None  # noqa: UP037, UP045


def test_records_in_an_engines_own_spelling_travel_as_written() -> None:
    child = V0FlashAttentionMetadata(1, torch.arange(4), [4], torch.tensor([4]), None, False)
    record = V0FlashAttentionMetadata(
        1, torch.arange(4), [4], torch.tensor([4]), torch.zeros(1, 2), True, {"image": torch.ones(2)}, False, child
    )
    got = _roundtrip(record)
    assert got._cached_prefill_metadata.seq_lens == [4]
    _assert_equal_tensors(got.multi_modal_placeholder_index_maps["image"], torch.ones(2))
    record.seq_lens = ["4"]  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"Expected `int`, got `str` - at `\$\.seq_lens\[0\]`"):
        wire.pack(record)


def _callback() -> Callable[[], None]:
    def callback() -> None:
        pass

    return callback


def _common() -> CommonAttentionMetadata:
    slots = torch.arange(10, 20)
    starts = torch.tensor([0, 3, 7], dtype=torch.int32)
    return CommonAttentionMetadata(starts, starts.clone(), torch.tensor([3, 4]), 2, 7, 4, slots, slots[4:])


def _roundtrip(record: object, **options: Any) -> Any:
    header, buffers = wire.pack(record, **options)
    return wire.unpack(header, [bytearray(buffer) for buffer in buffers])


def _assert_equal_tensors(got: Any, want: Any) -> None:
    assert isinstance(got, torch.Tensor)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert torch.equal(got, want)


def _assert_arrived(got: Any, record: Any) -> None:
    assert type(got) is type(record)
    for name, value in record.asdict_zerocopy().items():
        if isinstance(value, torch.Tensor):
            _assert_equal_tensors(getattr(got, name), value)
        else:
            assert getattr(got, name) == value, name


def test_example_records_round_trip() -> None:
    for record in example_records():
        _assert_arrived(_roundtrip(record), record)


def test_records_of_one_class_in_a_row_and_of_classes_taking_turns_arrive_as_sent() -> None:
    # For records of one class in a row, as an engine sends them step after step, the receiver reads the bytes
    # that name the class once: each record must still arrive as its own class, with its own values.
    first, *others = example_records()
    steps = [make_flash_attention_metadata(num_seqs=seqs, seq_len=16) for seqs in (1, 2, 3)]
    for record in [first, first, *others, first, *steps, *others, *steps, first]:
        _assert_arrived(_roundtrip(record), record)


def test_a_record_that_starts_as_the_last_one_did_is_read_in_full() -> None:
    header, buffers = wire.pack(make_flash_attention_metadata(num_seqs=2, seq_len=4))
    wire.unpack(header, buffers)  # the receiver now knows how such a record starts
    with pytest.raises(WireError, match="trailing characters"):
        wire.unpack(header + b"\xc0", buffers)
    with pytest.raises(WireError, match="truncated"):
        wire.unpack(header[:-1], buffers)


def test_received_tensors_are_views_of_the_writable_buffers() -> None:
    header, buffers = wire.pack(make_flash_attention_metadata(num_tokens=1 << 18))
    owned = [bytearray(buffer) for buffer in buffers]
    got = wire.unpack(header, owned)
    assert len(owned) == 2, "the shared buffer and the 2 MiB slot mapping's own"
    pointers = [torch.frombuffer(buffer, dtype=torch.uint8).data_ptr() for buffer in owned]
    assert got.slot_mapping.data_ptr() == pointers[1]
    assert pointers[0] <= got.block_tables.data_ptr() < pointers[0] + len(owned[0])
    owned[1][:8] = (99).to_bytes(8, "little")
    assert got.slot_mapping[0] == 99, "no copy was made"


@pytest.mark.parametrize("read_only", [bytes, lambda buffer: memoryview(bytes(buffer))], ids=["bytes", "memoryview"])
def test_read_only_buffers_are_copied_once(read_only: Any) -> None:
    record = make_flash_attention_metadata()
    header, buffers = wire.pack(record)
    given = [read_only(buffer) for buffer in buffers]
    got = wire.unpack(header, given)
    for name, value in record.asdict_zerocopy().items():
        if isinstance(value, torch.Tensor):
            _assert_equal_tensors(getattr(got, name), value)
    tensors = [value for value in got.astuple_zerocopy() if isinstance(value, torch.Tensor)]
    starts = [tensor.data_ptr() for tensor in tensors]
    ends = [tensor.data_ptr() + tensor.nbytes for tensor in tensors]
    assert max(ends) - min(starts) <= len(given[0]), "all in one copy of the shared buffer, not one copy each"
    got.slot_mapping[0] = 5  # writable memory of its own
    assert bytes(given[0]) == bytes(buffers[0])


def test_large_tensor_is_sent_from_its_own_memory() -> None:
    record = make_flash_attention_metadata(num_tokens=1 << 18)
    _, buffers = wire.pack(record)
    assert buffers[1].nbytes == record.slot_mapping.nbytes
    assert torch.frombuffer(buffers[1], dtype=torch.uint8).data_ptr() == record.slot_mapping.data_ptr()


@dataclass
class Large(ZeroCopy):
    data: torch.Tensor


def test_a_large_tensor_of_a_new_size_makes_no_new_type() -> None:
    # An engine's tensors change size every step.  A ctypes view of each size is an array type of
    # its own, which Python makes anew (about 16 µs); numpy's view of the tensor costs the same at
    # every size.  (Kept alive here, each such type would stay listed.)
    before = len(ctypes.Array.__subclasses__())
    packed = [wire.pack(Large(torch.arange(wire.PACK_OWN_BUFFER + n, dtype=torch.uint8))) for n in range(5)]
    assert len(ctypes.Array.__subclasses__()) == before
    for n, (header, buffers) in enumerate(packed):
        assert buffers[1].nbytes == wire.PACK_OWN_BUFFER + n
        _assert_equal_tensors(
            wire.unpack(header, buffers).data, torch.arange(wire.PACK_OWN_BUFFER + n, dtype=torch.uint8)
        )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.int64, torch.bool])
@pytest.mark.parametrize("numpy", [True, False], ids=["numpy", "no numpy"])
def test_a_large_tensor_is_sent_from_its_memory_with_or_without_numpy(dtype, numpy, monkeypatch) -> None:
    if not numpy:  # torch without numpy: Tensor.numpy() raises, and the view is made with ctypes

        def no_numpy(self: torch.Tensor, *, force: bool = False) -> Any:
            raise RuntimeError("Numpy is not available")

        monkeypatch.setattr(torch.Tensor, "numpy", no_numpy)
    source = torch.arange(wire.PACK_OWN_BUFFER, dtype=torch.int64).to(dtype).requires_grad_(dtype.is_floating_point)
    record = Large(source)
    header, buffers = wire.pack(record)
    assert (buffers[1].format, buffers[1].nbytes) == ("B", source.nbytes)
    assert torch.frombuffer(buffers[1], dtype=torch.uint8).data_ptr() == source.data_ptr()
    del record, source
    gc.collect()  # the view keeps the tensor alive
    got = wire.unpack(header, buffers).data
    assert got.dtype is dtype
    _assert_equal_tensors(got, torch.arange(wire.PACK_OWN_BUFFER, dtype=torch.int64).to(dtype))


def test_override_keeps_the_wrappers_off_the_wire_and_receivers_get_defaults() -> None:
    record = WrapperMetadata(3, torch.arange(3), torch.tensor([0, 1]), 32, KernelWrapper(), KernelWrapper())
    got = _roundtrip(record)
    assert (got.prefill_wrapper, got.decode_wrapper) == (None, None)
    assert got.page_size == 32
    _assert_equal_tensors(got.paged_kv_indptr, record.paged_kv_indptr)


def test_skip_fields_per_call_reaches_the_override_and_defaults_fill_in() -> None:
    record = WrapperMetadata(3, torch.arange(3), torch.tensor([0, 1]), 32, KernelWrapper())
    skip = frozenset({"page_size", "paged_kv_indptr"})
    got = _roundtrip(record, skip_fields=skip)
    assert (got.page_size, got.paged_kv_indptr) == (16, None)
    assert skip == {"page_size", "paged_kv_indptr"}, "the caller's skip_fields is never changed"


def test_custom_getstate_decides_what_travels() -> None:
    record = ModelInput(torch.arange(4), torch.arange(4), [4], 1, _callback())
    got = _roundtrip(record)
    assert got.async_callback is None
    assert (got.seq_lens, got.virtual_engine) == ([4], 1)
    _assert_equal_tensors(got.input_tokens, record.input_tokens)


@dataclass
class ModelInputWithAttention(ZeroCopy):
    """A model input that holds its attention metadata as a field, as vLLM's GPU model input does."""

    input_tokens: torch.Tensor
    attn_metadata: WrapperMetadata | None = None
    step_inputs: list[WrapperMetadata] = field(default_factory=list)


def test_a_record_inside_a_field_travels_by_its_own_rules() -> None:
    inner = WrapperMetadata(3, torch.arange(3), torch.tensor([0, 2]), 32, KernelWrapper(), KernelWrapper())
    record = ModelInputWithAttention(torch.arange(5), inner, [inner, inner])
    got = _roundtrip(record)
    assert type(got.attn_metadata) is WrapperMetadata
    assert (got.attn_metadata.prefill_wrapper, got.attn_metadata.decode_wrapper) == (None, None)
    assert got.attn_metadata.page_size == 32
    _assert_equal_tensors(got.attn_metadata.paged_kv_indptr, inner.paged_kv_indptr)
    assert got.step_inputs[0] is got.step_inputs[1] is got.attn_metadata, "one record object stays one"


def test_a_record_inside_a_field_that_cannot_travel_names_the_outer_field() -> None:
    inner = WrapperMetadata(1, torch.arange(2), prefill_wrapper=KernelWrapper())
    inner.page_size = threading.Lock()  # type: ignore[assignment]  # travels, and cannot be pickled
    with pytest.raises(
        TypeError,
        match=r"^Bag cannot be sent: Expected `int`, got `_thread.lock` - at `\$.values\['inner'\].page_size`$",
    ):
        wire.pack(Bag({"inner": inner}))


def test_post_init_and_defaults_run_on_the_receiver() -> None:
    record = Derived([1, 2, 3], "sent", omitted="left behind")
    record.total = 99  # init=False fields travel and are set after __init__
    got = _roundtrip(record)
    assert (got.lens, got.label, got.total, got.omitted) == ([1, 2, 3], "sent", 99, "kept out")
    got = _roundtrip(record, skip_fields={"total", "label"})
    assert (got.label, got.total) == ("default", 6), "the default, and what __post_init__ makes"


class _Unhashable(str):
    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("skip", "message"),
    [
        ("lens", "skip_fields must be an iterable of field names, not the str 'lens'; write skip_fields={'lens'}"),
        (b"lens", "skip_fields must be an iterable of field names, not the bytes b'lens'"),
        (5, "skip_fields must be an iterable of field names, not int 5"),
        ([_Unhashable("lens")], "skip_fields must hold field names (str), not _Unhashable 'lens'"),
        ([["lens"]], "skip_fields must hold field names (str), not list ['lens']"),
    ],
)
def test_skip_fields_that_is_not_an_iterable_of_names_is_refused_as_asdict_zerocopy_refuses_it(
    skip: Any, message: str
) -> None:
    with pytest.raises(SkipFieldsError, match=f"^{re.escape(message)}$"):
        wire.pack(Derived([1]), skip_fields=skip)


def test_skip_fields_naming_no_field_is_refused() -> None:
    with pytest.raises(ValueError, match="nonexistent"):
        wire.pack(Derived([1]), skip_fields={"nonexistent"})


def test_a_tensor_whose_sizes_the_format_cannot_carry_is_refused_on_the_sender() -> None:
    # torch makes an empty tensor of any shape; the sender sent it, and the receiver refused it (an outside tester).
    for shape in [(0, 1 << 62), (0, 1 << 31, 1 << 31)]:  # the second: a contiguous stride of 2**62
        with pytest.raises(TypeError, match=r"^field 'values' of Bag cannot be sent .*sizes or strides of 2\*\*62"):
            wire.pack(Bag({"t": torch.empty(shape)}))
    empty = torch.empty(0, 1 << 61)
    assert wire.unpack(*wire.pack(Bag({"t": empty}))).values["t"].shape == empty.shape
    # A dimension of size 1 may have any stride: it is sent as a contiguous tensor's.
    odd = torch.arange(6.0).view(2, 3).t().unsqueeze(0).as_strided((1, 3, 2), ((1 << 63) - 1, 1, 3))
    got = wire.unpack(*wire.pack(Bag({"t": odd}))).values["t"]
    assert torch.equal(got, odd)
    assert got.stride()[1:] == odd.stride()[1:]


@dataclass
class IgnoresSkipFields(ZeroCopy):
    n: int
    secret: str = "default"

    def asdict_zerocopy(self, skip_fields: Iterable[str] | None = None) -> dict[str, Any]:  # type: ignore[override]
        return {"n": self.n, "secret": self.secret}  # skip_fields is not passed on


def test_skip_fields_leaves_its_names_out_though_an_override_ignores_it() -> None:
    packed = wire.pack(IgnoresSkipFields(1, "do-not-send"), skip_fields={"secret"})
    assert b"do-not-send" not in packed.header
    assert wire.unpack(packed.header, packed.buffers) == IgnoresSkipFields(1, "default")
    with pytest.raises(ValueError, match=r"^skip_fields names 'nothing', which is not a field of IgnoresSkipFields$"):
        wire.pack(IgnoresSkipFields(1), skip_fields={"secret", "nothing"})


def test_a_required_field_that_would_not_travel_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Derived.__init__ requires 'lens', which would not travel"):
        wire.pack(Derived([1]), skip_fields={"lens"})


@dataclass(init=False)
class CopiedFrom(ZeroCopy):
    """vLLM's shape of a metadata class made from another: its ``__init__`` takes objects, not its fields."""

    slot_mapping: torch.Tensor
    logits_indices: torch.Tensor

    def __init__(self, metadata: Any, common: Any) -> None:
        self.slot_mapping = metadata.slot_mapping
        self.logits_indices = common.logits_indices


def test_an_init_that_requires_parameters_that_are_not_fields_is_refused_saying_so() -> None:
    source = types.SimpleNamespace(slot_mapping=torch.arange(3), logits_indices=torch.arange(2))
    with pytest.raises(
        TypeError, match=r"CopiedFrom.__init__ requires 'common', 'metadata', which are not fields: .*give the param"
    ):
        wire.pack(CopiedFrom(source, source))


def test_cpu_twins_and_views_arrive_with_their_values() -> None:
    record = _common()
    got = _roundtrip(record)
    for name in ("query_start_loc", "query_start_loc_cpu", "slot_mapping", "decode_slot_mapping"):
        _assert_equal_tensors(getattr(got, name), getattr(record, name))
    assert got.query_start_loc.data_ptr() != got.query_start_loc_cpu.data_ptr(), "a clone is not a view"


@dataclass
class Rotary(ZeroCopy):
    """Two tensor fields, which the generated encoder reads inline."""

    angles: torch.Tensor
    offsets: torch.Tensor


@pytest.mark.parametrize(
    "lazy",
    [
        pytest.param(lambda: torch.complex(torch.arange(4.0), torch.ones(4)).conj(), id="conjugated-complex"),
        pytest.param(lambda: torch._neg_view(torch.arange(4)), id="negated-int64"),
        pytest.param(lambda: torch.complex(torch.arange(4.0), torch.ones(4)).conj().imag, id="negated-float"),
    ],
)
def test_a_tensor_field_with_a_lazy_conjugation_or_negation_arrives_with_its_values(
    lazy: Callable[[], torch.Tensor],
) -> None:
    # The bits say "negate (or conjugate) on read": the bytes as they lie are not the values.
    tensor = lazy()
    assert tensor.is_conj() or tensor.is_neg()
    for _ in range(2):  # the first record of a class goes the general way, the next ones its generated encoder
        got = _roundtrip(Rotary(angles=tensor, offsets=torch.arange(3)))
        assert not got.angles.is_conj()
        assert not got.angles.is_neg()
        _assert_equal_tensors(got.angles, tensor.resolve_conj().resolve_neg())


def test_a_view_of_a_tensor_sent_before_it_arrives_as_a_view() -> None:
    parent = torch.arange(24, dtype=torch.int64)
    views = {
        "tail": parent[4:],
        "every_other": parent[1::2],
        "matrix_transposed": parent.view(4, 6).t(),
        "as_int32": parent[2:6].view(torch.int32),
        # Steps in the inner dimension, whose reach the outer stride only just passes (an outside tester).
        "every_other_column": parent[:20].view(4, 5)[:, ::2],
        "transposed_every_other_row": parent[:20].view(4, 5).t()[::2],
        "stepped_block": parent[:20].view(4, 5)[1:3, ::3],
        "diagonal": parent[:16].view(4, 4).diagonal(),
    }
    got = _roundtrip(Bag({"parent": parent, **views}))
    for name, view in views.items():
        _assert_equal_tensors(got.values[name], view)
        assert got.values[name].stride() == view.stride(), name
    got.values["parent"][5] = -1
    assert got.values["tail"][1] == -1, "the view shares the parent's memory on the receiver too"
    assert got.values["every_other"][2] == -1


@dataclass
class TwoTensors(ZeroCopy):
    first: torch.Tensor
    second: torch.Tensor


@pytest.mark.parametrize(
    ("first", "second", "shared"),
    [
        (lambda parent: parent, lambda parent: parent[4:], True),
        (lambda parent: parent[2:], lambda parent: parent[4:].view(torch.int32), True),
        (lambda parent: parent[4:], lambda parent: parent, False),
        (lambda parent: parent[:4], lambda parent: parent[4:8], False),
    ],
    ids=["a view after its parent", "a view of another dtype", "a view before its parent", "two apart"],
)
def test_tensor_fields_that_share_memory_arrive_sharing_it_where_the_first_holds_the_second(
    first: Callable[[torch.Tensor], torch.Tensor], second: Callable[[torch.Tensor], torch.Tensor], shared: bool
) -> None:
    # Contiguous tensors in fields of their own, as a record usually holds them: those of one storage, found by
    # where each one's storage starts, go the general way, which sends a view of a tensor sent before it as a view.
    _roundtrip(TwoTensors(torch.zeros(1), torch.ones(1)))  # the class's first record makes its codec
    parent = torch.arange(24, dtype=torch.int64)
    record = TwoTensors(first(parent), second(parent))
    got = _roundtrip(record)
    _assert_arrived(got, record)
    got.first.view(torch.int64)[-1] = -1
    expected = record.second.clone()
    if shared:
        expected.view(torch.int64)[-1] = -1
    _assert_equal_tensors(got.second, expected)


def test_a_view_whose_elements_overlap_arrives_contiguous_in_memory_of_its_own() -> None:
    parent = torch.arange(6)
    expanded = parent[:3].expand(2, 3)
    got = _roundtrip(Bag({"parent": parent, "expanded": expanded}))
    _assert_equal_tensors(got.values["expanded"], expanded)
    assert got.values["expanded"].stride() == (3, 1), "a receiver never gets more elements than bytes"
    got.values["parent"][0] = -1
    assert got.values["expanded"][0, 0] == 0


def test_a_tensor_with_no_elements_arrives_with_a_contiguous_tensors_strides() -> None:
    # docs/wire-format.md, "What arrives": strides say nothing where there are no elements (an outside
    # tester asked whether "a dense tensor keeps its strides" held for them).
    for empty in (torch.empty(0, 8).t(), torch.empty(3, 0, 2).permute(2, 0, 1)):
        got = _roundtrip(Bag({"empty": empty})).values["empty"]
        assert (got.shape, got.stride()) == (empty.shape, torch.empty(empty.shape).stride())


_SUB_BYTE: Final = [getattr(torch, f"{kind}{bits}") for kind in ("uint", "int") for bits in range(1, 8)]
_ODD_COPIES: Final = [*_SUB_BYTE, torch.bfloat16, torch.float8_e5m2, torch.bool, torch.complex128]


@pytest.mark.parametrize("dtype", _ODD_COPIES, ids=str)
@pytest.mark.parametrize("rows", [4, 2048], ids=["shared-buffer", "own-buffer"])
def test_a_stepped_slice_of_every_dtype_arrives_contiguous_small_or_large(dtype: torch.dtype, rows: int) -> None:
    # torch has no copy kernel for the sub-byte dtypes: a large one (an outside tester) raised
    # NotImplementedError where a small one travelled.
    whole = torch.arange(rows * 4096, dtype=torch.uint8).view(-1, 16).view(dtype)
    stepped = whole[:, ::2]
    got = _roundtrip(Bag({"stepped": stepped})).values["stepped"]
    assert (got.dtype, got.shape, got.is_contiguous()) == (dtype, stepped.shape, True)
    # Compared as integers of the item's size, bit for bit: torch compares no sub-byte dtype, no NaN equal.
    if dtype.is_complex:
        got, stepped = torch.view_as_real(got), torch.view_as_real(stepped)
    carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[stepped.dtype.itemsize]
    assert torch.equal(got.view(carrier), stepped.view(carrier))


def test_a_view_sent_before_its_parent_arrives_in_memory_of_its_own() -> None:
    parent = torch.arange(10)
    got = _roundtrip(Bag({"tail": parent[4:], "parent": parent}))
    _assert_equal_tensors(got.values["tail"], parent[4:])
    got.values["parent"][5] = -1
    assert got.values["tail"][1] == 5


def test_views_of_a_large_tensor_point_into_its_own_buffer() -> None:
    parent = torch.arange(1 << 18)
    _, buffers = wire.pack(Bag({"parent": parent, "head": parent[:8]}))
    assert [buffer.nbytes for buffer in buffers] == [0, parent.nbytes], "the view costs no bytes"


def test_same_tensor_twice_arrives_as_one_object() -> None:
    shared = torch.arange(3)
    got = _roundtrip(Bag({"a": shared, "b": [shared, shared]}))
    assert got.values["a"] is got.values["b"][0] is got.values["b"][1]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (lambda: None, "type builtins.function is not plain data"),
        (_callback(), "type builtins.function is not plain data"),
        (threading.Lock(), "type _thread.lock is not plain data"),
        (torch.eye(2).to_sparse(), "layout torch.sparse_coo"),
        (torch.empty(2, device="meta"), "meta device"),
    ],
    ids=["lambda", "local function", "lock", "sparse tensor", "meta tensor"],
)
def test_a_value_that_cannot_be_sent_names_its_field(value: object, reason: str) -> None:
    with pytest.raises(
        TypeError, match=rf"field 'values' of Bag cannot be sent \(\$\.values\['bad'\]\[0\]\): .*({reason})"
    ):
        wire.pack(Bag({"ok": 1, "bad": [value]}))


class _Kind(enum.IntEnum):
    PREFILL = 1


@dataclass
class Typed(ZeroCopy):
    """Fields whose annotations a subclass of a plain type matches, as typing has it."""

    step: int = 0
    scale: float = 1.0
    shape: tuple[int, ...] = ()
    counts: dict[str, int] | None = None
    lens: list[int] = field(default_factory=list)
    pair: tuple[int, int] | None = None
    cascade: bool = False


def test_a_value_of_a_subclass_of_a_plain_type_gets_no_advice_its_annotation_refuses() -> None:
    # "Bad input gets a clear error": send int(value) only where the field takes an int.
    @dataclass
    class Phased(ZeroCopy):
        phase: _Kind = _Kind.PREFILL

    with pytest.raises(TypeError, match=r"not plain data \(.*\); send it pickled with allow_pickle=True") as caught:
        wire.pack(Phased())
    assert "int(value)" not in str(caught.value)
    with pytest.raises(TypeError, match=r"Expected `.*_Kind`, got `int` - at `\$\.phase`"):
        wire.pack(Phased(int(_Kind.PREFILL)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "plain"),
    [
        ({"step": _Kind.PREFILL}, "int"),
        ({"scale": np.float64(0.5)}, "float"),
        ({"shape": torch.Size([2, 3])}, "tuple"),
        ({"counts": collections.defaultdict(int, a=1)}, "dict"),
        ({"lens": [1, _Kind.PREFILL]}, "int"),
    ],
    ids=["IntEnum", "numpy.float64", "torch.Size", "defaultdict", "an IntEnum in a list"],
)
def test_a_value_of_a_subclass_of_a_plain_type_travels_only_pickled(changes: dict[str, Any], plain: str) -> None:
    # Issue: "Any other value is refused on the sender with a TypeError naming the field and its type, and
    # saying how to opt in."  It matches its annotation, as typing has it, so the opt-in sends it.
    record = Typed(**changes)
    (name,) = changes
    with pytest.raises(
        TypeError,
        match=rf"^field '{name}' of Typed .* not plain data .*send {plain}\(value\) if the annotation takes "
        rf"an? {plain}, or .*allow_pickle=True",
    ):
        wire.pack(record)
    header, buffers = wire.pack(record, allow_pickle=True)
    with pytest.raises(WireError, match="does not read pickles"):
        wire.unpack(header, buffers)
    got = wire.unpack(header, buffers, allow_pickle=True)
    assert type(getattr(got, name)) is type(changes[name])
    assert getattr(got, name) == changes[name]
    assert [type(item) for item in got.lens] == [type(item) for item in record.lens]


@dataclass
class ByHead(ZeroCopy):
    scales: dict[Any, float]


@pytest.mark.parametrize(
    ("scales", "key"),
    [
        ({(0, 1): 0.5}, "a dict key of type builtins.tuple"),
        ({0.5: 1.0}, "a dict key of type builtins.float"),
        ({True: 1.0}, "a dict key of type builtins.bool"),
        ({1 << 64: 1.0}, "the int dict key 18446744073709551616, which does not fit in 64 bits,"),
    ],
    ids=["tuple", "float", "bool", "int beyond 64 bits"],
)
def test_a_dict_whose_keys_are_not_plain_travels_pickled_as_a_whole_with_the_opt_in(
    scales: dict[Any, float], key: str
) -> None:
    # Refused even with allow_pickle, by a message that named no opt-in: an engine's {(layer, head): ...}.
    record = ByHead(scales)
    message = f"field 'scales' of ByHead cannot be sent ($.scales): {key} is not plain data"
    with pytest.raises(TypeError, match=rf"^{re.escape(message)} .*allow_pickle=True on both sides"):
        wire.pack(record)
    header, buffers = wire.pack(record, allow_pickle=True)
    with pytest.raises(WireError, match="does not read pickles"):
        wire.unpack(header, buffers)
    got = wire.unpack(header, buffers, allow_pickle=True)
    assert got.scales == scales
    assert [type(k) for k in got.scales] == [type(k) for k in scales]


_SETS: Final = {
    "set": (set, set),
    "frozenset": (frozenset, frozenset),
    "AbstractSet": (collections.abc.Set, frozenset),
    "MutableSet": (collections.abc.MutableSet, set),
    "Iterable": (collections.abc.Iterable, set),
}


def _sets(spelling: str, annotation: Any) -> type:
    """A class of the same name and field for each *spelling*, its field annotated *annotation*."""
    return make_dataclass(
        f"Sets{spelling}", [("ids", annotation)], bases=(ZeroCopy,), namespace={"__module__": __name__}
    )


@pytest.mark.parametrize("spelling", list(_SETS))
def test_the_items_of_a_set_that_travels_pickled_are_checked_on_both_sides(spelling: str) -> None:
    # vLLM's scheduler output holds set[str] fields, which travel only pickled; {1, 2} got through both
    # sides under every spelling of a set.  (Found by an outside tester.)
    generic, make = _SETS[spelling]
    right = _sets(spelling, generic[str])
    with pytest.raises(
        TypeError, match=re.escape(f"Sets{spelling} cannot be sent: Expected `str`, got `int` - at `$.ids[0]`")
    ):
        wire.pack(right(make({1, 2})), allow_pickle=True)
    arrived = wire.unpack(*wire.pack(right(make({"a", "b"})), allow_pickle=True), allow_pickle=True)
    assert arrived.ids == make({"a", "b"})
    assert type(arrived.ids) is make
    del right, arrived
    gc.collect()
    wrong = _sets(spelling, generic[int])  # a sender that runs other code
    header, buffers = wire.pack(wrong(make({1, 2})), allow_pickle=True)
    del wrong
    gc.collect()
    receiver = _sets(spelling, generic[str])
    with pytest.raises(WireError, match=re.escape(f"Sets{spelling}: Expected `str`, got `int` - at `$.ids[")):
        wire.unpack(header, buffers, allow_pickle=True)
    assert receiver in zerocopy_classes()


class _Tags(set):  # type: ignore[type-arg]
    """A set of the engine's own: its items are checked as a set's are."""


@pytest.mark.parametrize(
    ("spelling", "value"),
    [
        ("AbstractSet", _Tags({"a"})),
        ("MutableSet", _Tags({"a"})),
        ("Iterable", _Tags({"a"})),
        ("Iterable", collections.Counter({"a": 1})),
    ],
    ids=["AbstractSet", "MutableSet", "Iterable", "Iterable-Counter"],
)
def test_the_items_of_a_subclass_of_a_set_or_a_dict_are_checked_under_every_spelling(spelling: str, value: Any) -> None:
    # set[int] checked a subclass's items; AbstractSet[int], MutableSet[int] and Iterable[int] did not, nor a
    # Counter's keys under Iterable[int].  (Found by an outside tester.)
    generic, _ = _SETS[spelling]
    cls = _sets(f"{spelling}Sub{type(value).__name__}", generic[int])
    with pytest.raises(TypeError, match=r"Expected `int`, got `str` - at (`key` in )?`\$\.ids"):  # a dict's: its keys
        wire.pack(cls(value), allow_pickle=True)


@dataclass
class _Inner(ZeroCopy):
    n: int
    wrapper: object = field(default=None, metadata=OMIT)


@dataclass
class _ByLayerHead(ZeroCopy):
    per_head: Dict[Any, _Inner]  # noqa: UP006


def test_a_record_inside_a_value_that_travels_pickled_is_refused_on_the_sender() -> None:
    # Pickled, the record inside skipped every rule: its OMIT field arrived, its values went unchecked, and
    # it was not made by its __init__.  (Found by an outside tester.)
    record = _ByLayerHead({(0, 1): _Inner(3, wrapper="kernel state")})
    with pytest.raises(
        TypeError,
        match=r"^field 'per_head' of _ByLayerHead cannot be sent \(\$\.per_head\): it holds a _Inner record in a "
        r"value that travels pickled, .*hold the record in a list, a tuple or a dict with str or int keys$",
    ):
        wire.pack(record, allow_pickle=True)
    arrived = wire.unpack(*wire.pack(_ByLayerHead({1: _Inner(3, wrapper="kernel state")})))
    assert arrived.per_head == {1: _Inner(3)}  # with plain keys it travels by its rules, OMIT left behind


@dataclass
class _Request(ZeroCopy):
    sampling_params: Any = None


@dataclass
class _Scheduled(ZeroCopy):
    new_requests: List[_Request]  # noqa: UP006


def test_a_value_refused_in_a_record_inside_a_field_says_where_it_can_be_left_out() -> None:
    # skip_fields names only the record packed's fields: the advice to use it for a value in a record
    # inside one could not be followed.  (Found by an outside tester.)
    with pytest.raises(TypeError) as caught:
        wire.pack(_Scheduled([_Request(object())]))
    message = str(caught.value)
    assert message.startswith("field 'new_requests' of _Scheduled cannot be sent ($.new_requests[0].sampling_params)")
    assert message.endswith("or leave it out of _Request with OMIT, an asdict_zerocopy() override or __getstate__")
    assert "skip_fields" not in message
    with pytest.raises(TypeError, match=r"or leave it out with skip_fields, an asdict_zerocopy\(\) override"):
        wire.pack(_Request(object()))  # the record packed's own field: skip_fields reaches it


def test_a_record_of_another_class_of_the_same_name_is_named_by_its_module() -> None:
    # Engines repeat class names between backends; a message that named the class expected by its name
    # alone and the one that came by its module could not tell them apart.  (Found by an outside tester.)
    made = [
        dataclass(ZeroCopyFields("Inner", (ZeroCopy,), {"__module__": module, "__annotations__": {"n": int}}))
        for module in ("backend_a", "backend_b")
    ]
    outer = make_dataclass("Outer", [("inner", Optional[made[0]])], bases=(ZeroCopy,))  # noqa: UP045
    expected = "Expected `backend_a.Inner | None`, got `backend_b.Inner` - at `$.inner`"
    with pytest.raises(TypeError, match=re.escape(expected)):
        wire.pack(outer(made[1](1)))


@dataclass
class _Mamba(ZeroCopy):
    nums_dict: Optional[dict] = None  # noqa: UP045  # vLLM's spelling, with no item types


def test_a_numpy_scalar_under_an_annotation_that_names_no_type_gets_the_item_advice() -> None:
    # The advice to send value.item() came only where the annotation named a type, and never for a dict's key.
    # (Found by outside testers.)
    with pytest.raises(TypeError, match=r"numpy\.int64 is not plain data .*send value\.item\(\), its Python value"):
        wire.pack(_Mamba({0: {"n": np.int64(3)}}))
    with pytest.raises(TypeError, match=r"key of type numpy\.int64 is not plain data .*send key\.item\(\), its Python"):
        wire.pack(_Mamba({np.int64(1): 2}))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"step": np.int32(3)}, "Expected `int`, got `numpy.int32` - at `$.step` (a numpy scalar: send value.item()"),
        ({"cascade": np.bool_(True)}, "Expected `bool`, got `numpy.bool` - at `$.cascade` (a numpy scalar"),
        ({"pair": (1, 2, 3)}, "Expected `tuple of 2 | None`, got `tuple` - at `$.pair`"),
    ],
    ids=["numpy.int32", "numpy.bool", "a tuple of 3"],
)
def test_a_value_its_annotation_does_not_take_is_refused_even_with_the_opt_in(
    changes: dict[str, Any], message: str
) -> None:
    # vLLM's cascade attention computes its prefix length with numpy: an int32, and a numpy bool from it.
    for allow_pickle in (False, True):
        with pytest.raises(TypeError, match=re.escape(f"Typed cannot be sent: {message}")):
            wire.pack(Typed(**changes), allow_pickle=allow_pickle)


def test_records_of_other_classes_are_refused() -> None:
    with pytest.raises(TypeError, match="PlainRecord is not one"):
        wire.pack(PlainRecord(1))
    with pytest.raises(TypeError, match="int is not a dataclass"):
        wire.pack(3)
    with pytest.raises(TypeError, match="got the class Bag itself"):
        wire.pack(Bag)


def test_getstate_that_is_not_a_dict_is_refused() -> None:
    @dataclass
    class Listed(ZeroCopy):
        x: int

        def __getstate__(self) -> list[int]:
            return [self.x]

    with pytest.raises(TypeError, match=r"Listed.__getstate__\(\) returned a list"):
        wire.pack(Listed(1))


def test_an_override_returning_a_name_that_is_not_a_field_is_refused() -> None:
    @dataclass
    class Extra(ZeroCopy):
        x: int

        def asdict_zerocopy(self, skip_fields: Iterable[str] | None = None) -> dict[str, Any]:  # type: ignore[override]
            return {**super().asdict_zerocopy(skip_fields), "extra": 1}

    with pytest.raises(TypeError, match="returned 'extra', which is not a field"):
        wire.pack(Extra(1))


def test_a_class_that_is_not_alive_on_the_receiver_is_refused() -> None:
    def make() -> object:
        @dataclass
        class Gone(ZeroCopy):
            x: int

        return Gone(1)

    header, buffers = wire.pack(make())
    gc.collect()
    with pytest.raises(WireError, match=r"no dataclass made by ZeroCopyFields named .*Gone is alive here"):
        wire.unpack(header, buffers)


def test_a_class_renamed_decorated_again_or_given_another_init_after_it_travelled_travels_as_it_is_now() -> None:
    Made = make_dataclass("MadeToBeRenamed", [("x", int)], bases=(ZeroCopy,))  # a factory's class, in "types"
    assert wire.unpack(*wire.pack(Made(1))) == Made(1)

    Made.__module__, Made.__qualname__ = __name__, "RenamedAfterItTravelled"
    header, buffers = wire.pack(Made(2))
    assert f"{__name__}:RenamedAfterItTravelled".encode() in header
    assert wire.unpack(header, buffers) == Made(2)

    Made.__annotations__ = {"x": int, "y": str}
    for name in ("__init__", "__repr__", "__eq__"):
        delattr(Made, name)
    Made = dataclass(Made)
    assert wire.unpack(*wire.pack(Made(3, "y"))) == Made(3, "y")
    with pytest.raises(TypeError, match=r"Expected `str`, got `int` - at `\$.y`"):
        wire.pack(Made(3, 4))  # type: ignore[arg-type]

    def init(self: Any, x: int, y: str, z: int) -> None:
        self.x, self.y = x, y

    Made.__init__ = init
    with pytest.raises(TypeError, match="requires 'z'"):
        wire.pack(Made(4, "y", 0))


def _decorate_again(cls: Any, annotations: dict[str, Any]) -> None:
    cls.__annotations__ = annotations
    for name in ("__init__", "__repr__", "__eq__"):
        delattr(cls, name)
    dataclass(cls)


def test_a_class_decorated_again_while_its_codec_is_made_gets_a_new_one_at_its_next_call(monkeypatch) -> None:
    # Another thread's change, between the codec's reading of the fields and of what it was made for, left a
    # codec of the old fields that looked current: the class could not send its records (an outside tester).
    @dataclass
    class Changing(ZeroCopy):
        a: int

    read = wire.fields

    def fields_then_a_change(cls: Any) -> Any:
        found = read(cls)
        if cls is Changing and len(found) == 1:
            Changing.b = 0  # type: ignore[attr-defined]
            _decorate_again(Changing, {"a": int, "b": int})
        return found

    monkeypatch.setattr(wire, "fields", fields_then_a_change)
    with contextlib.suppress(TypeError):  # a call during the change may send either shape, or refuse
        wire.pack(Changing(1))
    monkeypatch.undo()
    assert wire.unpack(*wire.pack(Changing(1, 2))) == Changing(1, 2)  # type: ignore[call-arg]


def test_a_field_gone_while_its_record_is_sent_is_a_type_error_and_the_next_call_sends_the_new_fields() -> None:
    # Each field's check was looked up in the class's codec of the moment: a field gone meanwhile raised KeyError.
    change = False

    @dataclass
    class Shrinks(ZeroCopy):
        a: int
        b: int = 0

        def asdict_zerocopy(self, skip_fields: Any = None) -> dict[str, Any]:
            fields_now = super().asdict_zerocopy(skip_fields)
            if change and "b" in Shrinks.__dataclass_fields__:
                _decorate_again(Shrinks, {"a": int})  # as another thread might, while this record is sent
            return fields_now

    assert wire.unpack(*wire.pack(Shrinks(1, 2))) == Shrinks(1, 2)
    change = True
    with pytest.raises(TypeError, match="Shrinks changed while a record of it was sent: 'b' is no field of it now"):
        wire.pack(Shrinks(1, 2))
    assert wire.unpack(*wire.pack(Shrinks(1))) == Shrinks(1)


def test_headers_and_buffers_that_do_not_match_are_refused() -> None:
    header, buffers = wire.pack(make_flash_attention_metadata())
    with pytest.raises(WireError, match="lists 1 buffers, but 2 were given"):
        wire.unpack(header, [*buffers, b""])
    with pytest.raises(WireError, match="buffer 0 holds 3 bytes"):
        wire.unpack(header, [b"abc"])
    with pytest.raises(WireError, match="not a metakit header"):
        wire.unpack(b"XYZ" + header[3:], buffers)
    other_format = header[:3] + bytes([wire.FORMAT + 1]) + header[4:]
    with pytest.raises(WireError, match=f"format {wire.FORMAT + 1} arrived"):
        wire.unpack(other_format, buffers)
    assert wire.buffer_count(header) == 1


# --- between two processes -------------------------------------------------------


def _records(sending: bool) -> list[object]:
    """The records both processes build the same way: the receiver compares with its own.

    The sender's model input holds a callback; what the receiver gets, and
    builds for itself, has none.
    """
    return [
        *example_records(),
        make_flash_attention_metadata(num_tokens=1 << 18),
        WrapperMetadata(3, torch.arange(3), torch.tensor([0, 1]), 32, KernelWrapper(), KernelWrapper()),
        ModelInput(torch.arange(4), None, [4], 2, _callback() if sending else None),
        _common(),
    ]


def _receiver(conn: Connection) -> None:
    """Receive every record over *conn*, compare it with its own, and answer with what failed."""
    failures = []
    for want in _records(sending=False):
        try:
            header = conn.recv_bytes()
            buffers = []
            for nbytes in (spec.nbytes for spec in wire.buffer_table(header)):
                buffer = bytearray(nbytes)
                if nbytes:
                    conn.recv_bytes_into(buffer)
                buffers.append(buffer)
            got = wire.unpack(header, buffers)
            assert type(got) is type(want), type(got)
            for name, value in want.asdict_zerocopy().items():  # type: ignore[attr-defined]
                mine = getattr(got, name)
                ok = torch.equal(mine, value) if isinstance(value, torch.Tensor) else mine == value
                assert ok, f"{type(want).__qualname__}.{name}"
        except Exception:
            failures.append(traceback.format_exc())
    conn.send(failures)


def _module_guard(conn: Connection) -> None:
    """Receive one record that refers to ``colorsys``, which this process never imported."""
    import sys

    header = conn.recv_bytes()
    buffers = [bytearray(spec.nbytes) for spec in wire.buffer_table(header)]
    for buffer in buffers:
        if buffer:
            conn.recv_bytes_into(buffer)
    try:
        wire.unpack(header, buffers, allow_pickle=True)
        conn.send("unpack() accepted a value from a module that is not imported")
    except WireError as error:
        conn.send(str(error) if "colorsys" not in sys.modules else "unpack() imported colorsys")


def _send(conn: Connection, record: object, **options: Any) -> None:
    header, buffers = wire.pack(record, **options)
    conn.send_bytes(header)
    for buffer in buffers:
        if buffer.nbytes:
            conn.send_bytes(buffer)


def _spawn(target: Callable[[Connection], None]) -> tuple[Any, Connection]:
    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe()
    process = context.Process(target=target, args=(theirs,), daemon=True)
    process.start()
    return process, mine


def test_records_travel_between_two_processes_over_a_pipe() -> None:
    process, conn = _spawn(_receiver)
    try:
        for record in _records(sending=True):
            _send(conn, record)
        assert conn.poll(120), "the receiving process did not answer"
        failures = conn.recv()
        assert not failures, "\n".join(failures)
    finally:
        process.join(30)
        if process.is_alive():
            process.kill()


def test_a_pickled_value_from_a_module_the_receiver_never_imported_is_refused_there() -> None:
    import colorsys

    process, conn = _spawn(_module_guard)
    try:
        _send(conn, Bag({"function": colorsys.rgb_to_hsv}), allow_pickle=True)
        assert conn.poll(120), "the receiving process did not answer"
        assert "colorsys is not imported here, and metakit never imports a module" in conn.recv()
    finally:
        process.join(30)
        if process.is_alive():
            process.kill()


def _define_in(module: types.ModuleType, qualname: str) -> Any:
    """A new record class of one field, ``x: int``, that *module* holds under *qualname*, as a reloaded module would."""

    @dataclass
    class Defined(ZeroCopy):
        x: int

    Defined.__module__ = module.__name__
    Defined.__qualname__ = qualname
    setattr(module, qualname, Defined)
    return Defined


def test_a_class_its_module_holds_by_name_wins_over_an_older_one_of_that_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("metakit_test_redefined")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    old, new = _define_in(module, "Redefined"), _define_in(module, "Redefined")
    assert old in zerocopy_classes(), "the older class must be alive for this case"
    header, buffers = wire.pack(new(3))
    got = wire.unpack(header, buffers)
    assert type(got) is new, "the class the module holds, as pickle would find it"


def test_a_record_whose_class_was_defined_again_since_the_last_is_of_the_class_its_module_holds_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The receiver reads the name of a class once for records of it in a row: a class defined again under that
    # name (a module reloaded) between two such records must be the one the next record gets.
    module = types.ModuleType("metakit_test_defined_again")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    first = _define_in(module, "Again")
    header, buffers = wire.pack(first(3))
    assert type(wire.unpack(header, buffers)) is first
    second = _define_in(module, "Again")
    got: Any = wire.unpack(header, buffers)  # the same bytes, which name the class by its module and name
    assert type(got) is second
    assert got.x == 3
    module.Again = None  # type: ignore[attr-defined]  # and now neither: two live classes bear the name
    with pytest.raises(WireError, match="2 dataclasses made by ZeroCopyFields are named metakit_test_defined_again"):
        wire.unpack(header, buffers)


class _AllEqualMeta(ZeroCopyFields):
    """A metaclass whose classes all compare equal and hash alike: the wire must tell them apart by identity."""

    def __eq__(cls, other: object) -> bool:
        return isinstance(other, _AllEqualMeta)

    def __hash__(cls) -> int:
        return 0


def test_classes_that_compare_equal_each_travel_with_their_own_fields() -> None:
    @dataclass
    class First(metaclass=_AllEqualMeta):
        a: int

    @dataclass
    class Second(metaclass=_AllEqualMeta):
        b: str
        c: torch.Tensor

    assert First == Second
    first = wire.unpack(*wire.pack(First(1)))
    second = wire.unpack(*wire.pack(Second("x", torch.arange(3))))
    assert type(first) is First
    assert first.a == 1
    assert type(second) is Second
    assert second.b == "x"
    assert second.c.tolist() == [0, 1, 2]


class _EqualsOnly(type):  # noqa: PLW1641  # its classes cannot be hashed, on purpose
    def __eq__(cls, other):
        return cls is other


class _Unhashable(metaclass=_EqualsOnly):
    pass


def test_a_value_whose_class_cannot_be_hashed_is_refused_with_a_type_error():
    # README, limits: such a value cannot travel; pack raises TypeError, as copy and pickle do.
    @dataclass
    class Holds(ZeroCopy):
        value: Any

    with pytest.raises(TypeError, match="unhashable"):
        wire.pack(Holds(_Unhashable()))
