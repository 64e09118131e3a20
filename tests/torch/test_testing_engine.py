"""``metakit.testing`` on the example engine and on records that hold real tensors."""

from __future__ import annotations

import sys
import types
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
import torch

from metakit import ZeroCopy
from metakit.examples import engine
from metakit.examples.engine import FlashInferMetadata
from metakit.testing import assert_zerocopy, assert_zerocopy_class, class_id, zerocopy_classes_in

if TYPE_CHECKING:
    from torch import Tensor  # for type checkers only: at run time the annotation below cannot resolve


@pytest.mark.parametrize("cls", zerocopy_classes_in("metakit.examples.engine"), ids=class_id)
def test_every_example_engine_class_passes_with_no_instance(cls):
    assert_zerocopy_class(cls)


def test_the_example_engine_classes_are_found_in_definition_order():
    assert zerocopy_classes_in(engine) == [
        engine.AttentionMetadata,
        engine.FlashAttentionMetadata,
        engine.FlashInferMetadata,
    ]


@pytest.mark.parametrize("meta", engine.example_records(), ids=lambda meta: type(meta).__name__)
def test_every_example_record_passes(meta):
    assert_zerocopy(meta)


@dataclass
class ClonesItsTables(FlashInferMetadata):
    def asdict_zerocopy(self, skip_fields=None):
        d = super().asdict_zerocopy(skip_fields)
        if d.get("block_tables") is not None:
            d["block_tables"] = d["block_tables"].clone()  # a device copy on a GPU
        return d


def test_an_override_that_clones_a_tensor_is_reported():
    meta = engine.make_flashinfer_metadata()
    record = ClonesItsTables(**{name: getattr(meta, name) for name in meta.__dataclass_fields__})
    with pytest.raises(AssertionError) as error:
        assert_zerocopy(record)
    assert str(error.value) == (
        "ClonesItsTables: the override ClonesItsTables.asdict_zerocopy: obj.asdict_zerocopy()['block_tables']"
        " is not the object the instance holds: it was copied or replaced"
    )


def test_an_override_that_clones_a_tensor_is_reported_with_no_instance():
    # The bare instance's tensor fields hold empty tensors of their own: a clone shows.
    with pytest.raises(AssertionError, match=r"\['block_tables'\] is not the object the instance holds"):
        assert_zerocopy_class(ClonesItsTables)


class ClonesTensors:
    """A mixin whose override clones every tensor: listed first, it stands in front of ZeroCopy's methods."""

    def asdict_zerocopy(self, skip_fields=None):
        d = super().asdict_zerocopy(skip_fields)
        return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in d.items()}


@dataclass
class ClonesOptionalTables(ClonesTensors, ZeroCopy):
    num_tokens: int
    block_tables: torch.Tensor | None = None


def test_a_field_annotated_as_an_optional_tensor_gets_a_tensor_sentinel():
    with pytest.raises(AssertionError, match=r"\['block_tables'\] is not the object the instance holds"):
        assert_zerocopy_class(ClonesOptionalTables)


@pytest.mark.parametrize("copy", ["contiguous", "float", "long", "to_float32"])
def test_an_override_that_copies_with_a_conversion_is_reported_with_no_instance(copy):
    convert = {
        "contiguous": torch.Tensor.contiguous,
        "float": torch.Tensor.float,
        "long": torch.Tensor.long,
        "to_float32": lambda t: t.to(torch.float32),
    }[copy]

    @dataclass
    class Converts(ZeroCopy):
        slot_mapping: torch.Tensor

        def asdict_zerocopy(self, skip_fields=None):
            d = super().asdict_zerocopy(skip_fields)
            return {k: convert(v) if isinstance(v, torch.Tensor) else v for k, v in d.items()}

    # The sentinel is strided and int16: each of these makes a new tensor of it.
    with pytest.raises(AssertionError, match=r"\['slot_mapping'\] is not the object the instance holds"):
        assert_zerocopy_class(Converts)


@dataclass
class ClonesATensorNamedForCheckers(ClonesTensors, ZeroCopy):
    slot_mapping: Tensor


def test_a_tensor_annotation_that_cannot_resolve_still_gets_a_tensor_sentinel():
    with pytest.raises(AssertionError, match=r"\['slot_mapping'\] is not the object the instance holds"):
        assert_zerocopy_class(ClonesATensorNamedForCheckers)


@dataclass
class MovesToItsDevice(FlashInferMetadata):
    def asdict_zerocopy(self, skip_fields=None):
        # .to() on the device a tensor is on returns that very tensor.
        d = super().asdict_zerocopy(skip_fields)
        return {k: v.to(v.device) if isinstance(v, torch.Tensor) else v for k, v in d.items()}


def test_an_override_that_moves_tensors_to_where_they_are_passes():
    meta = engine.make_flashinfer_metadata()
    assert_zerocopy(MovesToItsDevice(**{name: getattr(meta, name) for name in meta.__dataclass_fields__}))


class FlatView:
    """A descriptor field whose every read is a new view of the stored tensor."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attribute = f"_{name}"

    def __get__(self, obj: object, owner: type | None = None) -> object:
        if obj is None:
            return None
        stored = getattr(obj, self.attribute, None)
        return stored.view(-1) if isinstance(stored, torch.Tensor) else stored

    def __set__(self, obj: object, value: object) -> None:
        setattr(obj, self.attribute, value)


@dataclass
class WithFlatSlots(ZeroCopy):
    num_tokens: int
    slot_mapping: object = FlatView()


def test_a_tensor_field_read_as_a_new_view_each_time_is_not_reported_as_copied():
    record = WithFlatSlots(4, slot_mapping=torch.arange(4).reshape(2, 2))
    assert record.slot_mapping is not record.slot_mapping
    assert_zerocopy(record)
    assert_zerocopy_class(WithFlatSlots)


_TEXT_ANNOTATIONS = """
from __future__ import annotations
import copy
from dataclasses import dataclass
from typing import List, Optional
import torch
from metakit import ZeroCopy

@dataclass
class Step(ZeroCopy):
    count: counted()
    slot_mapping: torch.Tensor | None = None
    seq_lens: Optional[List[int]] = None

    def asdict_zerocopy(self, skip_fields=None):
        d = super().asdict_zerocopy(skip_fields)
        if isinstance(d.get(copied), (torch.Tensor, list)):
            d[copied] = copy.copy(d[copied])
        return d
"""


@pytest.mark.parametrize("copied", ["slot_mapping", "seq_lens"])
def test_the_class_helper_reads_text_annotations_without_evaluating_them(copied, monkeypatch):
    # DESIGN: "Classes never have their annotations evaluated".  The sentinels still follow the
    # text: a tensor field gets a tensor and a list field a list, so a copy of either shows.
    evaluations = []
    module = types.ModuleType("text_annotations")
    module.__dict__.update(counted=lambda: evaluations.append(1) or int, copied=copied)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(_TEXT_ANNOTATIONS, "<text annotations>", "exec", dont_inherit=True), module.__dict__)
    with pytest.raises(AssertionError, match=rf"\['{copied}'\] is not the object the instance holds"):
        assert_zerocopy_class(module.Step)
    assert evaluations == []


_SENTINEL_PROBE = """
from dataclasses import dataclass
from typing import Annotated, Dict, List, Optional, Tuple, Union
import torch
from torch import nn
from metakit import ZeroCopy

TensorAlias = torch.Tensor
Ints = List[int]
Tree = Union[int, "Tree"]

@dataclass
class Probe(ZeroCopy):
    value: {annotation} = None

    def asdict_zerocopy(self, skip_fields=None):
        seen.append(type(self.value))
        if isinstance(self.value, (list, dict)) and not self.value:  # as vLLM's inputs drop an empty dict
            skip_fields = {{"value", *(skip_fields or ())}}
        return super().asdict_zerocopy(skip_fields)
"""


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        ("Dict[str, torch.Tensor]", dict),
        ("Optional[Dict[str, torch.Tensor]]", dict),
        ("dict[str, torch.Tensor] | None", dict),
        ("Optional[List[torch.Tensor]]", list),
        ("List[int]", list),
        ("Annotated[List[int], 'doc']", list),
        ("Optional[torch.Tensor]", torch.Tensor),
        ("torch.Tensor | None", torch.Tensor),
        ("Optional[Tuple[torch.Tensor, torch.Tensor]]", None),
        ("int", None),
        # Names looked up in the module, as a dict is read (found by an outside tester):
        ("TensorAlias", torch.Tensor),
        ("Optional[TensorAlias]", torch.Tensor),
        ("Ints", list),
        ("torch.LongTensor", torch.Tensor),
        ("nn.Parameter", torch.Tensor),
        ("Tree", None),
    ],
)
@pytest.mark.parametrize("text", [False, True], ids=["live", "text"])
def test_a_fields_sentinel_follows_its_annotations_outer_type(annotation, expected, text, monkeypatch):
    # A text annotation (from __future__ import annotations) is read by its outer type as a live
    # one is: a dict of tensors gets a dict, not a tensor.  (Found by an outside tester: the word
    # Tensor anywhere in the text made a tensor, and a correct override failed on it.)
    seen: list[type] = []
    module = types.ModuleType("sentinel_probe")
    module.seen = seen  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    source = ("from __future__ import annotations\n" if text else "") + _SENTINEL_PROBE.format(annotation=annotation)
    exec(compile(source, "<sentinel probe>", "exec", dont_inherit=True), module.__dict__)
    assert_zerocopy_class(module.Probe)
    if expected is None:
        assert seen[0] not in (list, dict, torch.Tensor)
    else:
        assert seen[0] is expected


_BASE_ELSEWHERE = """
from __future__ import annotations
from dataclasses import dataclass
from torch import Tensor as T
from metakit import ZeroCopy

@dataclass
class Base(ZeroCopy):
    slot_mapping: T
"""

_SUBCLASS_HERE = """
from dataclasses import dataclass
from metakit_base_elsewhere import Base

@dataclass
class Sub(Base):
    def asdict_zerocopy(self, skip_fields=None):
        return {name: value.clone() for name, value in super().asdict_zerocopy(skip_fields).items()}
"""


def test_a_field_declared_in_a_base_in_another_module_is_read_in_that_module(monkeypatch):
    # (Found by an outside tester: the base's annotation text was looked up in the subclass's module, where
    # its alias of Tensor is not, so the field got a plain sentinel and an override that copies passed.)
    for name, source in [("metakit_base_elsewhere", _BASE_ELSEWHERE), ("metakit_sub_here", _SUBCLASS_HERE)]:
        module = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, module)
        exec(compile(source, f"<{name}>", "exec", dont_inherit=True), module.__dict__)
    with pytest.raises(AssertionError, match=r"\['slot_mapping'\] is not the object the instance holds"):
        assert_zerocopy_class(sys.modules["metakit_sub_here"].Sub)


@pytest.mark.parametrize("check", ["instance", "class"])
def test_an_override_that_writes_into_a_tensor_field_is_blamed_for_it(check):
    # (An outside tester: an override that adds to a tensor in place passed, and the check changed the record.)
    @dataclass
    class Step(ZeroCopy):
        slot_mapping: torch.Tensor

        def asdict_zerocopy(self, skip_fields=None):
            self.slot_mapping.add_(1)
            return super().asdict_zerocopy(skip_fields)

    record = Step(torch.arange(4.0).reshape(2, 2).t())  # strided: compared by its values, not its bytes in order
    with pytest.raises(AssertionError, match=r"changed what the instance's field 'slot_mapping' holds"):
        assert_zerocopy(record) if check == "instance" else assert_zerocopy_class(Step)


@pytest.mark.parametrize(
    "change",
    [
        lambda tensor: tensor.zero_(),
        lambda tensor: tensor.mul_(2),
        lambda tensor: tensor.abs_(),
        lambda tensor: tensor.relu_(),
        lambda tensor: tensor.clamp_(min=0),
        lambda tensor: tensor.clamp_(max=16),
        lambda tensor: tensor.clamp_(min=-100),
        lambda tensor: tensor.masked_fill_(tensor == -1, 0),
        lambda tensor: tensor.unsqueeze_(0),
        lambda tensor: tensor.t_() if tensor.dim() == 2 else tensor.unsqueeze_(1),
        lambda tensor: tensor.set_(tensor.clone()),
    ],
    ids=[
        "zero_",
        "mul_",
        "abs_",
        "relu_",
        "clamp_",
        "clamp_max",
        "clamp_low",
        "masked_fill_",
        "unsqueeze_",
        "t_",
        "set_",
    ],
)
def test_an_override_that_changes_a_tensor_field_in_place_is_reported_with_no_instance(change):
    # (Outside testers: the class check's tensor held zeros, then -3 and 7, which some of these changes
    # leave as they were; and a change of shape or storage kept the values.)
    @dataclass
    class Step(ZeroCopy):
        seq_lens: torch.Tensor

        def asdict_zerocopy(self, skip_fields=None):
            change(self.seq_lens)
            return super().asdict_zerocopy(skip_fields)

    with pytest.raises(AssertionError, match=r"changed what the instance's field 'seq_lens' holds"):
        assert_zerocopy_class(Step)


@pytest.mark.parametrize("check", ["instance", "class"])
def test_a_post_init_that_clamps_its_tensor_once_passes(check):
    # The class check's new sentinels had never been through __post_init__: its first clamp_ was blamed as a
    # change that dataclasses.replace made to the record (an outside tester).
    @dataclass
    class Padded(ZeroCopy):
        slot_mapping: torch.Tensor

        def __post_init__(self):
            self.slot_mapping.clamp_(min=0)

    assert_zerocopy(Padded(torch.tensor([3, -1, 5]))) if check == "instance" else assert_zerocopy_class(Padded)


@pytest.mark.parametrize("check", ["instance", "class"])
def test_a_post_init_that_changes_its_tensor_every_time_is_still_blamed(check):
    @dataclass
    class Counts(ZeroCopy):
        seq_lens: torch.Tensor

        def __post_init__(self):
            self.seq_lens.add_(1)

    with pytest.raises(AssertionError, match=r"__post_init__: dataclasses.replace\(obj\) changed what the instance's"):
        assert_zerocopy(Counts(torch.zeros(3))) if check == "instance" else assert_zerocopy_class(Counts)


@pytest.mark.parametrize(
    "tensor",
    [
        torch.zeros(1 << 20),  # read through numpy on the CPU
        torch.zeros(1 << 10, dtype=torch.complex64).conj(),  # a conjugate view: numpy refuses it as it is
        torch.zeros(32, 32).t(),  # strided: its elements in order
        torch.zeros(5, dtype=torch.bfloat16),  # no numpy dtype
    ],
    ids=["large", "conjugate", "strided", "bfloat16"],
)
def test_a_change_to_the_last_byte_of_a_tensor_shows(tensor):
    @dataclass
    class Big(ZeroCopy):
        kv: torch.Tensor

        def asdict_zerocopy(self, skip_fields=None):
            self.kv.view(-1)[-1:].add_(1) if self.kv.is_contiguous() else self.kv.t()[-1, -1:].add_(1)
            return super().asdict_zerocopy(skip_fields)

    with pytest.raises(AssertionError, match=r"changed what the instance's field 'kv' holds"):
        assert_zerocopy(Big(tensor))


def test_a_quantized_tensor_field_is_compared_by_identity_without_crashing():
    # Viewing a quantized tensor's bytes crashed the process (an outside tester).
    @dataclass
    class Quantized(ZeroCopy):
        weights: object

    with warnings.catch_warnings():  # torch deprecates quantized dtypes
        warnings.simplefilter("ignore", UserWarning)
        weights = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1, 0, torch.qint8)
    assert_zerocopy(Quantized(weights))


def test_a_fake_tensor_field_is_not_reported_as_changed():
    # torch.equal on a FakeTensor raises: each check read that as a change (an outside tester).
    from torch._subclasses.fake_tensor import FakeTensorMode

    @dataclass
    class Traced(ZeroCopy):
        x: object

    with FakeTensorMode():
        fake = torch.empty(4)
    assert_zerocopy(Traced(fake))
