"""What gets installed runs by itself: the wheel, and the service image built by
deploy/Dockerfile (there is no Docker engine here, so the image's wheel is built from the
files the Dockerfile copies), each installed into a clean virtual environment with only the
runtime dependencies and run from a directory outside the source tree. The import rules
that keep the installation this simple are in tests/unit/test_packaging.py.

The runtime dependencies are downloaded once, through pip's configured index, into a
wheelhouse under the user's cache directory; later runs install from it offline.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / "deploy" / "Dockerfile.dockerignore"
CONSTRAINTS = ROOT / "constraints.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = [p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]]
WHEELHOUSE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pingo-tests" / "wheelhouse"
FILLING = threading.Lock()  # one download into the wheelhouse at a time
# A clean environment: nothing of the source tree or of Pingo's settings leaks in.
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("PINGO_")}


# -- the wheel and the image, installed ---------------------------------------------------
def pip(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *map(str, args)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if check and proc.returncode:
        raise AssertionError(f"pip {' '.join(map(str, args))} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def offline(*args: str | Path, fill: list[str | Path]) -> None:
    """``pip *args`` from the wheelhouse alone; what it lacks is first downloaded into it
    (``fill``: the requirements to download, dependencies included)."""
    extra = ["--no-index", "--find-links", WHEELHOUSE]
    if pip(*args, *extra, check=False).returncode:
        with FILLING:
            pip("download", "--quiet", "--dest", WHEELHOUSE, *fill)
        pip(*args, *extra)


def copied_by_dockerfile() -> list[str]:
    """The sources of the build stage's COPY lines, each copied to the same relative place."""
    sources = []
    for line in DOCKERFILE.read_text().splitlines():
        if m := re.match(r"COPY\s+(?!--from)(.+)", line):
            *srcs, dest = m.group(1).split()
            assert dest == "./" or (len(srcs) == 1 and dest == f"./{srcs[0]}"), line
            sources += srcs
    return sources


def test_dockerignore_lets_in_exactly_what_the_dockerfile_copies() -> None:
    lines = [x.strip() for x in DOCKERIGNORE.read_text().splitlines() if x.strip() and not x.startswith("#")]
    assert lines[0] == "*"
    assert sorted(x[1:] for x in lines if x.startswith("!")) == sorted(copied_by_dockerfile())


def stage(sources: list[str], into: Path) -> Path:
    into.mkdir()
    for name in sources:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, into / name)
    return into


def build_wheel(src: Path, out: Path) -> Path:
    offline("wheel", "--quiet", "--no-deps", "--wheel-dir", out, src, fill=PYPROJECT["build-system"]["requires"])
    (wheel,) = out.glob("pingo-*.whl")
    return wheel


def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def top_level(wheel: Path) -> set[str]:
    names = wheel_files(wheel)
    assert any(re.fullmatch(r"evaluation/params/.+\.json", n) for n in names)  # package data
    return {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}


def runtime_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        lines = z.read(meta).decode().splitlines()
    return sorted(x.split(":", 1)[1].strip() for x in lines if x.startswith("Requires-Dist:") and "extra ==" not in x)


def runtime_venv(requirements: list[str]) -> Path:
    """A virtualenv (without pip) holding exactly ``requirements`` and their dependencies at
    the versions of constraints.txt, kept in the cache for this set only: a changed set gets
    a new environment, never a patched one."""
    pinned = ["-c", str(CONSTRAINTS)]  # as the Dockerfile installs: every version from the lock
    key = hashlib.sha256("\n".join([sys.version, *requirements, CONSTRAINTS.read_text()]).encode()).hexdigest()[:16]
    venv = WHEELHOUSE.parent / f"venv-{key}"
    if not (venv / "complete").exists():
        for old in WHEELHOUSE.parent.glob("venv-*"):
            shutil.rmtree(old)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        offline(
            "--python",
            venv / "bin" / "python",
            "install",
            "--quiet",
            *pinned,
            *requirements,
            fill=[*pinned, *requirements],
        )
        (venv / "complete").touch()
    return venv


def run_all(commands: list[list[str | Path]], cwd: Path) -> list[subprocess.CompletedProcess]:
    def run(cmd: list[str | Path]) -> subprocess.CompletedProcess:
        return subprocess.run(list(map(str, cmd)), cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(run, commands))


def subcommands() -> list[str]:
    from pingo.cli import parser

    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


@pytest.fixture
def cache() -> Iterator[None]:
    """The wheelhouse and the cached environment, one test session at a time."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with open(WHEELHOUSE.parent / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def test_wheel_and_image_install_and_run_outside_the_source_tree(tmp_path: Path, cache: None) -> None:
    from pingo.cli import service_names

    with ThreadPoolExecutor(2) as pool:
        image_build = pool.submit(build_wheel, stage(copied_by_dockerfile(), tmp_path / "image-src"), tmp_path / "i")
        full_wheel = build_wheel(stage(["pyproject.toml", "README.md", *PACKAGES], tmp_path / "src"), tmp_path / "w")
        image_wheel = image_build.result()
    assert top_level(image_wheel) == {"pingo", "services", "shared", "evaluation"}
    assert top_level(full_wheel) == {"pingo", "services", "shared", "evaluation", "hadoop_emulator"}
    assert runtime_requirements(image_wheel) == runtime_requirements(full_wheel)

    # The image: its wheel over the runtime dependencies alone (pip check: all of them).
    venv = runtime_venv(runtime_requirements(image_wheel))
    python, pingo = venv / "bin" / "python", venv / "bin" / "pingo"
    pip("--python", python, "install", "--quiet", "--no-deps", "--force-reinstall", image_wheel)
    pip("--python", python, "check")
    away = tmp_path / "elsewhere"  # the working directory: no source tree to import from
    away.mkdir()
    services = service_names()
    commands = subcommands()
    assert len(services) == 5 and {"dev", "serve", "submit", "emulate-hadoop", "evaluate", "whatif"} <= set(commands)
    where = "import pingo, services, shared, evaluation; print(pingo.__file__, services.__file__, shared.__file__)"
    results = run_all(
        [
            [python, "-c", where],
            [pingo, "--help"],
            *[[pingo, c, "--help"] for c in commands],
            *[[python, "-m", f"services.{s}", "--help"] for s in services],
        ],
        away,
    )
    located, top, *rest = results
    assert located.returncode == 0, located.stderr
    assert all(f.startswith(str(venv)) for f in located.stdout.split()), located.stdout
    assert top.returncode == 0 and top.stdout.startswith("usage: pingo"), top.stderr
    for c, r in zip(commands, rest[: len(commands)], strict=True):
        if c == "emulate-hadoop":  # left out of the image, and it says so
            assert r.returncode == 2 and "hadoop_emulator package is not installed here" in r.stderr, r.stderr
        else:
            assert r.returncode == 0 and r.stdout.startswith(f"usage: pingo {c}"), (c, r.stderr)
    for s, r in zip(services, rest[len(commands) :], strict=True):
        assert r.returncode == 0 and r.stdout.startswith(f"usage: python -m services.{s}"), (s, r.stderr)

    # A light install: no numpy, no matplotlib; `pingo evaluate` says what to install.
    light, evaluate = run_all(
        [[python, "-c", "import numpy"], [pingo, "evaluate", "--quick", "--out", tmp_path / "results"]], away
    )
    assert light.returncode == 1 and "No module named 'numpy'" in light.stderr, light.stderr
    assert evaluate.returncode == 2 and "pip install 'pingo[evaluation]'" in evaluate.stderr, evaluate.stderr
    assert "numpy and matplotlib" in evaluate.stderr and not (tmp_path / "results").exists()

    # The installed names (docs/operations.md, "Installed package names"): a project of the
    # user's with its own `shared`, as the working directory of a service, stops it at once.
    project = tmp_path / "project"
    (project / "shared").mkdir(parents=True)
    (project / "shared" / "__init__.py").write_text("")
    (shadowed,) = run_all([[python, "-m", "services.decision", "--help"]], project)
    assert shadowed.returncode == 1 and "Run from another directory" in shadowed.stderr, shadowed.stderr

    # The wheel of the whole source: the same, plus the Hadoop emulator.
    pip("--python", python, "install", "--quiet", "--no-deps", "--force-reinstall", full_wheel)
    emulator, standalone = run_all(
        [[pingo, "emulate-hadoop", "--help"], [python, "-m", "hadoop_emulator", "--help"]], away
    )
    assert emulator.returncode == 0 and emulator.stdout.startswith("usage: pingo emulate-hadoop"), emulator.stderr
    assert standalone.returncode == 0 and "--status-lag" in standalone.stdout, standalone.stderr
