"""The kinds of test, one folder each (docs/testing.md): ``unit`` (pure code: no service,
broker, store or server process), ``system`` (the services over nx-27017 and RabbitMQ)
and ``emulator`` (the Hadoop emulator alone). Each test is marked with its folder's kind,
so ``-m unit`` selects the same tests as ``tests/unit``."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
KINDS = ("unit", "system", "emulator")


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
