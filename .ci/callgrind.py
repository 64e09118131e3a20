"""What ``.ci/count-creation`` and ``.ci/count-calls`` share: a program's instructions, counted by valgrind's callgrind.

Unlike time, the count does not move with the machine's load.  With a fixed hash seed it still depends on where
a program's objects happen to lie, which the length of its command line alone moves: so each program runs in
``LAYOUTS``, its command line padded by that many characters, and a figure is the median of them.
"""

from __future__ import annotations

import os
import re
import subprocess

LAYOUTS = (0, 64, 128)
"""The lengths of padding on each program's command line: three layouts of its objects."""


def instructions(python: str, code: str, *arguments: str, padding: int) -> int:
    """The instructions that ``python -c code arguments...`` runs, its command line padded by *padding* characters."""
    ran = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            python,
            "-c",
            code,
            *arguments,
            "-" * padding,
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # the same dict layouts in every run
    )
    collected = re.search(r"Collected : (\d+)", ran.stderr)
    if collected is None:
        raise RuntimeError(f"callgrind printed no count:\n{ran.stderr}")
    return int(collected.group(1))


def implementation(python: str) -> str:
    """*python*'s implementation and version, as a record names them: ``CPython 3.13.0``."""
    code = "import platform; print(platform.python_implementation(), platform.python_version())"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
