"""The kinds of test, one folder each (docs/testing.md): ``unit`` (pure code: no service,
broker, store or server process), ``system`` (the services over nx-27017 and RabbitMQ)
and ``emulator`` (the Hadoop emulator alone). Each test is marked with its folder's kind,
so ``-m unit`` selects the same tests as ``tests/unit``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
KINDS = ("unit", "system", "emulator")


def pytest_configure(config: pytest.Config) -> None:
    # The test jobs are `python3 ...` found on PATH, and every service, job runner and
    # emulator the tests start inherits this environment. The interpreter running the
    # tests comes first, as in an activated virtualenv: a version-manager shim (pyenv's
    # `python3` is a bash script running `pyenv exec`) costs ~0.1 s of CPU per job, which
    # over the thousands of jobs of the suite was minutes.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        path = Path(item.path).resolve()
        if not path.is_relative_to(TESTS):
            continue
        kind = path.relative_to(TESTS).parts[0]
        if kind in KINDS:
            item.add_marker(kind)
        else:
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(f"tests outside tests/{{{','.join(KINDS)}}}/: {', '.join(misplaced[:5])}")
