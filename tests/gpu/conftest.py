"""``tests/gpu`` needs CUDA: without it, its tests are not collected at all.

Not collected rather than skipped, since CI (``METAKIT_NO_SKIPS=1``) fails
a run in which any test is skipped, and CI has no GPU.  The run's header
says so.
"""

from __future__ import annotations

import importlib.metadata

import pytest


def _has_cuda() -> bool:
    # The installed metadata, not the import system: tests/torch would import as a namespace package.
    try:
        importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return False
    import torch

    return bool(torch.cuda.is_available())


_HAS_CUDA = _has_cuda()

collect_ignore_glob = [] if _HAS_CUDA else ["test_*.py"]


def pytest_report_header(config: pytest.Config) -> str:
    return "tests/gpu: " + (
        "CUDA found, the GPU tests run" if _HAS_CUDA else "no CUDA, the GPU tests are not collected"
    )
