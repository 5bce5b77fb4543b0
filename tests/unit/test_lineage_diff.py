"""What changed between two lineages is named field by field, generically
(docs/planning.md, "Why an action is computed")."""

from __future__ import annotations

import json

from shared.hashing import lineage_of
from shared.lineage_diff import PARENT, changes
from shared.workflow_spec import parse_workflow


def lineage(action: dict, prints: dict | None = None, parents: dict | None = None) -> dict:
    spec, violations = parse_workflow({"name": "w", "actions": [action]}, [])
    assert not violations, violations
    return lineage_of(spec.actions[0], parents or {}, prints)


BASE = {"id": 1, "name": "a", "type": "SHELL", "command": ["echo", "x"], "additionalInput": ["/data/in", "2"]}


def fields(old: dict, new: dict, **kw) -> list[str]:
    return [c.field for c in changes(old, new, **kw)]


def test_the_same_lineage_has_no_change():
    assert changes(lineage(BASE), lineage(BASE)) == []


def test_a_changed_command_is_named():
    found = changes(lineage(BASE), lineage({**BASE, "command": ["echo", "y"]}))
    assert [c.field for c in found] == ["command"]
    assert found[0].old == '["echo", "x"]' and found[0].new == '["echo", "y"]'


def test_a_changed_additional_input_value_is_named_by_position():
    changed = lineage({**BASE, "additionalInput": ["/data/in", "3"]})
    assert fields(lineage(BASE), changed) == ["additionalInput[1].value"]


def test_a_key_field_the_diff_never_heard_of_is_named():
    # What another part of the key may add (an input's fingerprint, a cache version): named as it is.
    old, new = lineage(BASE), lineage(BASE)
    old["inputs"], new["inputs"] = {"/data/in": "size:1"}, {"/data/in": "size:2"}
    assert fields(old, new) == ['inputs["/data/in"]']
    assert fields(lineage(BASE), {**lineage(BASE), "cacheVersion": "2"}) == ["cacheVersion"]

    # In the definition too: an input fingerprinted into it, a cache version.
    def with_definition(**more: object) -> dict:
        out = lineage(BASE)
        out["definition"] = json.dumps({**json.loads(out["definition"]), **more})
        return out

    before = with_definition(inputs=[{"path": "/data/in", "fingerprint": "size=1"}], cacheVersion="1")
    after = with_definition(inputs=[{"path": "/data/in", "fingerprint": "size=2"}], cacheVersion="2")
    assert fields(before, after) == ["cacheVersion", "inputs[0].fingerprint"]


def test_the_action_folder_fingerprint_is_named():
    folder = {**BASE, "actionFolder": "/opt/a"}
    old = lineage(folder, {1: "sha256:aa"})
    assert fields(old, lineage(folder, {1: "sha256:bb"})) == ["actionFolderFingerprint"]


def test_a_changed_parent_is_named_by_its_id():
    child = {**BASE, "id": 2, "parentActions": [1]}
    spec, _ = parse_workflow({"name": "w", "actions": [BASE, child]}, [])
    old, new = lineage_of(spec.actions[1], {1: "h1"}), lineage_of(spec.actions[1], {1: "h2"})
    found = changes(old, new, {"1": "h1"}, {"1": "h2"})
    assert [(c.field, c.parent, c.old, c.new) for c in found] == [(PARENT, "1", "h1", "h2")]
    assert found[0].describe() == "parent 1 changed"
    # Without the parents' ids, the list is named.
    assert fields(old, new) == ["parents"]


def test_a_digest_is_told_briefly_and_kept_whole():
    """People read the summary next to a plan (the dry run's "why"): a digest is cut to
    what tells two apart, as an input's changes are; the change keeps it whole."""
    old, new = "sha256:" + "9e1b" * 16, "sha256:" + "3894" * 16
    before, after = ({"definition": "{}", "inputs": [{"digest": d}]} for d in (old, new))
    (change,) = changes(before, after)
    assert (change.field, change.old, change.new) == ("inputs[0].digest", old, new)
    assert change.describe() == "inputs[0].digest changed (sha256:9e1b9e1b9e1b… -> sha256:389438943894…)"
    command = {"definition": json.dumps({"command": ["echo", "a" * 64]})}
    (plain,) = changes(command, {"definition": json.dumps({"command": ["echo", "b" * 64]})})
    assert "a" * 64 in plain.describe()  # not a digest: shown as it is
