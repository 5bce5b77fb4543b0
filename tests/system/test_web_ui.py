"""The web view in a real browser (Debian's Chromium through Playwright), against the
services in process: what a person sees of workflows, storage and history."""

from __future__ import annotations

import time

from playwright.async_api import Page, expect

from shared.store import users
from tests.support.browser import browser, page, screenshot
from tests.support.system import Api
from tests.support.workflows import diamond, shell_action

# The state colours of pingo.css, as the browser computes them.
GREEN = "rgb(46, 158, 91)"  # finished
RED = "rgb(214, 69, 69)"  # failed
REUSED_FILL = "rgb(227, 246, 246)"


def failing() -> dict:
    boom = {"id": 2, "name": "boom", "type": "SHELL", "actionFolder": "examples/jobs",
            "command": ["python3", "fail.py", "the input was empty"], "parentActions": [{"id": 1}]}  # fmt: skip
    return {"name": "breaks", "actions": [shell_action(1, "ui-fine"), boom]}


def shown_bytes(n: float) -> str:
    """Pingo.bytes of common.js: binary units, one decimal below 10."""
    units, i, v = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], 0, float(n)
    while abs(v) >= 1024 and i < len(units) - 1:
        v, i = v / 1024, i + 1
    return f"{v:.{1 if i and abs(v) < 10 else 0}f} {units[i]}"


async def fill_of(p: Page, action_id: str) -> str:
    return await p.locator(f'[data-action="{action_id}"] rect').evaluate("r => getComputedStyle(r).fill")


async def test_workflows_storage_and_history_pages(system: Api) -> None:
    first = await system.run(diamond("ui"))
    again = await system.run(diamond("ui"))  # everything reused or skipped
    broken = await system.run(failing())
    assert (first["state"], again["state"], broken["state"]) == ("SUCCEEDED", "SUCCEEDED", "FAILED")
    async with browser() as b, page(b) as p:
        # The list: newest first, each with its state and outcome counts.
        await p.goto(system.base + "/")
        rows = p.locator("#workflows tbody tr")
        await expect(rows).to_have_count(3)
        assert [await r.get_attribute("data-id") for r in await rows.all()] == [broken["id"], again["id"], first["id"]]
        await expect(rows.nth(0).locator(".state")).to_have_text("FAILED")
        await expect(rows.nth(1).locator(".count.reused")).to_have_text("♻ 1")
        await screenshot(p, "workflows")

        # A computed diamond: four nodes, laid out in three levels, all finished (green).
        await p.goto(f"{system.base}/workflows/{first['id']}")
        nodes = p.locator("#dag .node")
        await expect(nodes).to_have_count(4)
        ys = {a["localId"]: await p.locator(f'[data-action="{a["id"]}"]').get_attribute("transform")
              for a in first["actions"]}  # fmt: skip
        level = {k: float(v.split(",")[1].rstrip(")")) for k, v in ys.items()}
        assert level[1] < level[2] == level[3] < level[4]
        for a in first["actions"]:
            assert await p.locator(f'[data-action="{a["id"]}"]').get_attribute("data-state") == "FINISHED"
            assert await fill_of(p, a["id"]) == GREEN
        await expect(p.locator("#kill")).to_be_disabled()  # it has ended
        await screenshot(p, "workflow-computed")

        # The same diamond again: its leaf reused (drawn apart), the rest skipped.
        await p.goto(f"{system.base}/workflows/{again['id']}")
        await expect(nodes).to_have_count(4)
        by_local = {a["localId"]: a for a in again["actions"]}
        leaf = p.locator(f'[data-action="{by_local[4]["id"]}"]')
        assert await leaf.get_attribute("data-decision") == "reused"
        assert await fill_of(p, by_local[4]["id"]) == REUSED_FILL
        await expect(leaf.locator("text.name")).to_contain_text("♻")
        for k in (1, 2, 3):
            assert await p.locator(f'[data-action="{by_local[k]["id"]}"]').get_attribute("data-decision") == "skipped"
        await leaf.click()
        await expect(p.locator("#details")).to_contain_text("its output was reused")
        await expect(p.locator("#details")).to_contain_text(by_local[4]["hash"])
        await screenshot(p, "workflow-reused")

        # The failing workflow: red node; its details show the error and its log.
        await p.goto(f"{system.base}/workflows/{broken['id']}")
        boom = next(a for a in broken["actions"] if a["name"] == "boom")
        await expect(p.locator(f'[data-action="{boom["id"]}"]')).to_have_attribute("data-state", "FAILED")
        assert await fill_of(p, boom["id"]) == RED
        await p.locator(f'[data-action="{boom["id"]}"]').click()
        await expect(p.locator("#log-stderr")).to_contain_text("fail.py: the input was empty")
        await expect(p.locator("#details")).to_contain_text(boom["jobId"])
        await screenshot(p, "workflow-failed")

        # Storage: the gauge against the budget, and the datasets of the runs.
        await p.goto(system.base + "/storage")
        _, body = await system.request("GET", "/api/v1/datasets")
        stored = body["bytesByState"].get("STORED", 0)
        capacity = system.settings.capacity_bytes
        await expect(p.locator("#usage-text")).to_have_text(
            f"{shown_bytes(stored)} of {shown_bytes(capacity)} ({100 * stored / capacity:.1f}%)"
        )
        await expect(p.locator("#gauge")).to_be_visible()
        table = p.locator("#datasets tbody tr")
        await expect(table).to_have_count(len(body["datasets"]))
        assert stored > 0 and len(body["datasets"]) >= 5
        await p.locator('th[data-sort="useCount"]').click()
        first_row = await table.first.get_attribute("data-hash")
        most_used = max(body["datasets"], key=lambda d: d["useCount"])
        assert next(d for d in body["datasets"] if d["hash"] == first_row)["useCount"] == most_used["useCount"]
        await expect(p.locator("#usage-over-time canvas")).to_have_count(1)
        await expect(p.locator("#deleted")).to_be_visible()
        for word in ("null", "undefined", "NaN"):
            await expect(p.locator("main")).not_to_contain_text(word)
        await screenshot(p, "storage")

        # History: the four charts, each drawn with its legend.
        await p.goto(system.base + "/history?resolution=1m")
        for chart in ("actions", "seconds", "bytes", "failures"):
            await expect(p.locator(f"#chart-{chart}")).to_be_visible()
        await expect(p.locator("#chart-actions canvas")).to_have_count(1)
        await expect(p.locator("#chart-actions .u-legend")).to_contain_text("computed")
        await expect(p.locator("#chart-failures .u-legend")).to_contain_text("action_failed")
        await expect(p.locator(".switch a.active")).to_have_text("1m")
        for word in ("null", "undefined", "NaN"):  # nothing unrendered leaks onto the page
            await expect(p.locator("main")).not_to_contain_text(word)
        await screenshot(p, "history")


async def test_a_running_workflow_updates_live_and_is_killed_from_its_page(system: Api) -> None:
    plan = await system.submit({"name": "slow", "actions": [shell_action(1, "ui-slow", seconds=60)]})
    (action,) = plan["actions"]
    async with browser() as b, page(b) as p:
        await p.goto(f"{system.base}/workflows/{plan['id']}")
        node = p.locator(f'[data-action="{action["id"]}"]')
        await expect(node).to_have_attribute("data-state", "RUNNING", timeout=20_000)
        p.once("dialog", lambda dialog: dialog.accept())
        await p.locator("#kill").click()
        # The page follows the kill without a reload.
        await expect(node).to_have_attribute("data-state", "KILLED", timeout=30_000)
        await expect(p.locator(".head .state")).to_have_text("KILLED")
    wf = await system.wait(plan["id"])
    assert wf["state"] == "KILLED"


async def test_with_users_on_the_page_asks_for_a_token(system: Api) -> None:
    token = await users.add(system.ctx.store, "carol", False, time.time())
    mine = Api(system.settings, token)
    await mine.open()
    try:
        wf = await mine.run({"name": "carols", "actions": [shell_action(1, "ui-carol")]})
    finally:
        await mine.close()
    async with browser() as b, page(b, expected=("401",)) as p:
        await p.goto(system.base + "/")
        await expect(p.locator("#sign-in")).to_be_visible()
        await p.locator("#token").fill(token)
        await p.locator("#sign-in button").click()
        await expect(p.locator(f'#workflows tr[data-id="{wf["id"]}"]')).to_be_visible()
        await expect(p.locator("#workflows tbody tr td").nth(3)).to_have_text("carol")
