"""A model runner shaped like vLLM's, using the metadata of vllm_backends.

Written for these tests: what the runner does with ``asdict_zerocopy()``
(bind it, merge it into a dict display, hand it to a broadcast whose
parameter is ``Optional[Dict[str, Union[torch.Tensor, Any]]]``, rebuild a
record with ``**``) type-checks as written, and the typed idioms the README
shows for what a ``TypedDict`` forbids keep every type.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Set, TypedDict, TypeVar, Union

from engine_base import Tensor
from typing_extensions import assert_type
from vllm_backends import BackendMetadata, PagedMetadata, SamplingMetadata, WrapperMetadata, WrapperMetadataChild

import metakit

M = TypeVar("M", bound=PagedMetadata)


def broadcast_tensor_dict(
    tensor_dict: Optional[Dict[str, Union[Tensor, Any]]] = None, src: int = 0
) -> Dict[str, Union[Tensor, Any]]:
    return tensor_dict or {}


def add_broadcastable(tensor_dict: Dict[str, Any], metadata: Optional[BackendMetadata]) -> None:
    if metadata is not None:
        tensor_dict.update(metadata.asdict_zerocopy())


def make_metadata(**kwargs: Any) -> PagedMetadata:
    return PagedMetadata(**kwargs)


class PagedDict(TypedDict):
    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    slot_mapping: Tensor
    seq_lens: Optional[List[int]]
    seq_lens_tensor: Optional[Tensor]
    max_decode_seq_len: int
    block_tables: Optional[Tensor]
    use_cuda_graph: bool


def driver_step(meta: PagedMetadata, input_tokens: Tensor, decode: Optional[PagedMetadata]) -> None:
    metadata_dict = {"input_tokens": input_tokens, "num_prefills": meta.num_prefills}
    metadata_dict.update(meta.asdict_zerocopy())
    broadcast_tensor_dict(metadata_dict, src=0)
    if decode is not None:
        # Bound first, then passed where a Dict[str, Any] is expected.
        decode_dict = decode.asdict_zerocopy()
        broadcast_tensor_dict(decode_dict, src=0)
        assert_type(decode_dict["block_tables"], Optional[Tensor])
        rebuilt = PagedMetadata(**decode_dict)
    broadcast_tensor_dict(meta.asdict_zerocopy())
    tensor_dict: Dict[str, Any] = {"input_tokens": input_tokens}
    add_broadcastable(tensor_dict, meta)


def worker_step() -> PagedMetadata:
    metadata_dict = broadcast_tensor_dict(src=0)
    metadata_dict.pop("input_tokens")
    return make_metadata(**metadata_dict)


def override_as_declared(meta: WrapperMetadata, child: WrapperMetadataChild) -> None:
    # A user's override wins, with the type it declares.
    assert_type(meta.asdict_zerocopy(), Dict[str, Any])
    assert_type(child.asdict_zerocopy({"sm_scale"}), Dict[str, Any])
    # Its skip_fields is the override's to check (it may take names of its own); the function form's is checked.
    assert_type(child.asdict_zerocopy({"not_a_field"}), Dict[str, Any])
    metakit.asdict_zerocopy(child, skip_fields={"not_a_field"})  # E: no such field
    broadcast_tensor_dict(meta.asdict_zerocopy(), src=0)
    # The function form never calls the override: it has the fields.
    assert_type(metakit.asdict_zerocopy(meta)["plan_hook"], Optional[Callable[[int], None]])


def idiom_add_keys(meta: PagedMetadata, input_tokens: Tensor) -> None:
    # Annotate the binding with the dict you mean: the same object, no copy.
    tensor_dict: Dict[str, Union[Tensor, int, bool, List[int], None]] = meta.asdict_zerocopy()
    tensor_dict["input_tokens"] = input_tokens
    loose: Dict[str, Any] = meta.asdict_zerocopy()
    loose["lora_requests"] = set()
    view: Mapping[str, object] = meta.asdict_zerocopy()


def idiom_pop_a_field(meta: PagedMetadata) -> None:
    # Read the attribute and skip the field: the dict never holds it.
    slot_mapping = meta.slot_mapping
    rest = meta.asdict_zerocopy(skip_fields={"slot_mapping"})
    assert_type(slot_mapping, Tensor)
    assert_type(rest["block_tables"], Optional[Tensor])


def idiom_replace(meta: PagedMetadata, tables: Tensor) -> None:
    assert_type(metakit.replace(meta, block_tables=tables, use_cuda_graph=True), PagedMetadata)


def idiom_named_dict(meta: PagedMetadata) -> PagedDict:
    return meta.asdict_zerocopy()


def skip_through_star_args(meta: PagedMetadata, args: List[Any], kwargs: Dict[str, Any]) -> None:
    # Names that may come through *args or **kwargs make every key not required.
    maybe = meta.asdict_zerocopy(*args)
    if "slot_mapping" in maybe:
        assert_type(maybe["slot_mapping"], Tensor)
    assert_type(metakit.asdict_zerocopy(meta, **kwargs).get("use_cuda_graph"), Optional[bool])


def typevar_receivers(meta: M) -> None:
    assert_type(metakit.astuple_zerocopy(meta)[8], bool)


def plain_dataclass_base(sampling: SamplingMetadata) -> None:
    # handle is OMIT in a plain dataclass base; extra, seeds, merged, copied, keyed and left_by_one are OMIT;
    # kept, unmarked, kept_by_name and kept_by_zero are not (keys given by Final names are read as their text,
    # and a mark's literal value by its truth; found by an outside tester: 0 made the whole result dict[str, Any]).
    assert_type(sampling.astuple_zerocopy(), tuple[float, Optional[Tensor], object, object, object, object])


def typed_dict_methods(meta: PagedMetadata) -> None:
    # The TypedDict methods keep mypy's key-by-key types on the plugin's result.
    d = meta.asdict_zerocopy()
    assert_type(d.get("block_tables"), Optional[Tensor])
    assert_type(d.get("max_decode_seq_len", 0), int)
    d.update({"num_prefills": 2, "use_cuda_graph": False})
    merged = d | {"num_prefills": 3}
    assert_type(merged["num_prefills"], int)
    d |= {"use_cuda_graph": True}
    assert_type(d.setdefault("num_prefills", 1), int)


def idiom_dict_methods(meta: PagedMetadata, decode: Optional[PagedMetadata]) -> Dict[str, Any]:
    # What a TypedDict forbids (a read by a variable key, update by keyword, setdefault of a new key,
    # pop and del) is allowed on the same object bound as a Dict[str, Any], as the README shows.
    d: Dict[str, Any] = meta.asdict_zerocopy()
    sizes = {key: d[key] for key in d}
    d.update(num_prefills=2, **sizes)
    d.setdefault("lora_mapping", None)
    d.pop("slot_mapping")
    del d["block_tables"]
    empty: Dict[str, Any] = {}
    return decode.asdict_zerocopy() if decode is not None else empty


def idiom_declared_before_it_is_bound(meta: PagedMetadata, input_tokens: object, driver: bool) -> None:
    # vLLM's driver and workers declare the binding first, and a model runner keeps the dict in an
    # attribute: each assignment binds it as declared (mypy narrowed it to the TypedDict, so adding a
    # key was an error: an outside tester).
    metadata_dict: Dict[str, Any]
    if driver:
        metadata_dict = meta.asdict_zerocopy()
        metadata_dict["input_tokens"] = input_tokens
        metadata_dict.update(extra=1)
        metadata_dict.pop("slot_mapping")
    else:
        metadata_dict = {}
    assert_type(metadata_dict, Dict[str, Any])
    holder = _Holder()
    holder.cached = meta.asdict_zerocopy(skip_fields={"block_tables"})
    holder.cached["input_tokens"] = input_tokens
    assert_type(holder.cached, Dict[str, Any])


class _Holder:
    cached: Dict[str, Any]


def idiom_result_mixed_with_another_dict(meta: PagedMetadata, skip: Optional[Set[str]], flag: bool) -> int:
    # docs/typing.md: a variable that takes a plain call's result and one with a skip_fields that is not
    # a literal, or a result mixed with another dict, is annotated Dict[str, Any].
    d: Dict[str, Any] = meta.asdict_zerocopy()
    if skip:
        d = meta.asdict_zerocopy(skip_fields=skip)
    e: Dict[str, Any] = meta.asdict_zerocopy() if flag else {}
    return len(d) + len(e)
