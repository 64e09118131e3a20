"""The command line's plumbing: argparse's parser, with help that cannot be written reported, and its streams."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser``, whose ``--help`` fails as any other output does when it cannot be written.

    argparse drops the ``OSError`` of writing its help, so ``metakit show --help | head -c0``
    would exit with 0 having written nothing; the command line ends it with status 141 instead.
    """

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        (sys.stdout if file is None else file).write(self.format_help())


class Told:
    """``sys.stderr`` while a command runs: what it cannot take is dropped, never the command's output.

    A write that fails (a full disk) is remembered, and ``main`` then exits
    with status 2 once the output is written; the stream goes to the null
    device, so that Python's flush at exit cannot fail again.  Without a
    stderr (started with it closed), what is said is discarded, as Python
    discards its own messages there, where ``print`` would write it on stdout.
    """

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.lost = False

    def write(self, text: str) -> int:
        self._tell(lambda stream: stream.write(text))
        return len(text)

    def flush(self) -> None:
        self._tell(lambda stream: stream.flush())

    def isatty(self) -> bool:
        return self.stream is not None and self.stream.isatty()

    def __getattr__(self, name: str) -> Any:  # the stream's own: encoding, fileno...
        return getattr(self.stream, name)

    def _tell(self, call: Callable[[TextIO], object]) -> None:
        if self.stream is None or self.lost:
            return
        try:
            call(self.stream)
        except (OSError, ValueError):  # a full disk, a closed stream
            self.lost = True
            discard(self.stream)


def buffer_stdout() -> None:
    """Write stdout through a buffer, a line at a time, where ``python -u`` (``PYTHONUNBUFFERED``) left none.

    Unbuffered, a text stream writes straight to its file and drops what a
    partial write leaves (a reader that stops in the middle of a large
    output): the program would end with status 0 having written part of it.
    A buffer writes the rest, and so meets the closed pipe.
    """
    raw = getattr(sys.stdout, "buffer", None)
    if not (isinstance(raw, io.RawIOBase) and isinstance(sys.stdout, io.TextIOWrapper)):
        return
    try:  # a file of its own on the same descriptor, which it never closes
        stream = io.FileIO(raw.fileno(), "w", closefd=False)
    except (OSError, ValueError):  # no descriptor: left as it is
        return
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(stream), encoding=sys.stdout.encoding, errors=sys.stdout.errors, line_buffering=True
    )


def discard(stream: TextIO | None) -> None:
    """Send what is left of *stream* nowhere (its descriptor to the null device), if it is a file."""
    try:
        descriptor = stream.fileno()  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):  # not a file (captured, as in tests), or closed: nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)
