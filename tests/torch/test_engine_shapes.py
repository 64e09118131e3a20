"""The engine-shaped records of ``tests/records.py`` with real tensors."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field

import torch

import metakit
import metakit.testing as mt
from metakit import OMIT, ZeroCopy
from tests.records import FlashInferMeta, FlashMeta, FrozenSlotsMeta


def test_torch_tensors_are_never_copied():

    @dataclass
    class TMeta(ZeroCopy):
        slot_mapping: torch.Tensor
        block_tables: torch.Tensor
        seq_lens: list
        num_tokens: int
        wrapper: object = field(default=None, metadata=OMIT)

        def __post_init__(self):
            self.attn_bias = torch.zeros(1)

    m = TMeta(torch.arange(1024), torch.ones(4, 8, dtype=torch.int32), [torch.tensor(1)], 7, object())
    d = m.asdict_zerocopy()
    assert list(d) == ["slot_mapping", "block_tables", "seq_lens", "num_tokens"]
    assert d["slot_mapping"] is m.slot_mapping
    assert d["seq_lens"] is m.seq_lens
    assert d["slot_mapping"].data_ptr() == m.slot_mapping.data_ptr()
    t = m.astuple_zerocopy()
    assert t[1] is m.block_tables
    ref = dataclasses.asdict(m)
    assert ref["slot_mapping"] is not m.slot_mapping  # dataclasses copies, metakit does not
    r = metakit.replace(m, num_tokens=8)
    assert r.slot_mapping is m.slot_mapping
    assert r.wrapper is m.wrapper
    assert r.num_tokens == 8
    assert r.attn_bias is not m.attn_bias
    mt.assert_zerocopy(m)
    mt.assert_zerocopy_class(TMeta)
    rebuilt = TMeta(**d)
    assert rebuilt.slot_mapping is m.slot_mapping


def test_torch_pickle_and_deepcopy():
    o = FlashMeta(1, 8, 2, torch.arange(6), [4], query_start_loc=torch.tensor([0, 4]))
    back = pickle.loads(pickle.dumps(o))
    assert torch.equal(back.slot_mapping, o.slot_mapping)
    assert back.slot_mapping is not o.slot_mapping
    dc = copy.deepcopy(o)
    assert torch.equal(dc.query_start_loc, o.query_start_loc)
    assert metakit.asdict_zerocopy(dc)["slot_mapping"] is dc.slot_mapping
    fs = FrozenSlotsMeta(input_tokens=torch.arange(3), input_positions=torch.arange(3))
    r = metakit.replace(fs, is_prompt=False)
    assert r.input_tokens is fs.input_tokens
    back = pickle.loads(pickle.dumps(fs))
    assert torch.equal(back.input_tokens, fs.input_tokens)


def test_torch_flashinfer_override_drops_wrapper():
    o = FlashInferMeta(0, 0, 4, torch.arange(4), decode_wrapper=object(), wrapper=object())
    d = o.asdict_zerocopy()
    assert "decode_wrapper" not in d
    assert "wrapper" not in d
    assert "doc_wrapper" not in d
    assert d["slot_mapping"] is o.slot_mapping
    rebuilt = FlashInferMeta(**o.asdict_zerocopy(skip_fields={"max_seq_len"}))
    assert rebuilt.slot_mapping is o.slot_mapping
    assert rebuilt.decode_wrapper is None
    mt.assert_zerocopy(o)
