"""How workflows, actions and datasets look over HTTP (camelCase, times as Unix seconds)."""

from __future__ import annotations

from typing import Any

from shared.store import datasets as ds
from shared.store.transitions import decode


def action_view(a: dict[str, Any], full: bool = True) -> dict[str, Any]:
    out = {
        "id": a["_id"],
        "localId": a["local_id"],
        "name": a["name"],
        "hash": a["hash"],
        "decision": a["decision"],
        "reason": a.get("reason"),
        "state": a["state"],
        "outputPath": a.get("output_path"),
    }
    if a.get("follows"):
        out["follows"] = a["follows"]  # the action computing its dataset (in_flight)
    if full:
        out.update(
            {
                "type": a.get("type"),
                "managed": a.get("managed"),
                "forceComputation": a.get("force"),
                "parents": a.get("parent_local_ids", []),
                "attempts": a.get("attempt", 0),
                "submitErrors": a.get("submit_errors", 0),
                "jobId": a.get("job_id"),
                "createdAt": a.get("created_at"),
                "submittedAt": a.get("submitted_at"),
                "startedAt": a.get("started_at"),
                "finishedAt": a.get("finished_at"),
                "seconds": a.get("seconds"),
                "size": a.get("size"),
                "error": a.get("error"),
                "followers": a.get("followers", []),
                "successor": a.get("successor"),
                "takeoverOf": a.get("takeover_of"),
            }
        )
    return out


def workflow_view(wf: dict[str, Any], actions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out = {
        "id": wf["_id"],
        "name": wf.get("name"),
        "state": wf["state"],
        "counts": wf.get("counts"),
        "createdAt": wf.get("created_at"),
        "finishedAt": wf.get("finished_at"),
        "error": wf.get("error"),
        "killRequested": bool(wf.get("kill_requested")),
    }
    if actions is not None:
        out["actions"] = [action_view(a) for a in actions]
    return out


def dataset_view(d: dict[str, Any]) -> dict[str, Any]:
    return {
        "hash": d["_id"],
        "state": d["state"],
        "path": d.get("path"),
        "size": d.get("size"),
        # As recorded at commit: what verification before a reuse compares against.
        "files": d.get("files"),
        "checksum": d.get("checksum"),
        "committedAt": d.get("committed_at"),
        "computeSeconds": ds.mean_seconds(d),
        "computeCount": int(d.get("compute_count") or 0),
        "useCount": d.get("use_count", 0),
        "claims": d.get("claims", []),
        "producers": d.get("producers", []),
        "lastUsedAt": d.get("last_used_at"),
        "createdAt": d.get("created_at"),
        "updatedAt": d.get("updated_at"),
    }


def timeline(wf: dict[str, Any], actions: list[dict[str, Any]], datasets: list[dict[str, Any]]) -> list[dict]:
    """Every transition of a workflow, its actions and their datasets, in time order."""
    rows = []
    for kind, docs in (("workflow", [wf]), ("action", actions), ("dataset", datasets)):
        for d in docs:
            d = decode(d)
            label = d["_id"] if kind != "action" else f"{d['_id']} ({d['name']})"
            for h in d.get("history", []):
                rows.append(
                    {
                        "at": h["at"],
                        "kind": kind,
                        "id": label,
                        "state": h["state"],
                        "by": h.get("by"),
                        "note": h.get("note"),
                    }
                )
    rows.sort(key=lambda r: r["at"])
    return rows
