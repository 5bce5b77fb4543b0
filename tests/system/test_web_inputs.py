"""External inputs on the workflow page, in a real browser (Chromium through Playwright):
each is a source node of the DAG, with its fingerprint, above the actions that read it
(docs/web-ui.md; docs/planning.md, "External inputs")."""

from __future__ import annotations

from playwright.async_api import expect

from tests.support.browser import browser, page, screenshot
from tests.support.system import Api
from tests.system.test_external_inputs import corpus_at, reading


async def test_an_input_is_a_source_node_with_its_fingerprint(system: Api, settings) -> None:
    corpus = corpus_at(settings.allowed_output_roots[0] / "corpus", "abcd")
    wf = await system.run(reading(str(corpus), "ui"))
    assert wf["state"] == "SUCCEEDED"
    reader = wf["actions"][0]
    async with browser() as b, page(b) as p:
        await p.goto(f"{system.base}/workflows/{wf['id']}")
        await expect(p.locator("#dag .node")).to_have_count(4)  # three actions, one input
        source = p.locator("#dag .node.input")
        await expect(source).to_have_attribute("data-input", str(corpus))
        await expect(source.locator("text.name")).to_have_text("◇ corpus")
        await expect(source.locator("text.sub")).to_have_text("folder · 4 B")
        await expect(source.locator("title")).to_contain_text("size 4 · files 1 · digest sha256:")
        y = lambda t: float(t.split(",")[1].rstrip(")"))  # noqa: E731
        above = y(await source.get_attribute("transform"))
        assert above < y(await p.locator(f'[data-action="{reader["id"]}"]').get_attribute("transform"))
        await expect(p.locator("#dag .edge")).to_have_count(2)  # input -> read, read -> count
        await p.locator(f'[data-action="{reader["id"]}"]').click()
        await expect(p.locator("#details")).to_contain_text(f"{corpus} · kind folder · size 4")
        await screenshot(p, "workflow-inputs")
