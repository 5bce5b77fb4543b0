"""The web view in a real browser (Debian's Chromium through Playwright), against the
services in process: what a person sees of workflows, storage and history."""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import time
from pathlib import Path

from playwright.async_api import Page, expect

from pingo.dev import all_services
from shared.runtime import Context, running
from shared.store import users
from tests.support.browser import browser, page, screenshot
from tests.support.system import Api, make_settings
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


# How many lines the text of an element takes on screen.
LINES = """e => {
  const r = document.createRange();
  r.selectNodeContents(e);
  return new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size;
}"""


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
        await expect(p.locator("#reused-from")).to_contain_text("taken from the stored dataset")
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
        # The attempts table keeps a job id on one line (cut with …), the whole id on hover.
        job = p.locator("table.attempts td.job")
        await expect(job).to_have_attribute("title", boom["jobId"])
        assert await job.evaluate(LINES) == 1
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


def round_steps(ticks: list[str]) -> bool:
    """Whether axis labels like ``0|2 KiB|4 KiB`` go up in equal steps of 1, 2 or 5 times a
    power of ten, in one unit."""
    units = {t.split(" ", 1)[1] for t in ticks[1:] if " " in t}
    values = [float(t.split(" ", 1)[0]) for t in ticks]
    steps = {round(b - a, 9) for a, b in itertools.pairwise(values)}
    if len(units) > 1 or len(steps) != 1 or values[0] != 0:
        return False
    (step,) = steps
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(math.isclose(mantissa, m) for m in (1, 2, 5))


async def test_reused_and_skipped_actions_say_what_happened_and_history_fits_the_data(system: Api) -> None:
    """A re-run's reused action says its output was taken from a stored dataset and links to
    the action and workflow that computed it; a skipped one says which descendant's reuse
    made it unneeded. The History page opens on a period that fits a new install's few
    minutes, with round ticks."""
    first = await system.run(diamond("ui-link"))
    again = await system.run(diamond("ui-link"))
    made = {a["localId"]: a for a in first["actions"]}
    by_local = {a["localId"]: a for a in again["actions"]}
    async with browser() as b, page(b) as p:
        await p.goto(f"{system.base}/workflows/{again['id']}")
        await p.locator(f'[data-action="{by_local[4]["id"]}"]').click()
        reused = p.locator("#reused-from")
        await expect(reused).to_contain_text(f"taken from the stored dataset {by_local[4]['hash'][:12]}")
        link = reused.locator("a")
        await expect(link).to_have_text(f"{made[4]['name']} in {first['name']}")
        await expect(p.locator("#details")).to_contain_text("reused: its output was already stored")
        for stale in ("decision", "its output was reused"):
            await expect(p.locator("#details")).not_to_contain_text(stale)
        await screenshot(p, "workflow-reused")

        # A skipped action: not computed because its reader took a stored dataset.
        await p.locator(f'[data-action="{by_local[2]["id"]}"]').click()
        skipped = p.locator("#skipped-because")
        await expect(skipped).to_contain_text("Skipped: not computed because what reads its output took a stored")
        await expect(skipped.locator("a")).to_have_text(by_local[4]["name"])
        await expect(p.locator("#details")).to_contain_text("Not run, so there is no log.")
        await screenshot(p, "workflow-skipped")
        await skipped.locator("a").click()  # selects the reusing action in place
        await expect(p.locator("#details h2")).to_contain_text(by_local[4]["name"])

        # The link opens the workflow that computed the dataset, that action selected.
        await link.click()
        await expect(p).to_have_url(f"{system.base}/workflows/{first['id']}?action={made[4]['id']}")
        await expect(p.locator("#details h2")).to_contain_text(made[4]["name"])
        await expect(p.locator(f'[data-action="{made[4]["id"]}"]')).to_have_class(re.compile(r"\bselected\b"))
        await expect(p.locator("#details")).to_contain_text("computed: no stored output had its lineage")

        # History, as a new install opens it: minutes of data, so minute buckets, not two days.
        await p.goto(system.base + "/history")
        await expect(p.locator(".switch a.active")).to_have_text("1m")
        await expect(p.locator("#period")).to_contain_text("1-minute buckets (fitted to the history there is)")
        for chart in ("actions", "seconds", "bytes"):
            ticks = (await p.locator(f"#chart-{chart}").get_attribute("data-y-ticks") or "").split("|")
            assert len(ticks) >= 2 and round_steps(ticks), (chart, ticks)
        assert (await p.locator("#chart-bytes").get_attribute("data-y-ticks") or "").endswith("KiB")
        await screenshot(p, "history-fitted")


async def test_a_running_workflow_updates_live_and_is_killed_from_its_page(system: Api) -> None:
    plan = await system.submit({"name": "slow", "actions": [shell_action(1, "ui-slow", seconds=60)]})
    (action,) = plan["actions"]
    async with browser() as b, page(b) as p:
        await p.goto(f"{system.base}/workflows/{plan['id']}")
        node = p.locator(f'[data-action="{action["id"]}"]')
        await expect(node).to_have_attribute("data-state", "RUNNING", timeout=20_000)
        # Its panel shows how long it has run so far, from the job's own start.
        await node.click()
        await expect(p.locator("#details")).to_contain_text(re.compile(r"took[\d.]+ \w+ so far"))
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


def talkative(label: str, seconds: float = 0.0) -> dict:
    """A SHELL action that writes a line to its stdout, sleeps, then makes its output."""
    script = (
        f"import os, sys, time; print('hello from {label}', flush=True); time.sleep({seconds}); "
        "os.makedirs(sys.argv[-1])"
    )
    return {"id": 1, "name": label, "type": "SHELL", "actionFolder": "examples/jobs",
            "command": ["python3", "-c", script, label]}  # fmt: skip


async def sign_in(p: Page, base: str, token: str) -> None:
    await p.goto(base + "/")
    await expect(p.locator("#sign-in")).to_be_visible()
    await p.locator("#token").fill(token)
    await p.locator("#sign-in button").click()
    await expect(p.locator("#workflows")).to_be_visible()


async def test_with_users_required_a_user_opens_her_workflow_its_logs_and_kills_it(
    tmp_path: Path, mongo_url: str
) -> None:
    """PINGO_AUTH=required, two users: every page of the web view opens (the pages hold no
    data; the API they call asks for the token), and a user works with her workflow from
    the list; another user's workflow page says it is not found."""
    settings = make_settings(tmp_path, mongo_url, auth="required")
    ctx = await Context.open(settings)
    async with running(ctx, all_services):
        alice_token = await users.add(ctx.store, "alice", False, time.time())
        bob_token = await users.add(ctx.store, "bob", False, time.time())
        alice = Api(settings, alice_token)
        await alice.open()
        try:
            done = await alice.run({"name": "alices-done", "actions": [talkative("alice-done")]})
            slow = await alice.submit({"name": "alices-slow", "actions": [talkative("alice-slow", seconds=60)]})
            assert done["state"] == "SUCCEEDED"
            base = alice.base
            async with browser() as b:
                async with page(b, expected=("401",)) as p:
                    await sign_in(p, base, alice_token)
                    # From the list to the finished workflow's page, by clicking its name.
                    await p.locator(f'#workflows tr[data-id="{done["id"]}"] a').click()
                    await expect(p).to_have_url(f"{base}/workflows/{done['id']}")
                    (action,) = done["actions"]
                    node = p.locator(f'[data-action="{action["id"]}"]')
                    await expect(node).to_have_attribute("data-state", "FINISHED")
                    await expect(p.locator(".head .state")).to_have_text("SUCCEEDED")
                    await screenshot(p, "users-workflow")
                    # Its action's logs.
                    await node.click()
                    await expect(p.locator("#log-stdout")).to_contain_text("hello from alice-done")
                    await expect(p.locator("#details")).to_contain_text(action["jobId"])
                    await screenshot(p, "users-action-logs")
                    # The running one, killed from its page.
                    await p.goto(base + "/")
                    await p.locator(f'#workflows tr[data-id="{slow["id"]}"] a').click()
                    running_node = p.locator(f'[data-action="{slow["actions"][0]["id"]}"]')
                    await expect(running_node).to_have_attribute("data-state", "RUNNING", timeout=20_000)
                    p.once("dialog", lambda dialog: dialog.accept())
                    await p.locator("#kill").click()
                    await expect(running_node).to_have_attribute("data-state", "KILLED", timeout=30_000)
                    await expect(p.locator(".head .state")).to_have_text("KILLED")
                    await screenshot(p, "users-killed")
                    # The other pages open too, drawn from the API with her token.
                    await p.goto(base + "/storage")
                    await expect(p.locator("#datasets")).to_be_visible()
                    await p.goto(base + "/history")
                    await expect(p.locator("#chart-actions")).to_be_visible()
                    assert (await alice.wait(slow["id"]))["state"] == "KILLED"

                # Bob sees none of hers: her workflow's page is a plain "not found".
                async with page(b, expected=("401", "404")) as p:
                    await sign_in(p, base, bob_token)
                    await expect(p.locator("#workflows tbody tr")).to_have_count(0)
                    await p.goto(f"{base}/workflows/{done['id']}")
                    await expect(p.locator("#not-found h1")).to_have_text("Workflow not found")
                    await expect(p.locator("#not-found")).to_contain_text(done["id"])
                    await expect(p.locator("#kill")).to_have_count(0)
                    await expect(p.locator("body")).not_to_contain_text('"status"')
                    await screenshot(p, "users-not-found")
                    # His run of the same action reuses her dataset: the page says it was
                    # another user's computation, and neither names nor links to it.
                    bob = Api(settings, bob_token)
                    await bob.open()
                    try:
                        his = await bob.run({"name": "bobs", "actions": [talkative("alice-done")]})
                    finally:
                        await bob.close()
                    (reused,) = his["actions"]
                    assert reused["state"] == "REUSED"
                    await p.goto(f"{base}/workflows/{his['id']}?action={reused['id']}")
                    await expect(p.locator("#reused-from")).to_contain_text("computed by another user's workflow")
                    await expect(p.locator("#reused-from a")).to_have_count(0)
                    await expect(p.locator("#details")).not_to_contain_text(done["id"])
                    await screenshot(p, "users-reused-from-another")
        finally:
            await alice.close()


async def test_with_users_required_every_page_is_html_and_the_api_still_asks(tmp_path: Path, mongo_url: str) -> None:
    """Each route of the web view answers its page without credentials, judged by the route
    it matched (``/workflows/{id}`` for any id), while the API and unknown paths do not."""
    settings = make_settings(tmp_path, mongo_url, auth="required")
    ctx = await Context.open(settings)
    async with running(ctx, all_services):
        api = Api(settings)
        await api.open()
        try:
            assert api.http is not None
            for path in ("/", "/workflows/wf-anything", "/storage", "/history",
                         "/history?resolution=1m", "/ui/common.js", "/ui/vendor/dagre.min.js"):  # fmt: skip
                async with api.http.get(api.base + path) as r:
                    assert r.status == 200, (path, r.status, await r.text())
                    assert re.match(r"(text/html|text/javascript|application/javascript)", r.content_type), path
            for path in ("/api/v1/workflows", "/api/v1/workflows/wf-anything", "/api/v1/datasets"):
                async with api.http.get(api.base + path) as r:
                    assert r.status == 401, (path, r.status)
                    assert r.content_type == "application/problem+json"
            async with api.http.get(api.base + "/workflows/a/b") as r:
                assert r.status in (401, 404), r.status  # not a page: no HTML for it
                assert r.content_type == "application/problem+json"
        finally:
            await api.close()


async def test_the_owner_pins_invalidates_and_deletes_datasets_from_the_storage_page(system: Api) -> None:
    done = await system.run({"name": "manage", "actions": [shell_action(1, "ui-m1"), shell_action(2, "ui-m2", [1])]})
    mid, leaf = (a["hash"] for a in done["actions"])
    held = await system.submit({"name": "holds", "actions": [shell_action(1, "ui-h1"),
                                                              shell_action(2, "ui-h2", [1], seconds=60)]})  # fmt: skip
    needed = held["actions"][0]["hash"]

    async def stored() -> bool:
        return (await system.db.datasets.find_one({"_id": needed}, {"state": 1}))["state"] == "STORED"

    while not await stored():
        await asyncio.sleep(0.1)
    async with browser() as b, page(b, expected=("409",)) as p:
        await p.goto(system.base + "/storage")
        _, body = await system.request("GET", "/api/v1/datasets")
        leaves = body["bytesByState"]["LEAF"]
        assert body["usedBytes"] >= body["bytesByState"]["STORED"] + leaves
        await expect(p.locator("#usage-held")).to_contain_text(f"{shown_bytes(body['usedBytes'])} of")
        row = p.locator(f'#datasets tr[data-hash="{mid}"]')
        await row.locator('button[data-verb="pin"]').click()
        await expect(row.locator('button[data-verb="unpin"]')).to_be_visible()
        assert (await system.db.datasets.find_one({"_id": mid}))["pinned"]
        p.on("dialog", lambda dialog: dialog.accept())
        await p.locator(f'#datasets tr[data-hash="{leaf}"] button[data-verb="invalidate"]').click()
        await expect(p.locator("#manage-message")).to_contain_text("invalidate done")
        await expect(p.locator(f'#datasets tr[data-hash="{leaf}"] td').nth(1)).to_have_text(
            re.compile("INVALIDATED|DELETING|DELETED")
        )
        # Still needed by the running workflow: refused, and the page says why.
        await p.locator(f'#datasets tr[data-hash="{needed}"] button[data-verb="delete"]').click()
        await expect(p.locator("#manage-message")).to_contain_text("still needed")
        await expect(p.locator("#manage-message")).to_have_class("error")
        await screenshot(p, "storage-manage")
        await p.locator(f'#datasets tr[data-hash="{mid}"] button[data-verb="delete"]').click()
        await expect(p.locator("#manage-message")).to_contain_text("delete done")
    await system.request("POST", f"/api/v1/workflows/{held['id']}/kill")
    _, detail = await system.request("GET", f"/api/v1/datasets/{mid}")
    assert [h["note"] for h in detail["history"] if h["note"] in ("pinned", "deleted by hand")] == [
        "pinned", "deleted by hand"]  # fmt: skip
