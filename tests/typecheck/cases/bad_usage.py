"""Bad usage: mypy must report an error on each line commented "E: why", and on no other."""

import enum
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Literal, Optional, Set, TypeVar, Union

from engine_base import AttentionMetadata, FlashInferMetadata, Tensor
from engine_models import Box, Direct, IntBox
from vllm_backends import PagedMetadata, SamplingMetadata
from vllm_runner import broadcast_tensor_dict

import metakit


class MyStr(str): ...


def forward(num_prefills: int, num_prefill_tokens: int, num_decode_tokens: int, slot_mapping: Tensor) -> None: ...


def keys_that_are_not_in_the_dict(meta: FlashInferMetadata) -> None:
    d = meta.asdict_zerocopy()
    d["attn_bias"]  # E: a post-init attribute
    d["is_profile_run"]  # E: another post-init attribute
    d["kernel_version"]  # E: a ClassVar
    d["workspace_size"]  # E: an InitVar
    d["prefill_wrapper"]  # E: an OMIT field
    d["decode_wrapper"]  # E: an OMIT field, merged into other metadata
    metakit.asdict_zerocopy(meta)["attn_bias"]  # E: the function form too
    d["slot_mapping"] = None  # E: a value of the wrong type
    d["unknown"] = 1  # E: no key of that name


def wrong_value_types(meta: FlashInferMetadata, box: IntBox) -> None:
    d = meta.asdict_zerocopy()
    page_size: str = d["page_size"]  # E: an int
    tables: Tensor = d["block_tables"]  # E: may be None
    item: str = box.asdict_zerocopy()["item"]  # E: generic parameter substituted: int
    count: str = meta.astuple_zerocopy()[0]  # E: the tuple's first item is an int
    meta.astuple_zerocopy()[8]  # E: the tuple has eight items
    a, b = meta.astuple_zerocopy()  # E: and not two


def skipped_keys(meta: FlashInferMetadata, direct: Direct, others: set[str]) -> None:
    meta.asdict_zerocopy(skip_fields=("slot_mapping", *others))["slot_mapping"]  # E: skipped beside others
    d = meta.asdict_zerocopy(skip_fields={"slot_mapping", "is_prompt"})
    d["slot_mapping"]  # E: skipped
    d["is_prompt"]  # E: skipped
    metakit.asdict_zerocopy(meta, ["page_size"])["page_size"]  # E: skipped
    direct.asdict_zerocopy(("a",))["a"]  # E: skipped


def unknown_skip_names(meta: FlashInferMetadata, box: Box[int], others: set[str], name: str) -> None:
    meta.asdict_zerocopy(skip_fields={"slot_mapping", "slot_mappin"})  # E: not a field
    meta.asdict_zerocopy(skip_fields={"slot_mappin", *others})  # E: beside *others (an outside tester)
    meta.asdict_zerocopy(["slot_mappin", name])["slot_mapping"]  # E: beside a variable
    meta.asdict_zerocopy(["attn_bias"])  # E: a post-init attribute is not a field
    meta.asdict_zerocopy(("kernel_version",))  # E: nor is a ClassVar
    meta.asdict_zerocopy({"workspace_size"})  # E: nor an InitVar
    metakit.asdict_zerocopy(box, skip_fields=["value"])  # E: the function form too
    meta.asdict_zerocopy(skip_fields="slot_mapping")  # E: a str is not a set of names


def extra_splat_keys(meta: FlashInferMetadata, base: AttentionMetadata) -> None:
    forward(**meta.asdict_zerocopy())  # E: is_prompt, block_tables, ... are extra
    forward(**base.asdict_zerocopy())
    forward(**meta.asdict_zerocopy(skip_fields={"num_prefills"}))  # E: also one missing
    AttentionMetadata(**meta.asdict_zerocopy())  # E: extra for the base class


def classes_where_instances_belong() -> None:
    metakit.asdict_zerocopy(FlashInferMetadata)  # E: the class itself
    metakit.astuple_zerocopy(Direct)  # E: the class itself


def runner_misuse(meta: PagedMetadata, sampling: SamplingMetadata) -> None:
    d = meta.asdict_zerocopy()
    broadcast_tensor_dict(d)
    d["attn_bias"]  # E: still no such key after it was passed as a dict
    d["input_tokens"] = 1  # E: adding a key: annotate the binding instead
    d.pop("slot_mapping")  # E: popping a field: skip it instead
    narrow: Dict[str, int] = d  # E: not every value is an int
    also_narrow: Dict[str, int] = meta.asdict_zerocopy()  # E: nor from the call itself
    forward(**d)  # E: splats stay checked
    sampling.asdict_zerocopy()["handle"]  # E: OMIT in a plain dataclass base


def skip_fields_of_the_wrong_type(meta: PagedMetadata, anything: Any) -> None:
    meta.asdict_zerocopy(skip_fields=5)  # E: not an iterable
    meta.asdict_zerocopy(b"slot_mapping")  # E: bytes are not names
    meta.asdict_zerocopy(anything)
    meta.asdict_zerocopy(skip_fields=[1])  # E: a list display of ints (typed list[Any] from the declared Any)
    meta.asdict_zerocopy(skip_fields={b"slot_mapping"})  # E: a set display of bytes
    meta.asdict_zerocopy(skip_fields=["slot_mapping", *["use_cuda_graph"]])


def skip_fields_made_by_a_comprehension_or_a_call(meta: PagedMetadata, ints: list[int]) -> None:
    # Inferred against the declared Any, each of these is a list[Any], set[Any] or Generator[Any, ...].
    meta.asdict_zerocopy(skip_fields=[n * 2 for n in range(2)])  # E: a list comprehension of ints
    meta.asdict_zerocopy(skip_fields={n + 1 for n in ints})  # E: a set comprehension of ints
    meta.asdict_zerocopy(skip_fields=(n for n in ints))  # E: a generator of ints
    meta.asdict_zerocopy(skip_fields=sorted(ints))  # E: a generic call's list of ints


def skip_fields_that_may_be_a_str(
    meta: PagedMetadata, two: Literal["a", "b"], maybe: Optional[str], either: Union[str, Set[str]], name: MyStr
) -> None:
    meta.asdict_zerocopy(skip_fields=two)  # E: a Literal of two strs
    meta.asdict_zerocopy(skip_fields=maybe)  # E: an Optional[str]
    meta.asdict_zerocopy(skip_fields=either)  # E: a str or a set
    meta.asdict_zerocopy(skip_fields=name)  # E: a str subclass
    metakit.asdict_zerocopy(meta, skip_fields=maybe)  # E: the function form too


class PlainConfig:
    page_size: int = 16


class Color(enum.Enum):
    RED = 1


class Shade(enum.Enum):
    """No members: an enum below it, with a dataclass among its bases too, has dataclass members."""


def never_a_dataclass(number: int, text: str, color: Color, shade: Shade) -> None:
    metakit.astuple_zerocopy(number)  # E: an int is never a dataclass
    metakit.asdict_zerocopy(text)  # E: nor is a str
    metakit.replace(number)  # E: replace() too
    metakit.asdict_zerocopy(color)  # E: an enum with members takes no subclass, and is no dataclass
    metakit.asdict_zerocopy(Color.RED)  # E: its member the same
    metakit.asdict_zerocopy(shade)


def maybe_none(meta: Optional[PagedMetadata]) -> None:
    metakit.asdict_zerocopy(meta)  # E: None is never a dataclass
    metakit.astuple_zerocopy(meta)  # E: the same
    metakit.asdict_zerocopy(None)  # E: the same
    metakit.replace(meta, use_cuda_graph=True)  # E: as mypy checks dataclasses.replace


def replace_as_dataclasses_replace(config: PlainConfig, anything: object) -> None:
    metakit.replace(config)  # E: a plain class, which dataclasses.replace refuses too
    metakit.replace(anything)  # E: so is object
    metakit.replace(PagedMetadata)  # E: so is a class


def replace_checks_names_and_types(meta: PagedMetadata) -> None:
    metakit.replace(meta, slot_mappin=None)  # E: not a field
    metakit.replace(meta, use_cuda_graph="yes")  # E: a str for a bool
    metakit.replace(meta, num_prefills=None)  # E: None for an int


def local_classes_are_named_as_at_run_time() -> None:
    @dataclass
    class Local(metakit.ZeroCopy):
        a: int

    Local(1).asdict_zerocopy(["b"])  # E: the message says local_classes_are_named_as_at_run_time.<locals>.Local


class Runner:
    def step(self) -> None:
        @dataclass
        class Local(metakit.ZeroCopy):
            a: int

        metakit.asdict_zerocopy(Local)  # E: the message says Runner.step.<locals>.Local


def typed_dict_methods_stay_checked(meta: PagedMetadata) -> None:
    d = meta.asdict_zerocopy()
    d.update({"num_prefils": 2})  # E: no such key
    d.update({"num_prefills": "2"})  # E: a str for an int


SteppedT = TypeVar("SteppedT", bound=FlashInferMetadata)


def typevar_receiver_keys_stay_checked(meta: SteppedT) -> None:
    meta.asdict_zerocopy()["attn_bias"]  # E: not a field
    meta.asdict_zerocopy(skip_fields={"slot_mappings"})  # E: not a field
    meta.asdict_zerocopy(skip_fields={"slot_mapping": 0, "seq_len": 1})  # E: a dict's keys are the names


EitherT = TypeVar("EitherT", bound=Union[PagedMetadata, FlashInferMetadata])


def union_bound_typevar_receiver_keys_stay_checked(meta: EitherT) -> None:
    # A TypeVar bound to a union got dict[str, Any] (an outside tester).
    meta.asdict_zerocopy()["attn_bias"]  # E: a field of neither
    meta.asdict_zerocopy(skip_fields={"slot_mappings"})  # E: a field of neither
    meta.asdict_zerocopy(skip_fields=frozenset(["slot_mappings"]))  # E: a frozenset of a display is a literal
    meta.astuple_zerocopy()[20]  # E: out of range for both
    metakit.asdict_zerocopy(meta)["attn_bias"]  # E: the function form too (an outside tester)
    metakit.astuple_zerocopy(meta)[20]  # E: out of range for both


def starred_skip_fields_items_are_checked(meta: FlashInferMetadata, ints: set[int]) -> None:
    # (An outside tester: each raises at run time, and passed.)
    meta.asdict_zerocopy(skip_fields={"slot_mapping", *ints})  # E: ints are no field names
    meta.asdict_zerocopy(skip_fields=[*ints])  # E: nor alone
    meta.asdict_zerocopy(skip_fields={"slot_mapping", *{"slot_mappin"}})  # E: a name in a starred display


def a_plain_result_rebound_to_one_that_may_lack_keys(meta: FlashInferMetadata, skip: Set[str]) -> int:
    d = meta.asdict_zerocopy()
    d = meta.asdict_zerocopy(skip_fields=skip)  # E: its keys may be gone (docs/typing.md: annotate d)
    return len(d)


@dataclass
class _Paged(metakit.ZeroCopy):
    num_pages: int = 0
    page_size: int = 16


@dataclass
class _FixedPages(_Paged):
    page_size: ClassVar[int] = 32  # type: ignore[misc]  # a field made a ClassVar: no field at run time


@dataclass
class _FixedCount(_Paged):
    num_pages: ClassVar = 8  # type: ignore[misc]  # the same, bare


def a_field_that_a_subclass_makes_a_bare_classvar_is_no_key(meta: _FixedCount) -> None:
    meta.asdict_zerocopy()["num_pages"]  # E: a bare ClassVar in this class
    meta.asdict_zerocopy(skip_fields={"num_pages"})  # E: not a field of this class


def a_field_that_a_subclass_makes_a_classvar_is_no_key(meta: _FixedPages) -> None:
    # (An outside tester: the plugin kept it, where stubgen did not.)
    meta.asdict_zerocopy()["page_size"]  # E: a ClassVar in this class
    meta.asdict_zerocopy(skip_fields={"page_size"})  # E: not a field of this class
    meta.astuple_zerocopy()[1]  # E: one field only
