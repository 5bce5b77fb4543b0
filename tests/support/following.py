"""What the tests of following a computation in flight share, on either executor: jobs
that log each run (``PINGO_EXEC_LOG`` in their configuration, which reaches a SHELL job's
environment locally and through Oozie's ``<env-var>``), a sweep's workflow, and counting
runs from the log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.gates import Gate
from tests.support.system import Api

Maker = Callable[..., dict[str, Any]]  # (aid, label, parents, seconds=..., **extra) -> action


def logging_conf(log: Path, **env: str) -> list[dict[str, str]]:
    """The configuration that makes a synth job log each run to ``log`` (and get ``env``)."""
    return [{"key": "PINGO_EXEC_LOG", "value": str(log)}, *({"key": k, "value": v} for k, v in env.items())]


def sweep_member(make: Maker, log: Path, tag: str, i: int, root_seconds: float = 1.0, **env: str) -> dict:
    """A parameter sweep's member: the same root and middle, its own training step."""
    return {
        "name": f"{tag}-{i}",
        "actions": [
            make(1, f"{tag}-ingest", [], seconds=root_seconds, configurationParameters=logging_conf(log, **env)),
            make(2, f"{tag}-features", [1], configurationParameters=logging_conf(log)),
            make(3, f"{tag}-train-{i}", [2], configurationParameters=logging_conf(log)),
        ],
    }


def runs(log: Path, label: str) -> int:
    """Successful runs of ``label`` as the jobs logged them (a failed one logs ``<label> failed``)."""
    if not log.exists():
        return 0
    return sum(line.split(" ", 1)[1] == label for line in log.read_text().splitlines())


def failed_runs(log: Path, label: str) -> int:
    return runs(log, f"{label} failed")


def action(wf: dict, local_id: int) -> dict:
    return next(a for a in wf["actions"] if a["localId"] == local_id)


def states(wf: dict) -> list[tuple]:
    return [(a["localId"], a["state"], a.get("reason"), a.get("error")) for a in wf["actions"]]


async def running(api: Api, wf_id: str, local_id: int, timeout: float = 30.0) -> None:
    """Until the action's job is seen running.

    A local job reads RUNNING only once it has run a second (the job runner's start
    notice, docs/performance.md "The job runner"), and what the test does while it runs
    may take seconds on a loaded machine: a job a test watches this way waits at a gate
    (tests/support/gates.py) the test opens once its steps are done."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if action(await api.workflow(wf_id), local_id)["state"] == "RUNNING":
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{wf_id}.{local_id} never ran: {states(await api.workflow(wf_id))}")


async def producer_and_followers(
    api: Api, member: Callable[..., dict], log: Path, tag: str, gate: Gate, followers: int = 2
) -> tuple[dict, list[dict]]:
    """A sweep member whose root runs, then ``followers`` more submitted while it runs: its
    job waits at ``gate`` until the test opens it."""
    first = await api.submit(member(log, tag, 0, root_seconds=0.0, **gate.env))
    await running(api, first["id"], 1)
    others = [await api.submit(member(log, tag, i, root_seconds=0.0, **gate.env)) for i in range(1, followers + 1)]
    assert all(action(o, 2)["reason"] == "in_flight" for o in others), [states(o) for o in others]
    return first, others


async def kill(api: Api, wf_id: str) -> None:
    status, out = await api.request("POST", f"/api/v1/workflows/{wf_id}/kill")
    assert status in (200, 202), out
