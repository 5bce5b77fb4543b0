"""Lineage hashes (docs/planning.md, "Lineage hashes").

``hash(a) = SHA-256(version || canonical(a) || parents' hashes)``. It depends on the
action's definition and its ancestry only: not on siblings, ids, the workflow's name or
submission order. Parents are taken in argument order (by parent id), except for
order-insensitive types, whose parents are a set.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import networkx as nx

from shared.workflow_spec import ORDER_INSENSITIVE, ActionId, ActionSpec, WorkflowSpec, id_order

HASH_VERSION = "pingo-lineage-v1"


def canonical(definition: dict[str, Any]) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def lineage_hash(definition: dict[str, Any], parent_hashes: list[str]) -> str:
    h = hashlib.sha256()
    for part in (HASH_VERSION, canonical(definition), *parent_hashes):
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()


def definition_with(a: ActionSpec, fingerprints: dict[ActionId, str] | None) -> dict[str, Any]:
    """The definition that is hashed: with the fingerprint of the action folder's files, if
    known, so that replacing an executable makes the action (and its descendants) new."""
    definition = a.definition()
    if fingerprints and a.id in fingerprints:
        definition["actionFolderFingerprint"] = fingerprints[a.id]
    return definition


def workflow_hashes(spec: WorkflowSpec, fingerprints: dict[ActionId, str] | None = None) -> dict[ActionId, str]:
    by_id = spec.by_id()
    out: dict[ActionId, str] = {}
    for aid in nx.topological_sort(spec.graph()):
        a = by_id[aid]
        parents = [out[p] for p in sorted(a.parents, key=id_order)]
        if a.type in ORDER_INSENSITIVE:
            parents.sort()
        out[aid] = lineage_hash(definition_with(a, fingerprints), parents)
    return out
