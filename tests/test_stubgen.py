"""``python -m metakit stubgen``: the stub of a whole module, with a named
``TypedDict`` per zero-copy dataclass whose keys are what the method returns.

The module here is written to a temporary package; it needs no torch.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from metakit._meta import included_names
from metakit.stubgen import main, module_stub, stub_path

PACKAGE = "stubgen_example"

BASE = '''
from dataclasses import dataclass, field
from typing import Generic, Optional, TypeVar

from metakit import OMIT, ZeroCopy

T = TypeVar("T")


class Tensor:
    """Stands in for torch.Tensor."""


@dataclass
class ForeignBase(ZeroCopy, Generic[T]):
    """In another module, without ``from __future__ import annotations``."""

    count: int
    tensor: Optional[Tensor]
    values: list[T] = field(default_factory=list)
    handle: object = field(default=None, metadata=OMIT)
'''

MODELS = '''
"""Engine metadata for the stub generator."""

from __future__ import annotations

import enum
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, overload

from metakit import OMIT, ZeroCopy, ZeroCopyFields

from .base import ForeignBase, Tensor

if TYPE_CHECKING:
    from collections.abc import Sequence

T = TypeVar("T")
PAGE_SIZE = 16


@dataclass
class AttentionMetadata(ZeroCopy):
    num_prefills: int
    slot_mapping: Tensor


@dataclass
class FlashInferMetadata(AttentionMetadata):
    is_prompt: bool
    block_tables: Tensor | None = None
    version: ClassVar[str] = "2"
    workspace: InitVar[int] = 0
    wrapper: object = field(default=None, metadata=OMIT)
    steps: int = field(default=0, init=False)

    def __post_init__(self, workspace: int) -> None:
        self.is_profile_run = False
        self.attn_bias: Tensor | None = None


@dataclass
class Redefined(FlashInferMetadata):
    is_prompt: int = 0  # redefined: its TypedDict cannot inherit


@dataclass
class Box(ZeroCopy, Generic[T]):
    item: T


@dataclass
class IntBox(Box[int]):
    label: str = ""


@dataclass
class FromForeign(ForeignBase[bytes]):
    sizes: Sequence[int] = ()


@dataclass
class Direct(metaclass=ZeroCopyFields):
    a: int
    _: KW_ONLY
    b: str = "b"


class Outer:
    @dataclass
    class Inner(ZeroCopy):
        q: int


@dataclass
class Overriding(ZeroCopy):
    a: int

    def asdict_zerocopy(self, skip_fields: Any = None) -> dict[str, Any]:
        return {"a": self.a}


def make(num_prefills: int = 1, *, name: str = "x") -> AttentionMetadata:
    return AttentionMetadata(num_prefills, Tensor())


class Backend(enum.Enum):
    FLASH = "flash"
    INFER = 2


@overload
def pick(value: int) -> int: ...
@overload
def pick(value: str) -> str: ...
def pick(value: int | str) -> int | str:
    return value
'''


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "src"
    (root / PACKAGE).mkdir(parents=True)
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / "base.py").write_text(textwrap.dedent(BASE))
    (root / PACKAGE / "models.py").write_text(textwrap.dedent(MODELS))
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [name for name in sys.modules if name.partition(".")[0] == PACKAGE]:
        del sys.modules[name]


@pytest.fixture
def stub(package: Path) -> str:
    return module_stub(importlib.import_module(f"{PACKAGE}.models"))


def classes(stub: str) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in ast.walk(ast.parse(stub)) if isinstance(node, ast.ClassDef)}


def typed_dict_keys(stub: str, name: str) -> list[str]:
    """The keys of the TypedDict *name* in *stub*, those it inherits first."""
    found = classes(stub)
    node = found[name]
    keys: list[str] = []
    for base in node.bases:
        base_name = ast.unparse(base.value if isinstance(base, ast.Subscript) else base)
        if base_name in found:
            keys += typed_dict_keys(stub, base_name)
    return keys + [stmt.target.id for stmt in node.body if isinstance(stmt, ast.AnnAssign)]  # type: ignore[union-attr]


def members(stub: str, name: str) -> dict[str, list[str]]:
    """The lines of each member of class *name* in *stub*."""
    result: dict[str, list[str]] = {}
    for stmt in classes(stub)[name].body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            key = stmt.name
        else:
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0]  # type: ignore[attr-defined]
            key = ast.unparse(target)
        result.setdefault(key, []).append(ast.unparse(stmt))
    return result


def test_each_typed_dict_has_exactly_the_keys_that_asdict_returns(package: Path, stub: str) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    names = ["AttentionMetadata", "FlashInferMetadata", "Redefined", "Box", "IntBox", "FromForeign", "Direct"]
    for name in names:
        assert typed_dict_keys(stub, f"{name}Dict") == list(included_names(getattr(models, name))), name
    assert typed_dict_keys(stub, "InnerDict") == ["q"]


def test_typed_dict_inherits_its_parents_where_keys_allow(stub: str) -> None:
    found = classes(stub)
    assert [ast.unparse(base) for base in found["FlashInferMetadataDict"].bases] == ["AttentionMetadataDict"]
    assert [ast.unparse(base) for base in found["IntBoxDict"].bases] == ["BoxDict[int]"]
    assert [ast.unparse(base) for base in found["BoxDict"].bases] == ["_TypedDict", "_Generic[T]"]
    # A redefined key, or a parent from another module: a TypedDict of its own.
    assert [ast.unparse(base) for base in found["RedefinedDict"].bases] == ["_TypedDict"]
    assert [ast.unparse(base) for base in found["FromForeignDict"].bases] == ["_TypedDict"]


def test_field_types_are_as_declared_and_substituted(stub: str) -> None:
    found = classes(stub)

    def types(name: str) -> dict[str, str]:
        return {
            stmt.target.id: ast.unparse(stmt.annotation)  # type: ignore[union-attr]
            for stmt in found[name].body
            if isinstance(stmt, ast.AnnAssign)
        }

    assert types("FlashInferMetadataDict") == {"is_prompt": "bool", "block_tables": "Tensor | None", "steps": "int"}
    assert types("RedefinedDict")["is_prompt"] == "int"
    # Declared in another module: names qualified and imported, T bound to bytes.
    assert types("FromForeignDict") == {
        "count": "int",
        "tensor": f"{PACKAGE}.base.Tensor | None",
        "values": "list[bytes]",
        "sizes": "Sequence[int]",
    }
    assert f"import {PACKAGE}.base" in stub


def test_methods_are_overloaded_and_exact(stub: str) -> None:
    flash = members(stub, "FlashInferMetadata")
    assert flash["asdict_zerocopy"] == [
        "@_overload\ndef asdict_zerocopy(self, skip_fields: None=None) -> FlashInferMetadataDict:\n    ...",
        "@_overload\ndef asdict_zerocopy(self, skip_fields: _Iterable[str] | None=None) -> _Mapping[str, _Any]:\n"
        "    ...",
    ]
    assert flash["astuple_zerocopy"] == [
        "def astuple_zerocopy(self) -> tuple[int, Tensor, bool, Tensor | None, int]:\n    ..."
    ]
    assert "-> BoxDict[T]" in members(stub, "Box")["asdict_zerocopy"][0]
    assert "-> Outer.InnerDict" in stub
    assert "def astuple_zerocopy(self) -> tuple[int, str]: ..." in stub  # Direct, without the KW_ONLY marker


def test_post_init_attributes_are_properties_not_fields(stub: str) -> None:
    flash = members(stub, "FlashInferMetadata")
    assert flash["is_profile_run"] == [
        "@property\ndef is_profile_run(self) -> bool:\n    ...",
        "@is_profile_run.setter\ndef is_profile_run(self, value: bool) -> None:\n    ...",
    ]
    assert "def attn_bias(self) -> Tensor | None" in flash["attn_bias"][0]
    assert "is_profile_run" not in members(stub, "Redefined")  # declared once, on the class that sets it


def test_dataclass_fields_keep_what_shapes_init(stub: str) -> None:
    flash = members(stub, "FlashInferMetadata")
    assert flash["version"] == ["version: ClassVar[str] = '2'"]
    assert flash["workspace"] == ["workspace: InitVar[int] = 0"]
    assert flash["wrapper"] == ["wrapper: object = ..."]
    assert flash["steps"] == ["steps: int = field(init=False)"]
    assert members(stub, "Direct")["_"] == ["_: KW_ONLY"]


def test_a_users_own_method_is_kept_as_written(stub: str) -> None:
    overriding = members(stub, "Overriding")
    assert overriding["asdict_zerocopy"] == [
        "def asdict_zerocopy(self, skip_fields: Any=None) -> dict[str, Any]:\n    ..."
    ]
    assert overriding["astuple_zerocopy"] == ["def astuple_zerocopy(self) -> tuple[int]:\n    ..."]


def test_the_rest_of_the_module_is_declared(stub: str) -> None:
    assert "def make(num_prefills: int = 1, *, name: str = 'x') -> AttentionMetadata: ..." in stub
    assert "PAGE_SIZE: int" in stub
    assert "T = TypeVar('T')" in stub
    assert f"from {PACKAGE}.base import ForeignBase, Tensor" in stub  # relative import made absolute
    assert "from collections.abc import Sequence" in stub  # TYPE_CHECKING imports hoisted
    assert "__future__" not in stub
    assert members(stub, "Backend") == {"FLASH": ["FLASH = 'flash'"], "INFER": ["INFER = 2"]}  # members
    assert stub.count("def pick(") == 2  # the overloads, not the implementation
    compile(stub, "models.pyi", "exec")


def test_cli_writes_the_stub_under_the_package_path(package: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "metakit", "stubgen", f"{PACKAGE}.models", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=package,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    written = out / PACKAGE / "models.pyi"
    assert result.stdout.strip() == f"wrote {written}"
    assert written.read_text() == module_stub(importlib.import_module(f"{PACKAGE}.models"))


def test_stub_path_of_a_package_is_its_init(package: Path, tmp_path: Path) -> None:
    assert stub_path(tmp_path, importlib.import_module(PACKAGE)) == tmp_path / PACKAGE / "__init__.pyi"


def test_cli_rejects_a_module_it_cannot_import(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["no_such_module_for_stubgen"])
    assert exit_info.value.code == 2
    assert "cannot import 'no_such_module_for_stubgen'" in capsys.readouterr().err
