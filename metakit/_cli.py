"""The command line's argument parser: argparse's, with help that cannot be written reported."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser``, whose ``--help`` fails as any other output does when it cannot be written.

    argparse drops the ``OSError`` of writing its help, so ``metakit show --help | head -c0``
    would exit with 0 having written nothing; the command line ends it with status 141 instead.
    """

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        (sys.stdout if file is None else file).write(self.format_help())
