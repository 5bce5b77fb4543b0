"""The determinism audit (docs/planning.md, "Determinism audit"): a lineage computed again
(forced, or its output lost) whose output's checksum differs from the one recorded at its
last commit is flagged, on the action and the dataset, and counted in the history
statistics; a deterministic action never is."""

from __future__ import annotations

import shutil
import time
from typing import Any

from tests.support.system import Api, pingo

WRITE = (
    "import os, sys; os.makedirs(sys.argv[-1], exist_ok=True); open(os.path.join(sys.argv[-1], 'part'), 'wb').write({})"
)


def workflow(name: str, content: str, force: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "actions": [
            {"id": 1, "name": "write", "type": "SHELL", "command": ["python3", "-c", WRITE.format(content)],
             "forceComputation": force},
        ],
    }  # fmt: skip


def only(wf: dict[str, Any]) -> dict[str, Any]:
    (action,) = wf["actions"]
    return action


async def nondeterministic_total(system: Api, since: float) -> int:
    status, body = await system.request(
        "GET", "/api/v1/history/stats", params={"resolution": "1m", "from": str(since - 60), "to": str(time.time() + 1)}
    )
    assert status == 200, body
    return body["totals"]["actions_nondeterministic"]


async def test_a_random_output_recomputed_is_flagged_and_counted(system: Api):
    since = time.time()
    first = await system.run(workflow("dice", "os.urandom(32)"))
    assert first["state"] == "SUCCEEDED" and only(first)["nondeterministic"] is None
    again = await system.run(workflow("dice", "os.urandom(32)", force=True))
    assert again["state"] == "SUCCEEDED"
    flag = only(again)["nondeterministic"]
    assert flag is not None, only(again)
    status, dataset = await system.request("GET", f"/api/v1/datasets/{only(again)['hash']}")
    assert status == 200, dataset
    assert flag["checksum"] == dataset["checksum"] != flag["previousChecksum"]
    assert flag["previousAction"] == only(first)["id"]
    assert dataset["nondeterministicCount"] == 1
    assert await nondeterministic_total(system, since) == 1
    text = await pingo(system.base, "status", again["id"])
    assert f"≠ 1 non-deterministic: its output differs from its lineage's last ({flag['previousChecksum'][:12]}" in text
    # Invalidated by hand and computed again: compared with the output it withdrew.
    status, body = await system.request("POST", f"/api/v1/datasets/{only(again)['hash']}/invalidate")
    assert status == 200, body
    third = await system.run(workflow("dice", "os.urandom(32)"))
    assert only(third)["decision"] == "compute", only(third)
    assert only(third)["nondeterministic"]["previousChecksum"] == flag["checksum"], only(third)
    assert await nondeterministic_total(system, since) == 2


async def test_a_deterministic_output_recomputed_is_never_flagged(system: Api):
    since = time.time()
    body = workflow("steady", "b'the same bytes'")
    first = await system.run(body)
    forced = await system.run(workflow("steady", "b'the same bytes'", force=True))
    # Lost (its files removed behind Pingo's back) and computed again.
    status, dataset = await system.request("GET", f"/api/v1/datasets/{only(first)['hash']}")
    assert status == 200, dataset
    shutil.rmtree(dataset["path"])
    lost = await system.run(body)
    assert only(lost)["decision"] == "compute", only(lost)
    for wf in (first, forced, lost):
        assert wf["state"] == "SUCCEEDED" and only(wf)["nondeterministic"] is None, only(wf)
    status, dataset = await system.request("GET", f"/api/v1/datasets/{only(first)['hash']}")
    assert status == 200 and dataset["nondeterministicCount"] == 0 and dataset["computeCount"] == 3, dataset
    assert await nondeterministic_total(system, since) == 0
    assert "non-deterministic" not in await pingo(system.base, "status", lost["id"])
