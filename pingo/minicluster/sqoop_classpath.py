"""``pingo sqoop-classpath``: the Java class path SQOOP actions run on with the local
executor (PINGO_SQOOP_CLASSPATH): Apache Sqoop 1.4.7's pinned jars and the PostgreSQL
JDBC driver (``sqoop/pom.xml``), ahead of Hadoop's (the mini cluster's ``pom.xml``), both
resolved into ~/.m2 the first time (docs/planning.md, "SQOOP actions")."""

from __future__ import annotations

import argparse
import os
import sys

from pingo.minicluster.classpath import SQOOP_POM, Unavailable, resolve_classpath


def sqoop_classpath(progress: bool = False) -> str:
    """Sqoop's jars first: its commons-cli must win over Hadoop's (sqoop/pom.xml says why)."""
    jars = [*resolve_classpath(progress, pom=SQOOP_POM, name="sqoop-1.4.7"), *resolve_classpath(progress)]
    return os.pathsep.join(dict.fromkeys(jars))


def main(argv: list[str] | None = None, prog: str = "pingo sqoop-classpath") -> int:
    argparse.ArgumentParser(
        prog=prog,
        description="Print the class path of SQOOP actions on the local executor, for PINGO_SQOOP_CLASSPATH "
        "(export PINGO_SQOOP_CLASSPATH=$(pingo sqoop-classpath)). Needs Java 17 and Maven the first time.",
    ).parse_args(argv)
    try:
        print(sqoop_classpath(progress=True))
    except Unavailable as exc:
        print(f"pingo: {exc}", file=sys.stderr)
        return 1
    return 0
