"""The repo's ``stubs/`` are what ``python -m metakit stubgen`` writes for
the example engine metadata now: regenerate them when this fails."""

import subprocess
import sys
from pathlib import Path

from metakit.examples import engine
from metakit.stubgen import module_stub, stub_path

STUBS = Path(__file__).parents[2] / "stubs"


def test_stubs_are_current() -> None:
    committed = stub_path(STUBS, engine)
    assert committed.exists(), f"missing {committed}"
    assert committed.read_text() == module_stub(engine), (
        "stubs/ is stale: run python -m metakit stubgen metakit.examples.engine -o stubs"
    )


def test_cli_writes_the_same_stubs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "metakit", "stubgen", "metakit.examples.engine", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert stub_path(tmp_path, engine).read_text() == stub_path(STUBS, engine).read_text()
