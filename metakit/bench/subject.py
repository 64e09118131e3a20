"""What the benchmark measures: the engine's ``FlashAttentionMetadata``, or torch-free twins."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

from metakit import ZeroCopy
from metakit.bench.report import installed
from metakit.bench.timing import Broken

ENGINE: str = "metakit.examples.engine"
SUBJECT: str = "FlashAttentionMetadata"


@dataclass
class Subject:
    """The records the benchmark measures: the engine's, or torch-free twins."""

    cls: type
    record: Any
    torch_version: str | None
    make_sized: Callable[[int], Any] | None
    """Builds a record whose ``slot_mapping`` has that many elements (torch only)."""


def load_subject() -> Subject:
    """The engine's ``FlashAttentionMetadata`` with real tensors, or its twin without torch."""
    torch_version = installed("torch")
    if torch_version is None:
        cls = twin_class(SUBJECT)
        return Subject(cls, cls(**{name: object() for name in field_names(cls)}), None, None)
    from metakit.examples import engine

    return Subject(
        engine.FlashAttentionMetadata,
        engine.make_flash_attention_metadata(),
        torch_version,
        lambda elements: engine.make_flash_attention_metadata(num_tokens=elements),
    )


def twin_class(name: str) -> type:
    """A torch-free ``ZeroCopy`` dataclass with the fields of the engine class *name*.

    The engine module imports torch, so its classes are read from its source:
    each class's annotated names, after those of the engine classes it derives
    from.  The twin derives from twins in the same way.
    """
    spec = importlib.util.find_spec(ENGINE)
    if spec is None or spec.origin is None:
        raise Broken(f"cannot find the source of {ENGINE}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    nodes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def build(node: ast.ClassDef) -> type:
        bases = tuple(build(nodes[b.id]) for b in node.bases if isinstance(b, ast.Name) and b.id in nodes)
        own = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
        return dataclasses.make_dataclass(
            node.name, [(n, Any) for n in own], bases=bases or (ZeroCopy,), namespace={"__module__": __name__}
        )

    if name not in nodes:
        raise Broken(f"{ENGINE} has no class {name}")
    return build(nodes[name])


def field_names(cls_or_record: Any) -> list[str]:
    """The names of the dataclass fields of a class or instance, in order."""
    return [f.name for f in fields(cls_or_record)]


class Peers(NamedTuple):
    """Equivalent records of the peers, where installed: an attrs class and a msgspec Struct."""

    attrs_record: Any | None
    struct_record: Any | None
    missing: dict[str, str]
    """Why a peer's record is None, by peer name."""


def peer_twins(name: str, values: Mapping[str, Any], *, frozen: bool = False) -> Peers:
    """An attrs instance and a msgspec Struct named *name* holding *values* (the very objects), *frozen* or not."""
    attrs_record = struct_record = None
    missing = {}
    if installed("attrs") is None:
        missing["attrs"] = "attrs is not installed"
    else:
        import attrs

        attrs_record = attrs.make_class(name, {key: attrs.field() for key in values}, frozen=frozen)(**values)
    if installed("msgspec") is None:
        missing["msgspec"] = "msgspec is not installed"
    else:
        import msgspec

        struct_record = msgspec.defstruct(name, [(key, Any) for key in values], frozen=frozen)(**values)
    return Peers(attrs_record, struct_record, missing)
