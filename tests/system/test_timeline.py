"""A workflow's timeline tells its own story, from its submission, with readable actors."""

from __future__ import annotations

import asyncio
import re

from tests.support.dev import pingo, user_env
from tests.support.system import Api
from tests.support.workflows import shell_action

REPLICA = re.compile(r"\d+:[0-9a-f]{6}")  # a replica's host:pid:token


async def test_the_timeline_starts_at_the_submission_and_names_its_actors(system: Api) -> None:
    first = await system.run({"name": "maker", "actions": [shell_action(1, "tl-base")]})
    assert first["state"] == "SUCCEEDED"
    await asyncio.sleep(1.0)  # the base dataset's history is well before the second submission
    second = await system.run(
        {"name": "reuser", "actions": [shell_action(1, "tl-base"), shell_action(2, "tl-new", [1])]}
    )
    assert second["state"] == "SUCCEEDED"
    assert [a["state"] for a in second["actions"]] == ["REUSED", "FINISHED"]
    status, tl = await system.request("GET", f"/api/v1/workflows/{second['id']}/timeline")
    assert status == 200, tl
    rows = tl["transitions"]
    # Its own submission first: nothing of the base dataset's making by the first workflow.
    assert (rows[0]["kind"], rows[0]["id"], rows[0]["state"]) == ("workflow", second["id"], "PLANNING")
    assert all(r["at"] >= rows[0]["at"] for r in rows)
    assert not [r for r in rows if r["by"] and REPLICA.search(r["by"])], rows
    actors = {(r["kind"], r["state"]): r["by"] for r in rows}
    assert actors[("action", "SUBMITTED")] == "action_manager"
    assert actors[("action", "FINISHED")] == "callback"
    assert actors[("workflow", "PLANNING")] == "workflow_manager"  # users are off: no user name
    # `pingo timeline` counts from its submission.
    env = user_env(PINGO_URL=f"http://127.0.0.1:{system.settings.port}", COLUMNS="200")
    out = await asyncio.to_thread(pingo, "timeline", second["id"], env=env)
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines() if line.strip()]
    assert lines[1][:2] == ["0.000", "workflow"], out.stdout
    assert not REPLICA.search(out.stdout), out.stdout
