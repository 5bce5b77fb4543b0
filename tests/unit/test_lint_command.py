"""The lint step of ./scripts/test (scripts/lint) judges what the repository tracks: a
newcomer's untracked scratch file in the clone does not stop the test command."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUFF = str(Path(sys.executable).parent / "ruff")
BAD = "import os, sys\nx = 1;\n"  # unused imports, two on a line, a semicolon: ruff refuses it


def lint(clone: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(clone / "scripts" / "lint")], cwd=clone, env={"RUFF": RUFF, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def git(clone: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=clone, check=True, capture_output=True)


def make_clone(tmp_path: Path) -> Path:
    """A small checkout with the project's lint settings and lint command, and one module."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "lint", clone / "scripts" / "lint")
    shutil.copy2(ROOT / "pyproject.toml", clone / "pyproject.toml")
    (clone / "good.py").write_text('"""A tracked module."""\n\nVALUE = 1\n')
    return clone


def test_the_test_command_lints_through_scripts_lint() -> None:
    steps = [line.strip() for line in (ROOT / "scripts" / "test").read_text().splitlines()]
    assert "scripts/lint" in steps
    assert not [s for s in steps if s.startswith(".venv/bin/ruff")]  # no other lint of the whole tree


def test_an_untracked_scratch_file_does_not_fail_the_lint(tmp_path: Path) -> None:
    clone = make_clone(tmp_path)
    git(clone, "init", "-q")
    git(clone, "add", "good.py", "pyproject.toml", "scripts/lint")
    (clone / "scratch.py").write_text(BAD)  # the newcomer's own, untracked
    (clone / "notes").mkdir()
    (clone / "notes" / "try.py").write_text(BAD)
    done = lint(clone)
    assert done.returncode == 0, done.stdout + done.stderr

    # Once tracked, it is the project's: the lint refuses it.
    git(clone, "add", "scratch.py")
    done = lint(clone)
    assert done.returncode != 0 and "scratch.py" in done.stdout
    # A tracked file deleted from the work tree is not named to the linter.
    (clone / "scratch.py").unlink()
    assert lint(clone).returncode == 0


def test_outside_a_git_checkout_everything_is_linted(tmp_path: Path) -> None:
    clone = make_clone(tmp_path)
    assert lint(clone).returncode == 0
    (clone / "scratch.py").write_text(BAD)
    done = lint(clone)
    assert done.returncode != 0 and "scratch.py" in done.stdout


def test_a_checkout_without_python_files_passes(tmp_path: Path) -> None:
    clone = make_clone(tmp_path)
    (clone / "good.py").unlink()
    git(clone, "init", "-q")
    git(clone, "add", "pyproject.toml")
    (clone / "scratch.py").write_text(BAD)
    assert lint(clone).returncode == 0
