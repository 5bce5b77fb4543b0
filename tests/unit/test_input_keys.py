"""What enters the lineage key besides the definition (docs/planning.md, "External inputs"
and "Lineage hashes"): external inputs with their fingerprints, and ``cacheVersion``; and
what does not change a hash that existed before them. With the services:
tests/system/test_external_inputs.py."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from services.workflow_manager.submission import inputs, with_inputs
from shared.config import Settings
from shared.hashing import workflow_hashes
from shared.inputs import candidates, changes
from shared.storage.base import InputTooLarge
from shared.storage.local import LocalStorage
from shared.workflow_spec import WorkflowSpec, parse_workflow

# Computed on main before inputs and cacheVersion existed (commit adf67de): path-shaped
# values that name nothing readable, and the examples, keep these hashes byte for byte.
MAIN_HASHES = {1: "eee8209ca1f3105304e145ca5229e2120d4f20064e29108a4c0c8187d9ce2201",
               2: "78c07e10b5a3bfa991f1e9f16873b99d15a19df9edb20cb99e2ee025e03fa917"}  # fmt: skip
MAIN_DIAMOND = {"1": "559281099897c624cd923b025800911d68de16561cc2870c79d4203ef7c82fd1",
                "4": "a4e922e12b19cccd8bc4d03f284be5a6c9caabeed7fbaaef436d4f749766c7f6"}  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]


def body_with(values: list[Any], **extra: Any) -> dict[str, Any]:
    return {"name": "inputs-on-main", **extra, "actions": [
        {"id": 1, "name": "read", "type": "shell", "command": ["cat"], "additionalInput": values},
        {"id": 2, "name": "sum", "type": "map-reduce", "mapper": ["cat"], "parentActions": [1],
         "additionalInput": {"in": "/tmp"}}]}  # fmt: skip


def parsed(body: dict[str, Any]) -> tuple[WorkflowSpec, list]:
    found: list = []
    spec, violations = parse_workflow(body, found)
    assert spec is not None, violations
    return spec, found


def settings_for(tmp_path: Path, **more: Any) -> Settings:
    return Settings(data_dir=tmp_path / "data", action_roots=[tmp_path / "actions"], **more)


def keyed(tmp_path: Path, body: dict[str, Any], owner: str | None = None, **more: Any):
    """The gateway's steps: parse, find and fingerprint the inputs, hash."""
    settings = settings_for(tmp_path, **more)
    storage = LocalStorage(settings.managed_dir)
    spec, found = parsed(body)
    prints, violations = asyncio.run(inputs(found, settings, storage, owner))
    spec = with_inputs(spec, prints)
    return workflow_hashes(spec), spec, violations


def test_a_workflow_with_no_input_found_keeps_the_hashes_it_had_on_main(tmp_path: Path) -> None:
    hashes, spec, violations = keyed(tmp_path, body_with(["/no/such/input.csv", {"value": "hdfs:///no/such"}]))
    assert not violations and not spec.actions[0].inputs
    assert hashes == MAIN_HASHES
    import json

    diamond, _ = parsed(json.loads((ROOT / "examples/diamond.json").read_text()))
    folders = {a.id: "f" * 64 for a in diamond.actions if a.actionFolder}
    assert {str(k): v for k, v in workflow_hashes(diamond, folders).items() if str(k) in MAIN_DIAMOND} == MAIN_DIAMOND


def test_an_existing_input_enters_the_key_and_a_change_is_a_miss_for_it_and_its_children(tmp_path: Path) -> None:
    data = tmp_path / "actions" / "data.csv"
    data.parent.mkdir(parents=True)
    data.write_text("a,b\n")
    first, spec, violations = keyed(tmp_path, body_with([str(data)]))
    assert not violations
    assert spec.actions[0].inputs[0]["path"] == str(data) and spec.actions[0].inputs[0]["size"] == 4
    assert keyed(tmp_path, body_with([str(data)]))[0] == first  # untouched: the same key
    data.write_text("a,b,c\n")
    second, spec2, _ = keyed(tmp_path, body_with([str(data)]))
    assert second[1] != first[1] and second[2] != first[2]  # the reader and its descendant
    assert changes(spec.actions[0].inputs[0], spec2.actions[0].inputs[0])[0] == "size 4 -> 6"


def test_a_touch_is_a_miss_by_stat_and_not_by_checksum(tmp_path: Path) -> None:
    data = tmp_path / "actions" / "data.csv"
    data.parent.mkdir(parents=True)
    data.write_text("same")
    by_stat, by_sum = (
        keyed(tmp_path, body_with([str(data)]))[0],
        keyed(tmp_path, body_with([str(data)]), input_fingerprint="checksum")[0],
    )
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert keyed(tmp_path, body_with([str(data)]))[0] != by_stat
    assert keyed(tmp_path, body_with([str(data)]), input_fingerprint="checksum")[0] == by_sum


def test_marks_say_what_detection_cannot(tmp_path: Path) -> None:
    data = tmp_path / "actions" / "ref"
    data.mkdir(parents=True)
    (data / "x").write_text("1")
    spec, _ = parsed(body_with([{"value": str(data), "input": False}, {"value": f"--in={data}", "input": str(data)}]))
    found = candidates(spec.actions[0], on_hdfs=False)
    assert [(c.index, c.path, c.declared) for c in found] == [(1, str(data), True)]
    _, spec, violations = keyed(tmp_path, body_with([{"value": f"--in={data}", "input": str(data)}]))
    assert not violations and spec.actions[0].inputs[0]["kind"] == "folder"
    _, _, violations = keyed(tmp_path, body_with([{"value": str(data / "nope"), "input": True}]))
    assert [v.loc for v in violations] == ["actions[0].additionalInput[0]"] and "does not exist" in violations[
        0
    ].message
    assert candidates(parsed(body_with(["hdfs:///d/x.csv"]))[0].actions[0], on_hdfs=True)[0].path == "/d/x.csv"


def test_a_path_the_user_may_not_read_is_never_looked_at(tmp_path: Path) -> None:
    """Outside the input roots, an existing path and a missing one are answered alike: a
    plain value, or the same violation when declared."""
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("x")
    (tmp_path / "data" / "local-jobs").mkdir(parents=True)
    for path in (secret, tmp_path / "elsewhere" / "missing.txt", tmp_path / "data" / "local-jobs"):
        _, spec, violations = keyed(tmp_path, body_with([str(path)]))
        assert not spec.actions[0].inputs and not violations
        _, _, declared = keyed(tmp_path, body_with([{"value": str(path), "input": True}]))
        assert "must be inside" in declared[0].message
    # {user} roots: each user's own.
    mine = tmp_path / "home" / "ann" / "in.csv"
    mine.parent.mkdir(parents=True)
    mine.write_text("1")
    roots = [str(tmp_path / "home" / "{user}")]
    assert keyed(tmp_path, body_with([str(mine)]), "ann", input_roots=roots)[1].actions[0].inputs
    assert not keyed(tmp_path, body_with([str(mine)]), "bob", input_roots=roots)[1].actions[0].inputs


def test_a_folder_past_the_bound_is_a_clear_violation(tmp_path: Path) -> None:
    big = tmp_path / "actions" / "big"
    big.mkdir(parents=True)
    for n in range(4):
        (big / f"{n}.txt").write_text("x")
    _, _, violations = keyed(tmp_path, body_with([str(big)]), input_max_files=3)
    assert "more than 3 files" in violations[0].message and "PINGO_INPUT_MAX_FILES" in violations[0].message
    with pytest.raises(InputTooLarge):
        asyncio.run(LocalStorage(tmp_path / "m").input_print(str(big), False, 3))


def test_cache_version_per_action_and_per_workflow_enters_the_key() -> None:
    base = workflow_hashes(parsed(body_with(["x"]))[0])
    assert base == workflow_hashes(parsed(body_with(["x"]))[0])
    versioned = body_with(["x"])
    versioned["actions"][1]["cacheVersion"] = "2"
    hashes = workflow_hashes(parsed(versioned)[0])
    assert hashes[1] == base[1] and hashes[2] != base[2]
    whole = workflow_hashes(parsed(body_with(["x"], cacheVersion="2026-11"))[0])
    assert whole[1] != base[1] and whole[2] != base[2]
    _, violations = parse_workflow(body_with(["x"], cacheVersion=3))
    assert [v.loc for v in violations] == ["cacheVersion"]


def test_cache_version_in_python() -> None:
    from pingo.builder import Workflow

    def built(**versions: str) -> dict:
        w = Workflow("py", cache_version=versions.get("workflow"))
        a = w.shell("a", ["true"])
        w.shell("b", ["true"], parents=[a], **({"cache_version": versions["b"]} if "b" in versions else {}))
        return w.hashes()

    base, one, every = built(), built(b="2"), built(workflow="2")
    assert base[1] == one[1] and base[2] != one[2]
    assert every[1] != base[1] and every[2] != base[2]


class CountingStorage(LocalStorage):
    """The local storage, counting the fingerprints it takes by path."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.taken: dict[str, int] = {}

    async def input_print(self, path: str, checksum: bool, max_files: int, user: str | None = None):
        self.taken[path] = self.taken.get(path, 0) + 1
        return await super().input_print(path, checksum, max_files, user)


def test_a_path_read_by_many_actions_is_fingerprinted_once_per_submission(tmp_path: Path) -> None:
    data = tmp_path / "actions" / "data.csv"
    data.parent.mkdir(parents=True)
    data.write_text("a,b\n")
    body = body_with([str(data)])
    body["actions"][1]["additionalInput"] = [{"value": str(data)}, {"value": str(data)}]
    settings = settings_for(tmp_path)
    storage = CountingStorage(settings.managed_dir)
    spec, found = parsed(body)
    prints, violations = asyncio.run(inputs(found, settings, storage, None))
    assert not violations
    assert storage.taken == {str(data): 1}
    spec = with_inputs(spec, prints)
    assert [len(a.inputs) for a in spec.actions] == [1, 1]  # one input each, the same fingerprint
    assert spec.actions[0].inputs[0] == spec.actions[1].inputs[0]
