"""The command line, ``python -m metakit``: ``show`` prints a class's generated source,
``stubgen`` writes stubs, ``--version``; bad targets, bad options and bad commands exit with
status 2 and one line that says why, before any work; Ctrl-C exits 130 without a traceback."""

import importlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import metakit
import metakit.testing
from tests.records import REPO


def _cli(*args, cwd=None, extra_path=None, timeout=120):
    env = dict(os.environ)
    paths = [str(extra_path)] if extra_path else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "metakit", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=env,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def modules(tmp_path):
    (tmp_path / "bb_raiser.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "bb_syntax.py").write_text("def (:\n")
    (tmp_path / "bb_exits.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "bb_good.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass
            from metakit import ZeroCopy

            @dataclass
            class Outer(ZeroCopy):
                x: int = 0

                @dataclass
                class Inner(ZeroCopy):
                    y: int = 0

            @dataclass
            class Plain:
                z: int = 0

            class NotDC:
                pass

            def func():
                pass

            value = 3
            """
        )
    )
    return tmp_path


def _one_error_line(proc):
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines, "no message"
    assert "error" in lines[-1]
    assert "Traceback" not in proc.stderr
    return lines[-1]


CLI_BAD = {
    "unknown-command": (["frobnicate"], "frobnicate"),
    "show-no-arg": (["show"], "MODULE:CLASS"),
    "show-no-colon": (["show", "bb_good"], "bb_good"),
    "show-empty-class": (["show", "bb_good:"], "bb_good:"),
    "show-empty-module": (["show", ":Outer"], ":Outer"),
    "show-missing-module": (["show", "bb_no_such_module:X"], "bb_no_such_module"),
    "show-raising-module": (["show", "bb_raiser:X"], "boom at import"),
    "show-syntax-error": (["show", "bb_syntax:X"], "bb_syntax"),
    "show-no-such-class": (["show", "bb_good:Nope"], "Nope"),
    "show-no-such-nested": (["show", "bb_good:Outer.Nope"], "Outer.Nope"),
    "show-not-a-class": (["show", "bb_good:func"], "func"),
    "show-a-value": (["show", "bb_good:value"], "value"),
    "show-not-a-dataclass": (["show", "bb_good:NotDC"], "NotDC is not a dataclass"),
    "show-extra-arg": (["show", "bb_good:Outer", "extra"], "extra"),
    "show-unknown-option": (["show", "--bogus", "bb_good:Outer"], "--bogus"),
    "stubgen-no-arg": (["stubgen"], "MODULE"),
    "stubgen-missing-module": (["stubgen", "bb_no_such_module"], "bb_no_such_module"),
    "stubgen-raising-module": (["stubgen", "bb_raiser"], "boom at import"),
    "stubgen-missing-parent": (["stubgen", "bb_good", "-o", "{tmp}/no/such/dir"], "no/such"),
    "stubgen-out-is-file": (["stubgen", "bb_good", "-o", "{tmp}/bb_good.py"], "not a directory"),
    "bench-unknown-option": (["bench", "--bogus"], "--bogus"),
    "bench-json-missing-dir": (["bench", "--json", "{tmp}/missing/out.json"], "missing"),
    "bench-json-is-dir": (["bench", "--json", "{tmp}"], "directory"),
    "bench-json-under-file": (["bench", "--json", "{tmp}/bb_good.py/out.json"], "not a directory"),
    "bench-plot-missing-dir": (["bench", "--plot", "{tmp}/missing/out.png"], "missing"),
}


@pytest.mark.parametrize("name", sorted(CLI_BAD))
def test_cli_bad_arguments_exit_2_with_one_line(name, modules):
    args, needle = CLI_BAD[name]
    args = [a.replace("{tmp}", str(modules)) for a in args]
    proc = _cli(*args, extra_path=modules, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    line = _one_error_line(proc)
    if needle:
        assert needle in proc.stderr
    assert proc.stdout == ""
    del line


def test_cli_module_exiting_at_import(modules):
    proc = _cli("show", "bb_exits:X", extra_path=modules, timeout=60)
    assert proc.returncode == 2
    assert "bb_exits" in _one_error_line(proc)


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_cli_bench_unwritable_directory_refused_before_work(option):
    target = "/proc/metakit-bb-out.json"
    with pytest.raises(OSError, match="metakit-bb-out"):
        open(target, "w").close()  # the precondition: nothing can be made there
    proc = subprocess.Popen(
        [sys.executable, "-m", "metakit", "bench", "--quick", option, target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        first = proc.stderr.readline()
    finally:
        proc.kill()
        proc.communicate()
    assert "error" in first, first


def test_cli_show_prints_generated_source_exactly(modules):
    sys.path.insert(0, str(modules))
    try:
        import bb_good  # type: ignore[import-not-found]

        for name, cls in (("Outer", bb_good.Outer), ("Outer.Inner", bb_good.Outer.Inner), ("Plain", bb_good.Plain)):
            proc = _cli("show", f"bb_good:{name}", extra_path=modules, timeout=60)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.rstrip("\n") == metakit.generated_source(cls).rstrip("\n")
            if name == "Plain":
                assert "plain dataclass" in proc.stderr
    finally:
        sys.path.remove(str(modules))
        sys.modules.pop("bb_good", None)


def test_cli_stubgen_makes_missing_last_directory(modules):
    out = modules / "newstubs"
    proc = _cli("stubgen", "bb_good", "-o", str(out), extra_path=modules, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stub = (out / "bb_good.pyi").read_text()
    assert "OuterDict" in stub


def test_cli_no_command_exits_2_with_usage():
    proc = _cli()
    assert proc.returncode == 2
    assert "usage" in proc.stderr
    assert "Traceback" not in proc.stderr


REPO_ENGINE_SHAPES = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


SHOW_MODULE = """
from dataclasses import dataclass, field
from metakit import ZeroCopy, OMIT

@dataclass
class Meta(ZeroCopy):
    a: int = 0
    w: object = field(default=None, metadata=OMIT)

@dataclass
class Over(Meta):
    b: int = 1
    def asdict_zerocopy(self, skip_fields=None):
        return super().asdict_zerocopy(skip_fields)

@dataclass
class Lone(ZeroCopy):
    q: int = 0

@dataclass
class Plain:
    x: int = 0

class Outer:
    @dataclass(slots=True)
    class Inner(ZeroCopy):
        z: int = 0

class NotDC:
    pass

@dataclass
class RParent(ZeroCopy):
    a: int = 0

@dataclass
class RChild(RParent):
    b: int = 0
    def __replace__(self, /, **changes):
        return super().__replace__(**changes)

@dataclass
class Deleted(ZeroCopy):
    a: int = 0

Deleted.asdict_zerocopy = lambda self, skip_fields=None: {}
del Deleted.asdict_zerocopy

@dataclass
class LaterTuple(ZeroCopy):
    a: int = 0

LaterTuple.astuple_zerocopy = lambda self: (self.a,)
"""


@pytest.fixture(scope="module")
def show_module(tmp_path_factory):
    d = tmp_path_factory.mktemp("showmod")
    (d / "bb_show_mod.py").write_text(SHOW_MODULE)
    sys.path.insert(0, str(d))
    try:
        import bb_show_mod

        results = {}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(d), os.environ.get("PYTHONPATH", "")]))
        for target in (
            "Meta",
            "Over",
            "Lone",
            "Plain",
            "Outer.Inner",
            "NotDC",
            "Missing",
            "RParent",
            "RChild",
            "Deleted",
            "LaterTuple",
        ):
            p = subprocess.run(
                [sys.executable, "-m", "metakit", "show", f"bb_show_mod:{target}"],
                capture_output=True,
                text=True,
                env=env,
                cwd=REPO_ENGINE_SHAPES,
                timeout=60,
                check=False,
            )
            results[target] = p
        yield bb_show_mod, results
    finally:
        sys.path.remove(str(d))
        sys.modules.pop("bb_show_mod", None)


@pytest.mark.parametrize(
    "target", ["Meta", "Over", "Lone", "Plain", "Outer.Inner", "RParent", "RChild", "Deleted", "LaterTuple"]
)
def test_show_prints_generated_source(show_module, target):
    mod, res = show_module
    cls = mod
    for part in target.split("."):
        cls = getattr(cls, part)
    p = res[target]
    assert p.returncode == 0, p.stderr
    assert p.stdout == metakit.generated_source(cls)


def test_show_notes_override_and_plain(show_module):
    _, res = show_module
    assert "Over.asdict_zerocopy" in res["Over"].stderr
    assert "own" in res["Over"].stderr
    assert "astuple_zerocopy" not in res["Over"].stderr
    assert "plain dataclass" in res["Plain"].stderr
    assert res["Lone"].stderr == ""
    assert res["Outer.Inner"].stderr == ""
    assert res["Deleted"].stderr == ""
    assert "LaterTuple.astuple_zerocopy" in res["LaterTuple"].stderr
    assert "asdict_zerocopy" not in res["LaterTuple"].stderr
    assert "RChild.__replace__" in res["RChild"].stderr
    assert "asdict" not in res["RChild"].stderr


def test_show_no_false_override_note_on_base(show_module):
    _, res = show_module
    # Meta defines no asdict_zerocopy/astuple_zerocopy/__replace__ of its own; only its
    # subclass Over overrides asdict_zerocopy.  Likewise RParent: only RChild has a __replace__.
    assert res["Meta"].stderr == ""
    assert res["RParent"].stderr == ""


def test_show_errors_exit_2(show_module):
    _, res = show_module
    for t in ("NotDC", "Missing"):
        assert res[t].returncode == 2
        assert res[t].stdout == ""
        assert res[t].stderr.count("\n") == 1
        assert "error" in res[t].stderr


REPO_STATEFUL = os.path.dirname(os.path.dirname(os.path.abspath(metakit.__file__)))


CLI_MODULE = textwrap.dedent(
    """
    from dataclasses import dataclass, field
    from metakit import ZeroCopy, OMIT

    @dataclass
    class Rec(ZeroCopy):
        a: int = 1
        w: object = field(default=None, metadata=OMIT)

    @dataclass
    class Plain:
        a: int = 1

    @dataclass
    class Own(ZeroCopy):
        a: int = 1
        def asdict_zerocopy(self, skip_fields=None):
            return {}

    class Outer:
        @dataclass(slots=True)
        class Inner(ZeroCopy):
            z: int = 0

    class NotDC:
        pass

    VALUE = 5
    """
)


@pytest.fixture
def cli(tmp_path):
    (tmp_path / "bb_cli_mod.py").write_text(CLI_MODULE)
    (tmp_path / "bb_cli_boom.py").write_text("raise RuntimeError('boom at import')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO_STATEFUL]))
    env.pop("COLUMNS", None)

    def run(*args, timeout=60):
        return subprocess.run(
            [sys.executable, "-m", "metakit", *args],
            check=False,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=timeout,
        )

    run.env = env
    run.tmp = tmp_path
    return run


def _source_in_subprocess(cli, spec):
    mod, qual = spec.split(":")
    code = (
        f"import functools, metakit, {mod}; cls = functools.reduce(getattr, {qual.split('.')!r}, {mod}); "
        "import sys; sys.stdout.write(metakit.generated_source(cls))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=cli.tmp, env=cli.env
    ).stdout


@pytest.mark.parametrize(
    ("spec", "note"),
    [
        ("bb_cli_mod:Rec", None),
        ("bb_cli_mod:Plain", "plain dataclass"),
        ("bb_cli_mod:Own", "own"),
        ("bb_cli_mod:Outer.Inner", None),
    ],
)
def test_show_prints_exactly_generated_source(cli, spec, note):
    # README: "`show` prints exactly `metakit.generated_source(cls)` on stdout, and on stderr what a
    # reader must know about it: on a plain dataclass ... on a class with its own
    # `asdict_zerocopy` ... that this method is the class's own"
    r = cli("show", spec)
    assert r.returncode == 0, r.stderr
    expected = _source_in_subprocess(cli, spec)
    assert expected
    assert r.stdout in (expected, expected + "\n"), (r.stdout, expected)
    if note is None:
        assert r.stderr == ""
    else:
        assert note in r.stderr.lower() or "own method" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("show", "bb_cli_mod:NotDC"),
        ("show", "bb_cli_mod:VALUE"),
        ("show", "bb_cli_mod:Missing"),
        ("show", "bb_cli_mod"),
        ("show", ":Rec"),
        ("show", "no_such_module_bb:X"),
        ("show", "bb_cli_boom:X"),
        ("show",),
        ("show", "bb_cli_mod:Rec", "extra"),
        ("frobnicate",),
        ("--frobnicate",),
        ("stubgen",),
        ("stubgen", "no_such_module_bb"),
        ("stubgen", "bb_cli_boom"),
        ("bench", "--bogus"),
        ("bench", "--json", "/no_such_dir_bb/x/results.json"),
        ("bench", "--plot", "/no_such_dir_bb/x/chart.png"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, tuple) else a,
)
def test_cli_errors_exit_2_with_a_one_line_message(cli, args):
    # README: "The exit status is 0 on success and 2 for anything you can fix, said in one line on
    # stderr before any work is done" / "its messages name it as you invoked it"
    r = cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    assert "Traceback" not in r.stderr
    error_lines = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(error_lines) == 1, r.stderr
    assert "python -m metakit" in error_lines[0], r.stderr
    assert "benchmark" not in r.stdout  # no work done


def test_cli_missing_extras_exit_2_before_work(cli):
    # README: "2 ... before any work is done: ... `--plot` without matplotlib, `--distributed` without
    # torch and numpy"
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        r = cli("bench", "--quick", "--plot", str(cli.tmp / "c.png"))
        assert r.returncode == 2
        assert "matplotlib" in r.stderr
        assert "benchmark" not in r.stdout
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("numpy") is None:
        r = cli("bench", "--quick", "--distributed")
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert "benchmark" not in r.stdout, (r.stdout, r.stderr)
    r = cli("bench", "--quick", "--json", str(cli.tmp))  # a directory, not a file
    assert r.returncode == 2
    assert "benchmark" not in r.stdout


def _starts_work(cli, *args, limit=20.0):
    """Runs the command; returns (returncode, stdout, stderr, whether the benchmark started)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "metakit", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cli.tmp,
        env=cli.env,
    )
    first = proc.stdout.readline()  # the benchmark's header line, or "" when it exits first
    started = "benchmark" in first
    if started:
        proc.kill()
    out, err = proc.communicate(timeout=limit)
    return proc.returncode, first + out, err, started


def test_bench_json_into_a_missing_directory_via_symlink_fails_before_work(cli):
    # README: "2 for anything you can fix, said in one line on stderr before any work is done: ...
    # an output path whose directory is missing or not writable (`--json`, `--plot`, `stubgen -o`)"
    link = cli.tmp / "results.json"
    os.symlink("/no_such_dir_bb/deeper/results.json", link)
    rc, _out, _err, started = _starts_work(cli, "bench", "--quick", "--json", str(link))
    assert not started, "the benchmark started although its --json path cannot be written"
    assert rc == 2


def test_stubgen_output_in_a_missing_directory_exits_2(cli):
    # README: "2 for anything you can fix ...: an output path whose directory is missing or not
    # writable (`--json`, `--plot`, `stubgen -o`)"
    target = cli.tmp / "missing" / "deeper"
    r = cli("stubgen", "bb_cli_mod", "-o", str(target))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert not (cli.tmp / "missing").exists()


@pytest.mark.parametrize("args", [("stubgen", "-o"), ("stubgen", "bb_cli_mod", "--output")])
def test_stubgen_option_errors_name_the_program(cli, args):
    # README: "`python -m metakit ...` is the same program; its messages name it as you invoked it."
    r = cli(*args)
    assert r.returncode == 2
    assert "__main__.py" not in r.stderr, r.stderr
    assert "python -m metakit stubgen" in r.stderr, r.stderr


def test_stubgen_writes_stubs(cli):
    # README: "`python -m metakit stubgen MODULE [-o DIR]` Writes `.pyi` stubs with a `TypedDict` per
    # class"
    out = cli.tmp / "typings"
    out.mkdir()
    r = cli("stubgen", "bb_cli_mod", "-o", str(out))
    assert r.returncode == 0, r.stderr
    stub = (out / "bb_cli_mod.pyi").read_text()
    assert "class RecDict(" in stub
    assert "def asdict_zerocopy" in stub
    rec_dict = stub.split("class RecDict(")[1].split("\n\n")[0]
    assert "a: int" in rec_dict
    assert "w:" not in rec_dict


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
