"""Per-action retries and timeouts through the Oozie executor against the Hadoop emulator
(the five services as processes, WebHDFS storage): Pingo resubmits a failed attempt as a
new Oozie job after its delay, and kills the Oozie job of an attempt past its timeout
(docs/state-machines.md, "Retries and timeouts"; local counterpart: test_retries.py). A
retry after one failure and a timeout also run on the real cluster and real Oozie, in
test_hadoop_two_targets.py; these stay here for what the emulator counts (its jobs of an
action, the hung job's processes gone)."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.system import test_hadoop_system
from tests.system.test_hadoop_following import oozie_jobs, oozie_status
from tests.system.test_hadoop_system import Hadoop, hdfs_action
from tests.system.test_retries import gone, processes_of

hadoop = test_hadoop_system.hadoop  # the fixture: five services as processes and the emulator


async def test_a_job_that_fails_twice_then_succeeds_on_the_cluster(hadoop: Hadoop, tmp_path: Path) -> None:
    marker, label = tmp_path / "attempts", f"hflaky-{uuid.uuid4().hex[:6]}"
    conf = [{"key": "SYNTH_FAIL_ONCE", "value": str(marker)}, {"key": "SYNTH_FAIL_TIMES", "value": "2"}]
    action = hdfs_action(1, label, configurationParameters=conf, retries={"count": 2, "delaySeconds": 0.2})
    wf = await hadoop.run({"name": label, "actions": [action]}, timeout=60)
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    (a,) = wf["actions"]
    assert a["attempts"] == 3 and [r["outcome"] for r in a["attemptLog"]] == ["failed", "failed", "succeeded"]
    assert all(r["executor"] == "oozie" for r in a["attemptLog"])
    # Each attempt was an Oozie workflow job of its own: two failed, the third succeeded.
    jobs = {j.id: j for j in oozie_jobs(hadoop, label)}
    assert [r["jobId"] in jobs for r in a["attemptLog"]] == [True] * 3
    assert [jobs[r["jobId"]].status for r in a["attemptLog"]] == ["KILLED", "KILLED", "SUCCEEDED"]
    assert marker.read_text().splitlines() == ["failed", "failed"]
    assert (hadoop.hdfs_path(a["outputPath"]) / "part-00000").is_file()


async def test_a_hanging_job_on_the_cluster_is_killed_at_its_timeout(hadoop: Hadoop) -> None:
    label = f"hhang-{uuid.uuid4().hex[:6]}"
    action = hdfs_action(1, label, seconds=60, timeoutSeconds=1)
    wf = await hadoop.run({"name": label, "actions": [action]}, timeout=30)
    assert wf["state"] == "FAILED"
    (a,) = wf["actions"]
    assert a["reason"] == "timed_out" and a["error"] == "timed out after 1 s"
    assert [(r["outcome"], r["error"]) for r in a["attemptLog"]] == [("timed_out", "timed out after 1 s")]
    assert await oozie_status(hadoop, a["attemptLog"][0]["jobId"]) == "KILLED"
    assert await gone(label), f"the timed-out job still runs: {processes_of(label)}"
