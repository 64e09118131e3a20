"""``python -m metakit``: ``show`` prints a class's generated source; bad
targets and bad commands exit with status 2 and say why."""

import importlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import metakit

MODULE = "metakit_cli_example"

SOURCE = """
from dataclasses import dataclass, field

from metakit import OMIT, ZeroCopy


@dataclass
class Step(ZeroCopy):
    is_prompt: bool
    slot_mapping: list
    wrapper: object = field(default=None, metadata=OMIT)


class Outer:
    @dataclass
    class Inner(ZeroCopy):
        block_tables: list


@dataclass
class Plain:
    seq_len: int


@dataclass
class Overriding(ZeroCopy):
    seq_len: int

    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy(skip_fields)


@dataclass
class Inheriting(Overriding):
    block_size: int


@dataclass
class Reached(ZeroCopy):
    seq_len: int


@dataclass
class Reaching(Reached):
    # Reached's generated methods now serve through ZeroCopy's (rule 2).
    def astuple_zerocopy(self):
        return super().astuple_zerocopy()


class NotADataclass:
    pass


def function():
    pass
"""


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A torch-free module of metadata classes, importable here and in a subprocess."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    return tmp_path


def run(*args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "metakit", *args], capture_output=True, text=True, env=env, check=False, timeout=120
    )


@pytest.mark.parametrize("qualname", ["Step", "Outer.Inner", "Plain", "Overriding", "Reached"])
def test_show_prints_the_generated_source(example, qualname):
    result = run("show", f"{MODULE}:{qualname}", path=example)
    assert result.returncode == 0, result.stderr
    cls = importlib.import_module(MODULE)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    assert result.stdout == metakit.generated_source(cls)
    first, second = result.stdout.splitlines()[:2]
    assert first == f"# metakit: the generated methods of {MODULE}.{cls.__qualname__}"
    assert second == "def asdict_zerocopy(self, skip_fields=None):"
    if qualname in ("Step", "Outer.Inner", "Reached"):
        assert result.stderr == ""


def test_show_on_a_plain_dataclass_says_it_shows_what_the_function_forms_run(example):
    result = run("show", f"{MODULE}:Plain", path=example)
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "note: Plain is a plain dataclass (its metaclass is not ZeroCopyFields), so it has no generated methods;"
        " this is the code that metakit.asdict_zerocopy() and metakit.astuple_zerocopy() run for its instances"
    ]
    assert "has no generated methods" not in result.stdout


def test_show_on_a_class_with_its_own_method_says_which_method_is_not_shown(example):
    result = run("show", f"{MODULE}:Overriding", path=example)
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "note: Overriding.asdict_zerocopy is the class's own method, not the code below, which"
        " super().asdict_zerocopy() and the function forms run"
    ]


def test_show_on_a_class_inheriting_a_users_method_names_where_it_comes_from(example):
    result = run("show", f"{MODULE}:Inheriting", path=example)
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "note: Inheriting.asdict_zerocopy is Overriding.asdict_zerocopy, which it inherits, not the code below,"
        " which super().asdict_zerocopy() and the function forms run"
    ]
    assert "'block_size': self.block_size" in result.stdout


def test_show_on_a_class_whose_methods_an_override_below_reaches_adds_no_note(example):
    # Its methods are ZeroCopy's now, which run the code shown for its instances.
    assert (
        vars(metakit.ZeroCopy)["astuple_zerocopy"] is vars(importlib.import_module(MODULE).Reached)["astuple_zerocopy"]
    )
    result = run("show", f"{MODULE}:Reached", path=example)
    assert (result.returncode, result.stderr) == (0, "")


def test_show_leaves_omit_fields_out(example):
    result = run("show", f"{MODULE}:Step", path=example)
    asdict, astuple = (text for text in result.stdout.split("\n\n\n") if text.startswith(("# metakit", "def astuple")))
    assert "'slot_mapping': self.slot_mapping," in asdict
    assert "wrapper" not in asdict
    assert "wrapper" not in astuple


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (MODULE, "expected MODULE:CLASS"),
        (f"{MODULE}:", "expected MODULE:CLASS"),
        (":Step", "expected MODULE:CLASS"),
        ("metakit_no_such_module:Step", "cannot import 'metakit_no_such_module'"),
        (f"{MODULE}:Missing", "has no class 'Missing'"),
        (f"{MODULE}:Outer.Missing", "has no class 'Outer.Missing'"),
        (f"{MODULE}:NotADataclass", "NotADataclass is not a dataclass"),
        (f"{MODULE}:function", "is not a class"),
    ],
    ids=[
        "no colon",
        "no class",
        "no module",
        "missing module",
        "missing class",
        "missing nested",
        "not a dataclass",
        "function",
    ],
)
def test_show_with_a_bad_target_exits_with_status_2_and_says_why(example, target, message):
    result = run("show", target, path=example)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_show_without_a_target_exits_with_status_2():
    result = run("show")
    assert result.returncode == 2
    assert "MODULE:CLASS" in result.stderr


def test_no_command_prints_usage_to_stderr_and_exits_with_status_2():
    result = run()
    assert result.returncode == 2
    assert result.stderr.startswith("usage: python -m metakit [--version] {bench,show,stubgen} ...")
    for command in ("bench", "show", "stubgen"):
        assert f"  {command}  " in result.stderr
    assert result.stdout == ""


def test_unknown_command_prints_usage_to_stderr_and_names_it():
    result = run("frobnicate")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: python -m metakit")
    assert result.stderr.endswith("python -m metakit: error: unknown command 'frobnicate'\n")
    assert result.stdout == ""


def test_help_prints_usage_and_exits_with_status_0():
    result = run("--help")
    assert result.returncode == 0
    assert "usage: python -m metakit" in result.stdout


RAISING = "metakit_cli_raising"


@pytest.fixture
def raising(tmp_path: Path) -> Path:
    """A module that raises something other than ImportError while it is imported."""
    (tmp_path / f"{RAISING}.py").write_text("1 / 0\n")
    return tmp_path


@pytest.mark.parametrize("args", [["show", f"{RAISING}:Step"], ["stubgen", RAISING]], ids=["show", "stubgen"])
def test_a_module_that_raises_exits_with_status_2_and_one_line(raising, tmp_path, args):
    result = (
        run(*args, "-o", str(tmp_path / "stubs"), path=raising) if args[0] == "stubgen" else run(*args, path=raising)
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"python -m metakit: error: importing '{RAISING}' raised ZeroDivisionError: division by zero\n"
    )
    assert result.stdout == ""


EXITING = "metakit_cli_exiting"


@pytest.mark.parametrize(("code", "shown"), [("3", "3"), ("'bye'", "'bye'"), ("", "None")])
@pytest.mark.parametrize("args", [["show", f"{EXITING}:Step"], ["stubgen", EXITING]], ids=["show", "stubgen"])
def test_a_module_that_exits_while_imported_exits_with_status_2_and_one_line(tmp_path, args, code, shown):
    # Its own status would say nothing of what went wrong, and "bye" would exit with 1.
    (tmp_path / f"{EXITING}.py").write_text(f"import sys\nsys.exit({code})\n")
    output = ["-o", str(tmp_path / "stubs")] if args[0] == "stubgen" else []
    result = run(*args, *output, path=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"python -m metakit: error: importing '{EXITING}' called sys.exit({shown})\n"
    assert result.stdout == ""


def test_stubgen_into_a_directory_it_cannot_make_exits_with_status_2_before_importing(example, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    result = run("stubgen", MODULE, "-o", str(blocker / "stubs"), path=example)
    assert result.returncode == 2
    assert (
        result.stderr
        == f"python -m metakit: error: cannot write stubs to {blocker / 'stubs'}: {blocker} is not a directory\n"
    )
    assert not (blocker.parent / "stubs").exists()


def test_stubgen_of_a_standard_library_module_warns_that_its_stub_would_shadow_the_real_one(tmp_path):
    result = run("stubgen", "json", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(
        f"warning: json is a module of the standard library; a stub for it in {tmp_path} would shadow its real one"
    )


def test_stubgen_of_the_users_own_module_does_not_warn(example, tmp_path):
    result = run("stubgen", MODULE, "-o", str(tmp_path / "stubs"), path=example)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr


def test_version_prints_metakit_and_its_version():
    result = run("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"metakit {metakit.__version__}\n", "")


def test_the_console_script_names_itself_metakit_in_usage_and_errors():
    script = Path(sys.executable).parent / "metakit"
    if not script.exists():  # only where metakit is installed with its scripts, as in every venv here
        pytest.fail(f"no console script {script}")
    result = subprocess.run([str(script), "show"], capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: metakit show [-h] MODULE:CLASS")
    result = subprocess.run([str(script), "frobnicate"], capture_output=True, text=True, check=False, timeout=60)
    assert result.stderr.endswith("metakit: error: unknown command 'frobnicate'\n")


def test_ctrl_c_exits_with_status_130_and_no_traceback():
    process = subprocess.Popen(
        [sys.executable, "-m", "metakit", "bench", "--quick"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell starts background jobs with SIGINT ignored, and Python then keeps ignoring it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509  # no threads here
    )
    assert process.stderr is not None
    # Wait until it is measuring, then interrupt it as a terminal's Ctrl-C would.
    for line in process.stderr:
        if "measuring" in line:
            break
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in err
    assert err.endswith("python -m metakit: interrupted\n")


def test_stubgen_into_a_directory_whose_parent_is_missing_exits_with_status_2(example, tmp_path):
    # ``-o DIR`` makes DIR, but not the directories above it.
    target = tmp_path / "missing" / "deeper"
    result = run("stubgen", MODULE, "-o", str(target), path=example)
    assert result.returncode == 2
    assert result.stderr == (
        f"python -m metakit: error: cannot write stubs to {target}: there is no directory {tmp_path / 'missing'}\n"
    )
    assert not (tmp_path / "missing").exists()
    made = tmp_path / "made"
    assert run("stubgen", MODULE, "-o", str(made), path=example).returncode == 0
    assert (made / f"{MODULE}.pyi").is_file()


@pytest.mark.parametrize("args", [["stubgen", "-o"], ["stubgen", MODULE, "--output"]])
def test_a_stubgen_option_without_its_value_is_refused_by_the_program_as_invoked(example, args):
    result = run(*args, path=example)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "usage: python -m metakit stubgen [-h] [-o DIR] MODULE",
        "python -m metakit stubgen: error: argument -o/--output: expected one argument",
    ]
