"""The mini cluster's Java classpath, from the pinned ``pom.xml`` beside this module.

Maven resolves it once into the local repository (``~/.m2``); the list of jars it writes
is kept under ``~/.cache/pingo/minicluster`` by a digest of the pom, so a changed pin is
resolved again and an unchanged one costs nothing. Java and Maven must be installed: the
error says which is missing and how to install it."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

POM = Path(__file__).resolve().with_name("pom.xml")
OOZIE_POM = POM.parent / "oozie" / "pom.xml"
SQOOP_POM = POM.parent / "sqoop" / "pom.xml"
HADOOP_VERSION = re.search(r"<hadoop\.version>([^<]+)</hadoop\.version>", POM.read_text()).group(1)
# Maven's output when it fails: the last lines carry the reason.
ERROR_TAIL = 40


class Unavailable(RuntimeError):
    """The mini cluster cannot run here (no Java, no Maven, jars not resolvable, or it did
    not start); the message says why and what to do."""


def java_home() -> Path:
    """A Java 17 home: ``JAVA_HOME`` if set, else the one ``java`` on PATH belongs to. The
    NodeManager starts containers with ``$JAVA_HOME/bin/java``, so it must be a real home."""
    if home := os.environ.get("JAVA_HOME"):
        if (Path(home) / "bin" / "java").is_file():
            return Path(home)
        raise Unavailable(f"JAVA_HOME={home} has no bin/java")
    java = shutil.which("java")
    if java is None:
        raise Unavailable("Java 17 is not installed (apt-get install openjdk-17-jdk-headless); "
                          "the real Hadoop mini cluster needs it")  # fmt: skip
    return Path(java).resolve().parents[1]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pingo" / "minicluster"


def resolve_classpath(progress: bool = True, pom: Path = POM, name: str = f"hadoop-{HADOOP_VERSION}") -> list[str]:
    """The jars of ``pom`` (the mini cluster's by default; Oozie's is ``OOZIE_POM``, Sqoop's
    ``SQOOP_POM``), resolved
    by ``mvn dependency:build-classpath`` the first time (downloads into ``~/.m2``, about
    115 MB for the cluster) and read from the cache afterwards."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    listing = cache_dir() / f"{name}-{digest}.classpath"
    if listing.is_file():
        jars = listing.read_text().strip().split(os.pathsep)
        if jars and all(Path(j).is_file() for j in jars):
            return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise Unavailable("Maven is not installed (apt-get install maven); it resolves the real Hadoop "
                          "mini cluster's jars from Maven Central into ~/.m2")  # fmt: skip
    java_home()  # Maven needs Java too: say so first
    listing.parent.mkdir(parents=True, exist_ok=True)
    partial = listing.with_suffix(".partial")
    if progress:
        print(f"resolving the jars of {pom} into ~/.m2 (once) ...",
              file=sys.stderr, flush=True)  # fmt: skip
    argv = [mvn, "-B", "-q", "-f", str(pom), "dependency:build-classpath", f"-Dmdep.outputFile={partial}"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not partial.is_file():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-ERROR_TAIL:])
        raise Unavailable(f"Maven could not resolve {pom} (exit {done.returncode}):\n{tail}")
    partial.replace(listing)
    if progress:
        print("resolved.", file=sys.stderr, flush=True)
    return listing.read_text().strip().split(os.pathsep)
