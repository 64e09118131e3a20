"""pyright (basedpyright) reads the exact types from the repo's ``stubs/``:
good usage of the example engine metadata is clean, and bad usage, such as a
key that is not in the dict, is reported."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

STUBS = Path(__file__).parents[2] / "stubs"

GOOD = """
import torch
from typing_extensions import assert_type

from metakit.examples.engine import (
    AttentionMetadataDict,
    FlashInferMetadata,
    FlashInferMetadataDict,
    make_flashinfer_metadata,
)


def forward(
    num_prefills: int, num_prefill_tokens: int, num_decode_tokens: int, slot_mapping: torch.Tensor, **rest: object
) -> None: ...


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
skipped = meta.asdict_zerocopy(skip_fields={"slot_mapping"})
"""

BAD = {
    "a post-init attribute": 'make_flashinfer_metadata().asdict_zerocopy()["attn_bias"]',
    "an OMIT field": 'make_flashinfer_metadata().asdict_zerocopy()["prefill_wrapper"]',
    "a misspelt key": 'make_flashinfer_metadata().asdict_zerocopy()["slot_mappin"]',
    "a wrong value type": 'page_size: str = make_flashinfer_metadata().asdict_zerocopy()["page_size"]',
    "a wrong tuple item type": "is_prompt: str = make_flashinfer_metadata().astuple_zerocopy()[4]",
}


def pyright(tmp_path: Path, source: str) -> list[dict[str, object]]:
    """basedpyright's error diagnostics for *source*, with stubs/ as its stub path."""
    (tmp_path / "usage.py").write_text(textwrap.dedent(source))
    config = {"stubPath": str(STUBS), "typeCheckingMode": "standard", "include": ["usage.py"]}
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-m", "basedpyright", "--outputjson", "--pythonpath", sys.executable, "usage.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    report = json.loads(result.stdout)
    assert report["summary"]["filesAnalyzed"] == 1, result.stdout
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


def test_good_usage_is_clean(tmp_path: Path) -> None:
    assert pyright(tmp_path, GOOD) == []


@pytest.fixture(scope="module")
def bad_errors(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    source = "from metakit.examples.engine import make_flashinfer_metadata\n" + "\n".join(BAD.values()) + "\n"
    return pyright(tmp_path_factory.mktemp("bad"), source)


def test_every_bad_line_is_reported(bad_errors: list[dict[str, object]]) -> None:
    lines = {diagnostic["range"]["start"]["line"] for diagnostic in bad_errors}  # type: ignore[index]
    assert lines == set(range(1, len(BAD) + 1)), bad_errors


@pytest.mark.parametrize("key", ["attn_bias", "prefill_wrapper"])
def test_the_message_names_the_key(bad_errors: list[dict[str, object]], key: str) -> None:
    expected = f'"{key}" is not a defined key in "FlashInferMetadataDict"'
    assert any(expected in str(diagnostic["message"]) for diagnostic in bad_errors), bad_errors
