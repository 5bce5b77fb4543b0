"""Spark tests: marked ``spark`` and skipped where spark-submit (``pingo[spark]``) is not
installed. The README's test command installs it, so they run there and in CI."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T", bound=Callable)


def spark(test: T) -> T:
    needs = pytest.mark.skipif(shutil.which("spark-submit") is None, reason="needs pip install 'pingo[spark]'")
    return pytest.mark.spark(needs(test))
