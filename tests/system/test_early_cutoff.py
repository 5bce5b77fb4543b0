"""Early cutoff (docs/planning.md, "Early cutoff"): a parent recomputed under a new key
whose output is byte-identical to an earlier lineage's lets its children reuse what that
lineage's children made. Measured on a chain of 10 whose root reads an input folder:
touched without change (default `stat` fingerprints: a new modification time, a new key),
only the root computes; changed, all ten do."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from shared.config import Settings
from tests.support.system import Api
from tests.support.workflows import shell_action

LENGTH = 10


def chain(corpus: Path) -> dict[str, Any]:
    actions = [shell_action(1, "cut-1")] + [shell_action(i, f"cut-{i}", [i - 1]) for i in range(2, LENGTH + 1)]
    actions[0]["additionalInput"].append({"key": "corpus", "value": str(corpus)})
    return {"name": "cutoff", "actions": actions}


def states(wf: dict[str, Any]) -> dict[Any, str]:
    return {a["localId"]: a["state"] for a in wf["actions"]}


async def a_chain_run_once(system: Api, settings: Settings, text: str) -> tuple[Path, dict[str, Any]]:
    corpus = settings.allowed_output_roots[0] / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "part-00000").write_text(text)
    first = await system.run(chain(corpus))
    assert first["state"] == "SUCCEEDED" and set(states(first).values()) == {"FINISHED"}, first
    return corpus, first


def touch(part: Path) -> None:
    later = part.stat().st_mtime_ns + 10**9
    os.utime(part, ns=(later, later))


async def test_a_changed_root_input_computes_the_whole_chain(system: Api, settings: Settings) -> None:
    """The control: the root's output differs, so nothing below it may be substituted."""
    corpus, _ = await a_chain_run_once(system, settings, "abcd")
    (corpus / "part-00000").write_text("abce")
    touch(corpus / "part-00000")
    again = await system.run(chain(corpus))
    assert states(again) == dict.fromkeys(range(1, LENGTH + 1), "FINISHED")
    assert all(a["miss"]["changes"] for a in again["actions"]), again["actions"]


async def test_a_touched_root_input_recomputes_the_root_only(system: Api, settings: Settings) -> None:
    corpus, first = await a_chain_run_once(system, settings, "abcd")
    touch(corpus / "part-00000")
    again = await system.run(chain(corpus))
    assert states(again) == {1: "FINISHED", **dict.fromkeys(range(2, LENGTH + 1), "REUSED")}
    # The root's output is byte-identical to the first run's: the children say so.
    row = {a["localId"]: a for a in again["actions"]}
    assert f"early cutoff: parent 1's output is identical to {first['id']}'s" in row[2]["reason"], row[2]
    assert f"early cutoff: parent 9's output is identical to {first['id']}'s" in row[10]["reason"], row[10]
    # Each reuses what the first run's action made: its output, at its path.
    was = {a["localId"]: a for a in first["actions"]}
    assert all(row[i]["outputPath"] == was[i]["outputPath"] for i in range(2, LENGTH + 1))
    # Submitted again: the root's new output is reused (planned for its child, whose own
    # dataset was never made), and the chain below is cut off anew: nothing computes.
    third = await system.run(chain(corpus))
    assert states(third) == dict.fromkeys(range(1, LENGTH + 1), "REUSED")
