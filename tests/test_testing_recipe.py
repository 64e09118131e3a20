"""The one-test-per-class recipe: ``zerocopy_classes_in`` finds a package's classes,
``class_id`` names the tests, and a failure reads well under ``pytest -q``."""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import metakit.testing
from metakit.testing import class_id, zerocopy_classes_in

_names = itertools.count()

MODELS = """
    import abc
    from dataclasses import dataclass
    from metakit import ZeroCopy, ZeroCopyFields
    from {package}.sub.inputs import ModelInput   # imported: found in its own module

    class ABCZeroCopyFields(ZeroCopyFields, abc.ABCMeta):
        pass

    @dataclass
    class AttentionMetadata(ZeroCopy):
        slot_mapping: list

    @dataclass
    class FlashAttentionMetadata(AttentionMetadata):
        max_seq_len: int = 0

        @dataclass
        class LocalAttentionMetadata(ZeroCopy):
            local_block_table: list

    @dataclass
    class Backend(metaclass=ABCZeroCopyFields):    # abstract: no instances to check
        seq_lens: list

        @abc.abstractmethod
        def build(self): ...

    @dataclass
    class Plain:                                   # not made by ZeroCopyFields
        seq_lens: list

    class NotADataclass(ZeroCopy):
        pass

    Alias = AttentionMetadata
"""

INPUTS = """
    from dataclasses import dataclass
    from metakit import ZeroCopy

    @dataclass(frozen=True)
    class ModelInput(ZeroCopy):
        input_tokens: list
"""


def write_package(root: Path, modules: dict[str, str]) -> str:
    package = f"engine_{next(_names)}_{root.name}".replace("-", "_")
    for relative, text in {"__init__.py": "", **modules}.items():
        path = root / package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text.format(package=package)))
    return package


@pytest.fixture
def package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return write_package(
        tmp_path,
        {
            "models.py": MODELS,
            "sub/__init__.py": "",
            "sub/inputs.py": INPUTS,
            "__main__.py": "raise SystemExit('__main__ must not be imported')",
        },
    )


def test_a_package_gives_its_classes_in_module_then_definition_order(package):
    classes = zerocopy_classes_in(package)
    assert [(cls.__module__, cls.__qualname__) for cls in classes] == [
        (f"{package}.models", "AttentionMetadata"),
        (f"{package}.models", "FlashAttentionMetadata"),
        (f"{package}.models", "FlashAttentionMetadata.LocalAttentionMetadata"),
        (f"{package}.sub.inputs", "ModelInput"),
    ]


def test_a_module_gives_only_its_own_classes(package):
    names = [cls.__qualname__ for cls in zerocopy_classes_in(f"{package}.sub.inputs")]
    assert names == ["ModelInput"]


def test_a_module_object_works_like_its_name(package):
    module = importlib.import_module(f"{package}.models")
    assert zerocopy_classes_in(module) == zerocopy_classes_in(f"{package}.models")


def test_every_class_found_passes_the_class_helper(package):
    for cls in zerocopy_classes_in(package):
        metakit.testing.assert_zerocopy_class(cls)


def test_a_module_without_such_classes_raises_lookup_error_rather_than_giving_an_empty_list():
    with pytest.raises(LookupError, match=r"no dataclass made by ZeroCopyFields is defined in textwrap$"):
        zerocopy_classes_in("textwrap")


def test_a_package_without_such_classes_names_the_package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = write_package(tmp_path, {"empty.py": "X = 1\n"})
    with pytest.raises(LookupError, match=f"the package {package} and its submodules"):
        zerocopy_classes_in(package)


def test_a_wrong_name_raises_module_not_found_error():
    with pytest.raises(ModuleNotFoundError, match="no_such_engine"):
        zerocopy_classes_in("no_such_engine.metadata")


def test_a_submodule_that_fails_to_import_is_not_skipped(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = write_package(tmp_path, {"models.py": INPUTS, "broken.py": "import no_such_dependency\n"})
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency"):
        zerocopy_classes_in(package)


def test_class_id_is_the_qualified_name(package):
    ids = [class_id(cls) for cls in zerocopy_classes_in(package)]
    assert ids == [
        "AttentionMetadata",
        "FlashAttentionMetadata",
        "FlashAttentionMetadata.LocalAttentionMetadata",
        "ModelInput",
    ]


# --- the recipe, run by pytest ----------------------------------------------------------

RECIPE = """
    import pytest
    from metakit.testing import assert_zerocopy_class, class_id, zerocopy_classes_in

    @pytest.mark.parametrize("cls", zerocopy_classes_in("{package}"), ids=class_id)
    def test_converts_without_copying(cls):
        assert_zerocopy_class(cls)
"""

BROKEN = """
    from dataclasses import dataclass
    from metakit import ZeroCopy

    @dataclass
    class FlashInferMetadata(ZeroCopy):
        slot_mapping: list
        decode_wrapper: object = None

        def asdict_zerocopy(self, skip_fields=None):
            if skip_fields is None:
                skip_fields = set()
            skip_fields.add("decode_wrapper")
            return super().asdict_zerocopy(skip_fields)
"""


def run_pytest(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *arguments]
    return subprocess.run(command, cwd=directory, env=_env(), capture_output=True, text=True, timeout=120, check=False)


def _env() -> dict[str, str]:
    """The environment for a child Python that imports the metakit these tests import."""
    home = str(Path(metakit.testing.__file__).parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([home, os.environ.get("PYTHONPATH", "")])}


def test_the_recipe_gives_one_test_per_class_named_by_its_qualified_name(package, tmp_path):
    (tmp_path / "test_recipe.py").write_text(textwrap.dedent(RECIPE.format(package=package)))
    result = run_pytest(tmp_path, "-v", "test_recipe.py")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in [
        "AttentionMetadata",
        "FlashAttentionMetadata",
        "FlashAttentionMetadata.LocalAttentionMetadata",
        "ModelInput",
    ]:
        assert f"test_recipe.py::test_converts_without_copying[{name}] PASSED" in result.stdout


def test_a_failure_under_pytest_q_shows_the_message_and_no_metakit_frames(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    package = write_package(tmp_path, {"metadata.py": BROKEN})
    (tmp_path / "test_recipe.py").write_text(textwrap.dedent(RECIPE.format(package=package)))
    result = run_pytest(tmp_path, "-q", "test_recipe.py")
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout
    message = (
        "E       AssertionError: FlashInferMetadata: the override FlashInferMetadata.asdict_zerocopy:"
        " obj.asdict_zerocopy(skip_fields=set()) changed the skip_fields it was given: it added"
        " ['decode_wrapper']; it must leave the caller's set unchanged and change a copy"
    )
    assert message in output
    assert "test_converts_without_copying[FlashInferMetadata]" in output
    assert "metakit" + "/" not in output.replace("metakit.testing import", "")  # no frame of metakit's files
    assert ">" + " " * 7 + "assert_zerocopy_class(cls)" in output  # the user's own line is the one shown


def test_import_metakit_imports_neither_pytest_nor_torch():
    code = "import sys, metakit, metakit.testing; print(sorted({'pytest', 'torch'} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
