"""Good usage: every line type-checks, and every type is exact."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict, TypeVar

from engine_base import AttentionMetadata, FlashInferMetadata, Tensor
from engine_models import (
    Backend,
    Box,
    DecodeMetadata,
    Direct,
    DirectChild,
    Empty,
    FlashAttentionMetadata,
    FrozenChild,
    IntBox,
    KeywordChild,
    Overriding,
    Pair,
    UndecoratedMetadata,
)
from typing_extensions import NotRequired, assert_type

import metakit


class AttentionDict(TypedDict):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Tensor


class FlashInferDict(TypedDict):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Tensor
    is_prompt: bool
    block_tables: Tensor | None
    page_size: int
    data_type: str


class FlashInferSkippedDict(TypedDict):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    is_prompt: bool
    block_tables: Tensor | None
    page_size: int
    data_type: str


class FlashInferMaybeDict(TypedDict, total=False):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Tensor
    is_prompt: bool
    block_tables: Tensor | None
    page_size: int
    data_type: str


class DecodeDict(TypedDict):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Tensor
    is_prompt: bool
    block_tables: Tensor | None
    page_size: bool
    decode_wrapper: object
    data_type: str
    steps: int


class FlashAttentionDict(TypedDict):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Tensor
    seq_lens: list[int] | None
    max_query_len: int | None
    use_cuda_graph: bool


class BoxDict(TypedDict):
    item: str
    items: list[str]


class IntBoxDict(TypedDict):
    item: int
    items: list[int]
    label: str


class PairDict(TypedDict):
    item: bytes
    items: list[bytes]
    other: float | None


class DirectDict(TypedDict):
    a: int
    b: str


class DirectChildDict(TypedDict):
    a: int
    b: str
    c: float


class KeywordDict(TypedDict):
    k: int
    p: str


class EmptyDict(TypedDict):
    pass


def forward(
    num_prefills: int,
    num_prefill_tokens: int,
    num_decode_tokens: int,
    slot_mapping: Tensor,
    is_prompt: bool,
    block_tables: Tensor | None,
    page_size: int,
    data_type: str,
) -> None: ...


def decode_forward(
    num_prefills: int, num_prefill_tokens: int, num_decode_tokens: int, is_prompt: bool, **kwargs: object
) -> None: ...


def method_forms(meta: FlashInferMetadata) -> None:
    assert_type(meta.asdict_zerocopy(), FlashInferDict)
    assert_type(meta.asdict_zerocopy(None), FlashInferDict)
    assert_type(meta.asdict_zerocopy(skip_fields={"slot_mapping"}), FlashInferSkippedDict)
    assert_type(meta.asdict_zerocopy(["slot_mapping", "prefill_wrapper"]), FlashInferSkippedDict)
    assert_type(meta.asdict_zerocopy(("slot_mapping", "slot_mapping")), FlashInferSkippedDict)
    assert_type(meta.astuple_zerocopy(), tuple[int, int, int, Tensor, bool, Tensor | None, int, str])
    d = meta.asdict_zerocopy()
    tensor: Tensor = d["slot_mapping"]
    assert_type(d["block_tables"], Tensor | None)
    assert_type(d["page_size"], int)
    forward(**d)
    FlashInferMetadata(**d, workspace_size=1)


MetaT = TypeVar("MetaT", bound=FlashInferMetadata)


def typevar_receivers(meta: MetaT) -> MetaT:
    """A receiver typed by a TypeVar gets what its bound gets (issue 24: it got dict[str, Any])."""
    assert_type(meta.asdict_zerocopy(), FlashInferDict)
    assert_type(meta.asdict_zerocopy(skip_fields={"slot_mapping"}), FlashInferSkippedDict)
    assert_type(meta.astuple_zerocopy(), tuple[int, int, int, Tensor, bool, Tensor | None, int, str])
    assert_type(metakit.asdict_zerocopy(meta), FlashInferDict)
    forward(**meta.asdict_zerocopy())
    return meta


def non_literal_skip(meta: FlashInferMetadata, skip: Iterable[str], names: set[str]) -> None:
    assert_type(meta.asdict_zerocopy(skip), FlashInferMaybeDict)
    assert_type(meta.asdict_zerocopy(skip_fields=names), FlashInferMaybeDict)
    assert_type(meta.asdict_zerocopy(skip_fields=frozenset(names)), FlashInferMaybeDict)
    # A frozenset of a display is a literal: Python has no frozenset display (an outside tester).
    assert_type(meta.asdict_zerocopy(skip_fields=frozenset({"slot_mapping"})), FlashInferSkippedDict)
    maybe = meta.asdict_zerocopy(skip)
    if "slot_mapping" in maybe:
        tensor: Tensor = maybe["slot_mapping"]
    page_size: int = maybe.get("page_size", 16)


def skip_fields_made_by_a_comprehension_or_a_call(base: AttentionMetadata, names: list[str]) -> None:
    base.asdict_zerocopy(skip_fields=[name for name in names if name])
    base.asdict_zerocopy(skip_fields={name.strip() for name in names})
    base.asdict_zerocopy(skip_fields=(name for name in names))
    base.asdict_zerocopy(skip_fields=sorted(names))
    base.asdict_zerocopy(skip_fields=set())


def function_forms(meta: FlashInferMetadata, base: AttentionMetadata, either: AttentionMetadata | Direct) -> None:
    assert_type(metakit.asdict_zerocopy(meta), FlashInferDict)
    assert_type(metakit.asdict_zerocopy(meta, {"slot_mapping"}), FlashInferSkippedDict)
    assert_type(metakit.asdict_zerocopy(meta, skip_fields=set()), FlashInferMaybeDict)
    assert_type(metakit.astuple_zerocopy(base), tuple[int, int, int, Tensor])
    assert_type(metakit.asdict_zerocopy(either), AttentionDict | DirectDict)
    forward(**metakit.asdict_zerocopy(meta))


def splat_into_smaller_call(meta: FlashInferMetadata) -> None:
    decode_forward(**meta.asdict_zerocopy(skip_fields={"slot_mapping"}))


def a_copy_made_with_dict_is_a_plain_dict(meta: FlashInferMetadata) -> None:
    # As without the plugin (it was a dict[str, object], which no ** call takes: an outside tester).
    kwargs = dict(meta.asdict_zerocopy())
    kwargs["is_prompt"] = False
    forward(**kwargs)
    assert_type(dict(meta.asdict_zerocopy(), page_size=16), dict[str, Any])
    assert_type(dict(meta.asdict_zerocopy(skip_fields={"slot_mapping"})), dict[str, Any])
    pairs = [("a", 1)]
    assert_type(dict(pairs), dict[str, int])  # other dicts as before
    # Through its views too (an outside tester: each was a dict[str, object]).
    forward(**dict(meta.asdict_zerocopy().items()))
    forward(**{key: value for key, value in meta.asdict_zerocopy().items() if key != "page_size"})
    assert_type(dict(meta.asdict_zerocopy().items()), dict[str, Any])
    assert_type(list(meta.asdict_zerocopy().values()), list[Any])


def inheritance(
    flash: FlashAttentionMetadata,
    decode: DecodeMetadata,
    undecorated: UndecoratedMetadata,
    keyword: KeywordChild,
    frozen: FrozenChild,
) -> None:
    assert_type(flash.asdict_zerocopy(), FlashAttentionDict)
    assert_type(decode.asdict_zerocopy(), DecodeDict)
    assert_type(undecorated.asdict_zerocopy(), FlashAttentionDict)
    assert_type(keyword.asdict_zerocopy(), KeywordDict)
    assert_type(frozen.astuple_zerocopy(), tuple[int, bool])
    assert_type(keyword.astuple_zerocopy(), tuple[int, str])
    base: AttentionMetadata = flash
    assert_type(base.asdict_zerocopy(), AttentionDict)


def generics(box: Box[str], int_box: IntBox, pair: Pair[bytes, float]) -> None:
    assert_type(box.asdict_zerocopy(), BoxDict)
    assert_type(int_box.asdict_zerocopy(), IntBoxDict)
    assert_type(int_box.astuple_zerocopy(), tuple[int, list[int], str])
    assert_type(pair.asdict_zerocopy(), PairDict)
    assert_type(metakit.asdict_zerocopy(pair), PairDict)


def metaclass_used_directly(direct: Direct, child: DirectChild, backend: Backend) -> None:
    assert_type(direct.asdict_zerocopy(), DirectDict)
    assert_type(direct.astuple_zerocopy(), tuple[int, str])
    assert_type(child.asdict_zerocopy(skip_fields={"hidden"}), DirectChildDict)
    assert_type(backend.astuple_zerocopy(), tuple[str])
    assert_type(metakit.astuple_zerocopy(child), tuple[int, str, float])


def own_method_wins(obj: Overriding, empty: Empty) -> None:
    assert_type(obj.asdict_zerocopy(), dict[str, int])
    assert_type(obj.astuple_zerocopy(), tuple[int, int])
    assert_type(empty.asdict_zerocopy(), EmptyDict)
    assert_type(empty.astuple_zerocopy(), tuple[()])


def generic_code(items: list[FlashInferMetadata]) -> list[Mapping[str, Any]]:
    return [item.asdict_zerocopy() for item in items]


class DictWithExtra(TypedDict):
    extra: NotRequired[int]


def forwarding_wrappers(meta: FlashInferMetadata, *args: Any, **changes: Any) -> None:
    # The object comes through ``*args``: its type is not the tuple's, nor the list's.
    assert_type(metakit.asdict_zerocopy(*args), dict[str, Any])
    assert_type(metakit.astuple_zerocopy(*args), tuple[Any, ...])
    metakit.replace(*args, **changes)
    metakit.replace(*[meta])


@dataclass
class _PagedLayout(metakit.ZeroCopy):
    num_pages: int = 0
    page_size: int = 16


class _FixedPageSize(_PagedLayout):  # a plain class: dataclasses never reads its annotations
    page_size: ClassVar[int] = 32  # type: ignore[misc]


@dataclass
class _FixedPaged(_FixedPageSize):
    extra: int = 0


def a_classvar_in_a_plain_class_between_leaves_the_field(meta: _FixedPaged) -> int:
    # (An outside tester: the plugin dropped the field, which fields() still holds.)
    return meta.asdict_zerocopy()["page_size"] + len(meta.asdict_zerocopy(skip_fields={"page_size"}))
