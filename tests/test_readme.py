"""Every ```python block of the guides runs, as a reader would paste it into a file.

The guides are the README, CONTRIBUTING.md and every page in docs/ (some
hold only ```sh and ```text blocks, which are not run).  Each block runs on
its own, in a fresh interpreter, in an empty directory.
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
the lines that follow it, up to the next ``$``; ``...`` stands for any text,
as in a doctest, so that a block may show part of a long output.

Relative links in the guides that this project writes by hand (the README,
CONTRIBUTING.md, docs/internals.md, docs/typing.md) must lead to a file that exists, and a
``#anchor`` to a heading of it.
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

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
GUIDES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
"""The documents whose code blocks run; docs/wire-format.md and docs/benchmarks.md hold none that do."""
LINKED = [README, ROOT / "CONTRIBUTING.md", ROOT / "docs" / "internals.md", ROOT / "docs" / "typing.md"]
"""The documents whose relative links are checked (docs/benchmarks.md links into .ci/, which the sdist leaves out)."""
NOT_RUN = re.compile(r"#\s*not run:\s*(?P<reason>\S.*)$", re.IGNORECASE)
NEEDS_TORCH = ("torch", "metakit.examples.engine", "metakit.distributed")
"""Modules whose import needs torch: a block that imports one runs only where torch is installed."""
HAS_TORCH = installed("torch") is not None


@dataclass(frozen=True)
class Block:
    line: int
    """The line of the document where the block's code starts."""
    source: str
    document: str = "README.md"
    """The document's path, from the project's root."""

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"

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


def readme_blocks(text: str, language: str = "python", document: str = "README.md") -> list[Block]:
    """The blocks of *language* (```python) in the text of *document*, in order."""
    blocks = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() == f"```{language}":
            start = index + 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            blocks.append(Block(start + 1, "\n".join(lines[start:end]) + "\n", document))
            index = end
        index += 1
    return blocks


def guide_blocks(language: str) -> list[Block]:
    """The blocks of *language* in every guide, in order."""
    return [
        block
        for path in GUIDES
        for block in readme_blocks(path.read_text(encoding="utf-8"), language, path.relative_to(ROOT).as_posix())
    ]


BLOCKS = guide_blocks("python")
RUNNABLE = [block for block in BLOCKS if block.not_run is None and (HAS_TORCH or not block.needs_torch)]


def test_the_readme_has_python_blocks_and_each_skip_gives_its_reason() -> None:
    assert len([block for block in BLOCKS if block.document == "README.md"]) >= 5
    for block in BLOCKS:
        if block.source.lstrip().lower().startswith("# not run"):
            assert block.not_run, f"{block.where}: '# Not run:' must say why"


def test_the_internals_page_has_blocks_that_run() -> None:
    assert [block for block in BLOCKS if block.document == "docs/internals.md" and block.not_run is None]


def test_blocks_that_need_torch_run_where_torch_is_installed() -> None:
    torch_blocks = [block.where for block in BLOCKS if block.needs_torch and block.not_run is None]
    assert torch_blocks, "the quick start imports torch"
    if HAS_TORCH:
        assert set(torch_blocks) <= {block.where for block in RUNNABLE}


def test_readme_blocks_parse_readme_fences() -> None:
    text = "intro\n```python\nx = 1\n```\n\n```sh\nls\n```\n```python\n# Not run: a fragment\ny\n```\n"
    assert readme_blocks(text) == [Block(3, "x = 1\n"), Block(10, "# Not run: a fragment\ny\n")]
    assert readme_blocks(text, "sh", "CONTRIBUTING.md") == [Block(7, "ls\n", "CONTRIBUTING.md")]
    assert readme_blocks(text)[1].not_run == "a fragment"
    assert Block(1, "import torch.distributed as dist\n").needs_torch
    assert Block(1, "from metakit.examples.engine import make\n").needs_torch
    assert not Block(1, "import metakit\n").needs_torch


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.where for block in RUNNABLE])
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    script = tmp_path / f"{Path(block.document).stem.lower()}_line_{block.line}.py"
    if block.session:
        script.write_text(DOCTEST.format(text=block.source, name=block.document, line=block.line - 1), encoding="utf-8")
    else:
        # Blank lines first, so that a traceback's line numbers are the document's.
        script.write_text("\n" * (block.line - 1) + block.source, encoding="utf-8")
    if block.distributed:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    else:
        command = [sys.executable, str(script)]
    env = {**os.environ, "PYTHONPATH": ""}  # metakit as installed, nothing of the tests
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=env)
    output = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
    if result.returncode != 0:
        pytest.fail(f"{block.where} failed:\n{output}", pytrace=False)


DOCTEST = """\
import doctest, sys
test = doctest.DocTestParser().get_doctest({text!r}, {{}}, {name!r}, {name!r}, {line})
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
runner.run(test)
sys.exit(1 if runner.failures else 0)
"""


@dataclass(frozen=True)
class Command:
    line: int
    argv: list[str]
    expected: str
    document: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"

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
                commands.append(Command(block.line + start, argv, expected, block.document))
    return commands


COMMANDS = [command for command in console_commands(guide_blocks("console")) if HAS_TORCH or not command.needs_torch]


def test_the_readme_shows_commands_with_their_output() -> None:
    assert any(command.argv[0] == "metakit" for command in COMMANDS)


def test_console_output_may_leave_out_lines() -> None:
    assert printed_as_shown("first\n...\nlast\n", "first\nsecond\nthird\nlast\n")
    assert not printed_as_shown("first\nlast\n", "first\nsecond\nlast\n")


def printed_as_shown(expected: str, printed: str) -> bool:
    """Whether *printed* is what a console block shows, ``...`` standing for any text."""
    return doctest.OutputChecker().check_output(expected, printed, doctest.ELLIPSIS)


@pytest.mark.parametrize("command", COMMANDS, ids=[command.where for command in COMMANDS])
def test_readme_command_prints_what_the_readme_shows(command: Command, tmp_path: Path) -> None:
    argv = command.argv
    if argv[0] == "metakit":
        argv = [str(Path(sys.executable).parent / "metakit"), *argv[1:]]
    else:
        argv = [sys.executable, *argv[1:]]
    result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    printed = result.stdout + result.stderr
    if not printed_as_shown(command.expected, printed):
        difference = doctest.OutputChecker().output_difference(
            doctest.Example(shlex.join(command.argv), command.expected), printed, doctest.ELLIPSIS
        )
        pytest.fail(f"{command.where}: {shlex.join(command.argv)}\n{difference}", pytrace=False)


LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor that GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    return {slug(match.group(1)) for match in re.finditer(r"^#+ (.*)$", text, re.MULTILINE)}


def test_slug_is_githubs() -> None:
    assert slug("Over any transport: `metakit.wire`") == "over-any-transport-metakitwire"
    assert slug("pyright and other checkers") == "pyright-and-other-checkers"


@pytest.mark.parametrize("path", LINKED, ids=[path.relative_to(ROOT).as_posix() for path in LINKED])
def test_relative_links_lead_somewhere(path: Path) -> None:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    broken = []
    for match in LINK.finditer(text):
        target = match.group("target")
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(linked):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{path.relative_to(ROOT)}: {broken}"
