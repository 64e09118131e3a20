"""What every benchmark report shares: the versions it ran with, and writing it as JSON.

The broadcast benchmark (``metakit.bench.broadcast``) uses these as well as
the main one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import metakit
from metakit._errors import describe


@functools.cache
def installed(name: str) -> str | None:
    """The version of the distribution *name*, or None if it is not installed or cannot be imported.

    Asks the installed metadata first, not the import system: a directory
    named ``torch`` on ``sys.path`` (a test folder) would import as an empty
    namespace package.  A peer that is installed but raises on import (a
    half-upgraded one) is said so once, and left out as a missing one is.
    """
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        importlib.import_module(name)
    except Exception as error:  # whatever a broken install raises, it is not the benchmark's
        print(f"({name} {version} is installed but cannot be imported: {describe(error)})", file=sys.stderr)
        return None
    return version


def source_digest() -> str:
    """A digest of metakit's own source (its ``.py`` files, the benchmark's included): which code a record measured,
    where the version number stays the same from change to change."""
    digest = hashlib.sha256()
    package = Path(metakit.__file__).parent
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def versions() -> dict[str, str | None]:
    """metakit's, Python's and the peers' versions: the ``versions`` object of every report."""
    return {
        "metakit": metakit.__version__,
        "source": source_digest(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": f"{platform.system()} {platform.machine()}",
        "torch": installed("torch"),
        "attrs": installed("attrs"),
        "msgspec": installed("msgspec"),
    }


def write_json(path: str, report: Mapping[str, Any]) -> None:
    """Write *report* to *path* as indented JSON (no NaN or infinity)."""
    Path(path).write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def write_output(option: str, path: str, write: Callable[[str], object]) -> str | None:
    """Write an output with *write*; on failure, why, naming *option* and *path*, with nothing left behind.

    A file that this call made is removed: a broken write leaves no part of
    one.  Anything that was there before (a file written over, a device) stays.
    """
    existed = os.path.lexists(path)
    try:
        write(path)
    except OSError as error:  # what the check before the run could not see (a full disk, a read-only mount)
        if not existed and os.path.isfile(path):
            with contextlib.suppress(OSError):
                os.remove(path)
        return f"cannot write {option} {path}: {error.strerror or error}"
    return None


def format_number(value: float | None, digits: int = 1) -> str:
    """*value* with thousands separators and *digits* decimals; ``-`` for None (not measured)."""
    return "-" if value is None else f"{value:,.{digits}f}"


def output_problem(path: str | Path, *, directory: bool = False) -> str | None:  # noqa: PLR0911  # one a problem
    """Why a file cannot be written at *path*, or None if it can.

    With *directory*, *path* is a directory to write files into, which is
    made if it is missing: then its parent must exist.  A symbolic link is
    followed, as writing follows it.  Checked before a run, so that a long
    run does not end in an error.
    """
    if not str(path):
        return "the path is empty"
    target = Path(os.path.realpath(path))
    if target.exists():
        if target.is_dir() != directory:
            return f"{path} is {'not ' if directory else ''}a directory"
        where = target
    else:
        where = target.parent
        if where.exists() and not where.is_dir():
            return f"{where} is not a directory"
        if not where.is_dir():
            return f"there is no directory {where}"
    if not os.access(where, os.W_OK | (os.X_OK if where.is_dir() else 0)):
        return f"{path} is not writable"
    if where.is_dir():
        # Permissions do not tell all: a superuser passes them, and some
        # file systems (/proc, a read-only mount) refuse new files anyway.
        try:
            with tempfile.TemporaryFile(dir=where):
                pass
        except OSError as error:
            return f"no file can be made in {where}: {error.strerror or error}"
    return None


def print_spread_table(rows: list[tuple[str, float | None, float | None, float | None, bool, str | None]]) -> None:
    """Rows of (label, best ns, median ns, ratio, unstable, note), with a footnote if one is unstable."""
    width = max(len(label) for label, *_ in rows)
    print(f"  {'':<{width}}  {'best ns':>9}  {'median ns':>9}  {'x metakit':>9}")
    for label, best, median, ratio, unstable, note in rows:
        mark = " !" if unstable else ""
        remark = f"  ({note})" if note else ""
        print(
            f"  {label:<{width}}  {format_number(best):>9}  {format_number(median):>9}"
            f"  {format_number(ratio, 2):>9}{mark}{remark}"
        )
    if any(unstable for *_, unstable, _ in rows):
        print(f"  ! {UNSTABLE_NOTE}")


UNSTABLE_NOTE = (
    "unstable: the standard deviation of its samples is over 10% of their mean (pyperf's rule);"
    " the machine was busy, rerun for a firmer figure"
)
