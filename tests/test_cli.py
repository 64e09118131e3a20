"""The command line, ``python -m metakit``: ``show`` prints a class's generated source, with a
note on stderr where that is not what the class runs; ``stubgen`` writes stubs; ``--version`` and
``--help``; bad targets, bad options, bad commands and modules that fail to import exit with
status 2 and one line that says why, before any work; Ctrl-C exits 130 without a traceback.

The program runs in this process, through ``metakit.__main__.main``, on a module of classes
written for each test; only what needs a process of its own runs as one (the names the
program gives itself, Ctrl-C, and a benchmark that must not start).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import signal
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

import metakit
import metakit.__main__
import metakit.bench
from tests.records import REPO

PROG = "python -m metakit"
"""How the program names itself here: ``sys.argv[0]`` is its ``__main__.py``, as ``python -m`` sets it."""

MODULE = "metakit_cli_example"
RAISING = "metakit_cli_raising"
SYNTAX = "metakit_cli_syntax"
EXITING = "metakit_cli_exiting"
USER_MODULES = (MODULE, RAISING, SYNTAX, EXITING)

METHODS = ("asdict_zerocopy", "astuple_zerocopy", "__replace__")

SOURCE = """
from dataclasses import dataclass, field

from metakit import OMIT, ZeroCopy, ZeroCopyFields


@dataclass
class Step(ZeroCopy):
    is_prompt: bool
    slot_mapping: list
    wrapper: object = field(default=None, metadata=OMIT)


class Outer:
    @dataclass(slots=True)
    class Inner(ZeroCopy):
        block_tables: list


@dataclass
class Batch(ZeroCopy):
    size: int = 0

    @dataclass
    class Item(ZeroCopy):
        index: int = 0


@dataclass
class Plain:
    seq_len: int


@dataclass
class Reached(ZeroCopy):
    seq_len: int


# Each reaches its own method of Reached through super(): Reached's generated methods are now
# forwarders, which serve the instance's own class (rule 2).
@dataclass
class Overriding(Reached):
    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy(skip_fields)


@dataclass
class Reaching(Reached):
    def astuple_zerocopy(self):
        return super().astuple_zerocopy()


@dataclass
class Replacing(Reached):
    block_size: int = 0

    def __replace__(self, /, **changes):
        return super().__replace__(**changes)


@dataclass
class Inheriting(Overriding):
    block_size: int


@dataclass
class Deleted(ZeroCopy):
    seq_len: int = 0


Deleted.asdict_zerocopy = lambda self, skip_fields=None: {}
del Deleted.asdict_zerocopy


@dataclass
class LaterTuple(ZeroCopy):
    seq_len: int = 0


LaterTuple.astuple_zerocopy = lambda self: (self.seq_len,)


@dataclass
class MetaOnly(metaclass=ZeroCopyFields):  # no ZeroCopy base: super() in its override reaches nothing
    seq_len: int = 0

    def asdict_zerocopy(self, skip_fields=None):
        return {}


@dataclass
class Borrowing(ZeroCopy):
    seq_len: int = 0

    asdict_zerocopy = Step.asdict_zerocopy  # generated for Step: in Borrowing, a user's method


class NotADataclass:
    pass


def function():
    pass


VALUE = 5
"""


class Result(NamedTuple):
    status: int
    out: str
    err: str


class BenchmarkStarted(BaseException):
    """The benchmark started: past the checks that must refuse the command (no ``except Exception`` stops it)."""


def _benchmark_started(*args: object, **kwargs: object) -> None:
    raise BenchmarkStarted


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Result]]:
    """Runs the program in this process, in *tmp_path*, which holds the user's modules.

    They are imported from there and gone from ``sys.modules`` afterwards, and ``sys.path``,
    ``sys.argv`` and the working directory are restored.  The benchmark itself never runs: a
    ``bench`` command that gets past its checks raises ``BenchmarkStarted``.
    """
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    (tmp_path / f"{RAISING}.py").write_text("1 / 0\n")
    (tmp_path / f"{SYNTAX}.py").write_text("def (:\n")
    for name in USER_MODULES:
        assert name not in sys.modules, name  # none left by another test
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # stubgen's default output, ./stubs, is made here
    monkeypatch.setattr(sys, "argv", [metakit.__main__.__file__])  # as `python -m metakit` sets it
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps its usage at this width, as in a pipe
    monkeypatch.setattr(metakit.bench, "_run", _benchmark_started)
    monkeypatch.setattr(metakit.bench, "_broadcast_benchmark", _benchmark_started)

    def run(*args: str) -> Result:
        importlib.invalidate_caches()  # a module a test wrote after the fixture is found
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = metakit.__main__.main(list(args))
            except SystemExit as stop:  # argparse's errors and --help, as the process would exit
                status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        return Result(status, out.getvalue(), err.getvalue())

    yield run
    for name in USER_MODULES:  # (monkeypatch.delitem restores only a name that was there before)
        sys.modules.pop(name, None)


def assert_refused(result: Result, error: str, usage: str | None = None) -> None:
    """Status 2, nothing on stdout, no traceback, and on stderr one line that says why: *error*.

    The line is all of stderr, or with argparse's errors it follows argparse's usage, which
    starts with *usage* (its wrapped lines indented).  An *error* ending in ``...`` is the start
    of the line.
    """
    assert result.status == 2, result
    assert result.out == "", result
    assert "Traceback" not in result.err, result.err
    *before, last = result.err.splitlines() or [""]
    assert result.err.endswith(f"{last}\n"), result.err
    if error.endswith("..."):
        assert last.startswith(error[:-3]), result.err
    else:
        assert last == error, result.err
    if usage is None:
        assert before == [], result.err
    else:
        assert before[0].startswith(usage), result.err
        assert all(line.startswith(" ") for line in before[1:]), result.err


# --- show ----------------------------------------------------------------------------------------


def _note_own(name: str, method: str) -> str:
    return (
        f"note: {name}.{method} is the class's own method, not the code below,"
        f" which super().{method}() and the function forms run"
    )


NOTE_PLAIN = (
    "note: Plain is a plain dataclass (its metaclass is not ZeroCopyFields), so it has no generated methods;"
    " this is the code that metakit.asdict_zerocopy() and metakit.astuple_zerocopy() run for its instances"
)
NOTE_INHERITED = (
    "note: Inheriting.asdict_zerocopy is Overriding.asdict_zerocopy, which it inherits, not the code below,"
    " which super().asdict_zerocopy() and the function forms run"
)


@pytest.mark.parametrize(
    ("qualname", "notes"),
    [
        pytest.param("Step", [], id="omit-field"),
        pytest.param("Outer.Inner", [], id="nested-slots"),
        pytest.param("Batch", [], id="with-a-nested-class"),
        pytest.param("Batch.Item", [], id="nested-in-a-record"),
        pytest.param("Plain", [NOTE_PLAIN], id="plain-dataclass"),
        pytest.param("Reached", [], id="methods-reached-through-super"),
        pytest.param("Overriding", [_note_own("Overriding", "asdict_zerocopy")], id="own-asdict"),
        pytest.param("Reaching", [_note_own("Reaching", "astuple_zerocopy")], id="own-astuple"),
        pytest.param("Replacing", [_note_own("Replacing", "__replace__")], id="own-replace"),
        pytest.param("Inheriting", [NOTE_INHERITED], id="inherited-override"),
        pytest.param("Deleted", [], id="override-deleted-again"),
        pytest.param("LaterTuple", [_note_own("LaterTuple", "astuple_zerocopy")], id="override-assigned-later"),
        pytest.param(
            "MetaOnly",
            [
                "note: MetaOnly.asdict_zerocopy is the class's own method, not the code below,"
                " which the function forms run"
            ],
            id="no-zerocopy-base",
        ),
        pytest.param("Borrowing", [_note_own("Borrowing", "asdict_zerocopy")], id="another-classs-generated-method"),
    ],
)
def test_show_prints_exactly_the_generated_source_and_notes_which_methods_it_is_not(cli, qualname, notes):
    # README: "The methods are plain functions, written for the class's fields. `metakit show`
    # prints them"; the notes on stderr say whose code it is, and which methods it is not.
    result = cli("show", f"{MODULE}:{qualname}")
    assert result.status == 0, result.err
    cls = importlib.import_module(MODULE)  # the module show imported, still in sys.modules
    for part in qualname.split("."):
        cls = getattr(cls, part)
    assert result.out == metakit.generated_source(cls)
    first, second = result.out.splitlines()[:2]
    assert first == f"# metakit: the generated methods of {MODULE}.{qualname}"
    assert second == "def asdict_zerocopy(self, skip_fields=None):"
    assert result.err.splitlines() == notes
    assert "note:" not in result.out
    assert "has no generated methods" not in result.out
    if qualname == "Reached":  # what makes this case: its own methods are forwarders, which run the code shown
        assert not any(vars(cls)[method].__code__.co_filename.startswith("<metakit") for method in METHODS)
    if qualname == "Inheriting":
        assert "'block_size': self.block_size" in result.out


def test_show_leaves_omit_fields_out(cli):
    result = cli("show", f"{MODULE}:Step")
    asdict, astuple = (text for text in result.out.split("\n\n\n") if text.startswith(("# metakit", "def astuple")))
    assert "'slot_mapping': self.slot_mapping," in asdict
    assert "wrapper" not in asdict
    assert "wrapper" not in astuple


# --- refusals --------------------------------------------------------------------------------------

SHOW_USAGE = f"usage: {PROG} show [-h] MODULE:CLASS"
STUBGEN_USAGE = f"usage: {PROG} stubgen [-h] [-o DIR] MODULE [MODULE ...]"
BENCH_USAGE = f"usage: {PROG} bench [-h]"


def _refused(args, error, usage=None, name=None):
    return pytest.param(args, error, usage, id=name or " ".join(args))


REFUSED = [
    # show: the target
    _refused(["show"], f"{PROG} show: error: the following arguments are required: MODULE:CLASS", SHOW_USAGE),
    _refused(["show", MODULE], f"{PROG}: error: expected MODULE:CLASS, got '{MODULE}'"),
    _refused(["show", f"{MODULE}:"], f"{PROG}: error: expected MODULE:CLASS, got '{MODULE}:'"),
    _refused(["show", ":Step"], f"{PROG}: error: expected MODULE:CLASS, got ':Step'"),
    _refused(
        ["show", "metakit_no_such_module:Step"],
        f"{PROG}: error: cannot import 'metakit_no_such_module': No module named 'metakit_no_such_module'",
    ),
    _refused(
        ["show", f"{RAISING}:Step"],
        f"{PROG}: error: importing '{RAISING}' raised ZeroDivisionError: division by zero",
    ),
    _refused(["show", f"{SYNTAX}:Step"], f"{PROG}: error: importing '{SYNTAX}' raised SyntaxError: ..."),
    _refused(["show", f"{MODULE}.:Step"], f"{PROG}: error: '{MODULE}.' is not a module name"),
    _refused(["show", f"{MODULE}..x:Step"], f"{PROG}: error: '{MODULE}..x' is not a module name"),
    _refused(["show", f"{MODULE}:-Step"], f"{PROG}: error: '-Step' is not a class name"),
    _refused(["show", f"{MODULE}:Outer..Inner"], f"{PROG}: error: 'Outer..Inner' is not a class name"),
    _refused(["stubgen", f"{MODULE}.", "-o", "{tmp}/stubs"], f"{PROG}: error: '{MODULE}.' is not a module name"),
    _refused(["show", f"{MODULE}:Missing"], f"{PROG}: error: module '{MODULE}' has no class 'Missing'"),
    _refused(["show", f"{MODULE}:Outer.Missing"], f"{PROG}: error: module '{MODULE}' has no class 'Outer.Missing'"),
    _refused(["show", f"{MODULE}:function"], f"{PROG}: error: {MODULE}:function is not a class"),
    _refused(["show", f"{MODULE}:VALUE"], f"{PROG}: error: {MODULE}:VALUE is not a class"),
    # README: "$ metakit show json:JSONDecoder / metakit: error: JSONDecoder is not a dataclass"
    _refused(["show", f"{MODULE}:NotADataclass"], f"{PROG}: error: NotADataclass is not a dataclass"),
    _refused(["show", f"{MODULE}:Step", "extra"], f"{PROG} show: error: unrecognized arguments: extra", SHOW_USAGE),
    _refused(["show", "--bogus", f"{MODULE}:Step"], f"{PROG} show: error: unrecognized arguments: --bogus", SHOW_USAGE),
    # stubgen: its options, the module, the output directory
    _refused(["stubgen"], f"{PROG} stubgen: error: the following arguments are required: MODULE", STUBGEN_USAGE),
    _refused(["stubgen", "-o"], f"{PROG} stubgen: error: argument -o/--output: expected one argument", STUBGEN_USAGE),
    _refused(["stubgen", MODULE, "--bogus"], f"{PROG} stubgen: error: unrecognized arguments: --bogus", STUBGEN_USAGE),
    _refused(["stubgen", MODULE, "extra."], f"{PROG}: error: 'extra.' is not a module name"),
    _refused(
        ["stubgen", MODULE, "--output"],
        f"{PROG} stubgen: error: argument -o/--output: expected one argument",
        STUBGEN_USAGE,
    ),
    _refused(
        ["stubgen", "metakit_no_such_module"],
        f"{PROG}: error: cannot import 'metakit_no_such_module': No module named 'metakit_no_such_module'",
    ),
    _refused(
        ["stubgen", RAISING, "-o", "{tmp}/stubs"],
        f"{PROG}: error: importing '{RAISING}' raised ZeroDivisionError: division by zero",
    ),
    # ``-o DIR`` makes DIR, but not the directories above it.
    _refused(
        ["stubgen", MODULE, "-o", "{tmp}/missing/deeper"],
        f"{PROG}: error: cannot write stubs to {{tmp}}/missing/deeper: there is no directory {{tmp}}/missing",
        name="stubgen -o a-missing-parent",
    ),
    _refused(
        ["stubgen", MODULE, "-o", "{tmp}/a_file/stubs"],
        f"{PROG}: error: cannot write stubs to {{tmp}}/a_file/stubs: {{tmp}}/a_file is not a directory",
        name="stubgen -o under-a-file",
    ),
    _refused(
        ["stubgen", MODULE, "-o", "{tmp}/a_file"],
        f"{PROG}: error: cannot write stubs to {{tmp}}/a_file: {{tmp}}/a_file is not a directory",
        name="stubgen -o a-file",
    ),
    # bench: its options and where it would write
    _refused(["bench", "--bogus"], f"{PROG} bench: error: unrecognized arguments: --bogus", BENCH_USAGE),
    _refused(["bench", "--json", ""], f"{PROG} bench: error: cannot write --json '': the path is empty"),
    _refused(["stubgen", MODULE, "-o", ""], f"{PROG}: error: cannot write stubs to '': the path is empty"),
    # An output path under a directory that does not exist, named in the error.
    _refused(
        ["bench", "--json", "{tmp}/missing/deeper/out.json"],
        f"{PROG} bench: error: cannot write --json {{tmp}}/missing/deeper/out.json:"
        " there is no directory {tmp}/missing/deeper",
        name="bench --json a-missing-directory",
    ),
    _refused(
        ["bench", "--quick", "--json", "{tmp}"],
        f"{PROG} bench: error: cannot write --json {{tmp}}: {{tmp}} is a directory",
        name="bench --json a-directory",
    ),
    _refused(
        ["bench", "--json", "{tmp}/a_file/out.json"],
        f"{PROG} bench: error: cannot write --json {{tmp}}/a_file/out.json: {{tmp}}/a_file is not a directory",
        name="bench --json under-a-file",
    ),
    _refused(
        ["bench", "--plot", "{tmp}/missing/out.png"],
        f"{PROG} bench: error: cannot write --plot {{tmp}}/missing/out.png: there is no directory {{tmp}}/missing",
        name="bench --plot a-missing-directory",
    ),
]


def _files(directory: Path) -> list[Path]:
    return sorted(path for path in directory.rglob("*") if "__pycache__" not in path.parts)


@pytest.mark.parametrize(("args", "error", "usage"), REFUSED)
def test_what_the_user_can_fix_exits_with_status_2_and_one_line_before_any_work(cli, tmp_path, args, error, usage):
    # README: "It exits with 0 on success, and with 2 for anything you can fix (an unknown option, a
    # module that cannot be imported, a class that is not a dataclass, an output path that cannot be
    # written), said in one line before any work is done" / "`python -m metakit ...` is the same
    # program": its messages name it as it was invoked.
    (tmp_path / "a_file").write_text("")
    before = _files(tmp_path)
    result = cli(*(arg.replace("{tmp}", str(tmp_path)) for arg in args))
    assert_refused(result, error.replace("{tmp}", str(tmp_path)), usage)
    assert _files(tmp_path) == before  # nothing made
    if args[0] == "stubgen" or error.endswith(("not a module name", "not a class name")):
        assert MODULE not in sys.modules  # refused before the module was imported


def test_an_error_of_many_lines_raised_by_the_users_module_is_told_in_one_line(cli, tmp_path):
    (tmp_path / "metakit_cli_lines.py").write_text("raise RuntimeError('first\\nsecond')\n")
    try:
        result = cli("show", "metakit_cli_lines:Step")
    finally:
        sys.modules.pop("metakit_cli_lines", None)
    assert_refused(result, f"{PROG}: error: importing 'metakit_cli_lines' raised RuntimeError: first\\nsecond")


UNREADABLE = """
class Unreadable(Exception):
    def __str__(self):
        raise ValueError("no message")

"""


@pytest.mark.parametrize(
    ("source", "target", "error"),
    [
        (UNREADABLE + "raise Unreadable()\n", "metakit_cli_unreadable:Step", "importing 'metakit_cli_unreadable'"),
        (
            UNREADABLE + "def __getattr__(name):\n    raise Unreadable()\n",
            "metakit_cli_unreadable:Step",
            "looking up 'Step'",
        ),
        (
            UNREADABLE.replace("(Exception)", "(ImportError)") + "raise Unreadable()\n",
            "metakit_cli_unreadable:Step",
            "cannot import 'metakit_cli_unreadable':",
        ),
    ],
    ids=["importing", "looking up", "an import error"],
)
def test_an_error_whose_message_cannot_be_read_is_told_by_its_type(cli, tmp_path, source, target, error):
    (tmp_path / "metakit_cli_unreadable.py").write_text(source)
    try:
        result = cli("show", target)
    finally:
        sys.modules.pop("metakit_cli_unreadable", None)
    told = error if error.endswith(":") else f"{error} raised"
    assert_refused(result, f"{PROG}: error: {told} Unreadable (its message cannot be read)")


ODD_CLASSES = """
class LazyMeta(type):
    def __getattr__(cls, name):
        raise RuntimeError("backend not installed")

class Lazy(metaclass=LazyMeta):
    pass

class FakeFields:
    __dataclass_fields__ = {"a": 1}
"""


@pytest.mark.parametrize(
    ("source", "args", "error"),
    [
        (
            "raise GeneratorExit\n",
            ["show", "metakit_cli_odd:Step"],
            "importing 'metakit_cli_odd' raised GeneratorExit",
        ),
        (
            ODD_CLASSES,
            ["show", "metakit_cli_odd:Lazy"],
            "reading Lazy as a dataclass raised RuntimeError: backend not installed",
        ),
        (
            ODD_CLASSES,
            ["show", "metakit_cli_odd:FakeFields"],
            "reading FakeFields as a dataclass raised AttributeError: 'int' object has no attribute 'name'",
        ),
    ],
    ids=["a BaseException on import", "a metaclass __getattr__ that raises", "a malformed dict of fields"],
)
def test_a_module_or_class_that_breaks_in_odd_ways_is_told_in_one_line(cli, tmp_path, source, args, error):
    (tmp_path / "metakit_cli_odd.py").write_text(source)
    try:
        result = cli(*args)
    finally:
        sys.modules.pop("metakit_cli_odd", None)
    assert_refused(result, f"{PROG}: error: {error}")


def test_stubgen_of_a_module_whose_class_raises_on_lookup_writes_its_stub(cli, tmp_path):
    (tmp_path / "metakit_cli_odd.py").write_text(ODD_CLASSES)
    try:
        result = cli("stubgen", "metakit_cli_odd", "-o", str(tmp_path / "stubs"))
    finally:
        sys.modules.pop("metakit_cli_odd", None)
    assert result.status == 0, result
    assert "class Lazy(metaclass=LazyMeta)" in (tmp_path / "stubs" / "metakit_cli_odd.pyi").read_text()


@pytest.mark.parametrize("package", [False, True], ids=["module", "package"])
def test_stubgen_of_a_module_with_a_lazy_getattr_asks_it_for_nothing(cli, tmp_path, package):
    # PEP 562: a module's __getattr__ runs for each name it lacks, such as __all__ or __path__; one that
    # imports a submodule of each name it is asked for raised from stubgen (an outside tester).
    source = (
        "from dataclasses import dataclass\nfrom metakit import ZeroCopy\n\n"
        "@dataclass\nclass Meta(ZeroCopy):\n    x: int\n\n"
        "def __getattr__(name):\n    raise RuntimeError(f'asked for {name}')\n"
    )
    path = tmp_path / "metakit_cli_lazy"
    if package:
        path.mkdir()
        (path / "__init__.py").write_text(source)
    else:
        path.with_suffix(".py").write_text(source)
    try:
        result = cli("stubgen", "metakit_cli_lazy", "-o", str(tmp_path / "stubs"))
    finally:
        sys.modules.pop("metakit_cli_lazy", None)
    assert result.status == 0, result
    stub = next((tmp_path / "stubs").rglob("*.pyi")).read_text()
    assert "class MetaDict(" in stub


@pytest.mark.parametrize(
    ("environment", "stdout", "error"),
    [
        ({"PYTHONIOENCODING": "ascii"}, None, "cannot write the output: 'ascii' codec can't encode character"),
        ({}, "/dev/full", "cannot write the output: [Errno 28] No space left on device"),
    ],
    ids=["an ASCII terminal", "a full disk"],
)
def test_output_that_cannot_be_written_is_told_in_one_line(tmp_path, environment, stdout, error):
    if stdout is not None and not os.path.exists(stdout):
        pytest.fail(f"{stdout} is needed: this test runs on Linux")
    (tmp_path / "metakit_cli_unicode.py").write_text(
        "from dataclasses import dataclass\nfrom metakit import ZeroCopy\n\n"
        "@dataclass\nclass Größe(ZeroCopy):\n    maß: int\n",
        encoding="utf-8",
    )
    env = dict(os.environ, **environment, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    with open(stdout or os.devnull, "w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "metakit", "show", "metakit_cli_unicode:Größe"],
            stdout=out if stdout else subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
        )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert err.startswith(f"{PROG}: error: {error}"), err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("command", ["show", "stubgen"])
def test_a_module_that_prints_while_imported_to_a_full_disk_exits_with_status_2(tmp_path, command):
    # Its failed print became the import's error, then Python's flush at exit failed again: "Exception
    # ignored" and status 120 (an outside tester).
    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is needed: this test runs on Linux")
    (tmp_path / "metakit_cli_noisy.py").write_text(
        "print('loading')\nfrom dataclasses import dataclass\nfrom metakit import ZeroCopy\n\n"
        "@dataclass\nclass Noisy(ZeroCopy):\n    a: int\n"
    )
    target = ["metakit_cli_noisy:Noisy"] if command == "show" else ["metakit_cli_noisy", "-o", str(tmp_path / "out")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    with open("/dev/full", "w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "metakit", command, *target],
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
        )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err, err
    assert "Exception ignored" not in err, err
    assert err.endswith(f"{PROG}: error: cannot write the output: [Errno 28] No space left on device\n"), err


@pytest.mark.parametrize(
    ("args", "stdout", "statuses"),
    [
        (["show", "metakit_cli_plain:Zero"], "# metakit: the generated", (0, 0)),
        (["show", "metakit_cli_plain:Plain"], "# metakit: the generated", (2, 0)),  # a note comes first
        (["show", "metakit_cli_plain:Missing"], "", (2, 2)),
        (["frobnicate"], "", (2, 2)),
    ],
    ids=["no note", "a note", "an error", "the usage"],
)
@pytest.mark.parametrize("stderr", ["full", "closed"])
def test_a_stderr_that_cannot_take_what_is_said_loses_no_output_and_sends_nothing_to_stdout(
    tmp_path, args, stdout, statuses, stderr
):
    # With stderr on a full disk, the note's failed write ended show with status 1 and no source; with
    # stderr closed, the note went to stdout, into the source (an outside tester). Now the output is
    # written whole and nothing else goes to stdout; what stderr could not take makes the status 2, and
    # a stderr closed by the caller is discarded, as Python discards its own messages there.
    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is needed: this test runs on Linux")
    plain = (
        "from dataclasses import dataclass\nfrom metakit import ZeroCopy\n\n"
        "@dataclass\nclass Plain:\n    a: int\n\n@dataclass\nclass Zero(ZeroCopy):\n    a: int\n"
    )
    (tmp_path / "metakit_cli_plain.py").write_text(plain)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "metakit", *args],
            stdout=subprocess.PIPE,
            stderr=full,
            env=env,
            check=False,
            preexec_fn=(lambda: os.close(2)) if stderr == "closed" else None,
        )
    out = done.stdout.decode()
    assert out.startswith(stdout) if stdout else not out, out
    assert "note:" not in out, out
    assert "error" not in out, out
    assert done.returncode == statuses[stderr == "closed"]


@pytest.mark.parametrize(("code", "shown"), [("3", "3"), ("'bye'", "'bye'"), ("", "None")])
@pytest.mark.parametrize("command", ["show", "stubgen"])
def test_a_module_that_exits_while_imported_exits_with_status_2_and_one_line(cli, tmp_path, command, code, shown):
    # Its own status would say nothing of what went wrong, and "bye" would exit with 1.
    (tmp_path / f"{EXITING}.py").write_text(f"import sys\nsys.exit({code})\n")
    result = cli(command, f"{EXITING}:Step" if command == "show" else EXITING)
    assert_refused(result, f"{PROG}: error: importing '{EXITING}' called sys.exit({shown})")


def test_a_module_of_metakit_that_needs_a_missing_extra_names_it(cli, monkeypatch):
    # The README's own `metakit show metakit.examples.engine:...` without torch said only "No module named
    # 'torch'", where every other command names the extra to install.  (Found by an outside tester.)
    monkeypatch.delitem(sys.modules, "metakit.examples.engine", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)  # as if it were not installed: its import fails
    result = cli("show", "metakit.examples.engine:AttentionMetadata")
    assert_refused(
        result,
        f"{PROG}: error: cannot import 'metakit.examples.engine': import of torch halted; None in sys.modules"
        " (pip install 'metakit[torch]')",
    )


@pytest.mark.parametrize(
    ("module", "missing"), [("metakit.wire", "msgspec"), ("metakit.wire", "torch"), ("metakit.distributed", "torch")]
)
def test_importing_a_module_whose_extra_is_missing_names_the_extra(module, missing):
    # A bare "No module named 'msgspec'" said nothing of metakit[torch].  (Found by an outside tester.)
    code = f"import sys; sys.modules[{missing!r}] = None; import {module}"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 1
    assert ran.stderr.splitlines()[-1] == (
        f"ModuleNotFoundError: {module} needs {missing}: pip install 'metakit[torch]'"
    )


def test_bench_follows_a_symbolic_link_to_its_output_and_refuses_a_missing_directory_before_work(cli, tmp_path):
    # README: an output path that cannot be written is refused "before any work is done".
    link = tmp_path / "results.json"
    link.symlink_to("/no_such_dir_bb/deeper/results.json")
    result = cli("bench", "--quick", "--json", str(link))  # BenchmarkStarted if it got past the check
    assert_refused(
        result, f"{PROG} bench: error: cannot write --json {link}: there is no directory /no_such_dir_bb/deeper"
    )


@pytest.mark.parametrize(
    ("args", "missing", "error"),
    [
        (
            ["--plot", "chart.png"],
            {"matplotlib"},
            "--plot needs matplotlib: pip install 'metakit[bench]' (or matplotlib)",
        ),
        (["--distributed"], {"torch"}, "--distributed needs torch: pip install 'metakit[torch,bench]'"),
        (
            ["--distributed"],
            {"torch", "numpy"},
            "--distributed needs torch and numpy: pip install 'metakit[torch,bench]'",
        ),
    ],
    ids=["plot-without-matplotlib", "distributed-without-torch", "distributed-without-torch-and-numpy"],
)
def test_bench_without_an_extra_it_needs_exits_with_status_2_before_work(cli, monkeypatch, args, missing, error):
    # metakit.bench.main: "The status is 2 for a usage error, found before anything runs (an output
    # path that cannot be written, a missing optional dependency)".  Whether the extras are
    # installed here or not, the benchmark, which asks the installed metadata, is told that
    # *missing* are not.
    installed = metakit.bench.report.installed
    monkeypatch.setattr(metakit.bench.report, "installed", lambda name: None if name in missing else installed(name))
    assert_refused(cli("bench", "--quick", *args), f"{PROG} bench: error: {error}")


# --- stubgen ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("made", [False, True], ids=["into-a-directory", "making-the-directory"])
def test_stubgen_writes_a_typeddict_per_class_without_omit_fields(cli, tmp_path, made):
    # README: "metakit stubgen MODULE... [-o DIR]   # write .pyi stubs with exact TypedDicts (DIR: stubs)"
    out = tmp_path / "typings"
    if not made:
        out.mkdir()
    result = cli("stubgen", MODULE, "-o", str(out))
    assert result.status == 0, result.err
    assert result.out == f"wrote {out / MODULE}.pyi\n"
    assert "warning" not in result.err  # the user's own module shadows nothing
    stub = (out / f"{MODULE}.pyi").read_text()
    assert "class BatchDict(" in stub
    assert "def asdict_zerocopy" in stub
    step_dict = stub.split("class StepDict(")[1].split("\n\n")[0]
    assert "is_prompt: bool" in step_dict
    assert "wrapper" not in step_dict


def test_stubgen_of_a_package_and_its_module_writes_a_stub_for_each_or_none(cli, tmp_path):
    # README: "stub the package too, and each module: `stubgen myengine myengine.metadata`" (a package's stub
    # is its __init__.pyi: outside testers found no way to stub a package's modules in one run).
    package = tmp_path / "metakit_cli_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .metadata import Meta\n")
    (package / "metadata.py").write_text(
        "from dataclasses import dataclass\nfrom metakit import ZeroCopy\n\n"
        "@dataclass\nclass Meta(ZeroCopy):\n    x: int\n"
    )
    try:
        result = cli(
            "stubgen", "metakit_cli_pkg", "metakit_cli_pkg.metadata", "metakit_cli_pkg", "-o", str(tmp_path / "stubs")
        )
        assert result.status == 0, result.err
        stubs = tmp_path / "stubs" / "metakit_cli_pkg"
        assert result.out == f"wrote {stubs / '__init__.pyi'}\nwrote {stubs / 'metadata.pyi'}\n"
        assert "class MetaDict(" in (stubs / "metadata.pyi").read_text()
        # One that fails: none is written, and the error names it.
        result = cli("stubgen", "metakit_cli_pkg.metadata", "metakit_cli_pkg.missing", "-o", str(tmp_path / "other"))
        assert result.status == 2
        assert "metakit_cli_pkg.missing" in result.err
        assert not (tmp_path / "other").exists()
    finally:
        for name in ("metakit_cli_pkg", "metakit_cli_pkg.metadata"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize("in_the_way", ["a file where its package's directory goes", "a directory where it goes"])
def test_stubgen_writes_no_stub_where_a_file_or_directory_stands_in_the_way_of_one(cli, tmp_path, in_the_way):
    # (An outside tester: the first module's stub was written, then the run failed on the second's.)
    package = tmp_path / "metakit_cli_blocked"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "metadata.py").write_text("X = 1\n")
    out = tmp_path / "stubs"
    out.mkdir()
    if in_the_way.startswith("a file"):
        (out / "metakit_cli_blocked").write_text("")
        problem = f"{out / 'metakit_cli_blocked'} is not a directory"
    else:
        (out / "metakit_cli_blocked" / "metadata.pyi").mkdir(parents=True)
        problem = f"{out / 'metakit_cli_blocked' / 'metadata.pyi'} is a directory"
    before = sorted(out.rglob("*"))
    try:
        result = cli("stubgen", MODULE, "metakit_cli_blocked.metadata", "-o", str(out))
        assert_refused(result, f"{PROG}: error: cannot write the stub of 'metakit_cli_blocked.metadata': {problem}")
        assert sorted(out.rglob("*")) == before
    finally:
        for name in ("metakit_cli_blocked", "metakit_cli_blocked.metadata"):
            sys.modules.pop(name, None)


def test_a_stub_that_cannot_be_written_leaves_the_one_before_whole(cli, tmp_path, monkeypatch):
    # (An outside tester, on a full disk: the stub was written in place, and half of it was left.)
    out = tmp_path / "typings"
    assert cli("stubgen", MODULE, "-o", str(out)).status == 0
    before = (out / f"{MODULE}.pyi").read_text()

    write = Path.write_text

    def disk_full(path, text, *args, **kwargs):  # half of it is written, then the disk is full
        write(path, text[: len(text) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    result = cli("stubgen", MODULE, "-o", str(out))
    assert_refused(
        result, f"{PROG}: error: cannot write the stub {out / MODULE}.pyi: [Errno 28] No space left on device"
    )
    assert (out / f"{MODULE}.pyi").read_text() == before
    assert sorted(path.name for path in out.iterdir()) == [f"{MODULE}.pyi"]


def test_stubgen_of_a_standard_library_module_warns_that_its_stub_would_shadow_the_real_one(cli, tmp_path):
    result = cli("stubgen", "json", "-o", str(tmp_path))
    assert result.status == 0, result.err
    assert result.err.startswith(
        f"warning: json is a module of the standard library; a stub for it in {tmp_path} would shadow its real one"
    )


def test_stubgen_of_a_module_without_source_exits_with_status_2_and_writes_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "metakit_cli_no_source", types.ModuleType("metakit_cli_no_source"))
    result = cli("stubgen", "metakit_cli_no_source", "-o", str(tmp_path / "stubs"))
    assert_refused(
        result,
        f"{PROG}: error: cannot read the source of 'metakit_cli_no_source':"
        " metakit_cli_no_source has no source file: it is a module made at run time",
    )
    assert not (tmp_path / "stubs").exists()
    # A directory without __init__.py was said to be "a built-in module" too.
    (tmp_path / "metakit_cli_namespace").mkdir()
    result = cli("stubgen", "metakit_cli_namespace", "-o", str(tmp_path / "stubs"))
    assert_refused(
        result,
        f"{PROG}: error: cannot read the source of 'metakit_cli_namespace':"
        " metakit_cli_namespace has no source file: it is a namespace package",
    )
    sys.modules.pop("metakit_cli_namespace", None)


def test_stubgen_where_mypys_generator_fails_exits_with_status_2_on_one_line(cli, monkeypatch):
    import metakit.stubgen

    def fails(*args: object) -> None:
        raise AssertionError  # as mypy's generator does for what it cannot write

    monkeypatch.setattr(metakit.stubgen._Additions, "add", fails)
    result = cli("stubgen", MODULE)
    assert_refused(
        result,
        f"{PROG}: error: cannot read the source of {MODULE!r}: mypy's stub generator cannot write it"
        " (AssertionError in ...",
    )


def test_stubgen_without_mypy_exits_with_status_2_and_says_what_to_install(cli, monkeypatch):
    # pyproject: the stub generator needs the `mypy` extra; without it, one line that says so.
    monkeypatch.delitem(sys.modules, "metakit.stubgen", raising=False)
    monkeypatch.delattr(metakit, "stubgen", raising=False)  # the package's attribute, set by an earlier import
    for name in ["mypy", *(name for name in sys.modules if name.startswith("mypy."))]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it fails, as where mypy is not installed
    assert_refused(cli("stubgen", MODULE), f"{PROG}: error: stubgen needs mypy: pip install 'metakit[mypy]'")
    assert MODULE not in sys.modules


# --- usage -----------------------------------------------------------------------------------------

USAGE = f"usage: {PROG} [--version] {{bench,show,stubgen}} ..."


@pytest.mark.parametrize(("args", "status"), [([], 2), (["--help"], 0)], ids=["no-command", "help"])
def test_usage_lists_the_commands_on_stderr_without_a_command_and_on_stdout_with_help(cli, args, status):
    result = cli(*args)
    assert result.status == status
    usage, other = (result.err, result.out) if status else (result.out, result.err)
    assert usage.startswith(f"{USAGE}\n")
    for command in ("bench", "show", "stubgen"):
        assert f"  {command}  " in usage
    assert "error" not in usage
    assert other == ""


@pytest.mark.parametrize("command", ["frobnicate", "--frobnicate"])
def test_an_unknown_command_is_named_in_one_line_after_the_usage(cli, command):
    result = cli(command)
    assert (result.status, result.out) == (2, "")
    assert result.err == cli().err + f"\n{PROG}: error: unknown command {command!r}\n"


@pytest.mark.parametrize("args", [["--version", "--bogus"], ["--help", "frobnicate"], ["-h", "show", "x:Y"]])
def test_version_and_help_take_no_arguments(cli, args):
    # README: an unknown option exits with status 2; nothing a user types is silently dropped.
    result = cli(*args)
    assert (result.status, result.out) == (2, "")
    assert result.err == cli().err + f"\n{PROG}: error: {args[0]} takes no arguments, got {' '.join(args[1:])}\n"


# --- in a process of its own -----------------------------------------------------------------------


def _process(*command: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("COLUMNS", None)
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, check=False, timeout=60)


@pytest.mark.parametrize("invocation", [["metakit"], [sys.executable, "-m", "metakit"]], ids=["script", "module"])
def test_the_program_runs_and_names_itself_as_invoked(invocation):
    # README: "`python -m metakit ...` is the same program"; the console script is `metakit`.
    # The name comes from sys.argv[0], which only a real process sets as a user's shell would.
    if invocation == ["metakit"]:
        script = Path(sys.executable).parent / "metakit"
        if not script.exists():  # only where metakit is installed with its scripts, as in every venv here
            pytest.fail(f"no console script {script}")
        invocation = [str(script)]
    name = "metakit" if len(invocation) == 1 else PROG
    result = _process(*invocation, "--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"metakit {metakit.__version__}\n", "")
    result = _process(*invocation, "show")
    assert result.returncode == 2
    assert result.stderr.startswith(f"usage: {name} show [-h] MODULE:CLASS")
    result = _process(*invocation, "frobnicate")
    assert result.returncode == 2
    assert result.stderr.endswith(f"\n{name}: error: unknown command 'frobnicate'\n")


@pytest.mark.parametrize("invocation", [["metakit"], [sys.executable, "-m", "metakit"]], ids=["script", "module"])
def test_a_module_in_the_current_directory_is_found_however_the_program_is_invoked(invocation, tmp_path):
    # README: "`python -m metakit ...` is the same program".  (Found by an outside tester: the
    # `metakit` script did not look in the current directory, as `python -m` does.)
    if invocation == ["metakit"]:
        invocation = [str(Path(sys.executable).parent / "metakit")]
    (tmp_path / "here_meta.py").write_text(SOURCE)
    env = dict(os.environ, PYTHONPATH=str(REPO))  # metakit itself, and nothing of the user's
    for args in (["show", "here_meta:Step"], ["stubgen", "here_meta", "-o", "typings"]):
        result = subprocess.run(
            [*invocation, *args], capture_output=True, text=True, env=env, cwd=tmp_path, check=False, timeout=120
        )
        assert (result.returncode, result.stderr) == (0, ""), args
    assert (tmp_path / "typings" / "here_meta.pyi").exists()


def test_ctrl_c_exits_with_status_130_and_no_traceback():
    # README: "Ctrl-C gives 130".  A signal to a real process, as a terminal sends it.
    process = subprocess.Popen(
        [sys.executable, "-m", "metakit", "bench", "--quick"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
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
    assert err.endswith(f"{PROG}: interrupted\n")


def test_ctrl_c_while_text_is_executed_still_exits_with_status_130(tmp_path):
    # Up to 3.13, a KeyboardInterrupt that leaves exec() of text, as dataclasses makes methods, made the
    # interpreter end by SIGINT (status -2 here) even after the CLI had caught it and returned 130.
    (tmp_path / "interrupted.py").write_text('exec("raise KeyboardInterrupt")\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    command = [sys.executable, "-m", "metakit", "stubgen", "interrupted", "-o", str(tmp_path / "out")]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False, timeout=120)
    assert (result.returncode, result.stderr) == (130, f"{PROG}: interrupted\n")


@pytest.mark.parametrize(
    "args",
    [["show", "metakit.bench.wire:WireRow"], ["--version"], ["stubgen", "metakit.bench.wire", "-o"]],
    ids=["show", "version", "stubgen"],
)
def test_a_command_started_with_its_standard_output_closed_says_so_without_a_traceback(args, tmp_path):
    # `metakit show ... >&-`: Python starts with sys.stdout None, and print() writes nowhere: it
    # ended with status 0, having written nothing. stubgen wrote its stubs and lost its "wrote" lines
    # (an outside tester): it is refused before any work too.
    output = [str(tmp_path / "stubs")] if args[-1] == "-o" else []
    done = subprocess.run(
        [sys.executable, "-m", "metakit", *args, *output],
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        preexec_fn=lambda: os.close(1),  # no threads here
        check=False,
    )
    assert (done.returncode, done.stderr) == (2, f"{PROG}: error: cannot write the output: standard output is closed\n")
    assert not (tmp_path / "stubs").exists()


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_bench_refuses_an_output_where_no_file_can_be_made_before_work(option):
    # Permissions do not tell (the superuser passes them); /proc refuses new files anyway.  A real
    # benchmark, killed after its first line on stderr: the refusal, or the start of the work.
    target = "/proc/metakit-bb-out.json"
    with pytest.raises(OSError, match="metakit-bb-out"):
        open(target, "w").close()  # the precondition: nothing can be made there
    process = subprocess.Popen(
        [sys.executable, "-m", "metakit", "bench", "--quick", option, target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
    finally:
        process.kill()
        process.communicate()
    assert first.startswith(f"{PROG} bench: error: cannot write {option} {target}: "), first


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["show", "metakit_cli_printing:Step"],
        ["stubgen", "metakit_cli_printing", "-o", "."],
        *([command, "--help"] for command in ("show", "stubgen", "bench")),  # argparse drops its own error
    ],
)
def test_a_reader_that_closes_the_pipe_early_ends_the_program_with_status_141_and_no_traceback(args, tmp_path):
    # `metakit --help | head -c0`: the reader is gone before the output is written.  A real process
    # with a real pipe: the error comes from the operating system, when the output is flushed (or
    # when the user's module prints as it is imported).
    (tmp_path / "metakit_cli_printing.py").write_text(f"print('imported')\n{SOURCE}")
    # The pipe is closed long before the program has imported metakit.
    assert _reading_stops([sys.executable, "-m", "metakit", *args], tmp_path, after=[]) == (141, "")


def _reading_stops(command: list[str], where: Path, after: list[str]) -> tuple[int, str]:
    """Run *command* in *where*, read the lines *after* from its output, close it: its exit status and stderr."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("PYTHONUNBUFFERED", None)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=where, env=env
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        assert [process.stdout.readline() for _ in after] == after
        process.stdout.close()
        err = process.stderr.read()
        process.wait(timeout=60)
    return process.returncode, err


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "python -u"])
def test_a_reader_that_stops_in_the_middle_of_a_large_output_ends_the_program_with_status_141(unbuffered, tmp_path):
    # `metakit show big:Big | head -1`, the source larger than a pipe holds.  (Found by an outside
    # tester: under `python -u` the partial write was dropped and the program ended with 0.)
    fields = "".join(f"    field_number_{i}: int = 0\n" for i in range(1000))
    (tmp_path / "big.py").write_text(f"{SOURCE}\n@dataclass\nclass Big(ZeroCopy):\n{fields}")
    command = [sys.executable, *(["-u"] if unbuffered else []), "-m", "metakit", "show", "big:Big"]
    assert _reading_stops(command, tmp_path, after=["# metakit: the generated methods of big.Big\n"]) == (141, "")


def test_called_in_process_under_python_u_the_program_leaves_standard_output_open():
    # The line buffer the program puts on an unbuffered stdout writes to the same file descriptor
    # and never closes it: output after main() returns, and the buffer is dropped, still arrives.
    program = (
        "import gc, sys\n"
        "from metakit.__main__ import main\n"
        "status = main(['--version'])\n"
        "sys.stdout.flush()\n"
        "sys.stdout = sys.__stdout__\n"
        "gc.collect()\n"
        "print('after', status)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    run = subprocess.run(
        [sys.executable, "-u", "-c", program], capture_output=True, text=True, env=env, check=False, timeout=60
    )
    assert (run.returncode, run.stdout.splitlines(), run.stderr) == (
        0,
        [f"metakit {metakit.__version__}", "after 0"],
        "",
    )
