"""What a person looks at in a terminal: live progress of a workflow, its DAG by levels,
sizes in bytes."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, TextIO

import networkx as nx

if TYPE_CHECKING:
    from pingo.client import Client

GLYPH = {
    "WAITING": "·",
    "READY": "○",
    "PROCESSING": "◔",
    "SUBMITTED": "◑",
    "RUNNING": "◕",
    "FINISHED": "●",
    "REUSED": "♻",
    "SKIPPED": "↷",
    "FOLLOWING": "⇢",
    "FAILED": "✗",
    "KILLED": "☠",
}
DONE = {"FINISHED", "REUSED", "SKIPPED", "FAILED", "KILLED"}
TERMINAL = {"SUCCEEDED", "FAILED", "KILLED"}


def human(n: float | None) -> str:
    """A size in bytes as a person reads it: binary units (1 KB = 1024 B), ``-`` for unknown."""
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def levels(actions: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Actions grouped by depth (the longest path from a root), each level in the given
    order: a level's actions depend only on earlier levels. Iterative, so a chain of any
    length is drawn."""
    by_local = {str(a["localId"]): a for a in actions}
    order = {key: i for i, key in enumerate(by_local)}
    graph = nx.DiGraph()
    graph.add_nodes_from(by_local)
    graph.add_edges_from(
        (str(p), key) for key, a in by_local.items() for p in a.get("parents", []) if str(p) in by_local
    )
    return [[by_local[k] for k in sorted(level, key=order.__getitem__)] for level in nx.topological_generations(graph)]


def render_dag(wf: dict[str, Any]) -> list[str]:
    lines = [f"{wf['id']}  {wf.get('name') or ''}  {wf['state']}"]
    for i, level in enumerate(levels(wf["actions"])):
        cells = []
        for a in level:
            parents = ",".join(str(p) for p in a.get("parents", []))
            cells.append(
                f"{GLYPH.get(a['state'], '?')} {a['localId']}:{a['name']}" + (f" ←{parents}" if parents else "")
            )
        lines.append(f"  L{i}  " + "   ".join(cells))
    legend = "  ".join(f"{g} {s.lower()}" for s, g in GLYPH.items())
    lines.append(f"  {legend}")
    return lines


def progress_key(wf: dict[str, Any]) -> str:
    return wf["state"] + "|" + ",".join(f"{a['localId']}={a['state']}" for a in wf["actions"])


def render_progress(wf: dict[str, Any], started: float, width: int = 30) -> list[str]:
    actions = wf["actions"]
    counts = Counter(a["state"] for a in actions)
    done = sum(counts[s] for s in DONE)
    filled = int(width * done / max(1, len(actions)))
    summary = " ".join(f"{s.lower()}={n}" for s, n in sorted(counts.items()))
    lines = [
        f"{wf['id']} [{'█' * filled}{'░' * (width - filled)}] {done}/{len(actions)} "
        f"{wf['state']} {time.time() - started:5.1f}s  {summary}"
    ]
    for a in actions:
        took = ""
        if a.get("startedAt") and a.get("finishedAt"):
            took = f" {a['finishedAt'] - a['startedAt']:.1f}s"
        lines.append(
            f"  {GLYPH.get(a['state'], '?')} {a['localId']!s:>4} {a['name'][:28]:<28} "
            f"{a['state']:<10} {a['decision']:<7}{took}"
            + (f"  follows {a['follows']}" if a.get("state") == "FOLLOWING" and a.get("follows") else "")
            + (f"  {a['error'][:60]}" if a.get("error") else "")
        )
    return lines


class LiveView:
    """Redraws in place on a terminal; elsewhere prints a line whenever something changed."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.tty = out.isatty()
        self.drawn = 0
        self.last: str | None = None

    def show(self, lines: list[str], key: str) -> None:
        if self.tty:
            if self.drawn:
                self.out.write(f"\x1b[{self.drawn}F\x1b[J")
            self.out.write("\n".join(lines) + "\n")
            self.drawn = len(lines)
        else:
            if key != self.last:
                self.out.write(lines[0] + "\n")
                self.last = key
        self.out.flush()

    def final(self, lines: list[str]) -> None:
        if self.tty:
            self.show(lines, "")
        else:
            self.out.write("\n".join(lines[1:]) + "\n")
            self.out.flush()


async def watch(client: Client, wf_id: str, interval: float = 0.3) -> dict[str, Any]:
    """Show a workflow's progress until it and every one of its actions have ended; its last state."""
    view = LiveView()
    started = time.time()
    while True:
        wf = await client.workflow(wf_id)
        lines = render_progress(wf, started)
        if wf["state"] in TERMINAL and all(a["state"] in DONE for a in wf["actions"]):
            view.final(lines)
            return wf
        view.show(lines, progress_key(wf))
        await asyncio.sleep(interval)
