"""``metakit.testing`` on records shaped like a real engine's: vLLM's FlashInfer metadata with
its override, its model-runner inputs and its V1 attention metadata (lists stand in for tensors;
``tests/torch/test_testing_engine.py`` checks records that hold tensors)."""

from __future__ import annotations

import abc
import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from metakit import OMIT, ZeroCopy, ZeroCopyFields
from metakit.testing import assert_zerocopy, assert_zerocopy_class


class Wrapper:
    """Stands in for a FlashInfer kernel wrapper: it cannot be broadcast."""


# --- legacy attention metadata with a FlashInfer backend --------------------------------


@dataclass
class AttentionMetadata(ZeroCopy):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: list[int]


@dataclass
class FlashInferMetadata(AttentionMetadata):
    """vLLM's shape: the wrapper is a plain field, and the override adds its name to the set."""

    max_prefill_seq_len: int
    use_cuda_graph: bool = False
    decode_wrapper: Wrapper | None = None
    seq_start_loc: list[int] | None = None
    block_tables: list[int] | None = None
    paged_kv_indptr: list[int] | None = None
    page_size: int | None = None

    def __post_init__(self) -> None:
        if self.num_prefills == 0:
            self.decode_wrapper = Wrapper()

    def asdict_zerocopy(self, skip_fields: set[str] | None = None) -> dict[str, Any]:
        if skip_fields is None:
            skip_fields = set()
        # The wrapper cannot be broadcast, so it never travels.
        skip_fields.add("decode_wrapper")
        return super().asdict_zerocopy(skip_fields)


@dataclass
class FixedFlashInferMetadata(FlashInferMetadata):
    """The same override, mended: it adds to a copy of the set it is given."""

    def asdict_zerocopy(self, skip_fields: set[str] | None = None) -> dict[str, Any]:
        skip = set(skip_fields or ())
        skip.add("decode_wrapper")
        return super(FlashInferMetadata, self).asdict_zerocopy(skip)


@dataclass
class OmittedWrapperMetadata(AttentionMetadata):
    """What metakit offers instead: an OMIT field and no override."""

    max_prefill_seq_len: int
    decode_wrapper: Wrapper | None = field(default=None, metadata=OMIT)


def decode_step(cls: type[AttentionMetadata]) -> Any:
    return cls(0, 0, 2, [5, 9], max_prefill_seq_len=0, seq_start_loc=[0, 1, 2], page_size=16)


@pytest.mark.parametrize("make", [decode_step, lambda cls: cls], ids=["assert_zerocopy", "assert_zerocopy_class"])
def test_vllms_flashinfer_override_is_reported_for_adding_to_the_callers_set(make):
    subject = make(FlashInferMetadata)
    check = assert_zerocopy_class if isinstance(subject, type) else assert_zerocopy
    with pytest.raises(AssertionError) as error:
        check(subject)
    assert str(error.value) == (
        "FlashInferMetadata: the override FlashInferMetadata.asdict_zerocopy: obj.asdict_zerocopy(skip_fields=set())"
        " changed the skip_fields it was given: it added ['decode_wrapper'];"
        " it must leave the caller's set unchanged and change a copy"
    )


def test_leaving_the_wrapper_out_is_not_reported_as_missing():
    # The old helper said "missing ['decode_wrapper']" here; leaving a field out is the
    # override's right, so the mended override passes both helpers.
    assert_zerocopy(decode_step(FixedFlashInferMetadata))
    assert_zerocopy_class(FixedFlashInferMetadata)
    d = decode_step(FixedFlashInferMetadata).asdict_zerocopy()
    assert "decode_wrapper" not in d


def test_the_omit_field_form_passes():
    meta = OmittedWrapperMetadata(0, 0, 2, [5, 9], 0, decode_wrapper=Wrapper())
    assert_zerocopy(meta)
    assert_zerocopy_class(OmittedWrapperMetadata)


# --- model-runner inputs ------------------------------------------------------------------


class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
    pass


class ModelRunnerInputBase(metaclass=ABCZeroCopyFields):
    """vLLM's shape: an abstract base the runners' frozen inputs derive from."""

    @abc.abstractmethod
    def as_broadcastable_tensor_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ModelInputForGPU(ModelRunnerInputBase):
    input_tokens: list[int] | None = None
    input_positions: list[int] | None = None
    seq_lens: list[int] | None = None
    query_lens: list[int] | None = None
    lora_requests: set[str] | None = None
    attn_metadata: AttentionMetadata | None = None
    request_ids_to_seq_ids: dict[str, list[int]] | None = None
    finished_requests_ids: list[str] | None = None
    virtual_engine: int = 0
    async_callback: Any | None = field(default=None, metadata=OMIT)

    def as_broadcastable_tensor_dict(self) -> dict[str, Any]:
        return self.asdict_zerocopy(skip_fields={"seq_lens", "query_lens"})


@dataclass(frozen=True)
class ModelInputForGPUWithSamplingMetadata(ModelInputForGPU):
    sampling_metadata: object | None = None
    is_prompt: bool | None = None  # used by the driver only


@pytest.mark.parametrize("cls", [ModelInputForGPU, ModelInputForGPUWithSamplingMetadata])
def test_frozen_model_inputs_under_an_abstract_base_pass(cls):
    assert_zerocopy_class(cls)
    assert_zerocopy(cls(input_tokens=[1, 2], input_positions=[0, 1], attn_metadata=AttentionMetadata(0, 0, 2, [5, 9])))


def test_a_frozen_model_input_that_copies_its_tokens_is_reported():
    @dataclass(frozen=True)
    class CopyingInput(ModelInputForGPU):
        def asdict_zerocopy(self, skip_fields=None):
            d = super().asdict_zerocopy(skip_fields)
            if "input_tokens" in d:
                d["input_tokens"] = copy.copy(d["input_tokens"])
            return d

    with pytest.raises(AssertionError) as error:
        assert_zerocopy_class(CopyingInput)
    assert str(error.value) == (
        "CopyingInput: the override CopyingInput.asdict_zerocopy: obj.asdict_zerocopy()['input_tokens']"
        " is not the object the instance holds: it was copied or replaced"
    )


# --- V1 attention metadata ------------------------------------------------------------------


@dataclass
class FlashAttentionMetadataV1(ZeroCopy):
    """vLLM V1's shape: many tensors, cascade fields, and a nested record class."""

    num_actual_tokens: int
    max_query_len: int
    query_start_loc: list[int]
    max_seq_len: int
    seq_lens: list[int]
    block_table: list[int]
    slot_mapping: list[int]
    use_cascade: bool
    common_prefix_len: int
    cu_prefix_query_lens: list[int] | None
    prefix_kv_lens: list[int] | None
    suffix_kv_lens: list[int] | None
    scheduler_metadata: list[int] | None = None
    max_num_splits: int = 0
    causal: bool = True

    @dataclass
    class LocalAttentionMetadata(ZeroCopy):
        local_query_start_loc: list[int]
        local_seqused_k: list[int]
        local_block_table: list[int]
        local_max_query_len: int
        local_max_seq_len: int

    local_attn_metadata: LocalAttentionMetadata | None = None


def v1_step() -> FlashAttentionMetadataV1:
    local = FlashAttentionMetadataV1.LocalAttentionMetadata([0, 2], [2], [0], 2, 2)
    return FlashAttentionMetadataV1(
        2, 2, [0, 2], 2, [2], [0], [3, 4], False, 0, None, None, None, local_attn_metadata=local
    )


@pytest.mark.parametrize("cls", [FlashAttentionMetadataV1, FlashAttentionMetadataV1.LocalAttentionMetadata])
def test_v1_metadata_and_its_nested_class_pass(cls):
    assert_zerocopy_class(cls)


def test_v1_metadata_replaced_each_step_keeps_its_objects():
    step = v1_step()
    assert_zerocopy(step)
    later = dataclasses.replace(step, num_actual_tokens=1)
    assert_zerocopy(later)
    assert later.asdict_zerocopy()["slot_mapping"] is step.slot_mapping


def test_v1_metadata_whose_override_drops_a_field_only_with_skip_fields_is_reported():
    @dataclass
    class Sloppy(FlashAttentionMetadataV1):
        def asdict_zerocopy(self, skip_fields=None):
            # Meant to always leave out the scheduler metadata, it does so only when given names.
            if skip_fields:
                skip_fields = {*skip_fields, "scheduler_metadata"}
            return super().asdict_zerocopy(skip_fields)

    with pytest.raises(AssertionError) as error:
        assert_zerocopy_class(Sloppy)
    message = str(error.value)
    assert message.startswith(
        "Sloppy: the override Sloppy.asdict_zerocopy: obj.asdict_zerocopy(skip_fields={'num_actual_tokens'})"
    )
    assert message.endswith("missing ['scheduler_metadata'], which it returns when called with no arguments")
