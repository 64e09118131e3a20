"""The example engine metadata (``metakit.examples.engine``) with real tensors:
round trips, storage that is never copied, and the CLI on the example."""

import dataclasses
import subprocess
import sys
from dataclasses import fields

import pytest
import torch

import metakit
from metakit import OMIT
from metakit.examples import engine
from metakit.testing import assert_zerocopy

RECORDS = {
    "AttentionMetadata": engine.make_attention_metadata,
    "FlashAttentionMetadata": engine.make_flash_attention_metadata,
    "FlashInferMetadata": engine.make_flashinfer_metadata,
}


@pytest.fixture(params=RECORDS.values(), ids=RECORDS.keys())
def record(request: pytest.FixtureRequest) -> engine.AttentionMetadata:
    return request.param()


def is_omitted(f: dataclasses.Field[object]) -> bool:
    return OMIT.items() <= f.metadata.items()


def test_the_examples_cover_every_class():
    assert [type(record) for record in engine.example_records()] == [
        engine.AttentionMetadata,
        engine.FlashAttentionMetadata,
        engine.FlashInferMetadata,
    ]
    assert len(fields(engine.FlashAttentionMetadata)) == 15
    assert {f.name for f in fields(engine.FlashInferMetadata) if is_omitted(f)} == {"prefill_wrapper", "decode_wrapper"}


@pytest.mark.parametrize("make", RECORDS.values(), ids=RECORDS.keys())
def test_each_example_class_passes_assert_zerocopy(make):
    assert_zerocopy(make())


def test_round_trip_through_init_rebuilds_the_record(record):
    rebuilt = type(record)(**record.asdict_zerocopy())
    for f in fields(record):
        if is_omitted(f):  # the kernel wrappers do not travel: they come back as defaults
            assert getattr(rebuilt, f.name) is f.default
            assert getattr(record, f.name) is not f.default
        else:
            assert getattr(rebuilt, f.name) is getattr(record, f.name)
    for name, value in vars(record).items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(getattr(rebuilt, name), value)


def test_round_trip_runs_post_init_and_leaves_its_attributes_out():
    record = engine.make_flashinfer_metadata()
    record.attn_bias = torch.ones(2, 2)
    d = record.asdict_zerocopy()
    assert "attn_bias" not in d
    assert "is_profile_run" not in d
    rebuilt = engine.FlashInferMetadata(**d)
    assert rebuilt.attn_bias is None
    assert rebuilt.is_profile_run is False


def test_every_tensor_in_the_result_is_the_very_same_tensor(record):
    d = record.asdict_zerocopy()
    tensors = {name: value for name, value in d.items() if isinstance(value, torch.Tensor)}
    assert "slot_mapping" in tensors
    for name, tensor in tensors.items():
        held = getattr(record, name)
        assert tensor is held
        assert tensor.data_ptr() == held.data_ptr()
    for value, f in zip(record.astuple_zerocopy(), [f for f in fields(record) if not is_omitted(f)], strict=True):
        assert value is getattr(record, f.name)


def test_dataclasses_asdict_copies_the_storage_and_metakit_does_not(record):
    copied = dataclasses.asdict(record)["slot_mapping"]
    shared = record.asdict_zerocopy()["slot_mapping"]
    function_form = metakit.asdict_zerocopy(record)["slot_mapping"]
    assert torch.equal(copied, record.slot_mapping)
    assert copied.data_ptr() != record.slot_mapping.data_ptr()
    assert shared.data_ptr() == function_form.data_ptr() == record.slot_mapping.data_ptr()


def test_a_write_through_the_result_is_seen_by_the_record():
    record = engine.make_flash_attention_metadata()
    record.asdict_zerocopy()["slot_mapping"][0] = -1
    assert record.slot_mapping[0].item() == -1
    dataclasses.asdict(record)["slot_mapping"][0] = -2
    assert record.slot_mapping[0].item() == -1


def test_skip_fields_drops_the_named_tensors(record):
    d = record.asdict_zerocopy(skip_fields={"slot_mapping"})
    assert "slot_mapping" not in d
    assert list(d) == [f.name for f in fields(record) if not is_omitted(f) and f.name != "slot_mapping"]


def test_show_prints_the_example_source():
    result = subprocess.run(
        [sys.executable, "-m", "metakit", "show", "metakit.examples.engine:FlashAttentionMetadata"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == metakit.generated_source(engine.FlashAttentionMetadata)
    assert "        'block_tables': self.block_tables,\n" in result.stdout
