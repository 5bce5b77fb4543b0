"""`pingo datasets` and GET /api/v1/datasets say what made each dataset, and an output that
was never stored does not read as deleted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.dev import pingo, user_env
from tests.support.following import logging_conf
from tests.support.system import Api
from tests.support.workflows import shell_action


async def test_datasets_name_their_producer_and_never_stored_outputs(system: Api, tmp_path: Path) -> None:
    failing = shell_action(
        2, "ds-broken", [1], configurationParameters=logging_conf(tmp_path / "exec.log", SYNTH_FAIL="always")
    )
    wf = await system.run({"name": "lister", "actions": [shell_action(1, "ds-made", name="make-base"), failing]})
    assert [a["state"] for a in wf["actions"]] == ["FINISHED", "FAILED"]
    made, broken = (a["hash"] for a in wf["actions"])
    status, body = await system.request("GET", "/api/v1/datasets")
    assert status == 200, body
    by_hash = {d["hash"]: d for d in body["datasets"]}
    assert by_hash[made]["producedByName"] == "make-base"
    assert by_hash[made]["workflow"]["id"] == wf["id"] and by_hash[made]["neverStored"] is False
    # The failed action's output was planned, never committed: no file was kept or deleted.
    assert by_hash[broken]["state"] == "DELETED" and by_hash[broken]["neverStored"] is True
    env = user_env(PINGO_URL=f"http://127.0.0.1:{system.settings.port}", COLUMNS="200")
    out = await asyncio.to_thread(pingo, "datasets", env=env)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.split()}
    assert "make-base" in rows[made[:12]] and wf["id"] in rows[made[:12]], out.stdout
    assert "NEVER_STORED" in rows[broken[:12]] and "DELETED" not in rows[broken[:12]], out.stdout
