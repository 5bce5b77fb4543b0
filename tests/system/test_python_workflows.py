"""Workflows written in Python, submitted to the real services (docs/workflows-in-python.md):
``pingo submit FILE.py`` sends the workflow the file builds, and the server sees the same
lineage as for the same workflow written as JSON, so it reuses what the JSON computed."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from pingo.builder import Workflow
from pingo.client import Client
from tests.support.system import Api
from tests.support.workflows import ROOT

PINGO = [sys.executable, "-m", "pingo.cli"]


async def pingo(system: Api, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "PINGO_URL": system.base}
    cli = await asyncio.create_subprocess_exec(
        *PINGO, *args, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(cli.communicate(), 120)
    assert cli.returncode is not None
    return cli.returncode, out.decode(), err.decode()


def by_name(actions: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {a["name"]: (a["hash"], a["decision"]) for a in actions}


async def test_the_python_diamond_reuses_what_the_json_diamond_computed(system: Api) -> None:
    first = await system.run(json.loads((ROOT / "examples" / "diamond.json").read_text()))
    assert first["state"] == "SUCCEEDED"
    hashes = {a["name"]: a["hash"] for a in first["actions"]}

    code, out, err = await pingo(system, "submit", "examples/python/diamond.py", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert {a["name"]: a["hash"] for a in plan["actions"]} == hashes
    assert plan["totals"]["compute"] == 0 and plan["totals"]["reuse"] == 1

    code, out, err = await pingo(system, "submit", "examples/python/diamond.py", "--wait")
    assert code == 0, err + out
    wf_id = out.strip().splitlines()[-1].split()[0]
    second = await system.workflow(wf_id)
    assert second["state"] == "SUCCEEDED"
    assert {a["name"]: a["hash"] for a in second["actions"]} == hashes
    assert {a["name"]: a["state"] for a in second["actions"]} == {
        "ingest": "SKIPPED", "clean": "SKIPPED", "statistics": "SKIPPED", "report": "REUSED"
    }  # fmt: skip


async def test_a_builder_workflow_submits_through_the_client(system: Api) -> None:
    wf = Workflow("built")
    corpus = wf.shell("corpus", ["python3", "corpus.py"], folder="examples/wordcount")
    wf.map_reduce("count words", ["python3", "mapper.py"], ["python3", "reducer.py"], folder="examples/wordcount",
                  properties={"mapreduce.job.reduces": "2"}, parents=[corpus])  # fmt: skip
    async with Client(system.base) as client:
        plan = await wf.submit(client)
    done = await system.wait(plan["id"])
    assert done["state"] == "SUCCEEDED"
    # The JSON word count is the same workflow: everything is reused or skipped.
    again = await system.submit(json.loads((ROOT / "examples" / "wordcount.json").read_text()))
    assert by_name(again["actions"]) == {
        "corpus": (plan["actions"][0]["hash"], "reuse"),
        "count words": (plan["actions"][1]["hash"], "reuse"),
    }
