"""Workflow bodies the tests submit, and what to read from a finished workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"


def shell_action(
    aid: Any, label: str, parents: list = (), seconds: float = 0.0, size_kb: int = 4, **extra: Any
) -> dict[str, Any]:
    """An action running examples/jobs/synth.py (thesis format)."""
    return {
        "id": aid,
        "name": extra.pop("name", label),
        "type": "SHELL",
        "actionFolder": "examples/jobs",
        "command": ["python3", "synth.py"],
        "parentActions": [{"id": p} for p in parents],
        "additionalInput": [
            {"key": "label", "value": label},
            {"key": "seconds", "value": str(seconds)},
            {"key": "sizeKB", "value": str(size_kb)},
        ],
        **extra,
    }


def diamond(prefix: str = "d", seconds: float = 0.0) -> dict[str, Any]:
    return {
        "name": "diamond",
        "actions": [
            shell_action(1, f"{prefix}-a", seconds=seconds),
            shell_action(2, f"{prefix}-b", [1], seconds=seconds),
            shell_action(3, f"{prefix}-c", [1], seconds=seconds),
            shell_action(4, f"{prefix}-d", [2, 3], seconds=seconds),
        ],
    }


def multilevel(prefix: str = "m") -> dict[str, Any]:
    """Four levels, a fan-in and an edge skipping a level."""
    return {
        "name": "multilevel",
        "actions": [
            shell_action(10, f"{prefix}-root"),
            shell_action(11, f"{prefix}-l1a", [10]),
            shell_action(12, f"{prefix}-l1b", [10]),
            shell_action(13, f"{prefix}-l2", [11, 12]),
            shell_action(14, f"{prefix}-l3", [13, 10]),
            shell_action(15, f"{prefix}-l3b", [13]),
        ],
    }


def decisions(wf: dict[str, Any]) -> dict[Any, str]:
    return {a["localId"]: a["decision"] for a in wf["actions"]}
