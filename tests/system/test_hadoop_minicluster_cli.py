"""``pingo hadoop-minicluster --oozie``, as a user runs it (``real_hadoop``): it starts
Apache Hadoop's mini cluster and Apache Oozie on it, waits until both are healthy, prints
Pingo's settings for them (which work: WebHDFS answers, Pingo's root is Pingo's, Oozie
answers with its sharelibs), and Ctrl-C stops both, leaving nothing listening."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pingo.ports import listening
from tests.support.workflows import ROOT

pytestmark = pytest.mark.real_hadoop
START_TIMEOUT = 240


def test_the_command_prints_working_settings_and_ctrl_c_stops_the_cluster_and_oozie(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pingo.cli", "hadoop-minicluster", "--oozie", "--dir", str(tmp_path / "cluster")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        settings: dict[str, str] = {}
        deadline = time.monotonic() + START_TIMEOUT
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("export "):
                key, _, value = line.removeprefix("export ").strip().partition("=")
                settings[key] = value
            if line.startswith("# Ctrl-C") or time.monotonic() > deadline:
                break
        assert set(settings) == {"PINGO_STORAGE", "PINGO_WEBHDFS_URL", "PINGO_NAME_NODE", "PINGO_JOB_TRACKER",
                                 "PINGO_HDFS_USER", "PINGO_HDFS_ROOT", "PINGO_EXECUTOR",
                                 "PINGO_OOZIE_URL"}, proc.stderr.read()  # fmt: skip
        assert settings["PINGO_EXECUTOR"] == "oozie"
        root = settings["PINGO_HDFS_ROOT"]
        url = f"{settings['PINGO_WEBHDFS_URL']}/webhdfs/v1{root}?op=GETFILESTATUS&user.name=pingo"
        with urllib.request.urlopen(url, timeout=30) as resp:
            status = json.load(resp)["FileStatus"]
        assert (status["type"], status["owner"]) == ("DIRECTORY", settings["PINGO_HDFS_USER"])
        oozie = settings["PINGO_OOZIE_URL"]
        with urllib.request.urlopen(f"{oozie}/v2/admin/status", timeout=30) as resp:
            assert json.load(resp)["systemMode"] == "NORMAL"
        # The sharelibs it uploaded over WebHDFS: the launcher, and streaming for MAP_REDUCE.
        with urllib.request.urlopen(f"{oozie}/v2/admin/list_sharelib", timeout=30) as resp:
            assert {"oozie", "mapreduce-streaming"} <= {lib["name"] for lib in json.load(resp)["sharelib"]}
        webhdfs_port = int(settings["PINGO_WEBHDFS_URL"].rsplit(":", 1)[1])
        rm_port = int(settings["PINGO_JOB_TRACKER"].rsplit(":", 1)[1])
        oozie_port = int(urlsplit(oozie).port or 0)
        assert listening(webhdfs_port) and listening(rm_port) and listening(oozie_port)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert not listening(webhdfs_port) and not listening(rm_port) and not listening(oozie_port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
