"""/metrics, /healthz and /readyz of a process: scraped over HTTP from the services running
in this process, parsed with the official client's parser."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pymongo import AsyncMongoClient

from shared.bus.rabbitmq import RabbitBus
from shared.config import Settings
from shared.ops import OpsServer
from shared.states import ACTION_LIVE
from shared.storage.base import ATTEMPTS_DIR
from shared.store import Store
from tests.support.gates import Gate
from tests.support.net import free_port
from tests.support.system import AMQP_URL, Api, make_settings
from tests.support.workflows import shell_action


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    """The suite's settings with the ops server on; the suite's ``system`` fixture runs on them."""
    return make_settings(tmp_path, mongo_url, metrics_port=free_port())


async def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """Every sample of ``/metrics``, keyed by name and sorted labels."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(samples: dict, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items())


async def test_a_workflow_shows_in_the_transition_counts_and_store_latency(system: Api, settings: Settings) -> None:
    before = await scrape(settings.metrics_port)
    done = await system.run({"name": "metrics", "actions": [shell_action(1, "m-1"), shell_action(2, "m-2", [1])]})
    assert done["state"] == "SUCCEEDED"
    after = await scrape(settings.metrics_port)

    def moved(**labels: str) -> float:
        return total(after, "pingo_transitions_total", **labels) - total(before, "pingo_transitions_total", **labels)

    assert moved(entity="actions", target="FINISHED") == 2
    assert moved(entity="workflows", target="SUCCEEDED") == 1
    assert total(after, "pingo_store_operation_seconds_count", command="find") > 0
    # The local executor calls back when a job ends; each accepted callback is counted.
    assert (
        total(after, "pingo_callbacks_total", outcome="accepted")
        - total(before, "pingo_callbacks_total", outcome="accepted")
        == 2
    )
    started = total(after, "pingo_ready_to_submit_seconds_count") - total(before, "pingo_ready_to_submit_seconds_count")
    assert started == 2
    assert total(after, "pingo_decision_runs_total") > 0
    assert total(after, "pingo_storage_capacity_bytes") == settings.capacity_bytes
    assert total(after, "pingo_storage_used_bytes") > 0
    assert total(after, "pingo_store_operation_seconds_count") > total(before, "pingo_store_operation_seconds_count")


async def test_an_identical_submission_counts_reuse_hits_and_saved_seconds(system: Api, settings: Settings) -> None:
    body = {"name": "again", "actions": [shell_action(1, "r-1", seconds=0.2), shell_action(2, "r-2", [1])]}
    assert (await system.run(body))["state"] == "SUCCEEDED"
    before = await scrape(settings.metrics_port)
    assert (await system.run(body))["state"] == "SUCCEEDED"
    after = await scrape(settings.metrics_port)
    hits = total(after, "pingo_reuse_hits_total") - total(before, "pingo_reuse_hits_total")
    saved = total(after, "pingo_reuse_saved_seconds_total") - total(before, "pingo_reuse_saved_seconds_total")
    assert hits >= 1  # the leaf is reused; its parent, feeding only a reused action, may be skipped
    assert saved > 0


async def test_ready_and_alive_while_the_store_and_broker_are_up(system: Api, settings: Settings) -> None:
    async with aiohttp.ClientSession() as http:
        for path in ("/healthz", "/readyz"):
            async with http.get(f"http://127.0.0.1:{settings.metrics_port}{path}") as resp:
                assert resp.status == 200, await resp.text()


async def test_not_ready_names_the_store_and_the_broker_when_unreachable() -> None:
    # A real PyMongo client and a real RabbitMQ bus, pointed at ports where nothing listens.
    dead = free_port()
    client: AsyncMongoClient = AsyncMongoClient(f"mongodb://127.0.0.1:{dead}", serverSelectionTimeoutMS=300)
    bus = RabbitBus(AMQP_URL.replace(":5672", f":{free_port()}"), "pingo.test.dead")
    port = free_port()
    ops = OpsServer(Store(client, client["pingo"]), bus, "127.0.0.1", port)
    await ops.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as resp:
            assert resp.status == 503
            body = await resp.json(content_type=None)
        assert any(d.startswith("store") for d in body["down"]) and "broker: not connected" in body["down"]
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/healthz") as resp:
            assert resp.status == 200  # alive all the same: restarting it would not bring the store back
    finally:
        await ops.stop()
        await client.close()


async def test_refused_callbacks_polls_and_live_actions_are_counted(
    system: Api, settings: Settings, gate: Gate
) -> None:
    port = settings.metrics_port
    before = await scrape(port)
    watched = shell_action(1, "w-slow", configurationParameters=gate.conf)  # runs until the gate opens
    plan = await system.submit({"name": "watched", "actions": [watched]})
    action_id = plan["actions"][0]["id"]

    async def live(states: tuple[str, ...]) -> float:
        samples = await scrape(port)
        return sum(total(samples, "pingo_actions", state=s) for s in states)

    # While its job runs, the decision lease holder counts it in flight.
    deadline = time.time() + 30
    while await live(("SUBMITTED", "RUNNING")) < 1:
        assert time.time() < deadline, "pingo_actions never showed the running action"
        await asyncio.sleep(0.1)
    url = f"{settings.callback_url}/callback/{action_id}"
    async with aiohttp.ClientSession() as http, http.get(url, params={"secret": "forged"}) as resp:
        assert resp.status == 403
    # ...and its poller looks at it while it runs (first poll_interval after its submission).
    deadline = time.time() + 30
    lag = "pingo_poll_lag_seconds_count"
    while total(await scrape(port), lag) - total(before, lag) < 1:
        assert time.time() < deadline, "the running job was never polled"
        await asyncio.sleep(0.1)
    gate.open()
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"
    deadline = time.time() + 10
    while await live(tuple(str(s) for s in ACTION_LIVE)) != 0:
        assert time.time() < deadline, "pingo_actions still counts live actions after the workflow ended"
        await asyncio.sleep(0.1)
    after = await scrape(port)

    def moved(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert moved("pingo_callbacks_total", outcome="refused") == 1
    assert moved("pingo_poll_lag_seconds_count") >= 1  # it was polled while it ran (above)
    assert total(after, "pingo_storage_threshold_bytes") == settings.threshold * settings.capacity_bytes


async def test_failed_submissions_are_counted(system: Api, settings: Settings) -> None:
    # A file where the attempts folder must be: every submission fails preparing its output.
    attempts = settings.managed_dir / ATTEMPTS_DIR
    attempts.rmdir()  # made empty at start-up
    attempts.write_text("in the way")
    before = total(await scrape(settings.metrics_port), "pingo_submit_errors_total")
    plan = await system.submit({"name": "blocked", "actions": [shell_action(1, "b-1")]})
    deadline = time.time() + 10
    while total(await scrape(settings.metrics_port), "pingo_submit_errors_total") - before < 1:
        assert time.time() < deadline, "a failed submission was not counted"
        await asyncio.sleep(0.1)
    # Past the retry ceiling the action ends FAILED, though the storage that failed it is
    # still broken when it ends (its attempt folder cannot be removed either).
    wf = await system.wait(plan["id"], timeout=60)
    (action,) = wf["actions"]
    assert wf["state"] == "FAILED" and action["state"] == "FAILED", action
    ceiling = settings.submit_retry_ceiling
    assert action["reason"] == "submit_failed" and f"submit failed ({ceiling}/{ceiling})" in action["error"]
    assert total(await scrape(settings.metrics_port), "pingo_submit_errors_total") - before == ceiling
