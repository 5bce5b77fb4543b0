"""One family of errors (shared/errors.py): every error the services raise on purpose is a
PingoError, each port declares what its adapters raise, and a refusal is a type, not an
attribute looked up by name."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from shared.errors import CannotStart, PingoError, Refused
from shared.executors.base import ExecutorError, JobFenced, JobRefused, LogsGone
from shared.hadoop.oozie import OozieError
from shared.hadoop.webhdfs import FileNotFound, HdfsError
from shared.storage.base import FolderTooLarge, StorageError, StorageRefused

ROOT = Path(__file__).resolve().parents[2]


# Moved by other work of the same change; they join the family where they land.
def pingo_modules() -> list[str]:
    """The services and their core; not the client (pingo/), which imports none of them."""
    return [
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for top in ("shared", "services")
        for p in sorted((ROOT / top).rglob("*.py"))
        if p.name != "__init__.py" and "__main__" not in p.name
    ]


def test_every_error_pingo_defines_is_a_pingo_error() -> None:
    strays = []
    for name in pingo_modules():
        module = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseException):
                if not issubclass(cls, PingoError):
                    strays.append(f"{name}.{cls_name}")
    assert strays == []


def test_the_ports_declare_their_errors_under_their_own_base() -> None:
    assert all(issubclass(e, ExecutorError) for e in (JobRefused, LogsGone, JobFenced))
    assert all(issubclass(e, StorageError) for e in (StorageRefused, FolderTooLarge))
    assert issubclass(JobRefused, Refused) and issubclass(StorageRefused, Refused)
    assert not issubclass(CannotStart, Refused)  # a configuration is never a refusal


@pytest.mark.parametrize(
    ("status", "exception", "refused", "kind"),
    [
        (403, "AccessControlException", True, StorageRefused),
        (403, "AuthorizationException", True, StorageRefused),
        (403, "StandbyException", False, HdfsError),  # a standby NameNode: ask the other one
        (404, "FileNotFoundException", False, FileNotFound),
        (500, "IOException", False, HdfsError),
    ],
)
def test_an_hdfs_answer_is_a_refusal_by_its_type(status: int, exception: str, refused: bool, kind: type) -> None:
    error = HdfsError.of(status, exception, "m", "MKDIRS", "/p")
    assert isinstance(error, kind) and isinstance(error, HdfsError)
    assert isinstance(error, Refused) is refused is error.refusal


@pytest.mark.parametrize(("status", "refused"), [(401, True), (403, True), (400, False), (500, False), (0, False)])
def test_an_oozie_answer_is_a_refusal_by_its_type(status: int, refused: bool) -> None:
    error = OozieError.of(status, "E1400", "m", "submit")
    assert isinstance(error, OozieError)
    assert isinstance(error, JobRefused) is refused is error.refusal


def test_no_refusal_is_looked_up_by_name() -> None:
    found = []
    for top in ("shared", "services", "pingo"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                by_name = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                if (
                    by_name
                    and node.func.id in ("getattr", "hasattr")
                    and any(  # type: ignore[union-attr]
                        isinstance(a, ast.Constant) and a.value == "refusal"
                        for a in node.args  # type: ignore[union-attr]
                    )
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
