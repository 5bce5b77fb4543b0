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
    # The real mini cluster's tests last, in their order: the one cluster of the session then
    # starts after every other test and is stopped right after them, instead of taking
    # memory and heartbeats through the rest of the suite.
    real = [item for item in items if item.get_closest_marker("real_hadoop")]
    if real:
        items[:] = [item for item in items if not item.get_closest_marker("real_hadoop")] + real


@pytest.fixture(scope="session")
def real_hadoop_cluster(tmp_path_factory: pytest.TempPathFactory):
    """Apache Hadoop's real mini cluster (pingo/minicluster), one for the whole session:
    started by the first ``real_hadoop`` test, stopped at the end. Java 17 and Maven are
    required; without them the test fails saying so (it is never skipped)."""
    from pingo.minicluster import MiniCluster, Unavailable
    from tests.support.hadoop_targets import GROUPS, PROXY_GROUPS

    cluster = MiniCluster(tmp_path_factory.mktemp("minicluster"), groups=GROUPS, proxy_groups=",".join(PROXY_GROUPS))
    try:
        cluster.start()
    except Unavailable as exc:
        pytest.fail(f"the real Hadoop mini cluster is unavailable: {exc}")
    REAL_HADOOP["started"] = f"healthy in {cluster.started_in:.1f} s, {cluster.rss() / 2**20:.0f} MB resident"
    yield cluster
    REAL_HADOOP["ended"] = f"{cluster.rss() / 2**20:.0f} MB resident at the end"
    cluster.stop()


@pytest.fixture(scope="session")
def real_oozie(real_hadoop_cluster, tmp_path_factory: pytest.TempPathFactory):
    """Apache Oozie 5.2.1 on the session's mini cluster (pingo/minicluster/oozie_server.py),
    one for the whole session: every real-Oozie test module uses it."""
    from pingo.minicluster import Unavailable
    from pingo.minicluster.oozie_server import OozieServer

    server = OozieServer(tmp_path_factory.mktemp("oozie"), real_hadoop_cluster)
    try:
        server.start()
    except Unavailable as exc:
        pytest.fail(f"Apache Oozie could not start: {exc}")
    REAL_OOZIE.append(f"Apache Oozie: healthy in {server.started_in:.1f} s, {server.rss() / 2**20:.0f} MB resident")
    yield server
    server.stop()


# What the session's mini cluster cost, for the summary (the budget in docs/testing.md).
REAL_HADOOP: dict[str, str] = {}
REAL_OOZIE: list[str] = []


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if REAL_HADOOP:
        terminalreporter.write_line(f"real Hadoop mini cluster: {', '.join(REAL_HADOOP.values())}")
    for line in REAL_OOZIE:
        terminalreporter.write_line(line)
