"""Crashes and outages with workflows running: the five services as separate processes on
a private RabbitMQ node and a private nx-27017 server, both of which these tests kill.

What must hold whatever is killed: every workflow ends SUCCEEDED, and every computed
action ran exactly once (examples/jobs/synth.py appends one line per run to the
execution log), with one attempt wherever its job had already been submitted.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from shared.store.transitions import decode
from tests.support.brokers import NxServer, RabbitNode, Relay
from tests.support.system import TERMINAL, Processes, make_settings
from tests.support.workflows import shell_action

SECONDS = 0.6  # each action's run time: long enough for the kills to land mid-workflow
# A service gives up on an unreachable store after this (PINGO_STORE_TIMEOUT; 10 s by
# default), so an outage a few times longer makes every loop fail and retry.
STORE_TIMEOUT = 1.5


def chain(prefix: str, n: int, seconds: float = SECONDS) -> dict[str, Any]:
    return {
        "name": f"{prefix}-chain",
        "actions": [
            shell_action(i, f"{prefix}-{i}", [i - 1] if i > 1 else [], seconds=seconds) for i in range(1, n + 1)
        ],
    }


def fan(prefix: str, width: int, seconds: float = SECONDS) -> dict[str, Any]:
    return {
        "name": f"{prefix}-fan",
        "actions": [
            shell_action(1, f"{prefix}-root", seconds=seconds),
            *(shell_action(i, f"{prefix}-leg-{i}", [1], seconds=seconds) for i in range(2, width + 2)),
            shell_action(width + 2, f"{prefix}-join", list(range(2, width + 2)), seconds=seconds),
        ],
    }


class Chaos(Processes):
    """The five services as processes, plus what a chaos test needs: the execution log,
    kills and restarts, and waits on conditions (never sleeps as assertions)."""

    node: RabbitNode
    nx: NxServer

    @property
    def exec_log(self) -> Path:
        return Path(self.settings.data_dir) / "exec.log"

    def executions(self) -> Counter[str]:
        """How many times each action ran, by action id."""
        if not self.exec_log.exists():
            return Counter()
        return Counter(line.split()[0] for line in self.exec_log.read_text().splitlines())

    async def restart(self, name: str) -> float:
        """SIGKILL a service (its whole process group) and start it again; seconds until it
        is up again (healthy, for the two that serve HTTP)."""
        self.stop(name, signal.SIGKILL)
        t0 = time.monotonic()
        self.start(name)
        port = {"workflow_manager": self.settings.port, "callback": self.settings.callback_port}.get(name)
        if port is not None:
            await self.healthy(port, timeout=60)
        return time.monotonic() - t0

    async def until(self, what: str, cond, timeout: float = 60.0) -> float:
        """Wait until the async ``cond()`` holds; the seconds it took."""
        t0 = time.monotonic()
        while not await cond():
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"{what}: not after {timeout}s; logs: {self.tail()}")
            await asyncio.sleep(0.1)
        return time.monotonic() - t0

    async def finished(self, wf_id: str) -> int:
        return await self.db.actions.count_documents({"workflow_id": wf_id, "state": "FINISHED"})

    async def submitted_jobs(self) -> dict[str, int]:
        """Actions whose job the executor has already accepted (a job id is recorded, and,
        the local executor's being recorded with the claim, before its job is made: its
        job folder exists), with the attempt that job belongs to."""
        found = self.db.actions.find({"job_id": {"$nin": [None, ""]}}, {"_id": 1, "attempt": 1, "job_id": 1})
        return {a["_id"]: a["attempt"] async for a in found if (self.settings.jobs_dir / a["job_id"]).is_dir()}

    async def ended(self, wf_id: str) -> bool:
        return await self.db.workflows.count_documents({"_id": wf_id, "state": {"$in": list(TERMINAL)}}) == 1

    async def first_transition_after(self, t: float) -> float:
        """Seconds from wall time ``t`` to the first action transition after it."""
        ats = [
            h["at"]
            async for a in self.db.actions.find({"updated_at": {"$gt": t}}, {"history": 1})
            for h in decode(a)["history"]
            if h["at"] > t
        ]
        first = min(ats, default=float("nan"))
        return first - t

    async def storage_settled(self, budget: float) -> bool:
        """Managed storage under budget and no dataset left half-way through deletion."""
        rows = await (
            await self.db.datasets.aggregate([{"$group": {"_id": "$state", "bytes": {"$sum": "$size"}}}])
        ).to_list()
        by_state = {r["_id"]: r["bytes"] for r in rows}
        busy = {"STORED_TO_DELETE", "PROCESSING", "DELETING"} & set(by_state)
        return not busy and by_state.get("STORED", 0) <= budget

    def count_in_logs(self, text: str) -> dict[str, int]:
        return {p.stem: p.read_text(errors="replace").count(text) for p in sorted(self.logs.glob("*.log"))}

    async def check_exactly_once(self, plans: list[dict[str, Any]], submitted: dict[str, int]) -> list[dict[str, Any]]:
        finals = [await self.wait(p["id"], timeout=90) for p in plans]
        for wf in finals:
            assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a.get("error")) for a in wf["actions"]]
        computed = {a["id"] for p in plans for a in p["actions"] if a["decision"] == "compute"}
        runs = self.executions()
        assert set(runs) == computed and set(runs.values()) == {1}, {k: n for k, n in runs.items() if n != 1}
        actions = {a["id"]: a for wf in finals for a in wf["actions"]}
        assert {actions[i]["state"] for i in computed} == {"FINISHED"}
        # A job that existed when something was killed was found again, never submitted twice:
        # the action ended on the attempt of that job. (An attempt killed before its job
        # existed is submitted again as the next one: that is no second job.)
        assert {i: actions[i]["attempts"] for i, at in submitted.items() if actions[i]["attempts"] != at} == {}
        assert await self.db.workflows.count_documents({}) == len(plans)
        return finals


@pytest.fixture(scope="module")
def private_nx(tmp_path_factory: pytest.TempPathFactory):
    """One private nx-27017 for the module (each test has a database of its own, named by
    ``make_settings``); a test may kill it, and the next one finds it started again."""
    nx = NxServer(tmp_path_factory.mktemp("nx"))
    yield nx
    nx.kill()


@pytest.fixture
def nx(private_nx: NxServer) -> NxServer:
    if not private_nx.running:
        private_nx.start()
    return private_nx


@pytest.fixture
async def chaos(request: pytest.FixtureRequest, tmp_path: Path, rabbit_node: RabbitNode, nx: NxServer):
    """The system on a private broker node and a private nx-27017; settings overrides
    come from indirect parametrization."""
    settings = make_settings(tmp_path, nx.url, amqp_url=rabbit_node.url, **getattr(request, "param", {}))
    (tmp_path / "logs").mkdir()
    system = Chaos(settings, tmp_path / "logs")
    system.node, system.nx = rabbit_node, nx
    try:
        await system.start_all()
        yield system
    finally:
        await system.stop_all()


async def test_workflow_submitted_while_broker_is_down_is_accepted_once_and_runs_once(chaos: Chaos) -> None:
    """Defect 3: with the broker down, POST /workflows answered a text/plain 500 after the
    workflow was stored RUNNING (so a client retry submitted it twice)."""
    await asyncio.to_thread(chaos.node.stop)
    body = fan("outage-post", 3)
    t0 = time.monotonic()
    async with chaos.http.post(f"{chaos.base}/api/v1/workflows", json=body) as r:
        status, content_type, plan = r.status, r.content_type, await r.json(content_type=None)
    answered = time.monotonic() - t0
    assert (status, content_type) == (201, "application/json"), plan
    assert plan["state"] == "RUNNING" and len(plan["actions"]) == 5
    assert answered < 10.0, f"the gateway blocked {answered:.1f}s on the broker"
    assert await chaos.db.workflows.count_documents({"name": body["name"]}) == 1
    assert await chaos.db.actions.count_documents({"workflow_id": plan["id"]}) == 5

    await asyncio.to_thread(chaos.node.start)
    await chaos.check_exactly_once([plan], {})
    print(f"\nPOST with the broker down answered 201 in {answered:.2f}s")
    gateway = (chaos.logs / "workflow_manager.log").read_text(errors="replace")
    assert "Error handling request" not in gateway and "ChannelInvalidStateError" not in gateway, gateway[-3000:]


async def test_services_started_before_store_and_broker_wait_for_them(
    tmp_path: Path, rabbit_node: RabbitNode, nx: NxServer
) -> None:
    """A service started while the store and the broker are unreachable waits for them
    (saying so in its log) instead of exiting, and works once they appear."""
    # The broker appears when the relay opens its port (nothing listens there before):
    # what the services see is the same as a node booting, without the wait.
    broker = Relay(rabbit_node.port)
    nx.kill()  # nothing listens on its socket now
    settings = make_settings(tmp_path, nx.url, amqp_url=rabbit_node.url_on(broker.port), store_timeout=STORE_TIMEOUT)
    (tmp_path / "logs").mkdir()
    system = Chaos(settings, tmp_path / "logs")
    await system.open()
    try:
        for name in system.SERVICES:
            system.start(name)

        async def logged(what: str) -> bool:
            counts = system.count_in_logs(f"waiting for the {what}")
            return len(counts) == 5 and all(counts.values())

        await system.until("every service waits for the store", lambda: logged("store"), timeout=40)
        assert all(p.poll() is None for p in system.procs.values()), system.tail()
        nx.start()
        await system.until("every service waits for the broker", lambda: logged("broker"), timeout=40)
        assert all(p.poll() is None for p in system.procs.values()), system.tail()
        await broker.open()
        await system.healthy(settings.port, timeout=40)
        await system.healthy(settings.callback_port, timeout=40)
        plan = await system.submit(fan("late", 2))
        await system.check_exactly_once([plan], {})
    finally:
        await system.stop_all()
        await broker.close()


# Intermediate outputs outgrow the budget during the run: the decision service marks and
# the dataset manager deletes while they are being killed too. The decision lease is short
# so that the restarted replica takes over in seconds, not the default 30.
SMALL_BUDGET = {"capacity_bytes": 48 * 1024, "decision_lease": 3.0}


@pytest.mark.parametrize("chaos", [SMALL_BUDGET], indirect=True)
async def test_each_service_killed_in_turn_mid_workflow(chaos: Chaos) -> None:
    """SIGKILL each kind of service in turn while workflows run, then start it again."""
    spine = await chaos.submit(chain("spine", 8))
    plans = [spine, await chaos.submit(fan("k-fan", 4)), await chaos.submit(chain("k-short", 4))]
    submitted: dict[str, int] = {}
    up: dict[str, float] = {}
    t0 = time.monotonic()
    # The decision first: a killed replica's lease (PINGO_DECISION_LEASE) must expire before another decides.
    # The gateway last: the spine does not wait for it, so it could run ahead during its restart.
    order = ("decision", "dataset_manager", "action_manager", "callback", "workflow_manager")
    assert sorted(order) == sorted(chaos.SERVICES)
    for step, name in enumerate(order, start=1):
        # Kill at a point of real progress, while the spine (serial) is still far from its end.
        await chaos.until(f"spine step {step}", lambda k=step: _at_least(chaos.finished(spine["id"]), k))
        assert not await chaos.ended(spine["id"])
        submitted = {**await chaos.submitted_jobs(), **submitted}  # the first attempt seen with a job
        up[name] = round(await chaos.restart(name), 1)
        if name == "workflow_manager":
            plans.append(await chaos.submit(fan("after-gateway", 2)))
    last_kill = time.monotonic()
    # A callback killed while it holds an action's finish lease (between the executor saying
    # the job ended and the action's FINISHED) stalls that action until the lease expires
    # (Outcomes.finish_lease, PINGO_STALE_AFTER): rare here, and then this wait is that much longer.
    await chaos.check_exactly_once(plans, submitted)
    done = time.monotonic() - last_kill
    # Storage went back under budget: marked datasets were deleted, none left half-deleted.
    budget = chaos.settings.threshold * chaos.settings.capacity_bytes
    settled = await chaos.until("storage back under budget", lambda: chaos.storage_settled(budget))
    assert await chaos.db.datasets.count_documents({"state": "DELETED"}) > 0
    print(
        f"\nkilled and restarted (s until up again): {up}; kills took {last_kill - t0:.1f}s; "
        f"all done {done:.1f}s after the last, storage settled {settled:.1f}s later"
    )


@pytest.mark.parametrize("chaos", [{}], indirect=True)
async def test_broker_down_mid_workflow(chaos: Chaos) -> None:
    """The broker crashes for ~10-15 s while workflows run, then comes back."""
    spine = await chaos.submit(chain("b-spine", 10))
    plans = [spine, await chaos.submit(fan("b-fan", 4))]
    await chaos.until("spine step 2", lambda: _at_least(chaos.finished(spine["id"]), 2))
    assert not await chaos.ended(spine["id"])
    submitted = await chaos.submitted_jobs()
    before = await chaos.finished(spine["id"])
    await asyncio.to_thread(chaos.node.stop, kill=True)
    down_at = time.monotonic()
    # Meanwhile the services keep working on their timers (the store is the truth), and
    # the gateway keeps accepting workflows.
    plans.append(await chaos.submit(fan("b-during", 2)))
    await asyncio.sleep(3.0)  # the outage itself; the node then takes 7-10 s to boot
    during = await chaos.finished(spine["id"]) - before
    await asyncio.to_thread(chaos.node.start)
    back_at, back_wall = time.monotonic(), time.time()
    # Every service's connection comes back by itself, with its queue and consumer.
    reconnected = await chaos.until(
        "every service reconnected", lambda: _all_logged(chaos, "reconnected to the broker", 5)
    )
    plans.append(await chaos.submit(fan("b-after", 2)))
    await chaos.check_exactly_once(plans, submitted)
    print(
        f"\nbroker down {back_at - down_at:.1f}s; spine actions finished meanwhile: {during}; all services "
        f"reconnected {reconnected:.1f}s after it was back; first transition after "
        f"{await chaos.first_transition_after(back_wall):.1f}s; all done {time.monotonic() - back_at:.1f}s after"
    )
    assert all(p.poll() is None for p in chaos.procs.values())
    # One line per process for the outage, not one per event.
    assert set(chaos.count_in_logs("broker unavailable").values()) == {1}, chaos.count_in_logs("broker unavailable")


@pytest.mark.parametrize("chaos", [{"store_timeout": STORE_TIMEOUT}], indirect=True)
async def test_store_down_mid_workflow(chaos: Chaos) -> None:
    """The store (nx-27017) is SIGKILLed while workflows run, for three times the services'
    store timeout, then restarted on the same socket and data dir."""
    spine = await chaos.submit(chain("s-spine", 10))
    plans = [spine, await chaos.submit(fan("s-fan", 4))]
    await chaos.until("spine step 2", lambda: _at_least(chaos.finished(spine["id"]), 2))
    assert not await chaos.ended(spine["id"])
    submitted = await chaos.submitted_jobs()
    chaos.nx.kill()
    down_at = time.monotonic()
    await asyncio.sleep(3 * STORE_TIMEOUT)  # the outage itself
    chaos.nx.start()
    back_at, back_wall = time.monotonic(), time.time()
    await chaos.check_exactly_once(plans, submitted)
    print(
        f"\nstore down {back_at - down_at:.1f}s; first transition "
        f"{await chaos.first_transition_after(back_wall):.1f}s after it was back; "
        f"all done {time.monotonic() - back_at:.1f}s after"
    )
    assert all(p.poll() is None for p in chaos.procs.values())
    # The loops said so, without flooding the logs (one line per failing step per tick).
    failing = chaos.count_in_logs("step failed")
    assert 0 < sum(failing.values()) and max(failing.values()) < 50, failing


async def _at_least(count, n: int) -> bool:
    return await count >= n


async def _all_logged(system: Chaos, text: str, n: int) -> bool:
    counts = system.count_in_logs(text)
    return len(counts) == n and all(counts.values())
