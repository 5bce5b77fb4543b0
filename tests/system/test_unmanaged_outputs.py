"""An unmanaged output is the latest successful attempt's output: a re-run with a changed
parameter replaces it (locally and on WebHDFS), by renames, and a commit cut off halfway
through a replacement converges when it is retried."""

from __future__ import annotations

import os
from pathlib import Path

from shared.storage.local import LocalStorage
from shared.storage.names import aside_name
from tests.support.system import Api
from tests.support.workflows import shell_action
from tests.system.test_hadoop_system import Hadoop, hadoop, hdfs_action  # noqa: F401 - the fixture

REPORT = "reports/latest"


def report(label: str, action=shell_action) -> dict:
    """A managed source and an unmanaged report at a fixed path; ``label`` is the report's parameter."""
    return {
        "name": "report",
        "actions": [
            action(1, "un-src"),
            action(2, label, [1], outputPath=REPORT, isManaged=False),
        ],
    }


def lineage_label(text: str) -> str:
    return text.splitlines()[0]


async def test_an_unmanaged_rerun_replaces_the_output(system: Api) -> None:
    out = system.settings.allowed_output_roots[0] / REPORT
    seen = []
    for label in ("un-v1", "un-v2", "un-v1"):
        wf = await system.run(report(label))
        assert [(a["state"], a["decision"]) for a in wf["actions"]][1] == ("FINISHED", "compute")
        assert Path(wf["actions"][1]["outputPath"]) == out
        assert lineage_label((out / "_lineage").read_text()) == label
        seen.append((out / "part-00000").read_bytes())
        # Nothing of the replaced output is left next to it, and it stays the user's to change.
        assert sorted(p.name for p in out.parent.iterdir() if p.name != ".pingo-attempts") == ["latest"]
        assert os.access(out / "part-00000", os.W_OK) or os.geteuid() == 0
    assert seen[0] != seen[1] and seen[0] == seen[2]


async def test_on_hdfs_an_unmanaged_rerun_replaces_the_output(hadoop: Hadoop) -> None:  # noqa: F811
    out = f"/pingo/outputs/{REPORT}"
    for label in ("hun-v1", "hun-v2"):
        wf = await hadoop.run(report(label, hdfs_action))
        assert [(a["state"], a["decision"]) for a in wf["actions"]][1] == ("FINISHED", "compute")
        assert wf["actions"][1]["outputPath"] == out
        assert lineage_label(hadoop.hdfs_path(f"{out}/_lineage").read_text()) == label
        assert sorted(p.name for p in hadoop.hdfs_path(out).parent.iterdir() if p.name != ".pingo-attempts") == [
            "latest"
        ]


async def attempt_with(storage: LocalStorage, final: Path, n: int, content: str) -> Path:
    attempt = Path(storage.attempt_path(str(final), "wf-un.2", n))
    await storage.prepare(str(attempt))
    attempt.mkdir()
    (attempt / "part-00000").write_text(content)
    return attempt


async def test_a_replacement_cut_off_halfway_converges_on_retry(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "datasets")
    final = tmp_path / "outputs" / "report"
    assert await storage.commit(str(await attempt_with(storage, final, 1, "old")), str(final))

    # Cut off after the old output was moved aside, before the new one went in.
    attempt = await attempt_with(storage, final, 2, "new")
    aside = final.with_name(aside_name(final.name, attempt.name))
    os.rename(final, aside)
    assert await storage.commit(str(attempt), str(final), replace=True)
    assert (final / "part-00000").read_text() == "new" and not aside.exists()

    # Cut off after the new output went in, before the old one was removed: the retry removes it.
    attempt = await attempt_with(storage, final, 3, "newer")
    aside = final.with_name(aside_name(final.name, attempt.name))
    os.rename(final, aside)
    os.rename(attempt, final)
    assert await storage.commit(str(attempt), str(final), replace=True)
    assert (final / "part-00000").read_text() == "newer" and not aside.exists()

    # Without replace, the first commit still wins (managed datasets).
    attempt = await attempt_with(storage, final, 4, "late")
    assert not await storage.commit(str(attempt), str(final))
    assert (final / "part-00000").read_text() == "newer" and not attempt.exists()


async def test_on_hdfs_a_replacement_cut_off_halfway_converges_on_retry(tmp_path: Path) -> None:
    from hadoop_emulator import start_emulator
    from shared.hadoop.webhdfs import WebHdfs
    from shared.storage.webhdfs import WebHdfsStorage

    emu = await start_emulator(tmp_path / "hdfs")
    storage = WebHdfsStorage(WebHdfs(emu.namenode_url, "pingo"), "/pingo/datasets")
    hdfs = storage.hdfs
    final = "/pingo/outputs/report"

    async def attempt_with(n: int, content: bytes) -> str:
        attempt = storage.attempt_path(final, "wf-un.2", n)
        await storage.prepare(attempt)
        await hdfs.create(f"{attempt}/part-00000", content)
        return attempt

    async def names() -> list[str]:
        return sorted(
            s["pathSuffix"] for s in await hdfs.list("/pingo/outputs") if s["pathSuffix"] != ".pingo-attempts"
        )

    try:
        assert await storage.commit(await attempt_with(1, b"old"), final)
        attempt = await attempt_with(2, b"new")
        aside = f"/pingo/outputs/{aside_name('report', attempt.rsplit('/', 1)[1])}"
        assert await hdfs.rename(final, aside)
        assert await storage.commit(attempt, final, replace=True)
        assert await hdfs.open(f"{final}/part-00000") == b"new" and await names() == ["report"]

        attempt = await attempt_with(3, b"newer")
        aside = f"/pingo/outputs/{aside_name('report', attempt.rsplit('/', 1)[1])}"
        assert await hdfs.rename(final, aside) and await hdfs.rename(attempt, final)
        assert await storage.commit(attempt, final, replace=True)
        assert await hdfs.open(f"{final}/part-00000") == b"newer" and await names() == ["report"]

        # A plain replacement over a folder with contents: never nested inside it.
        assert await storage.commit(await attempt_with(4, b"newest"), final, replace=True)
        assert await hdfs.open(f"{final}/part-00000") == b"newest" and await names() == ["report"]
        assert [s["pathSuffix"] for s in await hdfs.list(final)] == ["part-00000"]

        assert not await storage.commit(await attempt_with(5, b"late"), final)
        assert await hdfs.open(f"{final}/part-00000") == b"newest"
    finally:
        await storage.close()
        await emu.stop()
