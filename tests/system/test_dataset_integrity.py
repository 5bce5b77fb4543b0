"""What a committed dataset was is recorded (size, file count, checksum), checked at the
level of PINGO_VERIFY_REUSE before a reuse, and by the reconcile sweep; what is missing or
changed becomes LOST and is computed again (docs/planning.md, "Lost datasets"). The same
on WebHDFS: tests/system/test_hadoop_system.py."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from shared.config import Settings
from shared.events import EventType
from shared.storage.local import remove_tree
from shared.store.transitions import decode
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT, decisions, shell_action


@pytest.fixture
def settings(request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str) -> Settings:
    """Overrides come from indirect parametrization."""
    return make_settings(tmp_path, mongo_url, **getattr(request, "param", {}))


def pair(prefix: str, leaf: str) -> dict:
    return {"name": prefix, "actions": [shell_action(1, f"{prefix}-mid"), shell_action(2, leaf, [1])]}


def expected_checksum(path: Path) -> str:
    """The local checksum, computed here independently: SHA-256 over each file's relative
    path and content SHA-256, in path order."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path)}\0{hashlib.sha256(f.read_bytes()).hexdigest()}\0".encode())
    return h.hexdigest()


def flip_last_byte(f: Path) -> None:
    """A change behind Pingo's back that keeps the size (the file is sealed read-only)."""
    data = f.read_bytes()
    os.chmod(f, 0o600)
    f.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))


async def wait_dataset(api: Api, h: str, state: str, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.time() + timeout
    while (doc := decode(await api.db.datasets.find_one({"_id": h})))["state"] != state:
        assert time.time() < deadline, f"dataset {h} still {doc['state']} after {timeout}s, not {state}"
        await asyncio.sleep(0.2)
    return doc


def lost_events(api: Api) -> list[str]:
    return [e.subject.dataset_hash for e in api.ctx.bus.published if e.type == EventType.DATASET_LOST]


def history(doc: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(h["state"], h.get("note")) for h in doc["history"]]


async def test_a_committed_dataset_records_its_size_files_and_checksum(system: Api) -> None:
    wf = await system.run(pair("rec", "rec-a"))
    assert wf["state"] == "SUCCEEDED"
    status, body = await system.request("GET", "/api/v1/datasets")
    assert status == 200
    listed = {d["hash"]: d for d in body["datasets"]}
    for a in wf["actions"]:
        d = listed[a["hash"]]
        path = Path(d["path"])
        files = [p for p in path.rglob("*") if p.is_file()]
        assert d["files"] == len(files) == 2  # part-00000 and _lineage
        assert d["size"] == sum(p.stat().st_size for p in files) == a["size"]
        assert d["checksum"] == expected_checksum(path)
        assert d["committedAt"] is not None
    # The CLI shows the start of each checksum.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pingo.cli", "datasets", "--url", system.base,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    rows = {line.split()[0]: line for line in out.decode().splitlines()[1:] if line.strip()}
    for a in wf["actions"]:
        row = rows[a["hash"][:12]]
        assert listed[a["hash"]]["checksum"][:8] in row.split() and " 2 " in row


@pytest.mark.parametrize("settings", [{"verify_reuse": "checksum"}], indirect=True)
async def test_with_checksum_verification_a_same_size_change_is_found_and_computed_again(system: Api) -> None:
    first = await system.run(pair("flip", "flip-a"))
    mid = first["actions"][0]["hash"]
    doc = await system.db.datasets.find_one({"_id": mid})
    part = Path(doc["path"]) / "part-00000"
    original = part.read_bytes()
    flip_last_byte(part)

    plan = await system.submit(pair("flip", "flip-b"))  # a changed child needs it
    assert decisions(plan) == {1: "compute", 2: "compute"}
    second = await system.wait(plan["id"])
    assert second["state"] == "SUCCEEDED", [(a["localId"], a["state"], a.get("error")) for a in second["actions"]]
    again = decode(await system.db.datasets.find_one({"_id": mid}))
    assert ("LOST", "lost") in history(again)
    assert again["lost_reason"] == "checksum" and again["found_size"] == doc["size"]
    assert again["found_checksum"] not in (None, doc["checksum"])
    assert lost_events(system) == [mid]
    # Computed again from scratch: the changed files were removed, not kept by the commit.
    assert again["state"] == "STORED" and again["checksum"] == doc["checksum"] and part.read_bytes() == original


async def test_with_size_verification_a_same_size_change_goes_unseen(system: Api) -> None:
    """The trade-off of the default: a change that keeps the size is not seen."""
    first = await system.run(pair("blind", "blind-a"))
    mid = first["actions"][0]["hash"]
    doc = await system.db.datasets.find_one({"_id": mid})
    flip_last_byte(Path(doc["path"]) / "part-00000")

    plan = await system.submit(pair("blind", "blind-b"))
    assert decisions(plan) == {1: "reuse", 2: "compute"}
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"
    again = decode(await system.db.datasets.find_one({"_id": mid}))
    assert again["state"] == "STORED" and "LOST" not in [s for s, _ in history(again)]
    assert lost_events(system) == []


@pytest.mark.parametrize("settings", [{"verify_reuse": "none"}], indirect=True)
async def test_with_no_verification_the_catalogue_is_trusted(system: Api) -> None:
    first = await system.run(pair("trust", "trust-a"))
    mid = first["actions"][0]["hash"]
    remove_tree(Path((await system.db.datasets.find_one({"_id": mid}))["path"]))

    plan = await system.submit(pair("trust", "trust-b"))
    assert decisions(plan) == {1: "reuse", 2: "compute"}  # planned on the catalogue's word
    await system.wait(plan["id"])  # what its reader then finds is not the planner's business


@pytest.mark.parametrize(
    "settings",
    [{"reconcile_interval": 0.5}, {"reconcile_interval": 0.5, "verify_reuse": "none"}],
    indirect=True,
    ids=["size", "none"],
)
async def test_the_reconcile_sweep_marks_a_deleted_dataset_lost(system: Api) -> None:
    """With any level, ``none`` included, the sweep checks that the files exist."""
    first = await system.run(pair("gone", "gone-a"))
    mid, leaf = (a["hash"] for a in first["actions"])
    doc = await system.db.datasets.find_one({"_id": mid})
    remove_tree(Path(doc["path"]))

    lost = await wait_dataset(system, mid, "LOST")
    assert ("LOST", "lost") in history(lost) and lost["lost_reason"] == "missing"
    assert lost_events(system) == [mid]
    assert (await system.db.datasets.find_one({"_id": leaf}))["state"] == "LEAF"  # whole: left alone

    plan = await system.submit(pair("gone", "gone-b"))
    assert decisions(plan) == {1: "compute", 2: "compute"}
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"
    assert (await system.db.datasets.find_one({"_id": mid}))["state"] == "STORED"


@pytest.mark.parametrize("settings", [{"reconcile_interval": 0.5, "verify_reuse": "checksum"}], indirect=True)
async def test_the_reconcile_sweep_removes_nothing_and_a_recomputation_replaces_the_leftover(system: Api) -> None:
    first = await system.run(pair("bent", "bent-a"))
    mid = first["actions"][0]["hash"]
    doc = await system.db.datasets.find_one({"_id": mid})
    part = Path(doc["path"]) / "part-00000"
    original = part.read_bytes()
    flip_last_byte(part)

    lost = await wait_dataset(system, mid, "LOST")
    assert lost["lost_reason"] == "checksum" and ("LOST", "lost") in history(lost)
    assert part.read_bytes() != original, "the sweep removes no file"

    plan = await system.submit(pair("bent", "bent-b"))
    assert decisions(plan)[1] == "compute"
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"
    again = await wait_dataset(system, mid, "STORED")
    # The recomputed output was committed, not the changed leftover it would have lost to.
    assert again["checksum"] == doc["checksum"] and part.read_bytes() == original
    await asyncio.sleep(1.5)  # a few more sweeps find it whole
    assert (await system.db.datasets.find_one({"_id": mid}))["state"] == "STORED"
