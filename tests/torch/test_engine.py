"""The example engine metadata (``metakit.examples.engine``) with real tensors:
round trips, storage that is never copied, and the CLI on the example."""

import dataclasses
import subprocess
import sys
from dataclasses import dataclass, fields

import pytest
import torch

import metakit
from metakit import OMIT, ZeroCopy
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


@dataclass
class _FlashInferShaped(ZeroCopy):
    num_prefills: int
    slot_mapping: torch.Tensor
    decode_wrapper: object = None

    def asdict_zerocopy(self, skip_fields: set[str] | None = None) -> dict[str, object]:
        return super().asdict_zerocopy({"decode_wrapper", *(skip_fields or ())})


def test_every_form_runs_under_torch_compile_with_no_graph_break():
    # (Found by an outside tester: torch.compile read the globals of a generated method from the module that
    # its globals named, the class's, which holds none of them: every call with skip_fields, and so every
    # call of FlashInfer's override, raised InternalTorchDynamoError.)
    def step(record: _FlashInferShaped) -> torch.Tensor:
        kept = record.asdict_zerocopy(skip_fields={"num_prefills"})
        by_function = metakit.asdict_zerocopy(record, skip_fields=["decode_wrapper"])
        changed = metakit.replace(record, num_prefills=3)
        return (
            kept["slot_mapping"] * by_function["num_prefills"] + changed.num_prefills + len(record.astuple_zerocopy())
        )

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="eager", fullgraph=True)
    assert compiled(_FlashInferShaped(1, torch.arange(4))).tolist() == [6, 7, 8, 9]
    assert engine.FlashAttentionMetadata.asdict_zerocopy.__module__ == engine.__name__  # as before
