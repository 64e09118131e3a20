"""``python -m metakit stubgen``: the stub of a whole module, with a named
``TypedDict`` per zero-copy dataclass whose keys are what the method returns,
read by basedpyright.

The module here is written to a temporary package; it needs no torch.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metakit import stubgen
from metakit.__main__ import main
from metakit.stubgen import NameClash, module_stub, stub_path
from tests.records import ref_names

PACKAGE = "stubgen_example"
GOLDEN = Path(__file__).with_name("stubgen_models.pyi.golden")  # the stub of MODELS below

BASE = '''
"""In another module, without ``from __future__ import annotations``."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Generic, Optional, TypeVar

from metakit import OMIT, ZeroCopy

if TYPE_CHECKING:
    from stubgen_example.lora import LoRAMapping

T = TypeVar("T")


class Tensor:
    """Stands in for torch.Tensor."""


@dataclass
class ForeignBase(ZeroCopy, Generic[T]):
    count: int
    tensor: Optional[Tensor]
    values: list[T] = field(default_factory=list)
    handle: object = field(default=None, metadata=OMIT)
    hook: Optional[Callable] = None
    mapping: "Optional[LoRAMapping]" = None
    later: "Optional[Later]" = None


class Later:
    """Defined after the class that refers to it."""
'''

LORA = '''
class LoRAMapping:
    """Imported by base only for type checkers."""
'''
MODELS = '''
"""Engine metadata for the stub generator."""

from __future__ import annotations

import abc
import enum
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, overload

from typing_extensions import TypeVarTuple, Unpack

from metakit import OMIT, ZeroCopy, ZeroCopyFields

from .base import ForeignBase, Tensor

if TYPE_CHECKING:
    from collections.abc import Sequence

try:
    import tomllib
except ImportError:  # before 3.11
    tomllib = None

try:
    from math import isqrt as root
except ImportError:
    def root(n: int) -> int:
        return int(n**0.5)

__all__ = ["AttentionMetadata", "FlashInferMetadata", "Redefined", "Box", "IntBox", "Pair", "FromForeign"]
__all__ += ["Direct", "Outer", "Overriding", "make", "Backend", "pick", "ABCZeroCopyFields", "Abstract", "T"]
__all__ += ["PAGE_SIZE", "Defaults", "Empty", "Fields", "Plain", "root", "Variadic", "Ts"]

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


U = TypeVar("U")


@dataclass
class Pair(Box[T], Generic[T, U]):
    other: U | None = None


Ts = TypeVarTuple("Ts")


@dataclass
class Variadic(ZeroCopy, Generic[Unpack[Ts]]):
    items: tuple[Unpack[Ts]]


class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
    """The metaclass combination the README documents."""


@dataclass
class Abstract(metaclass=ABCZeroCopyFields):
    name: str

    @abc.abstractmethod
    def run(self) -> None: ...


@dataclass
class Defaults(ZeroCopy):
    """Defaults that are no values of the declared type are written ``= ...``."""

    dtype: Tensor = None  # type: ignore[assignment]
    names: list[str] = field(default_factory=list)
    scale: float = 1.0


@dataclass
class Empty(ZeroCopy):
    pass


@dataclass
class Fields(ZeroCopy):
    """field() calls as engines write them: merged metadata, keyword-only, factories."""

    required: int = field(metadata={"doc": "no default"})
    wrapper: object = field(default=None, metadata={**OMIT, "doc": "a kernel wrapper"})
    later: int = field(default=0, kw_only=True)
    sizes: list[int] = field(default_factory=list, kw_only=True)


@dataclass
class Plain:
    """Not made by ZeroCopyFields: no TypedDict."""

    x: int


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
    (root / PACKAGE / "lora.py").write_text(textwrap.dedent(LORA))
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [name for name in sys.modules if name.partition(".")[0] == PACKAGE]:
        del sys.modules[name]


@pytest.fixture
def stub(package: Path) -> str:
    return module_stub(importlib.import_module(f"{PACKAGE}.models"))


def classes(stub: str) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in ast.walk(ast.parse(stub)) if isinstance(node, ast.ClassDef)}


def bases(stub: str, name: str) -> list[str]:
    node = classes(stub)[name]
    return [ast.unparse(base) for base in node.bases] + [ast.unparse(keyword) for keyword in node.keywords]


def typed_dict_keys(stub: str, name: str) -> list[str]:
    """The keys of the TypedDict *name* in *stub*, those it inherits first."""
    found = classes(stub)
    keys: list[str] = []
    for base in found[name].bases:
        base_name = ast.unparse(base.value if isinstance(base, ast.Subscript) else base)
        if base_name in found:
            keys += typed_dict_keys(stub, base_name)
    return keys + [stmt.target.id for stmt in found[name].body if isinstance(stmt, ast.AnnAssign)]  # type: ignore[union-attr]


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
        for suffix in ("Dict", "PartialDict"):
            assert typed_dict_keys(stub, f"{name}{suffix}") == ref_names(getattr(models, name)), name
    assert typed_dict_keys(stub, "InnerDict") == ["q"]


def test_typed_dicts_inherit_their_parents_where_keys_allow(stub: str) -> None:
    assert bases(stub, "FlashInferMetadataDict") == ["AttentionMetadataDict"]
    assert bases(stub, "FlashInferMetadataPartialDict") == ["AttentionMetadataPartialDict", "total=False"]
    assert bases(stub, "IntBoxDict") == ["BoxDict[int]"]
    assert bases(stub, "BoxDict") == ["_TypedDict", "_Generic[T]"]
    assert bases(stub, "PairDict") == ["BoxDict[T]", "_Generic[T, U]"]
    # A redefined key, or a parent from another module: a TypedDict of its own.
    assert bases(stub, "RedefinedDict") == ["_TypedDict"]
    assert bases(stub, "FromForeignDict") == ["_TypedDict"]
    # What skip_fields leaves: any key may be missing, and keys may be added.
    assert bases(stub, "FromForeignPartialDict") == ["_TypedDict", "total=False", "extra_items=_Any"]


def test_field_types_are_as_written_and_substituted(stub: str) -> None:
    found = classes(stub)

    def types(name: str) -> dict[str, str]:
        return {
            stmt.target.id: ast.unparse(stmt.annotation)  # type: ignore[union-attr]
            for stmt in found[name].body
            if isinstance(stmt, ast.AnnAssign)
        }

    assert types("FlashInferMetadataDict") == {"is_prompt": "bool", "block_tables": "Tensor | None", "steps": "int"}
    assert types("RedefinedDict")["is_prompt"] == "int"
    # Declared in another module: names written in full and their modules imported, T bound
    # to bytes, names imported there only for type checkers found, string annotations read.
    assert types("FromForeignDict") == {
        "count": "int",
        "tensor": f"{PACKAGE}.base.Tensor | None",
        "values": "list[bytes]",
        "hook": "typing.Callable | None",
        "mapping": f"{PACKAGE}.lora.LoRAMapping | None",
        "later": f"{PACKAGE}.base.Later | None",
        "sizes": "Sequence[int]",
    }
    for module in (f"{PACKAGE}.base", f"{PACKAGE}.lora", "typing"):
        assert f"import {module}\n" in stub


def test_methods_are_overloaded_and_exact(stub: str) -> None:
    flash = members(stub, "FlashInferMetadata")
    assert flash["asdict_zerocopy"] == [
        "@_overload\ndef asdict_zerocopy(self, skip_fields: None=None) -> FlashInferMetadataDict:\n    ...",
        "@_overload\ndef asdict_zerocopy(self, skip_fields: _Set[str] | _list[str] | _tuple[str, ...] | _Iterator[str]"
        " | _Mapping[str, _Any]) -> FlashInferMetadataPartialDict:\n    ...",
        "@_overload\ndef asdict_zerocopy(self, skip_fields: _Set[str] | _list[str] | _tuple[str, ...] | _Iterator[str]"
        " | _Mapping[str, _Any] | None=None) -> FlashInferMetadataPartialDict:\n    ...",
    ]
    # every field that __init__ takes, by keyword; the InitVar as the type it takes.
    assert flash["__replace__"] == [
        "def __replace__(self, *, num_prefills: int=..., slot_mapping: Tensor=..., is_prompt: bool=..., "
        "block_tables: Tensor | None=..., workspace: int=..., wrapper: object=...) -> FlashInferMetadata:\n    ..."
    ]
    assert flash["astuple_zerocopy"] == [
        "def astuple_zerocopy(self) -> _tuple[int, Tensor, bool, Tensor | None, int]:\n    ..."
    ]
    assert "-> BoxDict[T]" in members(stub, "Box")["asdict_zerocopy"][0]
    assert "-> Outer.InnerDict" in stub
    assert "def astuple_zerocopy(self) -> _tuple[int, str]: ..." in stub  # Direct, without the KW_ONLY marker
    assert "def astuple_zerocopy(self) -> _tuple[()]: ..." in stub  # Empty


def test_post_init_attributes_are_properties_not_fields(stub: str) -> None:
    flash = members(stub, "FlashInferMetadata")
    assert flash["is_profile_run"] == [
        "@_property\ndef is_profile_run(self) -> bool:\n    ...",
        "@is_profile_run.setter\ndef is_profile_run(self, value: bool) -> None:\n    ...",
    ]
    assert "def attn_bias(self) -> Tensor | None" in flash["attn_bias"][0]
    assert "is_profile_run" not in members(stub, "Redefined")  # declared once, on the class that sets it


def test_dataclass_fields_keep_what_shapes_init(stub: str) -> None:
    flash = members(stub, "FlashInferMetadata")
    assert flash["version"] == ["version: ClassVar[str] = ..."]
    assert flash["workspace"] == ["workspace: InitVar[int] = ..."]
    assert flash["wrapper"] == ["wrapper: object = ..."]
    assert flash["steps"] == ["steps: int = field(init=False)"]
    fields = members(stub, "Fields")
    assert fields["wrapper"] == ["wrapper: object = ..."]
    assert fields["required"] == ["required: int"]
    assert fields["later"] == ["later: int = field(kw_only=True, default=0)"]
    assert fields["sizes"] == ["sizes: list[int] = field(kw_only=True, default_factory=list)"]
    # A default that is no value of the declared type is written ``= ...``.
    assert members(stub, "Defaults")["dtype"] == ["dtype: Tensor = ..."]
    assert members(stub, "Direct")["_"] == ["_: KW_ONLY"]


def test_a_users_own_method_is_kept_as_written(stub: str) -> None:
    overriding = members(stub, "Overriding")
    assert overriding["asdict_zerocopy"] == [
        "def asdict_zerocopy(self, skip_fields: Any=None) -> dict[str, Any]:\n    ..."
    ]
    assert overriding["astuple_zerocopy"] == ["def astuple_zerocopy(self) -> _tuple[int]:\n    ..."]


def test_the_rest_of_the_module_is_declared(stub: str) -> None:
    assert "def make(num_prefills: int = 1, *, name: str = 'x') -> AttentionMetadata: ..." in stub
    assert "PAGE_SIZE: int" in stub
    assert "T = TypeVar('T')" in stub
    assert f"from {PACKAGE}.base import ForeignBase, Tensor" in stub  # relative import made absolute
    imports = "from collections.abc import Iterator as _Iterator, Mapping as _Mapping, Sequence, Set as _Set"
    assert imports in stub  # TYPE_CHECKING too
    assert "__future__" not in stub
    assert members(stub, "Backend") == {"FLASH": ["FLASH = 'flash'"], "INFER": ["INFER = 2"]}  # members
    assert stub.count("def pick(") == 2  # the overloads, not the implementation
    # __all__ as the module computes it, ``+=`` included; names bound in try/except kept.
    assert "'Plain', 'root', 'Variadic', 'Ts']\n" in stub
    assert "from math import isqrt as root" in stub  # once, from the try body
    assert "root" not in {node.name for node in ast.parse(stub).body if isinstance(node, ast.FunctionDef)}
    compile(stub, "models.pyi", "exec")


def test_the_stub_is_the_same_on_every_python(stub: str) -> None:
    """Read from source text as mypy parses it, never from annotations at run time
    (3.14 reads them as source text, unnormalised): the golden file is every version's."""
    assert stub == GOLDEN.read_text(), f"regenerate {GOLDEN.name} from this run if the change is meant"


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
    assert main(["stubgen", "no_such_module_for_stubgen"]) == 2
    assert "cannot import 'no_such_module_for_stubgen'" in capsys.readouterr().err


def test_cli_refuses_a_mypy_older_than_its_stub_generator_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An outside tester: mypy 1.12 to 2.1 failed with parse()'s arguments; 1.12 to 1.14 write
    # dataclass fields without field(init=False). Those from 1.15 on are read as they are.
    monkeypatch.setattr(stubgen, "_MYPY", (1, 14))
    assert main(["stubgen", "json"]) == 2
    assert re.search(r"metakit stubgen needs mypy 1\.15 or later, and mypy \S+ is installed", capsys.readouterr().err)


def stub_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> str:
    """The stub of a module *name* of *source*, written to *tmp_path*."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        return module_stub(importlib.import_module(name))
    finally:
        sys.modules.pop(name, None)


def test_a_class_attribute_that_aliases_a_name_all_leaves_out_is_written_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mypy's generator leaves out the module's variables and functions that __all__ does not list, but
    # wrote ``PHASE = _PREFILL``: a name the stub never defines (an outside tester).
    source = """
        from dataclasses import dataclass

        from metakit import ZeroCopy

        __all__ = ["Meta", "Plain", "PUBLIC"]

        _PREFILL = "prefill"
        PUBLIC = "public"


        def _helper() -> None: ...


        class _Hidden: ...


        @dataclass
        class Meta(ZeroCopy):
            num_prefills: int
            PHASE = _PREFILL
            KEPT = PUBLIC


        class Plain:
            HELPER = _helper
            HIDDEN = _Hidden
        """
    stub = stub_of(tmp_path, monkeypatch, "aliased_privates", source)
    assert "    PHASE = ...\n" in stub
    assert "    HELPER: Incomplete\n" in stub
    assert "    KEPT = PUBLIC\n" in stub  # listed: the stub defines it
    assert "    HIDDEN = _Hidden\n" in stub  # a class is written all the same
    assert "PUBLIC: str" in stub
    assert "class _Hidden" in stub
    assert "_PREFILL" not in stub
    assert "_helper" not in stub


def test_odd_field_names_give_a_valid_stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A field called ``self`` leaves ``__replace__`` another name for the instance; ``__secret`` is
    ``_Record__secret`` at run time, with the type written for ``__secret``."""
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "odd_names",
        """
        from dataclasses import dataclass
        from metakit import ZeroCopy

        @dataclass
        class Record(ZeroCopy):
            self: int
            __secret: str
            _self: float = 0.0
            __self: bytes = b""
        """,
    )
    compile(stub, "odd_names.pyi", "exec")  # no duplicate parameter: ``__self`` would be ``_Record__self`` too
    assert typed_dict_keys(stub, "RecordDict") == ["self", "_Record__secret", "_self", "_Record__self"]
    assert "    _Record__secret: str\n" in stub
    assert (
        "def __replace__(_self_, /, *, self: int = ..., _Record__secret: str = ..., _self: float = ..., "
        "_Record__self: bytes = ...)" in stub
    )


def test_final_annotated_and_nested_class_fields_give_types_a_typed_dict_can_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``TypedDict`` item cannot be ``Final`` and needs no ``Annotated`` metadata; a class nested in
    the record, or an alias bound in its body, is named from the module, where the ``TypedDict`` is; the
    fields after it keep their defaults (mypy's generator forgot it wrote a dataclass once it met a nested
    class)."""
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "wrapped_types",
        """
        import enum
        from dataclasses import dataclass
        from typing import Annotated, Final, List
        from metakit import ZeroCopy

        Ids = List[str]  # shadowed in the class body, where the field's annotation is read

        @dataclass
        class Holder(ZeroCopy):
            class Kind(enum.Enum):
                A = 1

            Ids = List[int]  # an alias in the body: its TypedDict named it as the module would (an outside tester)
            kind: "Kind"
            ids: Ids
            fin: Final[int] = 3
            an: Annotated[int, "meta"] = 0
            n: int = 0
            bare: Final = "flash"  # the value's type, as mypy's generator writes Final[str] (an outside tester)
        """,
    )
    compile(stub, "wrapped_types.pyi", "exec")
    assert (
        "class HolderDict(_TypedDict):\n    kind: Holder.Kind\n    ids: Holder.Ids\n    fin: int\n    an: int\n"
        "    n: int\n    bare: str\n" in stub
    )
    assert "    Ids = list[int]\n" in stub
    assert "def astuple_zerocopy(self) -> _tuple[Holder.Kind, Holder.Ids, int, int, int, str]: ..." in stub
    assert "    n: int = ...\n" in stub


def test_field_under_another_name_with_a_merged_omit_gives_a_stub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mypy's own generator stopped with an AssertionError on the ``**OMIT`` of an aliased field().
    # It re-exports an import the module never uses: with the field() calls reduced, the stub wrote
    # ``OMIT as OMIT`` (an outside tester).
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "aliased_field",
        """
        import dataclasses as dc
        from dataclasses import dataclass, field as F
        from json import dumps, loads
        from metakit import OMIT, ZeroCopy

        @dataclass
        class Meta(ZeroCopy):
            n: int = 0
            wrapper: object = F(default=None, metadata={**OMIT, "doc": "kernel wrapper"})
            other: object = dc.field(default=None, metadata={"doc": "kept", **OMIT})
            late: int = F(init=False, default=0, metadata={**OMIT})
        """,
    )
    compile(stub, "aliased_field.pyi", "exec")
    assert "class MetaDict(_TypedDict):\n    n: int\n\n" in stub
    assert "    wrapper: object = ...\n    other: object = ...\n    late: int = F(init=False)\n" in stub
    imports = [line for line in stub.splitlines() if line.startswith(("from ", "import "))]
    assert "from dataclasses import dataclass, field as F" in imports
    assert "from json import dumps as dumps, loads as loads" in imports  # never used: mypy re-exports them
    assert not [line for line in imports if "OMIT" in line]


def test_a_module_name_that_the_stubs_own_imports_take_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written after the stub's ``from typing_extensions import TypedDict as _TypedDict``,
    # ``_TypedDict = dict`` made every TypedDict of the stub a dict that checks nothing.
    with pytest.raises(
        NameClash, match="defines or imports _TypedDict, a name that its stub gives one of its own imports"
    ):
        stub_of(
            tmp_path,
            monkeypatch,
            "own_import_clash",
            """
            from dataclasses import dataclass
            from metakit import ZeroCopy

            @dataclass
            class Meta(ZeroCopy):
                a: int

            _TypedDict = dict
            """,
        )


@pytest.mark.parametrize(
    ("member", "name"),
    [("_overload: int", "_overload"), ("_Any: int = 0", "_Any"), ("def _tuple(self) -> None: ...", "_tuple")],
)
def test_a_member_named_as_one_of_the_stubs_imports_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, member: str, name: str
) -> None:
    # A field ``_overload`` made every ``@_overload`` of the class's methods an int (an outside tester).
    source = f"""
    from dataclasses import dataclass
    from typing import Any
    from metakit import ZeroCopy

    @dataclass
    class Meta(ZeroCopy):
        x: Any
        {member}
    """
    with pytest.raises(NameClash, match=f"Meta has a member named {name}, a name that its stub gives one"):
        stub_of(tmp_path, monkeypatch, "own_import_member", source)


def test_a_class_around_a_record_with_a_member_named_as_one_of_the_stubs_imports_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The record's TypedDicts go in Outer's body, where ``_TypedDict`` was Outer's method (an outside tester).
    source = """
    from dataclasses import dataclass
    from metakit import ZeroCopy

    class Outer:
        def _TypedDict(self) -> None: ...

        @dataclass
        class Record(ZeroCopy):
            a: int
    """
    with pytest.raises(NameClash, match="Outer has a member named _TypedDict, a name that its stub gives one"):
        stub_of(tmp_path, monkeypatch, "own_import_outer", source)


def test_a_name_a_star_import_binds_as_one_of_the_stubs_imports_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No statement of the module shows what ``import *`` binds: it is read from the module as it runs
    # (an outside tester: the stub's ``_Any`` was the module's dict).
    (tmp_path / "star_helpers.py").write_text('__all__ = ["_Any"]\n_Any = dict\n')
    source = """
    from dataclasses import dataclass
    from metakit import ZeroCopy
    from star_helpers import *

    @dataclass
    class Record(ZeroCopy):
        a: int
    """
    with pytest.raises(NameClash, match="star_import defines or imports _Any, a name that its stub gives one"):
        stub_of(tmp_path, monkeypatch, "star_import", source)
    sys.modules.pop("star_helpers", None)


@pytest.mark.parametrize(
    ("binding", "clash"),
    [
        ("from typing import Any as _Any", False),  # the very import the stub makes (an outside tester)
        ("from collections.abc import Set as _Set, Iterator as _Iterator", False),
        ("from typing import Set as _Set", True),
        ("from typing import Any as _Any\n_Any = int", True),
        ("from typing import Any\n_Any = Any", True),  # a name the module defines: the stub writes it too
    ],
)
def test_a_module_may_import_what_the_stub_imports_under_the_same_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, binding: str, clash: bool
) -> None:
    source = "\n".join(
        [
            "from dataclasses import dataclass",
            "from metakit import ZeroCopy",
            binding,
            "@dataclass",
            "class Meta(ZeroCopy):",
            "    a: int",
            "    extra: object = None",
        ]
    )
    if clash:
        with pytest.raises(NameClash, match="a name that its stub gives one of its own imports: rename it"):
            stub_of(tmp_path, monkeypatch, "own_import_alias", source)
        return
    stub = stub_of(tmp_path, monkeypatch, "own_import_alias", source)
    compile(stub, "own_import_alias.pyi", "exec")
    assert "class MetaDict(_TypedDict):\n    a: int\n    extra: object\n" in stub


@pytest.mark.parametrize(
    "binding",
    ["class ThingDict(dict): ...", "from collections import UserDict as ThingDict"],
    ids=["defined", "imported"],  # imported: the stub imported it and wrote a TypedDict over it (an outside tester)
)
def test_a_name_the_module_gives_something_else_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, binding: str
) -> None:
    match = "defines or imports ThingDict, the name of the TypedDict that the stub gives Thing"
    with pytest.raises(NameClash, match=match):
        stub_of(
            tmp_path,
            monkeypatch,
            "name_clash",
            f"""
            from dataclasses import dataclass, field
            from metakit import ZeroCopy

            {binding}

            @dataclass
            class Thing(ZeroCopy):
                td: ThingDict = field(default_factory=ThingDict)
            """,
        )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param(
            """
            @dataclass
            class FooPartial(ZeroCopy):
                b: str

            @dataclass
            class Foo(ZeroCopy):
                a: int
            """,
            "would give FooPartial and Foo a TypedDict named FooPartialDict each",
            id="two classes' TypedDicts",
        ),
        pytest.param(
            """
            class Outer:
                InnerDict = dict

                @dataclass
                class Inner(ZeroCopy):
                    a: int
            """,
            "defines or imports Outer.InnerDict, the name of the TypedDict that the stub gives Outer.Inner",
            id="a name in the class around it",
        ),
    ],
)
def test_a_name_given_twice_in_one_namespace_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, message: str
) -> None:
    # Written twice, the second definition won: ``Foo``'s skip_fields result was typed as
    # ``FooPartial``'s full dict, whose key ``b`` it lacks.
    header = "from dataclasses import dataclass\nfrom metakit import ZeroCopy\n"
    with pytest.raises(NameClash, match=re.escape(message)):
        stub_of(tmp_path, monkeypatch, f"twice_{len(source)}", header + textwrap.dedent(source))


SELF_AND_PROPERTY = """
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from typing_extensions import Self

from metakit import ZeroCopy


@dataclass
class Node(ZeroCopy):
    value: int
    parent: Optional[Self] = None


@dataclass
class Odd(ZeroCopy):
    property: int = 0

    def __post_init__(self) -> None:
        self.num_seqs = 5


@dataclass
class tuple(ZeroCopy):  # noqa: N801  # a class may take a builtin's name in its module
    n: int = 0


@dataclass
class list(ZeroCopy):  # noqa: N801
    n: int = 0
"""

SELF_AND_PROPERTY_USAGE = """
from typing import Optional

from typing_extensions import assert_type

from self_and_property import Node, Odd

def use(node: Node, odd: Odd) -> None:
    parent: Optional[Node] = node.asdict_zerocopy()["parent"]
    assert_type(node.astuple_zerocopy()[1], Optional[Node])
    assert_type(odd.num_seqs, int)
    assert_type(odd.asdict_zerocopy()["property"], int)
    value, parent = node.astuple_zerocopy()  # the builtin tuple, though the module defines one
    node.asdict_zerocopy(["parent"])
    node.asdict_zerocopy(("parent",))
"""


def test_a_field_typed_self_and_a_field_named_property_give_a_stub_pyright_reads_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a TypedDict, ``Self`` is the TypedDict: the stub names the class.  A field called
    ``property`` would shadow the decorator of the stub's properties, and classes called ``tuple``
    and ``list`` the builtins in every method's types: the stub uses aliases."""
    stub = stub_of(tmp_path, monkeypatch, "self_and_property", SELF_AND_PROPERTY)
    assert "class NodeDict(_TypedDict):\n    value: int\n    parent: Node | None\n" in stub
    assert "@_property\n    def num_seqs(self) -> int: ..." in stub
    (tmp_path / "stubs").mkdir()
    (tmp_path / "stubs" / "self_and_property.pyi").write_text(stub)
    (tmp_path / "usage.py").write_text(textwrap.dedent(SELF_AND_PROPERTY_USAGE))
    (tmp_path / "self_and_property.py").unlink()  # pyright reads the stub alone
    assert basedpyright(tmp_path, ["stubs", "usage.py"]) == []


TARGETS = """
import contextlib
from dataclasses import dataclass

from metakit import ZeroCopy


@dataclass
class Prefill(ZeroCopy):
    num_prefills: int

    def __post_init__(self) -> None:
        self.query_start_loc, self.seq_start_loc = 1, "s"
        self.first = self.second = 2.5
        [self.listed, *self.rest] = [1, 2, 3]
        if self.num_prefills:
            for self.step in range(3):
                with contextlib.nullcontext(5) as self.held:
                    pass
"""

TARGETS_USAGE = """
from typing_extensions import assert_type

from targets import Prefill

def use(meta: Prefill) -> None:
    assert_type(meta.query_start_loc, int)
    assert_type(meta.seq_start_loc, str)
    assert_type(meta.first, float)
    assert_type(meta.second, float)
    print(meta.listed, meta.rest, meta.step, meta.held)
"""


def test_attributes_set_by_unpacking_in_a_chain_or_as_loop_and_with_targets_are_properties(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # README (pyright): "the attributes that methods set on self, as properties", however a method sets them.
    stub = stub_of(tmp_path, monkeypatch, "targets", TARGETS)
    for name in ("query_start_loc", "seq_start_loc", "first", "second", "listed", "rest", "step", "held"):
        assert f"@_property\n    def {name}(self) -> " in stub, name
    (tmp_path / "stubs").mkdir()
    (tmp_path / "stubs" / "targets.pyi").write_text(stub)
    (tmp_path / "usage.py").write_text(textwrap.dedent(TARGETS_USAGE))
    (tmp_path / "targets.py").unlink()  # pyright reads the stub alone
    assert basedpyright(tmp_path, ["stubs", "usage.py"]) == []


def test_a_type_parameter_imported_under_another_name_is_written_as_the_module_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by an outside tester: the stub wrote the TypeVar's own name, ``T``, which it never defined, where
    # the module named it ``BaseT`` or ``gb.T``; pyright then reported errors on correct code.
    (tmp_path / "generic_base.py").write_text(
        "from dataclasses import dataclass\nfrom typing import Generic, TypeVar\nfrom metakit import ZeroCopy\n"
        "T = TypeVar('T')\n"
        "@dataclass\nclass Base(ZeroCopy, Generic[T]):\n    x: list[T]\n"
    )
    renamed = """
    from dataclasses import dataclass
    from typing import Optional
    from generic_base import Base, T as BaseT

    @dataclass
    class Renamed(Base[BaseT]):
        extra: Optional[BaseT] = None
    """
    dotted = """
    from dataclasses import dataclass
    from typing import Optional
    import generic_base as gb

    @dataclass
    class Dotted(gb.Base[gb.T]):
        more: Optional[gb.T] = None
    """
    monkeypatch.delitem(sys.modules, "generic_base", raising=False)
    (tmp_path / "stubs").mkdir()
    for name, source, expected in [
        ("generic_renamed", renamed, "class RenamedDict(_TypedDict, _Generic[BaseT]):"),
        ("generic_dotted", dotted, "def asdict_zerocopy(self, skip_fields: None = None) -> DottedDict[gb.T]: ..."),
    ]:
        stub = stub_of(tmp_path, monkeypatch, name, source)
        assert expected in stub
        (tmp_path / "stubs" / f"{name}.pyi").write_text(stub)
    (tmp_path / "stubs" / "generic_base.pyi").write_text(module_stub(importlib.import_module("generic_base")))
    sys.modules.pop("generic_base", None)
    (tmp_path / "usage.py").write_text(
        "from typing_extensions import assert_type\n"
        "from generic_dotted import Dotted\n"
        "from generic_renamed import Renamed\n"
        "def f(a: Renamed[str], b: Dotted[int]) -> None:\n"
        "    assert_type(a.asdict_zerocopy()['extra'], str | None)\n"
        "    assert_type(b.asdict_zerocopy()['more'], int | None)\n"
        "    assert_type(b.astuple_zerocopy(), tuple[list[int], int | None])\n"
        "    assert_type(a.__replace__(extra='x'), Renamed[str])\n"
    )
    for name in ("generic_base", "generic_renamed", "generic_dotted"):
        (tmp_path / f"{name}.py").unlink()  # pyright reads the stubs alone
    assert basedpyright(tmp_path, ["stubs", "usage.py"]) == []


LOCAL_IMPORTS = """
from dataclasses import dataclass
from typing import List, Optional

from metakit import ZeroCopy


@dataclass
class SamplerMetadata(ZeroCopy):
    slot_mapping: List[int]

    def __post_init__(self) -> None:
        from collections import OrderedDict as Ordered  # imported here, as engines do to break a cycle
        import fractions

        self.by_seq: Optional[Ordered[int, int]] = None
        self.scale: Optional[fractions.Fraction] = None
        self.unknown: Optional[NowhereDefined] = None  # noqa: F821  # a name nothing binds
"""


def test_a_type_that_a_method_imports_itself_is_named_in_full_and_imported_by_the_stub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by an outside tester: the stub named OrderedDict as the method's import did, and imported
    # nothing, so pyright reported the name undefined.
    stub = stub_of(tmp_path, monkeypatch, "local_imports", LOCAL_IMPORTS)
    assert "def by_seq(self) -> collections.OrderedDict[int, int] | None: ..." in stub
    assert "def scale(self) -> fractions.Fraction | None: ..." in stub
    assert "def unknown(self) -> _Incomplete: ..." in stub
    assert {"import collections", "import fractions"} <= set(stub.splitlines())
    (tmp_path / "stubs").mkdir()
    (tmp_path / "stubs" / "local_imports.pyi").write_text(stub)
    (tmp_path / "usage.py").write_text(
        "from typing_extensions import assert_type\n"
        "import fractions\n"
        "from local_imports import SamplerMetadata\n"
        "meta = SamplerMetadata([0, 1])\n"
        "assert_type(meta.scale, fractions.Fraction | None)\n"
    )
    (tmp_path / "local_imports.py").unlink()  # pyright reads the stub alone
    assert basedpyright(tmp_path, ["stubs", "usage.py"]) == []


def test_an_init_var_without_a_default_stays_required_in_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dataclasses.replace`` raises ``ValueError`` without it: the stub makes leaving it out an error."""
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "init_vars",
        """
        from dataclasses import InitVar, dataclass
        from metakit import ZeroCopy

        @dataclass
        class Record(ZeroCopy):
            a: int
            needed: InitVar[str]
            optional: InitVar[int] = 0

            def __post_init__(self, needed: str, optional: int) -> None: ...
        """,
    )
    assert "def __replace__(self, *, a: int = ..., needed: str, optional: int = ...) -> Record: ..." in stub


def test_a_subclass_binds_a_type_var_tuple_and_a_param_spec_of_its_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parameters were bound one argument each: Ts took one type and stayed unpacked, P took the next
    # (``tuple[Unpack[int]]``, ``Callable[bytes, str]``); found by an outside tester.
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "variadic_bases",
        """
        from dataclasses import dataclass
        from typing import Callable, Generic, TypeVar
        from typing_extensions import ParamSpec, TypeVarTuple, Unpack
        from metakit import ZeroCopy

        T = TypeVar("T")
        Ts = TypeVarTuple("Ts")
        P = ParamSpec("P")

        @dataclass
        class Adv(ZeroCopy, Generic[T, Unpack[Ts], P]):
            items: tuple[Unpack[Ts]]
            call: Callable[P, T]
            pair: tuple[T, Unpack[Ts]]

        @dataclass
        class Sub(Adv[str, int, bytes, [int]]):
            pass

        @dataclass
        class Nothing(Adv[str, [int]]):
            pass

        @dataclass
        class Hook(ZeroCopy, Generic[P]):
            call: Callable[P, int]

        @dataclass
        class FlatHook(Hook[int, str]):
            pass
        """,
    )

    def returns(name: str) -> str:
        (method,) = members(stub, name)["astuple_zerocopy"]
        return method.partition(" -> ")[2].partition(":\n")[0]

    assert returns("Sub") == "_tuple[tuple[int, bytes], Callable[[int], str], tuple[str, int, bytes]]"
    assert returns("Nothing") == "_tuple[tuple[()], Callable[[int], str], tuple[str]]"
    assert returns("FlatHook") == "_tuple[Callable[[int, str], int]]"
    assert "call: Callable[[int], str] = ..., pair: tuple[str, int, bytes] = ...) -> Sub" in stub


if sys.version_info >= (3, 12):  # the syntax is new in 3.12

    def test_a_class_with_type_parameters_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """``class Box[T: int]`` (PEP 695): its T exists only in its scope, so its TypedDicts declare their own."""
        stub = stub_of(
            tmp_path,
            monkeypatch,
            "own_parameters",
            """
            from dataclasses import dataclass
            from metakit import ZeroCopy

            @dataclass
            class Box[T: int](ZeroCopy):
                item: T
            """,
        )
        assert "class BoxDict[T: int](_TypedDict):\n    item: T\n" in stub
        assert "class BoxPartialDict[T: int](_TypedDict, total=False, extra_items=_Any):" in stub
        assert "_Generic" not in stub


# --- basedpyright reads the stubs -----------------------------------------

MODULES = [f"{PACKAGE}.base", f"{PACKAGE}.lora", f"{PACKAGE}.models"]

USAGE = f"""
from typing import Any, Dict, Literal, Optional, Set

from typing_extensions import assert_type

from {PACKAGE}.base import Tensor
from {PACKAGE}.models import Abstract, Backend, Box, FlashInferMetadata, IntBox, Outer, Pair, Redefined, Variadic

def use(
    meta: FlashInferMetadata, box: IntBox, pair: Pair[bytes, float], abstract: Abstract, variadic: Variadic[int, str]
) -> None:
    assert_type(meta.asdict_zerocopy()["block_tables"], Tensor | None)
    assert_type(box.asdict_zerocopy()["item"], int)
    assert_type(pair.asdict_zerocopy()["other"], float | None)
    assert_type(variadic.asdict_zerocopy()["items"], tuple[int, str])
    assert_type(variadic.__replace__(items=(1, "a")), Variadic[int, str])
    assert_type(abstract.astuple_zerocopy(), tuple[str])
    assert_type(meta.asdict_zerocopy(skip_fields={{"slot_mapping"}}).get("is_prompt"), bool | None)
    meta.attn_bias = None
    meta.__replace__(is_prompt=True)
    assert_type(Backend.FLASH, Literal[Backend.FLASH])
    Outer.Inner(1).asdict_zerocopy()


def send(values: Dict[str, Any]) -> None: ...


def step(meta: FlashInferMetadata, skip: Optional[Set[str]]) -> None:
    # An Optional[Set[str]] variable: the result passes as a Dict[str, Any] (found by an outside tester).
    send(meta.asdict_zerocopy(skip_fields=skip))
    # A dict is an iterable of names, as it runs.
    meta.asdict_zerocopy(skip_fields={{"slot_mapping": None}})
"""

BAD_USAGE = {
    "a skipped key": 'meta.asdict_zerocopy(skip_fields={"slot_mapping"})["slot_mapping"]',
    "a str as skip_fields": 'meta.asdict_zerocopy(skip_fields="slot_mapping")',
    "a key that is a post-init attribute": 'meta.asdict_zerocopy()["attn_bias"]',
    "a field replaced with a value of the wrong type": 'meta.__replace__(is_prompt="yes")',
}


def basedpyright(directory: Path, files: list[str], **settings: object) -> list[dict[str, Any]]:
    """basedpyright's error diagnostics for *files* in *directory*, with ``stubs/`` as its stub path."""
    config = {"stubPath": "stubs", "typeCheckingMode": "standard", "include": files, **settings}
    (directory / "pyrightconfig.json").write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-m", "basedpyright", "--outputjson", "--pythonpath", sys.executable],
        capture_output=True,
        text=True,
        cwd=directory,
        timeout=600,
        check=False,
    )
    report = json.loads(result.stdout)
    diagnostics: list[dict[str, Any]] = report["generalDiagnostics"]
    return [d for d in diagnostics if d["severity"] == "error"]


@pytest.fixture
def stub_dir(package: Path, tmp_path: Path) -> Path:
    """The stubs of every module of the test package, in ``tmp_path/stubs``, written by the CLI's code."""
    for name in MODULES:
        assert main(["stubgen", name, "-o", str(tmp_path / "stubs")]) == 0
    return tmp_path


def test_basedpyright_reads_the_stubs_and_good_usage_clean(stub_dir: Path) -> None:
    (stub_dir / "usage.py").write_text(textwrap.dedent(USAGE))
    assert basedpyright(stub_dir, ["stubs", "usage.py"]) == []


def test_basedpyright_reports_each_bad_line(stub_dir: Path) -> None:
    header = f"from {PACKAGE}.models import FlashInferMetadata\nmeta: FlashInferMetadata = ...  # type: ignore\n"
    (stub_dir / "usage.py").write_text(header + "\n".join(BAD_USAGE.values()) + "\n")
    lines = {d["range"]["start"]["line"] for d in basedpyright(stub_dir, ["usage.py"])}
    assert lines == set(range(2, 2 + len(BAD_USAGE)))


def test_type_aliases_are_written_as_aliases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # mypy's generator, without semantic analysis, wrote each as ``Price: Incomplete``: every field
    # typed through one was Any to pyright (found by an outside tester, with vLLM's NestedTensors).
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "aliases",
        """
        import decimal
        from dataclasses import dataclass
        from typing import Annotated, List, Literal, Optional, Tuple, Union

        from typing_extensions import TypeAlias

        from metakit import ZeroCopy

        Price = Optional[decimal.Decimal]
        Tree = Union[List["Tree"], int]
        Pair: TypeAlias = Tuple[decimal.Decimal, int]
        LIMIT = decimal.Decimal(3)
        # A Literal's values, an Annotated's metadata and a string holding a type are no names.
        Mode = Optional[Literal["on", "off", 3]]
        Meters = Annotated[float, "unit"]
        Nested = List["List[int]"]
        Maybe: TypeAlias = "int | None"
        Unknown = Optional["NeverDefined"]

        @dataclass
        class Order(ZeroCopy):
            price: Price
            tree: Tree
            pair: Pair
        """,
    )
    compile(stub, "aliases.pyi", "exec")
    assert "\nimport decimal\n" in stub
    assert "\nPrice = decimal.Decimal | None\nTree = list[Tree] | int\nPair = tuple[decimal.Decimal, int]\n" in stub
    assert "\nLIMIT: Incomplete\n" in stub  # a constant stays one
    assert "\nMode = Literal['on', 'off', 3] | None\nMeters = float\n" in stub
    assert "\nNested = list[list[int]]\nMaybe = int | None\n" in stub
    assert "\nUnknown: Incomplete\n" in stub  # a name that nothing binds: no alias of an undefined name
    assert "class OrderDict(_TypedDict):\n    price: Price\n    tree: Tree\n    pair: Pair\n" in stub


def test_a_field_typed_self_is_each_subclass_own_in_its_typed_dict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The subclass's TypedDict inherited the base's, whose key said the base (found by an outside tester).
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "says_self",
        """
        from dataclasses import dataclass
        from typing import Optional

        from typing_extensions import Self

        from metakit import ZeroCopy

        @dataclass
        class Chunked(ZeroCopy):
            cached: Optional[Self] = None

        @dataclass
        class MLAChunked(Chunked):
            rank: int = 0
        """,
    )
    assert "class ChunkedDict(_TypedDict):\n    cached: Chunked | None\n" in stub
    assert "class MLAChunkedDict(_TypedDict):\n    cached: MLAChunked | None\n    rank: int\n" in stub


def test_a_packages_stub_keeps_the_classes_it_reexports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # mypy's generator wrote ``from .meta import Meta as Meta`` only where the stub used it: the package's
    # stub, which the README says to write, lost the class, and pyright refused the import (found by an
    # outside tester).
    package = tmp_path / "src" / "reexporting"
    package.mkdir(parents=True)
    (package / "meta.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass
            from metakit import ZeroCopy

            @dataclass
            class Meta(ZeroCopy):
                is_prompt: bool
                n: int

            @dataclass
            class Other(ZeroCopy):
                name: str
            """
        )
    )
    (package / "__init__.py").write_text(
        "import json as json\nfrom .meta import Meta as Meta\nfrom reexporting.meta import Other as Other\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    try:
        for name in ("reexporting", "reexporting.meta"):
            assert main(["stubgen", name, "-o", str(tmp_path / "stubs")]) == 0
    finally:
        for name in ("reexporting", "reexporting.meta"):
            sys.modules.pop(name, None)
    init = (tmp_path / "stubs" / "reexporting" / "__init__.pyi").read_text()
    assert "import json as json\n" in init
    assert "from reexporting.meta import Meta as Meta, Other as Other\n" in init
    (tmp_path / "usage.py").write_text(
        "from reexporting import Meta, Other\n"
        "n: int = Meta(True, 1).asdict_zerocopy()['n']\n"
        "wrong: str = Meta(True, 1).asdict_zerocopy()['n']\n"
        "Other('x').asdict_zerocopy()['nope']\n"
    )
    lines = {d["range"]["start"]["line"] for d in basedpyright(tmp_path, ["usage.py"])}
    assert lines == {2, 3}


def test_a_type_parameter_a_subclass_leaves_out_is_its_default_or_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stub wrote the base's own T and U in the subclass's methods, names that are no parameter
    # there: pyright said they are not defined (found by an outside tester, with PEP 695 classes).
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "left_out",
        """
        from dataclasses import dataclass
        from typing import Generic, Optional, TypeVar

        from typing_extensions import TypeVar as TypeVarWithDefault

        from metakit import ZeroCopy

        T = TypeVar("T")
        U = TypeVarWithDefault("U", default=int)
        V = TypeVarWithDefault("V", default=None)


        @dataclass
        class G(ZeroCopy, Generic[T]):
            t: T


        @dataclass
        class Bare(G):  # type: ignore[type-arg]
            b: int = 0


        @dataclass
        class D(ZeroCopy, Generic[T, U, V]):
            t: T
            u: Optional[U] = None
            v: Optional[V] = None


        @dataclass
        class H(D[str]):
            h: int = 0
        """,
    )
    bare, h = members(stub, "Bare"), members(stub, "H")
    assert "def astuple_zerocopy(self) -> _tuple[_Any, int]:" in bare["astuple_zerocopy"][0]
    assert "t: _Any=..., b: int=..." in bare["__replace__"][0]
    assert "def astuple_zerocopy(self) -> _tuple[str, int | None, None | None, int]:" in h["astuple_zerocopy"][0]
    assert "u: int | None=..., v: None | None=..." in h["__replace__"][0]
    if sys.version_info < (3, 13):  # PEP 695 with defaults
        return
    # A default that names what is not defined at run time is evaluated only when it is read.
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "left_out_695",
        """
        from dataclasses import dataclass
        from metakit import ZeroCopy

        @dataclass
        class D[T, U = Undefined](ZeroCopy):
            t: T
            u: U | None = None

        @dataclass
        class Bare(D):
            b: int = 0
        """,
    )
    assert (
        "def astuple_zerocopy(self) -> _tuple[_Any, _Any | None, int]:" in members(stub, "Bare")["astuple_zerocopy"][0]
    )


def test_a_param_spec_or_type_var_tuple_a_subclass_leaves_out_is_its_default_or_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # They stayed free in the subclass's stub, where no checker can read them (found by an outside tester).
    if sys.version_info < (3, 13):  # PEP 696 defaults in PEP 695's syntax
        return
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "left_out_variadic",
        """
        from dataclasses import dataclass
        from typing import Callable
        from metakit import ZeroCopy

        @dataclass
        class G[T = int, **P = [bytes]](ZeroCopy):
            x: T
            cb: Callable[P, T]

        @dataclass
        class H(G): pass

        @dataclass
        class I(G[float]): pass

        @dataclass
        class J[T = str, *Ts = *tuple[int, bytes]](ZeroCopy):
            x: T
            rest: tuple[*Ts]

        @dataclass
        class K(J): pass

        @dataclass
        class N[*Us, **R](ZeroCopy):
            rest: tuple[*Us]
            cb: Callable[R, int]

        @dataclass
        class M(N): pass

        @dataclass
        class Open[*Vs = *tuple[int, ...]](ZeroCopy):
            rest: tuple[*Vs]

        @dataclass
        class O(Open): pass
        """,
    )

    for returned in (
        "_tuple[int, Callable[[bytes], int]]",  # H
        "_tuple[float, Callable[[bytes], float]]",  # I
        "_tuple[str, tuple[int, bytes]]",  # K
        "_tuple[tuple[*tuple[_Any, ...]], Callable[..., int]]",  # M
        "_tuple[tuple[*tuple[int, ...]]]",  # O
    ):
        assert f"def astuple_zerocopy(self) -> {returned}: ..." in stub


def test_a_classvar_that_dataclasses_takes_for_a_field_is_its_type_in_the_typed_dict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # dataclasses reads a string annotation as a ClassVar only through the typing module: ``te.ClassVar[int]``
    # is a field.  The stub wrote ``cv: te.ClassVar[int]`` in the TypedDict, which pyright refuses and
    # types Any (found by an outside tester).
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "string_classvar",
        """
        from __future__ import annotations

        import typing as t
        from dataclasses import dataclass

        import typing_extensions as te

        from metakit import ZeroCopy

        @dataclass
        class Record(ZeroCopy):
            a: int
            cv: te.ClassVar[int] = 0
            real: t.ClassVar[int] = 0
        """,
    )
    if sys.version_info >= (3, 15):  # where dataclasses reads it as a ClassVar too
        assert typed_dict_keys(stub, "RecordDict") == ["a"]
        return
    assert typed_dict_keys(stub, "RecordDict") == ["a", "cv"]
    assert "    cv: int\n" in stub
    assert "def astuple_zerocopy(self) -> _tuple[int, int]:" in members(stub, "Record")["astuple_zerocopy"][0]


def test_a_classvar_or_initvar_that_dataclasses_takes_for_a_field_is_declared_a_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under ``from __future__ import annotations`` a ClassVar or InitVar in quotes is quoted again at run time,
    # and a name imported only under TYPE_CHECKING is missing: dataclasses reads neither, and makes a field.
    # The class body said ``label: ClassVar[str]``, so pyright refused the argument that ``__init__`` takes,
    # and the TypedDict said ``scale: InitVar[int]`` (found by an outside tester).
    stub = stub_of(
        tmp_path,
        monkeypatch,
        "quoted_pseudo_fields",
        """
        from __future__ import annotations

        from dataclasses import InitVar, dataclass
        from typing import TYPE_CHECKING, Annotated, ClassVar

        from metakit import ZeroCopy

        if TYPE_CHECKING:
            from typing import ClassVar as Hidden

        @dataclass
        class Record(ZeroCopy):
            a: int
            label: "ClassVar[str]" = "x"
            scale: "InitVar[int]" = 1
            hidden: Hidden[int] = 0
            noted: Annotated[InitVar[int], "a note"] = 0
            kept: ClassVar[int] = 0
            init: InitVar[int] = 0
        """,
    )
    # Nor does it read one inside Annotated[...]: the stub kept `noted: Annotated[InitVar[int], ...]`, and
    # pyright refused `record.noted`, which runs (found by an outside tester).
    assert typed_dict_keys(stub, "RecordDict") == ["a", "label", "scale", "hidden", "noted"]
    assert "    a: int\n    label: str\n    scale: int\n    hidden: int\n    noted: int\n" in stub
    record = members(stub, "Record")
    assert record["label"] == ["label: str = ..."]
    assert record["scale"] == ["scale: int = ..."]
    assert record["hidden"] == ["hidden: int = ..."]
    assert record["noted"] == ["noted: int = ..."]
    assert record["kept"] == ["kept: ClassVar[int] = ..."]
    assert record["init"] == ["init: InitVar[int] = ..."]
    assert "def astuple_zerocopy(self) -> _tuple[int, str, int, int, int]:" in record["astuple_zerocopy"][0]
    replace = record["__replace__"][0]
    assert "label: str=..., scale: int=..., hidden: int=..., noted: int=..., init: int=...) -> Record:" in replace
