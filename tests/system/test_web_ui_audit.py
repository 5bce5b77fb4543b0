"""The DAG page says why an action was computed (what changed since it was last computed,
docs/planning.md "Why an action is computed") and flags a non-deterministic one
("Determinism audit"), in a real browser (Debian's Chromium through Playwright)."""

from __future__ import annotations

import copy
import re
from typing import Any

from playwright.async_api import expect

from tests.support.browser import browser, page, screenshot
from tests.support.system import Api
from tests.support.workflows import shell_action

RANDOM = (
    "import os, sys; os.makedirs(sys.argv[-1], exist_ok=True); open(sys.argv[-1] + '/part', 'wb').write(os.urandom(32))"
)


def audited() -> dict[str, Any]:
    dice = {"id": 2, "name": "dice", "type": "SHELL", "command": ["python3", "-c", RANDOM], "parentActions": [1]}
    return {"name": "audited", "actions": [shell_action(1, "ui-source"), dice, shell_action(3, "ui-child", [1])]}


def node(wf: dict[str, Any], local_id: int) -> str:
    return f'[data-action="{wf["id"]}.{local_id}"]'


async def test_the_dag_page_says_what_changed_and_flags_a_non_deterministic_action(system: Api) -> None:
    body = audited()
    first = await system.run(body)
    changed = copy.deepcopy(body)
    changed["actions"][0]["additionalInput"][2]["value"] = "8"
    second = await system.run(changed)
    forced = copy.deepcopy(changed)
    forced["actions"][1]["forceComputation"] = True
    third = await system.run(forced)
    versioned = copy.deepcopy(changed)  # the source's key is new, its bytes are not
    versioned["actions"][0]["cacheVersion"] = "2"
    fourth = await system.run(versioned)
    assert [w["state"] for w in (first, second, third, fourth)] == ["SUCCEEDED"] * 4
    assert fourth["actions"][2]["state"] == "REUSED", fourth["actions"][2]
    async with browser() as b, page(b) as p:
        # What changed: the source's input value; the dice names its parent, a link to it.
        await p.goto(f"{system.base}/workflows/{second['id']}")
        await p.locator(node(second, 1)).click()
        why = p.locator("#why-computed")
        await expect(why.locator("tr[data-field]")).to_have_count(1)
        await expect(why.locator('tr[data-field="additionalInput[2].value"] td').nth(1)).to_have_text("4")
        await expect(why.locator('tr[data-field="additionalInput[2].value"] td').nth(2)).to_have_text("8")
        await expect(why.locator("a").first).to_have_text(first["id"])
        await screenshot(p, "workflow-why-computed")
        await p.locator(node(second, 2)).click()
        await expect(p.locator('#why-computed tr[data-field="parent 1"] a')).to_have_text("ui-source")
        await expect(p.locator("#nondeterministic")).to_have_count(0)
        assert "nondeterministic" not in (await p.locator(node(second, 2)).get_attribute("class") or "")

        # The dice forced again made other bytes: flagged on its node and in its details.
        await p.goto(f"{system.base}/workflows/{third['id']}")
        dice = p.locator(node(third, 2))
        await expect(dice).to_have_class(re.compile(r"\bnondeterministic\b"))
        await expect(dice.locator("text.name")).to_have_text("≠ dice")
        await dice.click()
        await expect(p.locator("#nondeterministic")).to_contain_text("Non-deterministic")
        await expect(p.locator("#why-computed")).to_contain_text("Same lineage as in " + second["id"])
        await expect(p.locator("#why-computed")).to_contain_text("forceComputation")
        await screenshot(p, "workflow-nondeterministic")

        # Planned to compute, cut off early at its start: it says so, not "Why computed".
        await p.goto(f"{system.base}/workflows/{fourth['id']}")
        await p.locator(node(fourth, 3)).click()
        await expect(p.locator("#why-computed h3")).to_have_text("Cut off early")
        await expect(p.locator("#cut-off")).to_contain_text("early cutoff: parent 1's output is identical to")
        await expect(p.locator('#why-computed tr[data-field="parent 1"]')).to_have_count(1)

        # The history page counts it.
        await p.goto(system.base + "/history?resolution=1m")
        await expect(p.locator(".nondeterministic-count")).to_have_text(" · ≠ 1 non-deterministic")
        await expect(p.locator(".cutoff-count")).to_have_text(" · 1 of the reused cut off early")
