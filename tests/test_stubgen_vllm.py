"""basedpyright on engine code shaped like vLLM's, reading the stubs that
``python -m metakit stubgen`` writes for the mypy plugin's vLLM-shaped case
modules (``tests/typecheck/cases``).

Each line of ``RUNNER`` marked ``# error`` must be reported, each marked
``# limit: RULE`` is reported by that rule because a stub cannot say
better (the README's limits), and no other line may be.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
from test_stubgen import basedpyright

from metakit.__main__ import main

CASES = Path(__file__).parent / "typecheck" / "cases"
CASE_MODULES = ["engine_base", "engine_models", "vllm_backends", "cycle_b", "cycle_a"]  # cycle_a imported first fails

RUNNER = """
from dataclasses import dataclass
from typing import Any, Dict, Optional, Set, Union

from engine_base import Tensor
from vllm_backends import BackendMetadata, PagedMetadata, WrapperMetadata


def broadcast_tensor_dict(
    tensor_dict: Optional[Dict[str, Union[Tensor, Any]]] = None, src: int = 0
) -> Dict[str, Union[Tensor, Any]]:
    return tensor_dict or {}


def bad_reads(meta: PagedMetadata) -> None:
    meta.asdict_zerocopy(skip_fields={"slot_mapping"})["slot_mapping"]  # error
    meta.asdict_zerocopy(skip_fields="slot_mapping")  # error
    block_tables: Tensor = meta.asdict_zerocopy()["block_tables"]  # error
    seq_lens_tensor: Tensor = meta.asdict_zerocopy()["seq_lens_tensor"]  # error


def drop_wrappers(meta: PagedMetadata, skip_fields: Optional[Set[str]] = None) -> Dict[str, Any]:
    # The body of vLLM's FlashInfer override.
    if skip_fields is None:
        skip_fields = set()
    skip_fields.add("block_tables")
    return meta.asdict_zerocopy(skip_fields)


def driver_step(meta: PagedMetadata, wrapper: WrapperMetadata, names: Set[str], input_tokens: Tensor) -> None:
    metadata_dict: Dict[str, Any] = {"input_tokens": input_tokens}
    metadata_dict.update(meta.asdict_zerocopy())
    broadcast_tensor_dict(metadata_dict, src=0)
    broadcast_tensor_dict(meta.asdict_zerocopy(skip_fields=names), src=0)
    broadcast_tensor_dict(wrapper.asdict_zerocopy(), src=0)
    skipped = meta.asdict_zerocopy(skip_fields={"block_tables"})
    skipped["input_tokens"] = input_tokens
    broadcast_tensor_dict(skipped, src=0)
    block_tables: Optional[Tensor] = meta.asdict_zerocopy()["block_tables"]
    rebuilt = PagedMetadata(**meta.asdict_zerocopy())
    broadcast_tensor_dict(meta.asdict_zerocopy(), src=0)  # limit: reportArgumentType
    full = meta.asdict_zerocopy()
    full["input_tokens"] = input_tokens  # limit: reportGeneralTypeIssues


@dataclass
class FlashInferMetadata(BackendMetadata):
    page_size: int = 16

    # vLLM's FlashInfer override, in another module than its base class.
    def asdict_zerocopy(self, skip_fields: Optional[Set[str]] = None) -> Dict[str, Any]:  # limit: reportIncompatibleMethodOverride
        if skip_fields is None:
            skip_fields = set()
        skip_fields.add("slot_mapping")
        return super().asdict_zerocopy(skip_fields)
"""  # noqa: E501  # the markers


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stubs of the case modules: cycle_b imports cycle_a, which is stubbed too."""
    directory = tmp_path_factory.mktemp("vllm")
    sys.path.insert(0, str(CASES))
    try:
        for name in CASE_MODULES:
            assert main(["stubgen", name, "-o", str(directory / "stubs")]) == 0
    finally:
        sys.path.remove(str(CASES))
        for name in CASE_MODULES:
            sys.modules.pop(name, None)
    (directory / "runner.py").write_text(textwrap.dedent(RUNNER))
    return directory


def test_the_stubs_of_the_case_modules_have_no_error(stub_dir: Path) -> None:
    assert basedpyright(stub_dir, ["stubs"]) == []


def test_engine_code_is_reported_exactly_where_it_is_wrong(stub_dir: Path) -> None:
    expected: dict[int, str | None] = {}
    for number, line in enumerate(RUNNER.splitlines()):
        mark = re.search(r"# (error|limit: (\w+))$", line)
        if mark:
            expected[number] = mark.group(2)
    reported = {d["range"]["start"]["line"]: d.get("rule") for d in basedpyright(stub_dir, ["runner.py"])}
    assert set(reported) == set(expected), reported
    limits = {line: rule for line, rule in expected.items() if rule is not None}
    assert {line: reported[line] for line in limits} == limits
