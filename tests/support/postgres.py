"""A PostgreSQL server of the tests' own, from Debian's ``postgresql`` binaries: a fresh
cluster (``initdb``) in a temporary folder on a free port of 127.0.0.1, trusting local
connections, stopped and thrown away afterwards. PostgreSQL refuses to run as root, so as
root it runs as the ``postgres`` user the package creates, in a folder of its own under
the temporary directory (pytest's are private to root)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pingo.ports import free_ports

USER = "pingo"  # the database's superuser, made by initdb
DATABASE = "postgres"
START_TIMEOUT = 60


@dataclass(frozen=True)
class Postgres:
    port: int
    bin: Path

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{DATABASE}"

    def sql(self, text: str) -> str:
        """Run ``text`` with psql; its output, unaligned and without headers."""
        done = subprocess.run(
            [str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", DATABASE,
             "-v", "ON_ERROR_STOP=1", "-qAt", "-c", text],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL is not installed (apt-get install postgresql)")
    return Path(found[-1]).parent


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    binaries = _binaries()
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    work = Path(tempfile.mkdtemp(prefix="pingo-postgres-"))
    if as_root:
        shutil.chown(work, "postgres")
    data, port = work / "data", free_ports(1)[0]

    def run(*argv: str) -> None:
        done = subprocess.run([*prefix, *argv], capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{argv[0]}: {done.stdout}{done.stderr}"

    run(str(binaries / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "--no-sync")
    options = f"-p {port} -k {work} -c listen_addresses=127.0.0.1 -c fsync=off"
    ctl = str(binaries / "pg_ctl")
    run(ctl, "-D", str(data), "-o", options, "-l", str(work / "postgres.log"), "-w", "-t", str(START_TIMEOUT), "start")
    try:
        yield Postgres(port, binaries)
    finally:
        run(ctl, "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(work, ignore_errors=True)
