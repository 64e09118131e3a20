"""Shared test set-up.

With METAKIT_NO_SKIPS=1 (as `make check` runs the tests) a skipped test fails
the run: every test that is collected must run.  An expected failure
(``xfail``, strict: one that passes fails the run) runs, so it is no skip.

Once the tests are collected, the objects the test modules made are frozen
out of the garbage collector's walks (``gc.freeze``): many tests collect
again and again.

Hypothesis draws the same examples on every run (``derandomize``), so that
a run passes or fails on the code alone.  METAKIT_HYPOTHESIS=explore draws
new ones each run, to look for inputs no run has tried yet.
"""

from __future__ import annotations

import gc
import os

import pytest
from hypothesis import settings

settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("METAKIT_HYPOTHESIS", "fixed"))

_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # An xfailed test ran: pytest reports it as skipped, with ``wasxfail``
    # (and ``xfail_strict`` makes each one fail the run when it passes).
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("METAKIT_NO_SKIPS") == "1" and _skipped:
        print(f"\nMETAKIT_NO_SKIPS=1, but {len(_skipped)} tests were skipped: {_skipped}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_finish(session: pytest.Session) -> None:
    # Every test module is imported by now, torch with them where it is
    # installed (about 160,000 objects the collector tracks, torch alone),
    # and all of that lives to the end.
    # Frozen, they are left out of every later collection, so that the tests
    # that collect again and again (threads, lifetimes) walk only what the
    # tests themselves made.  A frozen object is never collected: what the
    # modules hold lives to the end anyway.
    gc.collect()
    gc.freeze()
