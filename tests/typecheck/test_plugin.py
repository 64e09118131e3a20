"""The mypy plugin ``metakit.mypy``, checked on real modules.

Each module in ``cases/`` is type-checked with the plugin (``mypy.ini`` here),
all of them in one ``mypy.api`` run, and mypy's output for it must equal the
golden file beside it, ``cases/<module>.out``.  The errors must also fall on
exactly the lines commented ``E: why``: a golden file cannot bless a missed or a
spurious error.  After a deliberate change, update the golden files with::

    METAKIT_UPDATE_GOLDEN=1 python -m pytest tests/typecheck

and review their diff.  The case modules need no torch; ``Tensor`` in them is
a stand-in class.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import os
import re
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from mypy import api

import metakit
import metakit.mypy

HERE = Path(__file__).parent
CASES = HERE / "cases"
CONFIG = HERE / "mypy.ini"
CASE_FILES = sorted(CASES.glob("*.py"))
UPDATE = os.environ.get("METAKIT_UPDATE_GOLDEN") == "1"

_LOCATION = re.compile(r"^(?:.*[/\\])?(?P<file>[^/\\]+\.py):(?P<line>[0-9]+): (?P<kind>error|note): ")
_MARKER = re.compile(r"#\s*E:")
_DEFINED_IN = re.compile(r': note: "[^"]+" defined in "[^"]+"$')


def run_mypy(files: list[Path], cache_dir: Path) -> tuple[str, str, int]:
    return mypy_in_process(["--config-file", str(CONFIG), "--cache-dir", str(cache_dir), *map(str, files)])


def mypy_in_process(arguments: list[str]) -> tuple[str, str, int]:
    """``mypy.api.run(arguments)``, and what mypy keeps alive after it frozen.

    mypy keeps some 250,000 objects after a run.  Frozen, they are left out
    of the collections that later tests in this worker make: each took 0.3 s,
    and a test that collects at every step (test_late_changes) took 50 s.
    """
    result = api.run(arguments)
    gc.collect()
    gc.freeze()
    return result


def by_file(stdout: str) -> dict[str, list[str]]:
    """mypy's report lines, keyed by file name, with directories left out.

    Notes that say where a callee is defined are left out too: some mypy
    versions write them, others do not.
    """
    lines: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        match = _LOCATION.match(line)
        if match and not _DEFINED_IN.search(line):
            lines.setdefault(match["file"], []).append(line[match.start("file") :])
    return lines


def marked_lines(path: Path) -> set[int]:
    return {number for number, line in enumerate(path.read_text().splitlines(), 1) if _MARKER.search(line)}


def error_lines(lines: list[str]) -> set[int]:
    return {int(m["line"]) for m in map(_LOCATION.match, lines) if m and m["kind"] == "error"}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.fixture(scope="module")
def cold_run(cache_dir: Path) -> str:
    stdout, stderr, status = run_mypy(CASE_FILES, cache_dir)
    assert stderr == "", stderr  # a crash in the plugin would show here
    assert status == 1, stdout  # bad_usage.py has errors
    return stdout


@pytest.mark.parametrize("case", CASE_FILES, ids=lambda path: path.name)
def test_output_matches_golden(cold_run: str, case: Path) -> None:
    actual = "".join(f"{line}\n" for line in by_file(cold_run).get(case.name, []))
    golden = case.with_suffix(".out")
    if UPDATE:
        golden.write_text(actual)
    assert actual == golden.read_text()


@pytest.mark.parametrize("case", CASE_FILES, ids=lambda path: path.name)
def test_errors_fall_exactly_on_marked_lines(cold_run: str, case: Path) -> None:
    assert error_lines(by_file(cold_run).get(case.name, [])) == marked_lines(case)


def test_warm_cache_gives_identical_output(cold_run: str, cache_dir: Path) -> None:
    stdout, stderr, _ = run_mypy(CASE_FILES, cache_dir)
    assert stderr == ""
    assert stdout == cold_run


def test_dmypy_gives_identical_output(cold_run: str, tmp_path: Path) -> None:
    with dmypy(tmp_path) as check:
        assert by_file(check(CASE_FILES)) == by_file(cold_run)


# --- a change to a base class in another module reaches its users ----------
# Four modules, plain <- base <- middle <- user (plain is a dataclass that
# ZeroCopyFields did not make), named with a suffix so that runs that share
# the module-wide cache (for the standard library) start cold on them.

_SCENARIO = {
    "plain": """\
from dataclasses import dataclass, field
from metakit import OMIT

@dataclass
class Plain:
    p: object = field(metadata={"doc": "plain"})
""",
    "base": """\
from dataclasses import dataclass, field
from metakit import OMIT, ZeroCopy
from plain{suffix} import Plain

@dataclass
class Base(Plain, ZeroCopy):
    a: int
    wrapper: object = field(default=None, metadata={"doc": "kept"})
""",
    "middle": """\
from dataclasses import dataclass
from base{suffix} import Base

@dataclass
class Middle(Base):
    b: str = ""
""",
    "user": """\
import metakit
from middle{suffix} import Middle

def method(meta: Middle) -> None:
    wrapper: object = meta.asdict_zerocopy()["wrapper"]
    p: object = meta.asdict_zerocopy()["p"]

def function(meta: Middle) -> None:
    a: int = metakit.astuple_zerocopy(meta)[1]
""",
}
_EDITS = {  # the module each edit changes, and how
    "omit": ("base", 'metadata={"doc": "kept"}', "metadata=OMIT"),  # changes metadata only
    "retype": ("base", "a: int", "a: bytes"),
    "plain_omit": ("plain", 'metadata={"doc": "plain"}', "metadata=OMIT"),  # in a plain dataclass
}


def write_scenario(directory: Path, suffix: str, edit: str | None = None) -> list[Path]:
    files = []
    for name, template in _SCENARIO.items():
        edited = edit is not None and _EDITS[edit][0] == name
        text = template.replace(*_EDITS[edit][1:]) if edit is not None and edited else template
        path = directory / f"{name}{suffix}.py"
        path.write_text(text.replace("{suffix}", suffix))
        files.append(path)
    return files


def report(stdout: str, suffix: str) -> dict[str, list[str]]:
    return {name.replace(suffix, ""): lines for name, lines in by_file(stdout.replace(suffix, "")).items()}


@pytest.fixture(scope="module")
def edited_cold(cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[str]]]:
    """What a cold run reports after each edit."""
    reports = {}
    for edit in _EDITS:
        suffix = f"_cold_{edit}"
        stdout, _, _ = run_mypy(write_scenario(tmp_path_factory.mktemp(edit), suffix, edit), cache_dir)
        reports[edit] = report(stdout, suffix)
        assert "user.py" in reports[edit]  # each edit makes an error
    return reports


@pytest.mark.parametrize("runner", ["mypy", "dmypy"])
def test_edits_in_a_base_module_reach_its_users(
    runner: str, tmp_path: Path, cache_dir: Path, edited_cold: dict[str, dict[str, list[str]]]
) -> None:
    """A warm cache, and a running dmypy, report after an edit what a cold run does."""
    suffix = f"_{runner}_{tmp_path.name}"
    files = write_scenario(tmp_path, suffix)
    with contextlib.ExitStack() as stack:
        if runner == "dmypy":
            check = stack.enter_context(dmypy(tmp_path))
        else:

            def check(files: list[Path]) -> str:
                return run_mypy(files, cache_dir)[0]

        assert report(check(files), suffix) == {}
        for edit in _EDITS:
            write_scenario(tmp_path, suffix, edit)
            assert report(check(files), suffix) == edited_cold[edit], edit


@contextlib.contextmanager
def dmypy(directory: Path) -> Iterator[Callable[[list[Path]], str]]:
    """A dmypy daemon of its own, in a subprocess; yields its check command."""
    status_file = str(directory / "dmypy.json")

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mypy.dmypy", "--status-file", status_file, *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def check(files: list[Path]) -> str:
        result = command("run", "--", "--config-file", str(CONFIG), *map(str, files))
        assert result.returncode in (0, 1), result.stdout + result.stderr
        return result.stdout

    try:
        yield check
    finally:
        command("stop")


# --- the shapes the good cases expect are what the code returns ------------


@pytest.fixture
def case_modules(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(CASES))
    yield
    for case in CASE_FILES:
        sys.modules.pop(case.stem, None)


def test_expected_typed_dicts_are_what_runs(case_modules: None) -> None:
    """The TypedDicts that good_usage.py asserts are the keys the methods return."""
    base = importlib.import_module("engine_base")
    models = importlib.import_module("engine_models")
    good = importlib.import_module("good_usage")
    mangled = importlib.import_module("mangled_names")
    tensor = base.Tensor()
    flash = base.FlashInferMetadata(1, 2, 3, tensor, True, workspace_size=1)
    expected = [
        (flash.asdict_zerocopy(), good.FlashInferDict),
        (flash.asdict_zerocopy(skip_fields={"slot_mapping"}), good.FlashInferSkippedDict),
        (models.DecodeMetadata(1, 2, 3, tensor, True), good.DecodeDict),
        (models.FlashAttentionMetadata(1, 2, 3, tensor, None, None), good.FlashAttentionDict),
        (models.UndecoratedMetadata(1, 2, 3, tensor, None, None), good.FlashAttentionDict),
        (models.Box("x"), good.BoxDict),
        (models.IntBox(1), good.IntBoxDict),
        (models.Pair(b"x", other=1.0), good.PairDict),
        (models.Direct(1), good.DirectDict),
        (models.DirectChild(1), good.DirectChildDict),
        (models.KeywordChild(k=1, p=""), good.KeywordDict),
        (models.Empty(), good.EmptyDict),
        (mangled.Private(1, "x"), mangled.PrivateDict),
    ]
    for value, typed_dict in expected:
        got = value if isinstance(value, dict) else value.asdict_zerocopy()
        assert list(got) == list(typed_dict.__annotations__), typed_dict.__name__
    frozen = models.FrozenChild(1, object(), True)
    assert [f.name for f in dataclasses.fields(frozen)] == ["step", "wrapper", "done"]
    assert frozen.astuple_zerocopy() == (1, True)


def test_quoted_class_vars_and_init_vars_are_fields_at_run_time(case_modules: None) -> None:
    """What quoted_annotations.py keeps the declared types for: in quotes, under ``from __future__ import
    annotations``, or inside ``Annotated``, a ``ClassVar`` or ``InitVar`` is a field at run time; else neither is."""
    quoted = importlib.import_module("quoted_annotations")
    assert quoted.Quoted(1).asdict_zerocopy() == {"a": 1, "label": "x"}
    assert quoted.QuotedInitVar(1).asdict_zerocopy() == {"a": 1, "scale": 1}
    assert quoted.AnnotatedInitVar(1).astuple_zerocopy() == (1, 1)
    assert quoted.Below(1).astuple_zerocopy() == (1, "x", 0)
    assert quoted.Unquoted(1).astuple_zerocopy() == (1,)


TYPING_ONLY_CLASS_VAR = """
from dataclasses import dataclass
from typing import TYPE_CHECKING

from metakit import ZeroCopy

if TYPE_CHECKING:
    import dataclasses as dc
    from typing import ClassVar


@dataclass
class Deferred(ZeroCopy):
    x: int
    count: ClassVar[int] = 3
    scale: dc.InitVar[int] = 0


reveal_type(Deferred(1).asdict_zerocopy())
"""


@pytest.mark.parametrize(
    ("version", "future", "revealed"),
    [
        ("3.13", "", "TypedDict(typing_only.Deferred.__metakit-dict, {'x': int})"),
        ("3.13", "from __future__ import annotations\n", "dict[str, Any]"),
        ("3.14", "", "dict[str, Any]"),
    ],
    ids=["3.13", "3.13 with annotations as text", "3.14"],
)
def test_a_class_var_imported_only_for_type_checkers_is_a_field_where_annotations_wait(
    tmp_path: Path, version: str, future: str, revealed: str
) -> None:
    """(An outside tester.) Where annotations are text, or (3.14+) evaluated only when asked, a ``ClassVar`` or
    ``InitVar`` imported only under ``TYPE_CHECKING`` is no name when ``dataclasses`` reads it, and it takes the
    field for one; elsewhere the class statement raises ``NameError``. The plugin keeps the declared types
    there, as for one in quotes."""
    (tmp_path / "typing_only.py").write_text(future + TYPING_ONLY_CLASS_VAR)
    arguments = ["--config-file", str(CONFIG), "--cache-dir", str(tmp_path / "cache"), "--python-version", version]
    stdout, stderr, _ = mypy_in_process([*arguments, str(tmp_path / "typing_only.py")])
    assert stderr == ""
    assert [line.partition(" ")[2].replace("builtins.", "") for line in by_file(stdout)["typing_only.py"]] == [
        f'note: Revealed type is "{revealed}"'
    ]
    if future or sys.version_info >= (3, 14):  # what runs: both are fields
        module = types.ModuleType("typing_only")  # dataclasses reads text in the class's module
        module.reveal_type = lambda value: None  # type: ignore[attr-defined]
        with mock.patch.dict(sys.modules, {"typing_only": module}):
            exec(compile(future + TYPING_ONLY_CLASS_VAR, "<typing_only>", "exec", dont_inherit=True), vars(module))
            assert module.Deferred(1).asdict_zerocopy() == {"x": 1, "count": 3, "scale": 0}


def test_vllm_shaped_cases_assert_what_runs(case_modules: None) -> None:
    """What vllm_runner.py asserts about vllm_backends.py is what the code returns."""
    backends = importlib.import_module("vllm_backends")
    runner = importlib.import_module("vllm_runner")
    tensor = importlib.import_module("engine_base").Tensor()
    paged = backends.PagedMetadata(1, 2, 3, tensor, None, None, 4, None, True)
    assert list(paged.asdict_zerocopy()) == list(runner.PagedDict.__annotations__)
    # handle (OMIT in a plain dataclass base), extra, seeds, merged, copied, keyed and left_by_one are left out.
    sampling = backends.SamplingMetadata()
    kept = ["temperature", "selected", "kept", "unmarked", "kept_by_name", "kept_by_zero"]
    assert list(sampling.asdict_zerocopy()) == kept
    wrapper = backends.WrapperMetadata(1, 2, 3, tensor, True)
    assert "decode_wrapper" not in wrapper.asdict_zerocopy()
    assert "decode_wrapper" in metakit.asdict_zerocopy(wrapper)


def test_vllm_override_type_checks_without_the_plugin(tmp_path: Path) -> None:
    """The FlashInfer-shaped override is no error when the plugin is off either."""
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG.read_text().replace("plugins = metakit.mypy", ""))
    files = [CASES / "engine_base.py", CASES / "vllm_backends.py"]
    stdout, stderr, status = mypy_in_process(
        ["--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), *map(str, files)]
    )
    assert (status, stderr) == (0, ""), stdout


if sys.version_info >= (3, 12):  # the syntax is new in 3.12, and mypy parses with the running Python

    def test_a_class_with_type_parameters_of_its_own(tmp_path: Path) -> None:
        """``class Box[T]`` (PEP 695): mypy infers T's variance from every member, the plugin's own too."""
        (tmp_path / "box.py").write_text(
            textwrap.dedent(
                """
                from dataclasses import dataclass
                from metakit import ZeroCopy

                @dataclass
                class Box[T](ZeroCopy):
                    item: T
                    items: list[T]

                d = Box(1, [2]).asdict_zerocopy()
                reveal_type(d["item"])
                d["other"]  # an error
                """
            )
        )
        stdout, stderr, _ = mypy_in_process(
            ["--config-file", str(CONFIG), "--cache-dir", str(tmp_path / "cache"), str(tmp_path / "box.py")]
        )
        assert stderr == ""  # no INTERNAL ERROR
        assert [line.partition(" ")[2].replace("builtins.", "") for line in by_file(stdout)["box.py"]] == [
            'note: Revealed type is "int"',
            'error: TypedDict "Box.asdict_zerocopy()" has no key "other"  [typeddict-item]',
        ]


# --- the plugin module itself ----------------------------------------------


def test_plugin_refuses_mypy_older_than_1_12() -> None:
    with pytest.raises(RuntimeError, match=r"mypy >= 1\.12"):
        metakit.mypy.plugin("1.11.2")


@pytest.mark.parametrize("version", ["1.12.0", "1.20.1", "2.4.1", "2.5.0+dev.0123abcd"])
def test_plugin_accepts_supported_mypy(version: str) -> None:
    assert metakit.mypy.plugin(version) is metakit.mypy.ZeroCopyPlugin


def test_plugin_has_a_version() -> None:
    assert re.fullmatch(r"[0-9]+", metakit.mypy.__version__)
    assert int(metakit.mypy.__version__) >= 2  # 2: dict fallback, replace, plain-dataclass OMIT


def test_cases_need_no_torch() -> None:
    for case in CASE_FILES:
        assert not re.search(r"^\s*(import|from)\s+torch\b", case.read_text(), re.MULTILINE), case.name
