"""A workflow ends when its last action does, told by its count of live actions
(``open_actions``, kept by the moves' effects), not by reading every action after each
end; a count a crash left wrong is corrected by the repair sweep (docs/state-machines.md,
"Workflow")."""

from __future__ import annotations

from tests.support.system import Api
from tests.support.workflows import diamond, shell_action


async def test_a_workflow_settles_when_its_count_of_live_actions_reaches_zero(system: Api) -> None:
    plan = await system.submit(diamond("count"))
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    doc = await system.db.workflows.find_one({"_id": plan["id"]})
    assert doc["open_actions"] == 0
    # Reused next time: nothing live, so it is SUCCEEDED at once and counts nothing.
    again = await system.submit(diamond("count"))
    assert again["state"] == "SUCCEEDED"


async def test_a_count_a_crash_left_too_high_is_corrected_by_the_repair_sweep(system: Api) -> None:
    plan = await system.submit({"name": "lost-count", "actions": [shell_action(1, "lost-count", seconds=0.5)]})
    # As if a process died between an action's end and the count's update: one too many.
    await system.db.workflows.update_one({"_id": plan["id"]}, {"$inc": {"open_actions": 1}})
    wf = await system.wait(plan["id"], timeout=60)
    assert wf["state"] == "SUCCEEDED"  # found by the sweep once the workflow was quiet, not left RUNNING
