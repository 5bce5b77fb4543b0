import posixpath

from shared.config import Settings
from shared.executors.base import Executor


def make_executor(settings: Settings) -> Executor:
    if settings.executor == "oozie":
        from shared.executors.oozie import OozieExecutor
        from shared.hadoop.oozie import Oozie
        from shared.hadoop.webhdfs import WebHdfs

        return OozieExecutor(
            Oozie(settings.oozie_url, settings.hdfs_user), WebHdfs(settings.webhdfs_url, settings.hdfs_user),
            settings.name_node, settings.job_tracker, settings.queue_name,
            posixpath.join(settings.hdfs_root, "oozie-apps"), settings.spark_master,
        )  # fmt: skip
    from shared.executors.local import LocalExecutor
    from shared.executors.sandbox import Sandbox

    return LocalExecutor(
        settings.jobs_dir, slots=settings.local_slots, spark_master=settings.spark_master,
        sandbox=Sandbox.for_settings(settings), env_pass=settings.job_env_pass,
        sqoop_classpath=settings.sqoop_classpath,
    )  # fmt: skip
