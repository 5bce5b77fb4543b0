"""Apache Hadoop's own mini cluster, for trying Pingo on real HDFS and YARN and for the
``real_hadoop`` tests (docs/hadoop-protocol.md, "The real mini cluster").

``pom.xml`` pins the jars; :mod:`.classpath` resolves them once into ``~/.m2`` with Maven;
:mod:`.cluster` starts ``MiniHadoopClusterManager`` on private ports and waits until it is
healthy; :mod:`.cli` is ``pingo hadoop-minicluster``. ``oozie/pom.xml`` and :mod:`.oozie_server` run
Apache Oozie 5.2.1 beside it (docs/hadoop-protocol.md, "Apache Oozie on this machine")."""

from pingo.minicluster.classpath import HADOOP_VERSION, Unavailable, resolve_classpath
from pingo.minicluster.cluster import MiniCluster

__all__ = ["HADOOP_VERSION", "MiniCluster", "Unavailable", "resolve_classpath"]
