"""Every ```python block of the README runs, as a reader would paste it into a file.

Each block runs on its own, in a fresh interpreter, in an empty directory.
A block that is not meant to run says so where a reader sees it: its first
line is a comment ``# Not run: REASON``.  A block that imports torch (or the
parts of metakit that need it) runs only where torch is installed, that is
in `make test`; a block that calls ``init_process_group`` runs under
``torchrun`` with two processes.  A block of ``>>>`` lines is an interactive
session, checked as a doctest (an expected exception is written as Python
prints it, from ``Traceback (most recent call last):`` on, with ``...`` for
the frames).

The ```console blocks are checked too: each ``$ metakit ...`` or ``$ python -m
metakit ...`` line is run, and what it prints (stdout, then stderr) must be
the lines that follow it, up to the next ``$``.
"""

from __future__ import annotations

import ast
import doctest
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from metakit.bench.report import installed

README = Path(__file__).parent.parent / "README.md"
NOT_RUN = re.compile(r"#\s*not run:\s*(?P<reason>\S.*)$", re.IGNORECASE)
NEEDS_TORCH = ("torch", "metakit.examples.engine", "metakit.distributed")
"""Modules whose import needs torch: a block that imports one runs only where torch is installed."""
HAS_TORCH = installed("torch") is not None


@dataclass(frozen=True)
class Block:
    line: int
    """The line of the README where the block's code starts."""
    source: str

    @property
    def not_run(self) -> str | None:
        """The reason the block gives for not running, or None."""
        first = self.source.lstrip().splitlines()[0] if self.source.strip() else ""
        match = NOT_RUN.match(first)
        return match.group("reason") if match else None

    @property
    def needs_torch(self) -> bool:
        source = self.source
        if self.session:
            source = "\n".join(example.source for example in doctest.DocTestParser().get_examples(source))
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return False  # it will fail to run anywhere, and say why
        imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        imported += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
        return any(name == module or name.startswith(f"{module}.") for name in imported for module in NEEDS_TORCH)

    @property
    def session(self) -> bool:
        """Whether the block is an interactive session (``>>>`` lines with their output)."""
        return self.source.lstrip().startswith(">>>")

    @property
    def distributed(self) -> bool:
        return "init_process_group(" in self.source


def readme_blocks(text: str, language: str = "python") -> list[Block]:
    """The README's blocks of *language* (```python), in order."""
    blocks = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() == f"```{language}":
            start = index + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            blocks.append(Block(start + 1, "\n".join(lines[start:end]) + "\n"))
            index = end
        index += 1
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
RUNNABLE = [block for block in BLOCKS if block.not_run is None and (HAS_TORCH or not block.needs_torch)]


def test_the_readme_has_python_blocks_and_each_skip_gives_its_reason() -> None:
    assert len(BLOCKS) >= 5
    for block in BLOCKS:
        if block.source.lstrip().lower().startswith("# not run"):
            assert block.not_run, f"README.md:{block.line}: '# Not run:' must say why"


def test_blocks_that_need_torch_run_where_torch_is_installed() -> None:
    torch_blocks = [block.line for block in BLOCKS if block.needs_torch and block.not_run is None]
    assert torch_blocks, "the quick start imports torch"
    if HAS_TORCH:
        assert set(torch_blocks) <= {block.line for block in RUNNABLE}


def test_readme_blocks_parse_readme_fences() -> None:
    text = "intro\n```python\nx = 1\n```\n\n```sh\nls\n```\n```python\n# Not run: a fragment\ny\n```\n"
    assert readme_blocks(text) == [Block(3, "x = 1\n"), Block(10, "# Not run: a fragment\ny\n")]
    assert readme_blocks(text)[1].not_run == "a fragment"
    assert Block(1, "import torch.distributed as dist\n").needs_torch
    assert Block(1, "from metakit.examples.engine import make\n").needs_torch
    assert not Block(1, "import metakit\n").needs_torch


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"README.md:{block.line}" for block in RUNNABLE])
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    script = tmp_path / f"readme_line_{block.line}.py"
    if block.session:
        script.write_text(DOCTEST.format(text=block.source, line=block.line - 1), encoding="utf-8")
    else:
        # Blank lines first, so that a traceback's line numbers are the README's.
        script.write_text("\n" * (block.line - 1) + block.source, encoding="utf-8")
    if block.distributed:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    else:
        command = [sys.executable, str(script)]
    env = {**os.environ, "PYTHONPATH": ""}  # metakit as installed, nothing of the tests
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=env)
    output = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
    if result.returncode != 0:
        pytest.fail(f"README.md:{block.line} failed:\n{output}", pytrace=False)


DOCTEST = """\
import doctest, sys
test = doctest.DocTestParser().get_doctest({text!r}, {{}}, "README.md", "README.md", {line})
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
runner.run(test)
sys.exit(1 if runner.failures else 0)
"""


@dataclass(frozen=True)
class Command:
    line: int
    argv: list[str]
    expected: str

    @property
    def needs_torch(self) -> bool:
        """Whether it names a module of metakit that imports torch (``show metakit.examples.engine:...``)."""
        return any(arg.startswith(("metakit.examples.engine", "metakit.distributed")) for arg in self.argv)


def console_commands(blocks: list[Block]) -> list[Command]:
    """The ``$ metakit ...`` and ``$ python -m metakit ...`` commands of console blocks, with their output."""
    commands = []
    for block in blocks:
        lines = block.source.splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("$ ")]
        for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
            argv = shlex.split(lines[start][2:])
            if argv[:1] == ["metakit"] or argv[:3] == ["python", "-m", "metakit"]:
                expected = "".join(f"{line}\n" for line in lines[start + 1 : end])
                commands.append(Command(block.line + start, argv, expected))
    return commands


COMMANDS = [
    command
    for command in console_commands(readme_blocks(README.read_text(encoding="utf-8"), "console"))
    if HAS_TORCH or not command.needs_torch
]


def test_the_readme_shows_commands_with_their_output() -> None:
    assert any(command.argv[0] == "metakit" for command in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=[f"README.md:{command.line}" for command in COMMANDS])
def test_readme_command_prints_what_the_readme_shows(command: Command, tmp_path: Path) -> None:
    argv = command.argv
    if argv[0] == "metakit":
        argv = [str(Path(sys.executable).parent / "metakit"), *argv[1:]]
    else:
        argv = [sys.executable, *argv[1:]]
    result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert result.stdout + result.stderr == command.expected, f"README.md:{command.line}: {shlex.join(command.argv)}"
