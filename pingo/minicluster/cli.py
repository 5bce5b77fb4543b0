"""``pingo hadoop-minicluster``: start Apache Hadoop's real mini cluster (and with
``--oozie`` Apache Oozie on it), wait until it is healthy, print the settings Pingo needs,
and keep it up until Ctrl-C (or SIGTERM)."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from pingo.minicluster.classpath import HADOOP_VERSION, Unavailable
from pingo.minicluster.cluster import MiniCluster
from pingo.minicluster.oozie_server import OOZIE_VERSION, OozieServer


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=f"Run Apache Hadoop {HADOOP_VERSION}'s mini cluster (NameNode with WebHDFS, DataNode, "
        "ResourceManager, NodeManager, JobHistoryServer) on free local ports, for Pingo's WebHDFS storage. "
        "Needs Java 17 and Maven; the jars are resolved into ~/.m2 the first time.",
    )
    p.add_argument("--dir", type=Path, help="work folder for its data and logs (default: a temporary one, "
                   "removed on exit)")  # fmt: skip
    p.add_argument("--user", default="pingo", help="Pingo's HDFS user (PINGO_HDFS_USER): owns --root and may "
                   "act for other users (doas) (default: pingo)")  # fmt: skip
    p.add_argument("--root", default="/pingo", help="Pingo's folder on HDFS (PINGO_HDFS_ROOT) (default: /pingo)")
    p.add_argument("--heap", default="1g", help="the cluster JVM's -Xmx (default: 1g)")
    p.add_argument("--oozie", action="store_true", help=f"also run Apache Oozie {OOZIE_VERSION} on it (its jars "
                   "resolved into ~/.m2 the first time), for PINGO_EXECUTOR=oozie")  # fmt: skip
    return p


def main(argv: list[str] | None = None, prog: str = "pingo hadoop-minicluster") -> int:
    args = parser(prog).parse_args(argv)
    work = args.dir or Path(tempfile.mkdtemp(prefix="pingo-minicluster-"))
    cluster = MiniCluster(work.resolve(), hdfs_user=args.user, hdfs_root=args.root, heap=args.heap)
    oozie: OozieServer | None = None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        print(f"starting Apache Hadoop {HADOOP_VERSION}'s mini cluster in {work} ...", file=sys.stderr, flush=True)
        cluster.start(progress=True)
        print(f"healthy in {cluster.started_in:.1f} s, {cluster.rss() / 2**20:.0f} MB resident; "
              f"log {work / 'cluster.log'}", file=sys.stderr)  # fmt: skip
        settings = cluster.settings()
        if args.oozie:
            print(f"starting Apache Oozie {OOZIE_VERSION} on it ...", file=sys.stderr, flush=True)
            oozie = OozieServer((work / "oozie").resolve(), cluster)
            oozie.start()
            print(f"Oozie healthy in {oozie.started_in:.1f} s, {oozie.rss() / 2**20:.0f} MB resident; "
                  f"log {oozie.work / 'logs' / 'oozie.log'}", file=sys.stderr)  # fmt: skip
            settings |= {"PINGO_EXECUTOR": "oozie", "PINGO_OOZIE_URL": oozie.url}
            print("# Pingo's settings for this cluster and its Oozie")
        else:
            print("# Pingo's settings for this cluster (PINGO_EXECUTOR=oozie also needs an Oozie: --oozie)")
        for key, value in settings.items():
            print(f"export {key}={value}")
        # Not Pingo's settings: a Hadoop or Spark client's, so commented out here.
        print("# Hadoop and Spark clients on this cluster (spark-submit --master yarn):")
        for key, value in cluster.client_env().items():
            print(f"# export {key}={value}")
        print(f"# ResourceManager web {cluster.rm_web_url}, JobHistoryServer web {cluster.history_web_url}, "
              f"Hadoop configuration {cluster.conf_dir / 'core-site.xml'}")  # fmt: skip
        print("# Ctrl-C stops it", flush=True)
        watched: list[tuple[str, MiniCluster | OozieServer]] = [("mini cluster", cluster)]
        watched += [("Oozie", oozie)] if oozie is not None else []
        while not stop.wait(1.0):
            for name, server in watched:
                if server.process is None or server.process.poll() is not None:
                    print(f"{prog}: {name} exited; its log ends:\n{server.log_tail(20)}", file=sys.stderr)
                    return 1
        return 0
    except Unavailable as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    finally:
        if oozie is not None:
            oozie.stop()
        cluster.stop()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
