"""metakit's command line: ``python -m metakit {bench,show,stubgen} ...``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from metakit import generated_source

_COMMANDS = {
    "bench": "measure metakit against its peers on the example engine metadata",
    "show": "print the generated source of a class: show MODULE:CLASS",
    "stubgen": "write .pyi stubs with exact TypedDicts: stubgen MODULE [-o DIR]",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the process's exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in _COMMANDS:
        width = max(map(len, _COMMANDS))
        lines = [f"  {name:<{width}}  {text}" for name, text in _COMMANDS.items()]
        print("usage: python -m metakit {bench,show,stubgen} ...\n\ncommands:\n" + "\n".join(lines))
        if args and args[0] not in ("-h", "--help"):
            print(f"\nerror: unknown command {args[0]!r}", file=sys.stderr)
            return 2
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "show":
        return _show(rest)
    # Each command's module parses its own arguments.
    module = importlib.import_module(f"metakit.{command}")
    status: int = module.main(rest)
    return status


def _show(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m metakit show", description=_COMMANDS["show"])
    parser.add_argument("target", metavar="MODULE:CLASS", help="e.g. metakit.examples.engine:FlashAttentionMetadata")
    target = parser.parse_args(argv).target
    module_name, _, qualname = target.partition(":")
    if not module_name or not qualname:
        parser.error(f"expected MODULE:CLASS, got {target!r}")
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as error:
        parser.error(f"cannot import {module_name!r}: {error}")
    for part in qualname.split("."):
        if not hasattr(obj, part):
            parser.error(f"module {module_name!r} has no class {qualname!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        parser.error(f"{target} is not a class")
    try:
        print(generated_source(obj), end="")
    except TypeError as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
