"""On the Hadoop path (the emulator's Oozie and WebHDFS, the services as processes): a
computed action says what changed since it was last computed, and a recomputation whose
output's HDFS checksums differ from its lineage's last commit is flagged non-deterministic
(docs/planning.md, "Why an action is computed", "Determinism audit")."""

from __future__ import annotations

import copy
from typing import Any

from tests.system.test_early_cutoff import history
from tests.system.test_hadoop_system import Hadoop, hadoop  # noqa: F401  (the fixture)

DICE = """import os, sys
out = sys.argv[-1]
if out.startswith("hdfs://"):
    out = "/" + out.split("/", 3)[3]
path = os.path.join(os.environ.get("PINGO_EMULATOR_HDFS_ROOT", "/"), out.lstrip("/"))
os.makedirs(path, exist_ok=True)
with open(os.path.join(path, "part-00000"), "wb") as f:
    f.write(os.urandom(32) if sys.argv[1] == "random" else b"the same bytes")
"""


def dice(aid: int, how: str, force: bool = False) -> dict[str, Any]:
    return {
        "id": aid, "name": f"dice-{how}", "type": "SHELL", "actionFolder": "jobs", "command": ["python3", "dice.py"],
        "additionalInput": [{"value": how}], "forceComputation": force,
    }  # fmt: skip


def by_local(wf: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {a["localId"]: a for a in wf["actions"]}


async def test_misses_and_non_determinism_on_the_cluster(hadoop: Hadoop) -> None:  # noqa: F811
    (hadoop.emulator.root / "pingo" / "actions" / "jobs" / "dice.py").write_text(DICE)
    body = {"name": "hd-audit", "actions": [dice(1, "random"), dice(2, "steady")]}
    first = await hadoop.run(body)
    assert first["state"] == "SUCCEEDED", [(a["localId"], a["error"]) for a in first["actions"]]
    assert {a["miss"]["summary"] for a in first["actions"]} == {"never computed before"}

    forced = copy.deepcopy(body)
    for a in forced["actions"]:
        a["forceComputation"] = True
    before = await history(hadoop, first["createdAt"])
    again = by_local(await hadoop.run(forced))
    assert again[1]["state"] == again[2]["state"] == "FINISHED"
    assert again[1]["nondeterministic"] is not None, again[1]
    assert again[1]["nondeterministic"]["previousAction"] == by_local(first)[1]["id"]
    assert again[2]["nondeterministic"] is None, again[2]
    after = await history(hadoop, first["createdAt"])  # the random one counted, the steady one not
    assert after["actions_nondeterministic"] - before["actions_nondeterministic"] == 1, (before, after)
    assert "same lineage" in again[2]["miss"]["summary"]

    changed = copy.deepcopy(body)
    changed["actions"][1]["command"] = ["python3", "./dice.py"]
    wf = by_local(await hadoop.run(changed))
    assert wf[1]["decision"] == "reuse" and wf[1]["miss"] is None
    assert [c["field"] for c in wf[2]["miss"]["changes"]] == ["command"]
    # A cacheVersion, planted alone: the dry run names it, and nothing else.
    versioned = copy.deepcopy(changed)
    versioned["actions"][0]["cacheVersion"] = "fix-2"
    code, dry = await hadoop.request("POST", "/api/v1/workflows?dryRun=true", json=versioned)
    assert code == 200 and by_local(dry)[1]["decision"] == "compute", dry
    (change,) = by_local(dry)[1]["miss"]["changes"]
    assert change == {"field": "cacheVersion", "old": None, "new": "fix-2", "parent": None}
