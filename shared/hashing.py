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


def lineage_hash(lineage: dict[str, Any]) -> str:
    """The hash of a lineage record (``lineage_of``)."""
    h = hashlib.sha256()
    for part in (HASH_VERSION, lineage["definition"], *lineage["parents"]):
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()


def secret_digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(f"{HASH_VERSION}/secret/{value}".encode()).hexdigest()


def definition_with(a: ActionSpec, fingerprints: dict[ActionId, str] | None) -> dict[str, Any]:
    """The definition that is hashed: with the fingerprint of the action folder's files, if
    known, so that replacing an executable makes the action (and its descendants) new."""
    definition = a.definition()
    # A secret value enters the hash by its digest (docs/planning.md, "Secret values"):
    # changing it changes the computation, and the lineage kept beside the dataset, which
    # any catalogue reader may hold, never holds the value itself.
    definition["configurationParameters"] = [
        {**p, "value": secret_digest(p["value"])} if p.get("secret") else p
        for p in definition["configurationParameters"]
    ]
    if fingerprints and a.id in fingerprints:
        definition["actionFolderFingerprint"] = fingerprints[a.id]
    return definition


def lineage_of(a: ActionSpec, hashes: dict[ActionId, str], fingerprints: dict[ActionId, str] | None = None) -> dict:
    """What an action's hash is computed from, kept beside each dataset so that reuse is
    verified on the lineage itself (the thesis's second step), not on the hash alone:
    its canonical definition and its parents' hashes, in argument order (by parent id),
    or sorted for order-insensitive types, whose parents are a set. The one place this
    rule lives: the hash and the stored lineage can never disagree."""
    parents = [hashes[p] for p in sorted(a.parents, key=id_order)]
    if a.type in ORDER_INSENSITIVE:
        parents.sort()
    return {"definition": canonical(definition_with(a, fingerprints)), "parents": parents}


def workflow_hashes(spec: WorkflowSpec, fingerprints: dict[ActionId, str] | None = None) -> dict[ActionId, str]:
    by_id = spec.by_id()
    out: dict[ActionId, str] = {}
    for aid in nx.topological_sort(spec.graph()):
        out[aid] = lineage_hash(lineage_of(by_id[aid], out, fingerprints))
    return out
