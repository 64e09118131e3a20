"""More metadata classes: subclasses from another module, generics, the
metaclass used directly, and the other ways of declaring fields."""

import abc
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Generic, TypeVar

from engine_base import AttentionMetadata, FlashInferMetadata, Tensor

from metakit import OMIT, ZeroCopy, ZeroCopyFields

T = TypeVar("T")
U = TypeVar("U")


@dataclass
class FlashAttentionMetadata(AttentionMetadata):
    """Inherits four fields from a class in another module."""

    seq_lens: list[int] | None
    max_query_len: int | None
    use_cuda_graph: bool = False


@dataclass(slots=True)
class DecodeMetadata(FlashInferMetadata):
    """Redefines an inherited field: it keeps its place and takes the new type."""

    page_size: bool = True
    decode_wrapper: object = None  # no longer OMIT
    steps: int = field(default=0, init=False)


@dataclass(frozen=True)
class FrozenBase(ZeroCopy):
    step: int
    wrapper: object = field(default=None, metadata=OMIT)


@dataclass(frozen=True)
class FrozenChild(FrozenBase):
    """mypy gives a frozen dataclass a variable for each inherited field."""

    done: bool = False


class UndecoratedMetadata(FlashAttentionMetadata):
    """Not decorated: its annotation is no field, it has its parent's fields."""

    note: str = ""


@dataclass
class Box(ZeroCopy, Generic[T]):
    item: T
    items: list[T] = field(default_factory=list)


@dataclass
class IntBox(Box[int]):
    label: str = ""


@dataclass
class Pair(Box[T], Generic[T, U]):
    other: U | None = None


@dataclass
class Direct(metaclass=ZeroCopyFields):
    """Uses the metaclass without the ZeroCopy base."""

    a: int
    _: KW_ONLY
    b: str = ""
    hidden: Tensor | None = field(default=None, metadata=OMIT)


@dataclass
class DirectChild(Direct):
    c: float = 0.0


class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
    pass


@dataclass
class Backend(metaclass=ABCZeroCopyFields):
    name: str

    @abc.abstractmethod
    def run(self) -> None: ...


@dataclass(kw_only=True)
class KeywordBase(ZeroCopy):
    k: int


@dataclass
class KeywordChild(KeywordBase):
    """``fields()`` order is k, p, although ``__init__`` takes p first."""

    p: str


@dataclass
class Overriding(ZeroCopy):
    """A user's own method wins, and keeps its declared type."""

    a: int
    b: int

    def asdict_zerocopy(self, skip_fields: Any = None) -> dict[str, int]:
        return {"a": self.a}


@dataclass
class Empty(ZeroCopy):
    pass
