"""pyright (basedpyright) reads the exact types from the repo's ``stubs/``:
the stubs of every module in ``metakit.examples`` have no error, good usage
of the example engine metadata is clean, and bad usage, such as a key that
is not in the dict or a key that ``skip_fields`` took out, is reported."""

import importlib
import pkgutil
import shutil
import textwrap
from pathlib import Path

import pytest
from test_stubgen import basedpyright

import metakit.examples
from metakit.__main__ import main

STUBS = Path(__file__).parents[2] / "stubs"

GOOD = """
from typing import Any, Callable, Dict, Mapping, Optional, Protocol, Set

import torch
from typing_extensions import assert_type

import metakit
from metakit.examples.engine import (
    AttentionMetadataDict,
    FlashInferMetadata,
    FlashInferMetadataDict,
    FlashInferMetadataPartialDict,
    make_flashinfer_metadata,
)


def forward(
    num_prefills: int, num_prefill_tokens: int, num_decode_tokens: int, slot_mapping: torch.Tensor, **rest: object
) -> None: ...


def broadcast(tensor_dict: Dict[str, Any]) -> None: ...


meta = make_flashinfer_metadata()
d = meta.asdict_zerocopy()
assert_type(d, FlashInferMetadataDict)
base: AttentionMetadataDict = d
slot_mapping: torch.Tensor = d["slot_mapping"]
assert_type(d["block_tables"], torch.Tensor | None)
assert_type(meta.astuple_zerocopy()[4], bool)
forward(**d)
FlashInferMetadata(**d)
meta.attn_bias = None
meta.is_profile_run = True
skipped = meta.asdict_zerocopy(skip_fields={"slot_mapping", "prefill_wrapper"})
skipped["input_tokens"] = slot_mapping  # what skip_fields returns takes new keys
broadcast(skipped)
assert_type(skipped.get("block_tables"), torch.Tensor | None)
broadcast(metakit.asdict_zerocopy(meta))  # the function form is a dict[str, Any] for pyright
assert_type(meta.__replace__(page_size=32), FlashInferMetadata)
assert_type(metakit.replace(meta, page_size=32), FlashInferMetadata)


class SupportsAsdict(Protocol):  # vLLM's signature of the method (an outside tester)
    def asdict_zerocopy(self, skip_fields: Optional[Set[str]] = None) -> Mapping[str, Any]: ...


def send(record: SupportsAsdict, convert: Callable[[Optional[Set[str]]], Mapping[str, Any]]) -> None: ...


def sometimes(skip: Optional[Set[str]]) -> None:
    send(meta, meta.asdict_zerocopy)
    assert_type(meta.asdict_zerocopy(skip), FlashInferMetadataPartialDict)
    broadcast(meta.asdict_zerocopy(skip))  # a Dict[str, Any], as with a set (an outside tester)
"""

BAD = {
    "a post-init attribute": 'make_flashinfer_metadata().asdict_zerocopy()["attn_bias"]',
    "an OMIT field": 'make_flashinfer_metadata().asdict_zerocopy()["prefill_wrapper"]',
    "a misspelt key": 'make_flashinfer_metadata().asdict_zerocopy()["slot_mappin"]',
    "a wrong value type": 'page_size: str = make_flashinfer_metadata().asdict_zerocopy()["page_size"]',
    "a wrong tuple item type": "is_prompt: str = make_flashinfer_metadata().astuple_zerocopy()[4]",
    "a skipped key": 'make_flashinfer_metadata().asdict_zerocopy(skip_fields={"head_dim"})["head_dim"]',
    "a str as skip_fields": 'make_flashinfer_metadata().asdict_zerocopy(skip_fields="slot_mapping")',
    "an unknown field to __replace__": "make_flashinfer_metadata().__replace__(page_sise=32)",
    "None to metakit.replace": "metakit.replace(None)",
    "a record that may be None to metakit.replace": "metakit.replace(make_flashinfer_metadata() if id(0) else None)",
}


def with_stubs(directory: Path, source: str) -> Path:
    shutil.copytree(STUBS, directory / "stubs")
    (directory / "usage.py").write_text(textwrap.dedent(source))
    return directory


def test_every_example_module_has_a_stub_with_no_error(tmp_path: Path) -> None:
    modules = [info.name for info in pkgutil.walk_packages(metakit.examples.__path__, "metakit.examples.")]
    for name in ["metakit.examples", *modules]:
        importlib.import_module(name)
        assert main(["stubgen", name, "-o", str(tmp_path / "stubs")]) == 0
    assert len(list((tmp_path / "stubs").rglob("*.pyi"))) == 1 + len(modules)
    assert basedpyright(tmp_path, ["stubs"]) == []


def test_good_usage_is_clean(tmp_path: Path) -> None:
    assert basedpyright(with_stubs(tmp_path, GOOD), ["usage.py"]) == []


@pytest.fixture(scope="module")
def bad_errors(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    source = (
        "import metakit; from metakit.examples.engine import make_flashinfer_metadata\n"
        + "\n".join(BAD.values())
        + "\n"
    )
    return basedpyright(with_stubs(tmp_path_factory.mktemp("bad"), source), ["usage.py"])


def test_every_bad_line_is_reported(bad_errors: list[dict[str, object]]) -> None:
    lines = {diagnostic["range"]["start"]["line"] for diagnostic in bad_errors}  # type: ignore[index]
    assert lines == set(range(1, len(BAD) + 1)), bad_errors


@pytest.mark.parametrize("key", ["attn_bias", "prefill_wrapper"])
def test_the_message_names_the_key(bad_errors: list[dict[str, object]], key: str) -> None:
    expected = f'"{key}" is not a defined key in "FlashInferMetadataDict"'
    assert any(expected in str(diagnostic["message"]) for diagnostic in bad_errors), bad_errors
