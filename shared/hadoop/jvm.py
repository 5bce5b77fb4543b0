"""How a Hadoop JVM is started on Java 17, by the mini cluster and by the local executor's
SQOOP jobs alike."""

from __future__ import annotations

# The module openings Hadoop's own launch scripts give Java 17 (hadoop-functions.sh,
# hadoop_finalize_jpms_opts): the daemons' web apps (Guice, cglib) and HDFS need them.
JPMS_OPTS = ["-XX:+IgnoreUnrecognizedVMOptions"] + [
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in ("java.io", "java.lang", "java.lang.reflect", "java.math", "java.net", "java.text", "java.util",
                    "java.util.concurrent", "java.util.zip", "sun.security.util", "sun.security.x509")
]  # fmt: skip
