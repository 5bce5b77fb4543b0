"""The callback endpoint is a hint, checked and confirmed; the poller is the safety net."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import REGISTRY

from shared import callback_tokens
from shared.executors.base import JobState
from shared.store.transitions import decode
from tests.support.gates import Gate
from tests.support.net import free_port
from tests.support.system import Api
from tests.support.workflows import diamond, shell_action


async def callback(api: Api, action_id: str, **query: str) -> tuple[int, dict]:
    url = f"{api.settings.callback_url}/callback/{action_id}"
    assert api.http is not None
    async with api.http.get(url, params=query) as r:
        return r.status, await r.json(content_type=None)


async def snapshot(api: Api, wf_id: str) -> list[tuple]:
    docs = [decode(a) async for a in api.db.actions.find({"workflow_id": wf_id})]
    return sorted((a["_id"], a["state"], len(a["history"]), a.get("attempt")) for a in docs)


async def test_forged_and_unknown_callbacks_are_refused(system: Api, gate: Gate) -> None:
    # RUNNING (its start notice comes a second in) until the test opens the gate: nothing
    # moves it between the two snapshots but the callbacks.
    plan = await system.submit(
        {"name": "slow", "actions": [shell_action(1, "cb-slow", configurationParameters=gate.conf)]}
    )
    aid = plan["actions"][0]["id"]
    while (await system.workflow(plan["id"]))["actions"][0]["state"] != "RUNNING":
        await asyncio.sleep(0.05)
    before = await snapshot(system, plan["id"])
    status, body = await callback(system, aid, secret="not-the-secret", jobId="x", status="SUCCEEDED")
    assert status == 403 and (body["status"], body["detail"]) == (403, "wrong secret")
    # An unknown action gets the same answer as a wrong secret: ids do not leak.
    status, body = await callback(system, "wf-nope.1", secret="x", status="SUCCEEDED")
    assert status == 403 and (body["status"], body["detail"]) == (403, "wrong secret")
    await asyncio.sleep(0.3)
    assert await snapshot(system, plan["id"]) == before
    gate.open()
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"


async def test_repeated_and_late_callbacks_change_nothing(system: Api) -> None:
    wf = await system.run(diamond("cb-dup"))
    assert wf["state"] == "SUCCEEDED"
    before = await snapshot(system, wf["id"])
    datasets_before = sorted(
        [(d["_id"], d["compute_count"], len(decode(d)["history"])) async for d in system.db.datasets.find()]
    )
    for a in wf["actions"]:
        doc = await system.db.actions.find_one({"_id": a["id"]})
        for state in ("SUCCEEDED", "RUNNING", "SUCCEEDED", "FAILED"):
            status, _ = await callback(system, a["id"], secret=doc["secret"], jobId=doc["job_id"], status=state)
            assert status == 200
    await asyncio.sleep(0.5)
    assert await snapshot(system, wf["id"]) == before
    assert (
        sorted([(d["_id"], d["compute_count"], len(decode(d)["history"])) async for d in system.db.datasets.find()])
        == datasets_before
    )


async def test_a_signed_callback_is_checked_by_its_token_and_a_forged_one_refused(system: Api, gate: Gate) -> None:
    # The URL a job is given carries an HMAC of its action and dataset, not the stored
    # secret (docs/architecture.md, "callback"): a token for another action, another
    # dataset or under another key is refused like a wrong secret, and changes nothing.
    key = system.ctx.callback_key
    # It runs until the test opens the gate: a valid callback meets a job still running.
    signed = shell_action(1, "cb-signed", configurationParameters=gate.conf)
    plan = await system.submit({"name": "signed", "actions": [signed]})
    aid = plan["actions"][0]["id"]
    while (await system.workflow(plan["id"]))["actions"][0]["state"] != "RUNNING":
        await asyncio.sleep(0.05)
    doc = await system.db.actions.find_one({"_id": aid})
    h, job = doc["hash"], {"jobId": doc["job_id"], "status": "SUCCEEDED"}
    before = await snapshot(system, plan["id"])
    for token, dataset in (
        (callback_tokens.sign(key, f"{plan['id']}.2", h), h),  # another action's
        (callback_tokens.sign(b"another key", aid, h), h),
        (callback_tokens.sign(key, aid, h), "0" * 64),  # the dataset changed on the way
        (callback_tokens.sign(key, aid, None), h),
    ):
        status, body = await callback(system, aid, secret=token, dataset=dataset, **job)
        assert status == 403 and body["detail"] == "wrong secret"
    # A valid one while the job still runs: the executor is asked, and nothing moves.
    status, _ = await callback(system, aid, secret=callback_tokens.sign(key, aid, h), dataset=h, **job)
    assert status == 200
    await asyncio.sleep(0.3)
    assert await snapshot(system, plan["id"]) == before
    gate.open()
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"


@pytest.mark.settings(poll_interval=30.0, poll_max_interval=60.0)  # the poller too slow to matter
async def test_signed_notifications_alone_carry_a_chain_to_its_end(system: Api) -> None:
    actions = [shell_action(i, f"cb-chain-{i}", [i - 1] if i > 1 else []) for i in range(1, 5)]
    plan = await system.submit({"name": "signed-chain", "actions": actions})
    wf = await system.wait(plan["id"], timeout=20)
    assert wf["state"] == "SUCCEEDED"
    assert [a["state"] for a in wf["actions"]] == ["FINISHED"] * 4


async def test_a_signed_end_the_executor_cannot_confirm_gives_its_finish_lease_back(
    system: Api, monkeypatch: pytest.MonkeyPatch, gate: Gate
) -> None:
    # The lease is taken before the executor is asked (docs/architecture.md, "callback"):
    # an executor away must not leave it held, or nobody finishes the job until it expires.
    away_job = shell_action(1, "cb-away", configurationParameters=gate.conf)  # runs until the gate opens
    plan = await system.submit({"name": "away", "actions": [away_job]})
    aid = plan["actions"][0]["id"]
    while (await system.workflow(plan["id"]))["actions"][0]["state"] != "RUNNING":
        await asyncio.sleep(0.05)
    doc = await system.db.actions.find_one({"_id": aid})

    async def away(job_id: str) -> None:
        raise ConnectionError("the executor cannot be reached")

    with monkeypatch.context() as patch:
        patch.setattr(system.ctx.executor, "status", away)
        with pytest.raises(ConnectionError):
            await system.ctx.outcomes("test").finish_notified(aid, doc["job_id"], doc["hash"], True)
    assert (await system.db.actions.find_one({"_id": aid}))["finish_lease_at"] == 0.0
    gate.open()
    assert (await system.wait(plan["id"]))["state"] == "SUCCEEDED"


def batch_total(outcome: str) -> float:
    return REGISTRY.get_sample_value("pingo_callback_batches_total", {"outcome": outcome}) or 0.0


async def post_batch(api: Api, body: object, raw: bytes | None = None) -> tuple[int, dict]:
    assert api.http is not None
    # Where the service listens (the jobs may have been given another base).
    url = f"http://{api.settings.callback_host}:{api.settings.callback_port}/callback-batch"
    async with api.http.post(url, json=body if raw is None else None, data=raw) as r:
        return r.status, await r.json(content_type=None)


# The poller too slow to matter; a slot for each job, so that all end together.
@pytest.mark.settings(poll_interval=30.0, poll_max_interval=60.0, local_slots=12)
async def test_jobs_ending_together_are_notified_in_one_batch_and_finished_once(system: Api, gate: Gate) -> None:
    # Held at a gate, then let go at once: their ends come together to the job runner,
    # which sends those that come while one call is in flight as one batch
    # (docs/architecture.md, "The local job runner").
    n = 12
    actions = [shell_action(i, f"cb-batch-{i}", configurationParameters=gate.conf) for i in range(n)]
    plan = await system.submit({"name": "ends-in-batches", "actions": actions})
    before = batch_total("accepted")
    deadline = time.monotonic() + 60
    # Every job runs (its start notice came, a second in), waiting at the gate.
    while any(a["state"] != "RUNNING" for a in (await system.workflow(plan["id"]))["actions"]):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    gate.open()
    # The services share this loop: held a moment, the callback service answers no call,
    # so the first end's is in flight while the others come (as under load).
    time.sleep(1.0)
    wf = await system.wait(plan["id"], timeout=25)  # within the poll interval: the notices did it
    assert wf["state"] == "SUCCEEDED"
    assert batch_total("accepted") > before
    async for doc in system.db.actions.find({"workflow_id": plan["id"]}):
        assert [h["state"] for h in decode(doc)["history"]].count("FINISHED") == 1


@pytest.mark.settings(poll_interval=30.0, poll_max_interval=60.0, callback_base_url=f"http://127.0.0.1:{free_port()}")
async def test_a_batch_refuses_its_forged_and_unknown_entries_and_finishes_the_others(system: Api) -> None:
    # The jobs' own notifications go nowhere and the poller is too slow to matter: the
    # batches below are all that finishes them.
    n = 4
    plan = await system.submit({"name": "hostile-batch", "actions": [shell_action(i, f"hb-{i}") for i in range(n)]})
    ids = [a["id"] for a in plan["actions"]]
    jobs: dict[str, dict] = {}
    deadline = time.monotonic() + 60
    while len(jobs) < n:
        assert time.monotonic() < deadline
        for a in [d async for d in system.db.actions.find({"workflow_id": plan["id"], "job_id": {"$exists": True}})]:
            if (await system.ctx.executor.status(a["job_id"])).state == JobState.SUCCEEDED:
                jobs[a["_id"]] = a
        await asyncio.sleep(0.1)
    key = system.ctx.callback_key

    def entry(aid: str, token: str | None = None) -> str:
        doc = jobs[aid]
        dataset = doc.get("hash") if doc.get("managed") else None
        token = token or callback_tokens.sign(key, aid, dataset)
        signed = f"&dataset={dataset}" if dataset else ""
        return f"/callback/{aid}?secret={token}{signed}&jobId={doc['job_id']}&status=SUCCEEDED"

    forged = entry(ids[0], callback_tokens.sign(b"another key", ids[0], jobs[ids[0]].get("hash")))
    unknown = f"/callback/{plan['id']}.99?secret=x&jobId=j&status=SUCCEEDED"
    status, body = await post_batch(system, [entry(ids[1]), forged, entry(ids[2]), unknown, entry(ids[3])])
    # An unknown id and a forged token are answered alike: ids do not leak.
    assert status == 200 and body["results"] == [200, 403, 200, 403, 200]
    while sum([a["state"] == "FINISHED" for a in (await system.workflow(plan["id"]))["actions"]]) < n - 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert (await system.db.actions.find_one({"_id": ids[0]}))["state"] != "FINISHED"
    # An older URL's entry (the action's stored secret) is checked against the store, as its GET.
    older = f"/callback/{ids[0]}?secret={jobs[ids[0]]['secret']}&jobId={jobs[ids[0]]['job_id']}&status=SUCCEEDED"
    assert (await post_batch(system, [older, unknown]))[1]["results"] == [200, 403]
    assert (await system.wait(plan["id"], timeout=20))["state"] == "SUCCEEDED"

    # A body too big, too many entries, or not a list of paths: refused whole, as a problem.
    refused = batch_total("refused")
    status, body = await post_batch(system, None, raw=b"[" + b'"x",' * (1 << 19) + b'"x"]')
    assert status == 413 and body["status"] == 413
    for bad in ([entry(ids[1])] * 1001, {"a": 1}, [1], ["http://elsewhere/callback/x?secret=y"], ["/other/x"]):
        status, body = await post_batch(system, bad)
        assert status == 422 and body["status"] == 422 and "secret" not in body["detail"]
    assert batch_total("refused") == refused + 6
