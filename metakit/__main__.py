"""metakit's command line: ``metakit {bench,show,stubgen} ...``, or ``python -m metakit ...``.

Every error a user can cause (a bad argument, a module that cannot be
imported or raises, an output path that cannot be written) exits with
status 2 and one line on stderr (after the usage where argparse cannot
parse the arguments), before any work is done; so does an output that
cannot take what is written (a full disk), once it is seen, and a stderr that
cannot once the output is written (a closed one is discarded); Ctrl-C exits with
status 130, and a reader that closes the output early (``| head``) makes it
exit with status 141, as SIGPIPE would.  None of them prints a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import types
from collections.abc import Sequence
from pathlib import Path

import metakit
from metakit._cli import ArgumentParser, Told, buffer_stdout, discard
from metakit._errors import describe
from metakit._fields import METHOD_NAMES
from metakit._overrides import reaches_metakit, users_methods

_COMMANDS = {
    "bench": "measure metakit against its peers on the example engine metadata",
    "show": "print the generated source of a class: show MODULE:CLASS",
    "stubgen": "write .pyi stubs with exact TypedDicts: stubgen MODULE... [-o DIR]",
}

_EXTRAS = {
    "torch": "torch",
    "msgspec": "torch",
    "mypy": "mypy",
    "numpy": "bench",
    "attrs": "bench",
    "matplotlib": "bench",
}
"""Which of metakit's extras installs each module that a module of metakit's own may need."""

_INTERRUPTED = 130
"""The exit status of a program stopped by SIGINT (128 + 2), as shells report it."""

_PIPE_CLOSED = 141
"""The exit status of a program stopped by SIGPIPE (128 + 13), as shells report it."""


class UsageError(Exception):
    """A mistake of the user's: printed as one line, exit status 2."""


def program_name() -> str:
    """How the program was invoked: ``metakit`` (the console script) or ``python -m metakit``."""
    return "metakit" if Path(sys.argv[0]).stem == "metakit" else "python -m metakit"


def _usage(prog: str) -> str:
    width = max(map(len, _COMMANDS))
    lines = [f"  {name:<{width}}  {text}" for name, text in _COMMANDS.items()]
    return (
        f"usage: {prog} [--version] {{{','.join(_COMMANDS)}}} ...\n\ncommands:\n"
        + "\n".join(lines)
        + f"\n\n'{prog} COMMAND --help' describes each command's arguments."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the process's exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    prog = program_name()
    buffer_stdout()
    stderr = sys.stderr
    sys.stderr = told = Told(stderr)
    try:
        status = _main(prog, args)
    finally:
        sys.stderr = stderr
    return 2 if told.lost and status == 0 else status


def _main(prog: str, args: list[str]) -> int:
    try:
        try:
            status = _run(prog, args)
        except SystemExit as exit:  # argparse's, after --help or a mistake in the arguments
            status = 0 if exit.code is None else exit.code if isinstance(exit.code, int) else 2
        if sys.stdout is not None:  # None: started with its standard output closed
            sys.stdout.flush()  # here, where a closed pipe can still be told from other errors
    except UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        _flush_or_discard(prog)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        _flush_or_discard(prog)
        _forget_uncaught_interrupt()
        return _INTERRUPTED
    except BrokenPipeError:
        _discard_stdout()
        return _PIPE_CLOSED
    except (OSError, UnicodeEncodeError) as error:  # the output cannot take what is written: a full disk, ASCII
        _cannot_write(prog, error)
        return 2
    return status


def _forget_uncaught_interrupt() -> None:
    """Keep the interpreter from ending by SIGINT once this status is returned.

    Up to 3.13, a ``KeyboardInterrupt`` that leaves code run from a string
    (``exec`` of text, as ``dataclasses`` makes each class's methods: Ctrl-C
    while a module's classes are made) marks it uncaught for good, even once
    it is caught, and the interpreter then kills itself with SIGINT on its
    way out instead of exiting with 130.  Running text again clears the
    mark, as every such run does when it starts.
    """
    exec("")  # an empty text: nothing runs


def _flush_or_discard(prog: str) -> None:
    """Flush stdout before an error's exit, or say it cannot be written and discard it.

    Else Python's own flush at exit would fail again (a module that printed
    while it was imported, to a full disk) and end the process with status 120.
    """
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError) as error:
        _cannot_write(prog, error)


def _cannot_write(prog: str, error: BaseException) -> None:
    """Say that the output cannot be written, and discard what is left of it."""
    _discard_stdout()
    print(f"{prog}: error: cannot write the output: {_one_line(error)}", file=sys.stderr)


def _discard_stdout() -> None:
    """Send what is left of stdout nowhere: the reader has gone, and Python flushes it again at exit."""
    discard(sys.stdout)


def _run(prog: str, args: list[str]) -> int:
    command, rest = (args[0], args[1:]) if args else ("", [])
    if sys.stdout is None:  # started with it closed: print() would drop every line
        raise UsageError("cannot write the output: standard output is closed")
    if command in ("-h", "--help", "--version"):
        if rest:
            print(_usage(prog), file=sys.stderr)
            print(f"\n{prog}: error: {command} takes no arguments, got {' '.join(rest)}", file=sys.stderr)
            return 2
        print(_usage(prog) if command != "--version" else f"metakit {metakit.__version__}")
        return 0
    if command not in _COMMANDS:
        print(_usage(prog), file=sys.stderr)
        if command:
            print(f"\n{prog}: error: unknown command {command!r}", file=sys.stderr)
        return 2
    if command == "show":
        return _show(f"{prog} show", rest)
    if command == "bench":
        from metakit import bench

        return bench.main(rest, prog=f"{prog} bench")
    return _stubgen(f"{prog} stubgen", rest)


def _stubgen(prog: str, rest: list[str]) -> int:
    """``stubgen MODULE... [-o DIR]``: each module's stub, all made before any is written."""
    try:
        from metakit import stubgen
    except ModuleNotFoundError as error:
        missing = (error.name or "mypy").partition(".")[0]
        raise UsageError(f"stubgen needs {missing}: pip install 'metakit[mypy]'") from None
    # A bad argument exits here, with stubgen's usage, before any module is imported.
    arguments = stubgen.arguments(prog).parse_args(rest)
    output = Path(arguments.output)
    names = list(dict.fromkeys(arguments.modules))  # each once
    stubs = []
    for name, module in zip(names, _check_stubgen(names, arguments.output), strict=True):
        try:
            stubs.append((stubgen.module_stub(module), module))
        except stubgen.UNREADABLE as error:
            raise UsageError(f"cannot read the source of {name!r}: {_one_line(error)}") from None
        except (stubgen.NameClash, stubgen.OldMypy) as error:
            raise UsageError(str(error)) from None
    for _, module in stubs:  # a file or a directory in the way of any stub: none is written
        problem = _in_the_way(output, stubgen.stub_path(output, module))
        if problem:
            raise UsageError(f"cannot write the stub of {module.__name__!r}: {problem}")
    for stub, module in stubs:  # each made before any is written
        try:
            path = stubgen.write_stub(stub, output, module)
        except OSError as error:  # what the check before could not see (a full disk, a read-only mount)
            raise UsageError(f"cannot write the stub {stubgen.stub_path(output, module)}: {error}") from None
        print(f"wrote {path}")
    return 0


def import_user_module(name: str) -> types.ModuleType:
    """Import the user's module *name*; anything it raises becomes a ``UsageError``."""
    if not _dotted_name(name):  # refused before anything is imported
        raise UsageError(f"{name!r} is not a module name")
    _import_from_here()
    try:
        return importlib.import_module(name)
    except ImportError as error:
        extra = _EXTRAS.get((error.name or "").partition(".")[0]) if name.partition(".")[0] == "metakit" else None
        hint = f" (pip install 'metakit[{extra}]')" if extra and "pip install" not in str(error) else ""
        raise UsageError(f"cannot import {name!r}: {_one_line(error)}{hint}") from None
    except SystemExit as error:  # the module's own sys.exit(): not this command's status
        raise UsageError(f"importing {name!r} called sys.exit({error.code!r})") from None
    except (BrokenPipeError, KeyboardInterrupt):  # a reader that has gone, Ctrl-C: the program's end, not its error
        raise
    except BaseException as error:  # any other, GeneratorExit included, is the module's
        raise UsageError(f"importing {name!r} raised {_one_line(error, typed=True)}") from None


def _import_from_here() -> None:
    """Let modules in the current directory be imported, as ``python -m metakit`` lets them.

    ``python -m`` puts the current directory first on ``sys.path``; the
    ``metakit`` script puts its own directory there instead.
    """
    try:
        here = os.getcwd()
    except OSError:  # the directory was removed: nothing to import from it
        return
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)


def _dotted_name(name: str) -> bool:
    """Whether *name* is identifiers joined by dots, as module and class names are."""
    return all(part.isidentifier() for part in name.split("."))


def _one_line(error: BaseException, *, typed: bool = False) -> str:
    """*error*'s message, after its type's name if *typed*, on one line: its line breaks written as ``\\n``.

    Its type alone, said so, where its message cannot be read.
    """
    try:
        message = describe(error) if typed else str(error)
    except Exception:  # its __str__ raised: the user's exception class, not ours
        message = describe(error)
    return message.replace("\n", "\\n")


def _show(prog: str, argv: list[str]) -> int:
    parser = ArgumentParser(prog=prog, description=_COMMANDS["show"])
    parser.add_argument("target", metavar="MODULE:CLASS", help="e.g. metakit.examples.engine:FlashAttentionMetadata")
    target = parser.parse_args(argv).target
    module_name, _, qualname = target.partition(":")
    if not module_name or not qualname:
        raise UsageError(f"expected MODULE:CLASS, got {target!r}")
    if not _dotted_name(qualname):
        raise UsageError(f"{qualname!r} is not a class name")
    obj: object = import_user_module(module_name)
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"module {module_name!r} has no class {qualname!r}") from None
        except Exception as error:
            raise UsageError(f"looking up {qualname!r} raised {_one_line(error, typed=True)}") from None
    if not isinstance(obj, type):
        raise UsageError(f"{target} is not a class")
    try:
        source = metakit.generated_source(obj)
        notes = _show_notes(obj)
    except TypeError as error:
        raise UsageError(str(error)) from None
    except Exception as error:  # its metaclass's __getattr__ raised, or it holds no dict of fields
        raise UsageError(f"reading {qualname} as a dataclass raised {_one_line(error, typed=True)}") from None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(source, end="")
    return 0


def _show_notes(cls: type) -> list[str]:
    """What a reader of ``show``'s output must know: whose code it is, and which methods it is not."""
    name = cls.__qualname__
    if not isinstance(cls, metakit.ZeroCopyFields):
        return [
            f"{name} is a plain dataclass (its metaclass is not ZeroCopyFields), so it has no generated methods;"
            " this is the code that metakit.asdict_zerocopy() and metakit.astuple_zerocopy() run for its instances"
        ]
    notes = []
    for method in METHOD_NAMES:
        users = users_methods(cls, method)
        if not users:
            continue  # metakit's: what an instance of *cls* runs is the code below
        owner = users[0]
        whose = "the class's own method" if owner is cls else f"{owner.__qualname__}.{method}, which it inherits"
        reached = reaches_metakit(cls, users, method)
        runs = f"super().{method}() and the function forms run" if reached else "the function forms run"
        notes.append(f"{name}.{method} is {whose}, not the code below, which {runs}")
    return notes


def _check_stubgen(module_names: list[str], output: str) -> list[types.ModuleType]:
    """Check what ``stubgen`` will need before it runs: the output can be written and the modules import.

    Returns the modules.  Warns when a stub would shadow the real one of a module of the
    standard library or of another installed project.
    """
    from metakit.bench.report import output_problem

    problem = output_problem(output, directory=True)
    if problem:
        raise UsageError(f"cannot write stubs to {output or repr(output)}: {problem}")
    strangers = [name for name in module_names if not _dotted_name(name)]  # refused before any is imported
    if strangers:
        raise UsageError(f"{strangers[0]!r} is not a module name")
    modules = [import_user_module(name) for name in module_names]
    for name, module in zip(module_names, modules, strict=True):
        owner = _foreign_owner(module)
        if owner:
            print(
                f"warning: {name} is a module of {owner}; a stub for it in {output} would shadow its"
                " real one (or typeshed's) for every checker that reads that directory",
                file=sys.stderr,
            )
    return modules


def _in_the_way(output: Path, path: Path) -> str | None:
    """What stands where the stub *path* under *output* or a directory it needs would go, if anything."""
    for place in reversed(path.relative_to(output).parents):
        if (output / place).exists() and not (output / place).is_dir():
            return f"{output / place} is not a directory"
    return f"{path} is a directory" if path.is_dir() else None


def _foreign_owner(module: types.ModuleType) -> str | None:
    """``the standard library`` or ``an installed project`` if *module* is theirs, else None."""
    top = module.__name__.partition(".")[0]
    if top in sys.stdlib_module_names:
        return "the standard library"
    origin = vars(module).get("__file__")  # never asked of a module __getattr__ (PEP 562)
    if origin is None:
        return None
    path = Path(origin).resolve()
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if path.is_relative_to(Path(paths[key]).resolve()):
            return "an installed project"
    return None


if __name__ == "__main__":
    sys.exit(main())
