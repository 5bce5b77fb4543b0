"""What a person looks at in a terminal: a workflow's DAG by levels, its live progress,
tables of workflows and datasets, sizes in bytes.

Drawn with rich, which fits every view to the terminal's width (columns shrink, long names
are cut with an ellipsis, notes wrap) and redraws the live view in place. Off a terminal
(a pipe, a file) the same views come out as plain text: no colours, no cursor movement, no
carriage returns, and the live view prints one line per change instead of redrawing.

What the server sends (names, errors, notes) is shown, never obeyed: every view draws from
copies whose control characters are escaped (``pingo.terminal_text``), and the console
interprets no rich markup, so a workflow named ``[bold]x`` is shown as typed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from io import StringIO
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from pingo.terminal_text import escaping

if TYPE_CHECKING:
    from pingo.client import Client

GLYPH = {
    "WAITING": "·",
    "READY": "○",
    "PROCESSING": "◔",
    "SUBMITTED": "◑",
    "RUNNING": "◕",
    "RETRYING": "↻",
    "FINISHED": "●",
    "REUSED": "♻",
    "SKIPPED": "↷",
    "FOLLOWING": "⇢",
    "FAILED": "✗",
    "KILLED": "☠",
}
COLOUR = {
    "FINISHED": "green",
    "SUCCEEDED": "green",
    "REUSED": "cyan",
    "SKIPPED": "cyan",
    "FAILED": "red",
    "KILLED": "red",
    "RUNNING": "yellow",
    "SUBMITTED": "yellow",
    "PROCESSING": "yellow",
    "RETRYING": "yellow",
    "FOLLOWING": "magenta",
}
DONE = {"FINISHED", "REUSED", "SKIPPED", "FAILED", "KILLED"}
TERMINAL = {"SUCCEEDED", "FAILED", "KILLED"}
# What a summary counts, by action state: SKIPPED is not reused (its output was not needed
# at all, since a later action's output was reused), so it has its own count.
OUTCOME = {"FINISHED": "computed", "REUSED": "reused", "SKIPPED": "skipped", "FAILED": "failed", "KILLED": "killed"}
BAR_WIDTH = 20


def console(file: TextIO | None = None, width: int | None = None) -> Console:
    """A console on ``file`` (stdout by default). rich decides from the file whether it is a
    terminal: colours and redraws only there (and NO_COLOR / TERM=dumb are honoured). No
    markup: a string in a view is shown as it is (a name may hold ``[bold]``)."""
    out = file if file is not None else sys.stdout
    return Console(file=out, width=width, highlight=False, emoji=False, markup=False)


def show(out: Console, renderable: RenderableType) -> None:
    """Print a view. Off a terminal without the spaces rich pads table cells with at the end
    of each line, which only get in the way of ``grep``, ``diff`` and editors."""
    if out.is_terminal:
        out.print(renderable)
        return
    with out.capture() as captured:
        # A line of text stays one line in a log, whatever width rich assumes off a terminal.
        out.print(renderable, soft_wrap=isinstance(renderable, str | Text))
    out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    out.file.flush()


def to_text(renderable: RenderableType, width: int = 80) -> str:
    """A view as the plain text it prints off a terminal ``width`` columns wide."""
    out = StringIO()
    show(console(out, width), renderable)
    return out.getvalue()


class Flow:
    """Items left to right, separated by ``gap`` spaces, continued on the next line when the
    next item does not fit: an item is never broken unless it alone is wider than the line."""

    def __init__(self, items: list[Text], gap: int = 3) -> None:
        self.items, self.gap = items, gap

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = Text()
        for item in self.items:
            if line and line.cell_len + self.gap + item.cell_len > options.max_width:
                yield line
                line = Text()
            if line:
                line.append(" " * self.gap)
            line.append_text(item)
        yield line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((item.cell_len for item in self.items), default=0)
        total = sum(item.cell_len for item in self.items) + self.gap * max(0, len(self.items) - 1)
        return Measurement(min(widest, options.max_width), min(total, options.max_width))


class TextTable(Table):
    """A table whose string cells are shown as they are: never read as rich markup, whatever
    the console (a name may hold ``[bold]``)."""

    def add_row(self, *cells: RenderableType | None, **kwargs: Any) -> None:
        super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kwargs)


def human(n: float | None) -> str:
    """A size in bytes as a person reads it (``shared.sizes``, imported when first used: the
    parser of ``pingo`` imports nothing of ``shared``)."""
    from shared.sizes import human as size

    return size(n)


def duration(seconds: float | None) -> str:
    """``42.0s``, ``3m05s``, ``2h07m``: short enough for a table column."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def when(unix: float | None) -> str:
    """Local time, short: ``11-23 19:45`` this year, ``2025-11-23`` before."""
    if not unix:
        return "-"
    at = datetime.fromtimestamp(unix)
    return at.strftime("%m-%d %H:%M" if at.year == datetime.now().year else "%Y-%m-%d")


def styled(state: str) -> Text:
    return Text(state, style=COLOUR.get(state, ""))


def levels(actions: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Actions grouped by depth (the longest path from a root), ids in order within a level
    (ints before strings, as ``id_order``): a level's actions depend only on earlier levels.
    Iterative, so a chain of any length is drawn."""
    # Here, not at the top: every ``pingo`` command imports this module, few draw a DAG.
    import networkx as nx

    from shared.workflow_spec import id_order

    by_local = {str(a["localId"]): a for a in actions}
    graph = nx.DiGraph()
    graph.add_nodes_from(by_local)
    graph.add_edges_from(
        (str(p), key) for key, a in by_local.items() for p in a.get("parents", []) if str(p) in by_local
    )
    return [
        sorted((by_local[k] for k in level), key=lambda a: id_order(a["localId"]))
        for level in nx.topological_generations(graph)
    ]


def dag_order(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Actions parents first, level by level: the order the tables list them in."""
    return [a for level in levels(actions) for a in level]


def outcomes(actions: Iterable[dict[str, Any]]) -> Counter[str]:
    """How many actions were computed, reused, skipped, failed or killed (ended ones only)."""
    return Counter(OUTCOME[a["state"]] for a in actions if a["state"] in OUTCOME)


def workflow_outcomes(wf: dict[str, Any]) -> Counter[str]:
    """A workflow's outcome counts: from its actions when it came with them, else from the
    ``outcome`` an ended workflow records (so a list needs no request per workflow)."""
    if "actions" in wf or not wf.get("outcome"):
        return outcomes(wf.get("actions") or [])
    return Counter({OUTCOME[state.upper()]: n for state, n in wf["outcome"].items() if state.upper() in OUTCOME})


def planned_summary(actions: list[dict[str, Any]]) -> str:
    """What a submission's plan does: ``4 to compute, 1 reused, 3 skipped``."""
    following = sum(a.get("state") == "FOLLOWING" or a.get("reason") == "in_flight" for a in actions)
    computed = sum(a["decision"] == "compute" for a in actions) - following
    states = Counter(a.get("state") for a in actions)
    parts = [f"{computed} to compute", f"{states['REUSED']} reused"]
    if states["SKIPPED"]:
        parts.append(f"{states['SKIPPED']} skipped (not needed)")
    if following:
        parts.append(f"{following} following a computation in flight")
    return ", ".join(parts)


def _cell(a: dict[str, Any], parents: bool = True) -> Text:
    text = Text(GLYPH.get(a["state"], "?") + " ", style=COLOUR.get(a["state"], ""))
    text.append(f"{a['localId']}:{a['name']}")
    if parents and a.get("parents"):
        text.append(" ←" + ",".join(str(p) for p in a["parents"]), style="dim")
    return text


def legend() -> Flow:
    return Flow([Text(f"{g} {s.lower()}", style="dim") for s, g in GLYPH.items()], gap=2)


@escaping
def render_dag(wf: dict[str, Any]) -> RenderableType:
    """The workflow's DAG by levels: ``L0  ● 1:ingest   L1  ● 2:left ←1 ...``; a level wider
    than the terminal continues on the next line, under itself."""
    head = Text(f"{wf['id']}  ")
    head.append(wf.get("name") or "", style="bold")
    head.append("  ")
    head.append_text(styled(wf["state"]))
    grid = TextTable.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for i, level in enumerate(levels(wf["actions"])):
        grid.add_row(f"L{i}", Flow([_cell(a) for a in level]))
    return Group(head, grid, legend())


@escaping
def progress_head(wf: dict[str, Any], started: float) -> Text:
    """One line: the workflow, a bar of ended actions, its state, time since ``started``, counts."""
    actions = wf["actions"]
    done = sum(a["state"] in DONE for a in actions)
    filled = BAR_WIDTH * done // max(1, len(actions))
    line = Text(f"{wf['id']} ")
    line.append("█" * filled, style="green")
    line.append("░" * (BAR_WIDTH - filled), style="dim")
    line.append(f" {done}/{len(actions)} ")
    line.append_text(styled(wf["state"]))
    line.append(f" {duration(time.time() - started)}")
    counts = outcomes(actions)
    if counts:
        line.append("  " + " ".join(f"{k} {n}" for k, n in sorted(counts.items())), style="dim")
    return line


@escaping
def actions_table(actions: list[dict[str, Any]]) -> RenderableType:
    """One row per action in DAG order (state, run time, what it follows), then the errors
    of those that failed, each on lines of its own: an error is too long for a column."""
    table = TextTable(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    table.add_column("", no_wrap=True)
    table.add_column("id", no_wrap=True, overflow="ellipsis", max_width=16)
    # The one column that wraps: rich narrows it first when the terminal is narrow.
    table.add_column("name", overflow="ellipsis", min_width=8)
    table.add_column("state", no_wrap=True)
    table.add_column("took", no_wrap=True, justify="right")
    table.add_column("note", no_wrap=True, overflow="ellipsis")
    errors: list[RenderableType] = []
    for a in dag_order(actions):
        took = "-"
        if a.get("startedAt") and a.get("finishedAt"):
            took = duration(a["finishedAt"] - a["startedAt"])
        elif a.get("startedAt") and a.get("state") == "RUNNING":
            took = f"{duration(max(0.0, time.time() - a['startedAt']))}…"  # still running: time so far
        note = ""
        if a.get("state") == "FOLLOWING" and a.get("follows"):
            note = f"follows {a['follows']}"
        elif a.get("state") == "FOLLOWING" and a.get("shared"):
            note = "follows another user's computation"  # whose is not shown (docs/users.md)
        elif a.get("decision") == "reuse" and a.get("state") not in ("REUSED", "SKIPPED"):
            note = "reuse"
        elif a.get("state") == "READY" and a.get("held"):
            note = "held: storage budget"
        elif a.get("state") == "RETRYING" and a.get("retryAt"):
            note = f"attempt {a.get('attempts')} failed; retry in {duration(max(0.0, a['retryAt'] - time.time()))}"
        elif len(a.get("attemptLog") or []) > 1:
            note = f"{len(a['attemptLog'])} attempts"
        elif cut_off(a):
            note = "cut off early"
        if a.get("nondeterministic"):
            note = f"non-deterministic{'; ' + note if note else ''}"
        table.add_row(
            Text(GLYPH.get(a["state"], "?"), style=COLOUR.get(a["state"], "")),
            str(a["localId"]),
            a["name"],
            styled(a["state"]),
            took,
            note,
        )
        errors.extend(attempt_lines(a))
        if a.get("state") == "READY" and a.get("held"):
            errors.append(Text(f"⏸ {a['localId']}: {a['held']}", style="yellow"))
        errors.extend(audit_lines(a))
        if a.get("error"):
            error = Text(f"✗ {a['localId']}: ", style="bold red")
            error.append(str(a["error"]))
            errors.append(error)
    return Group(table, *errors) if errors else table


def cut_off(a: dict[str, Any]) -> bool:
    """It ended REUSED at its start: a parent's output was an earlier lineage's (docs/
    planning.md, "Early cutoff"; its reason says so)."""
    return a.get("state") == "REUSED" and str(a.get("reason") or "").startswith("early cutoff")


def audit_lines(a: dict[str, Any]) -> list[Text]:
    """Why a computed action was computed, when an earlier computation of it was compared
    (docs/planning.md, "Why an action is computed"), or why one planned to compute was
    cut off early instead, and whether its output differs from
    that lineage's last one ("Determinism audit")."""
    lines = []
    miss = a.get("miss") or {}
    if cut_off(a):  # planned to compute, its key being new, then reused at its start
        line = Text(f"♻ {a['localId']} ", style="dim")
        line.append(str(a["reason"]) + (f"; its key: {miss['summary']}" if miss.get("against") else ""))
        lines.append(line)
    elif a.get("decision") == "compute" and miss.get("against"):
        line = Text(f"↯ {a['localId']} computed: ", style="dim")
        line.append(str(miss["summary"]))
        lines.append(line)
    if flag := a.get("nondeterministic"):
        line = Text(f"≠ {a['localId']} non-deterministic: ", style="bold yellow")
        line.append(f"its output differs from its lineage's last ({flag['previousChecksum'][:12]} -> "
                    f"{flag['checksum'][:12]})")  # fmt: skip
        lines.append(line)
    return lines


def attempt_lines(a: dict[str, Any]) -> list[Text]:
    """The earlier attempts of an action that was tried more than once: job, run time and why each ended."""
    log = a.get("attemptLog") or []
    if len(log) < 2 and a.get("state") != "RETRYING":
        return []
    lines = []
    for r in log:
        took = duration(r["endedAt"] - r["startedAt"]) if r.get("startedAt") and r.get("endedAt") else "-"
        line = Text(f"↻ {a['localId']} attempt {r['attempt']}: ", style="dim")
        line.append(f"{r['outcome']} after {took}", style=COLOUR.get(r["outcome"].upper(), ""))
        line.append(f"  job {r.get('jobId') or '-'}" + (f"  {r['error']}" if r.get("error") else ""), style="dim")
        lines.append(line)
    return lines


@escaping
def render_progress(wf: dict[str, Any], started: float) -> RenderableType:
    return Group(progress_head(wf, started), actions_table(wf["actions"]))


def described(fingerprint: dict[str, Any]) -> str:
    """An input's fingerprint in a few words: ``file 12 B mtime_ns 1732…``, a digest cut short."""
    parts = [str(fingerprint.get("kind", "?"))]
    order = ("size", "files", "mtime_ns", "mtime_ms", "checksum", "digest")  # a stored lineage's keys are sorted
    for field, value in sorted(fingerprint.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99):
        if field == "kind":
            continue
        shown = human(value) if field == "size" else value
        parts.append(f"{field} {shown[:23] if isinstance(shown, str) and field != 'size' else shown}")
    return " ".join(parts)


def input_lines(actions: list[dict[str, Any]]) -> list[Text]:
    """One line per external input the actions read: its path, fingerprint and readers;
    in a dry run, how it changed since a workflow was last planned on it."""
    readers: dict[str, list[str]] = {}
    first: dict[str, dict[str, Any]] = {}
    for a in actions:
        for i in a.get("inputs") or []:
            readers.setdefault(i["path"], []).append(str(a["localId"]))
            first.setdefault(i["path"], i)
    lines = []
    for path, i in first.items():
        line = Text("◇ input ", style="dim")
        line.append(path, style="bold")
        line.append(f"  {described(i['fingerprint'])}  read by {', '.join(readers[path])}")
        if i.get("changes"):
            line.append(f"\n  changed since last used: {', '.join(i['changes'])}", style="yellow")
        elif "previous" in i:
            line.append("  (unchanged)" if i["previous"] else "  (first use)", style="dim")
        lines.append(line)
    for a in actions:
        for c in a.get("inputChanged") or []:
            warn = Text(f"✗ {a['localId']}: input {c['path']} changed while it ran ({', '.join(c['changes'])}): ",
                        style="yellow")  # fmt: skip
            warn.append("its output is kept for this workflow, and computed again by the next", style="dim")
            lines.append(warn)
    return lines


@escaping
def render_status(wf: dict[str, Any]) -> RenderableType:
    """``pingo status``: the DAG by levels, then every action's row, then the inputs read."""
    inputs = input_lines(wf["actions"])
    return Group(render_dag(wf), Text(), actions_table(wf["actions"]), *([Text(), *inputs] if inputs else []))


@escaping
def workflows_table(workflows: list[dict[str, Any]]) -> Table:
    """``pingo list``: one row per workflow with its actions' outcomes (its ``actions``, or
    the ``outcome`` of an ended one)."""
    table = TextTable(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    table.add_column("id", no_wrap=True)
    table.add_column("name", overflow="ellipsis", min_width=6)  # the column that narrows
    table.add_column("state", no_wrap=True)
    for heading in ("comp", "reuse", "skip", "fail"):
        table.add_column(heading, justify="right", no_wrap=True)
    table.add_column("submitted", no_wrap=True)
    table.add_column("took", justify="right", no_wrap=True)
    for wf in workflows:
        counts = workflow_outcomes(wf)
        created, finished = wf.get("createdAt"), wf.get("finishedAt")
        took = duration(finished - created) if created and finished else "-"
        if created and not finished and wf["state"] not in TERMINAL:
            took = duration(time.time() - created)  # so far
        table.add_row(
            wf["id"],
            # Cut with … on its one line, never wrapped at its spaces: no_wrap on the cell, not
            # the column, so that the column still narrows to fit the terminal.
            Text(wf.get("name") or "", no_wrap=True, overflow="ellipsis"),
            styled(wf["state"]),
            str(counts["computed"]),
            str(counts["reused"]),
            str(counts["skipped"]),
            str(counts["failed"] + counts["killed"]),
            when(created),
            took,
        )
    return table


@escaping
def timeline_table(rows: list[dict[str, Any]]) -> Table:
    """``pingo timeline``: seconds since the first transition, what moved, to which state, by whom."""
    table = TextTable(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    table.add_column("+s", justify="right", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("id", overflow="fold", min_width=16)
    table.add_column("state", no_wrap=True)
    table.add_column("by, note", min_width=16)
    t0 = rows[0]["at"] if rows else 0
    for r in rows:
        ident = r["id"][:12] if r["kind"] == "dataset" else r["id"]
        by = Text(r.get("by") or "-", style="dim")
        if r.get("note"):
            by.append(f": {r['note']}", style="")
        table.add_row(f"{r['at'] - t0:.3f}", r["kind"], ident, styled(r["state"]), by)
    return table


DECISION_COLOUR = {"compute": "yellow", "reuse": "green", "skip": "dim", "follow": "magenta"}


@escaping
def dry_run_view(plan: dict[str, Any]) -> RenderableType:
    """``pingo submit --dry-run``: per action what a submission would do and why, then the totals."""
    table = TextTable(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    table.add_column("id", no_wrap=True)
    table.add_column("name", overflow="fold")
    table.add_column("decision", no_wrap=True)
    table.add_column("hash", no_wrap=True)
    table.add_column("why", overflow="fold")
    for a in plan["actions"]:
        decision = Text(a["decision"], style=DECISION_COLOUR.get(a["decision"], ""))
        why = a["explanation"]
        if a.get("miss"):  # what changed since it was last computed
            why = f"{why}; {a['miss']['summary']}"
        table.add_row(str(a["localId"]), a["name"], decision, a["hash"][:12], why)
    totals = ", ".join(f"{n} {what}" for what, n in plan["totals"].items())
    inputs = input_lines(plan["actions"])
    head = Text(f"dry run of {plan['name']}: {totals}; nothing was submitted")
    return Group(head, table, *([Text(), *inputs] if inputs else []))


@escaping
def usage_table(rows: list[dict[str, Any]]) -> RenderableType:
    """``pingo datasets --by-user``: what each user's workflows keep, spent, and saved by reuse."""
    table = TextTable(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    table.add_column("user", no_wrap=True)
    for heading in ("datasets", "stored", "computed", "saved by reuse", "of it from others"):
        table.add_column(heading, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            r["user"] or "(no user)", str(r["datasets"]), human(r["bytes"]), duration(r["computeSeconds"]),
            duration(r["savedSeconds"]), duration(r["savedFromOthersSeconds"]),
        )  # fmt: skip
    return table


@escaping
def datasets_view(body: dict[str, Any]) -> RenderableType:
    """``pingo datasets``: the managed storage against its budget, bytes by state, one row per dataset."""
    stored = body["bytesByState"].get("STORED", 0)
    cap = body["capacityBytes"]
    filled = int(BAR_WIDTH * min(1.0, stored / cap)) if cap else 0
    usage = Text("managed intermediate storage ")
    usage.append("█" * filled, style="green")
    usage.append("░" * (BAR_WIDTH - filled), style="dim")
    usage.append(f" {human(stored)} of {human(cap)} (decision at {body['threshold']:.0%})")
    if (used := body.get("usedBytes")) is not None:
        usage.append(f"\nall datasets held {human(used)} of {human(cap)} (final outputs and deletions under way too)")
    by_state = TextTable.grid(padding=(0, 2))
    by_state.add_column(no_wrap=True)
    by_state.add_column(justify="right", no_wrap=True)
    for state, size in sorted(body["bytesByState"].items()):
        by_state.add_row(f"  {state}", human(size))
    return Group(usage, by_state, _DatasetRows(body["datasets"]))


class _DatasetRows:
    """One row per dataset, with what made it (the action's name and its workflow; hidden
    for another user's) as a last column where the terminal has room for it: the other
    columns never give way to it."""

    def __init__(self, datasets: list[dict[str, Any]]) -> None:
        self.datasets = datasets
        self.made = [" ".join(filter(None, [d.get("producedByName"), producing_workflow(d)])) for d in datasets]

    def table(self, made_width: int = 0) -> Table:
        """The rows, with a "made by" column at most ``made_width`` wide (none if 0)."""
        table = TextTable(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
        table.add_column("hash", no_wrap=True)
        table.add_column("state", no_wrap=True)
        for heading in ("size", "files"):
            table.add_column(heading, justify="right", no_wrap=True)
        table.add_column("checksum", no_wrap=True)
        for heading in ("time", "uses", "claims"):  # time: of one computation (mean)
            table.add_column(heading, justify="right", no_wrap=True)
        if made_width:
            table.add_column("made by", overflow="ellipsis", no_wrap=True, max_width=made_width)
        for d, made_by in zip(self.datasets, self.made, strict=True):
            table.add_row(
                d["hash"][:12],
                # Planned, never committed: nothing was kept, so nothing was deleted (docs/api.md).
                "NEVER_STORED" if d.get("neverStored") else d["state"],
                human(d.get("size")),
                "-" if d.get("files") is None else str(d["files"]),
                (d.get("checksum") or "-")[:8],
                duration(d.get("computeSeconds")),
                str(d.get("useCount", 0)),
                str(len(d.get("claims") or [])),
                *([made_by or "-"] if made_width else []),
            )
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table()
        if any(self.made):
            room = options.max_width - Measurement.get(console, options.update(width=10_000), table).maximum - 1
            if room >= MADE_BY_MIN:
                table = self.table(made_width=room)
        yield table


MADE_BY_MIN = 8  # the least of a name cut with … worth showing


def producing_workflow(d: dict[str, Any]) -> str | None:
    """The id of the workflow that made a dataset: its ``workflow`` link, else the workflow
    part of the producing action's id (``<workflow id>.<local id>``)."""
    link = d.get("workflow")
    if isinstance(link, dict) and link.get("id"):
        return str(link["id"])
    action = d.get("producedBy") or (d.get("producer") or {}).get("id")
    return action.rsplit(".", 1)[0] if isinstance(action, str) and "." in action else None


def _action_link(a: dict[str, Any]) -> str:
    wf = a.get("workflow") or {}
    name = f" ({wf['name']})" if wf.get("name") else ""
    return f"{a['id']} {a.get('name', '')} in {wf.get('id', '?')}{name}"


@escaping
def dataset_changed(verb: str, body: dict[str, Any]) -> str:
    """One line after ``pingo datasets delete|invalidate|pin|unpin|expire``."""
    d = body.get("dataset", body)  # an invalidation answers the dataset inside
    line = f"{d['hash'][:12]} {d['state']}"
    if verb == "invalidate":
        more = [h[:12] for h in body.get("invalidated", []) if h != d["hash"]]
        line += f"; its next use computes it again{' (and ' + ', '.join(more) + ')' if more else ''}"
        skipped = body.get("skipped") or {}
        line += "".join(f"; {h[:12]} left: {why}" for h, why in skipped.items())
    elif verb == "delete":
        line += "; its files are deleted" if d["state"] != "DELETED" else "; already deleted"
    elif verb in ("pin", "unpin"):
        line += "; pinned: never evicted" if d.get("pinned") else "; not pinned"
    else:
        at = d.get("expiresAt")
        line += f"; expires {stamp(at)}" if at is not None else "; no expiry"
    return line


def dataset_detail(d: dict[str, Any]) -> RenderableType:
    """``pingo datasets show``: one dataset, where it came from and what used it, and the
    command that shows the workflow which made it."""
    facts = TextTable.grid(padding=(0, 2))
    facts.add_column(no_wrap=True, style="bold")
    facts.add_column(overflow="fold")
    facts.add_row("hash", d["hash"])
    facts.add_row("state", styled(d["state"]))
    facts.add_row("path", d.get("path") or "-")
    size = d.get("size")
    facts.add_row("size", "-" if size is None else f"{human(size)} ({size} bytes)")
    files = "-" if d.get("files") is None else str(d["files"])
    facts.add_row("files, checksum", f"{files}, {d.get('checksum') or '-'}")
    facts.add_row(
        "computed",
        f"{d.get('computeCount', 0)} time(s), {duration(d.get('computeSeconds'))} each (mean)",
    )
    facts.add_row("used", f"{d.get('useCount', 0)} time(s), last {stamp(d.get('lastUsedAt'))}")
    facts.add_row("created, committed", f"{stamp(d.get('createdAt'))}, {stamp(d.get('committedAt'))}")
    if d.get("pinned") or d.get("expiresAt") is not None:
        kept = ["pinned (never evicted)"] if d.get("pinned") else []
        kept += [f"expires {stamp(d['expiresAt'])}"] if d.get("expiresAt") is not None else []
        facts.add_row("kept", ", ".join(kept))
    if d.get("withdrawnBy"):
        facts.add_row("withdrawn by", str(d["withdrawnBy"]))
    if d.get("claims"):
        facts.add_row("claimed by", ", ".join(d["claims"]))
    if (producer := d.get("producer")) and isinstance(producer, dict):
        facts.add_row("made by", _action_link(producer) + f", {producer.get('state', '')}")
    elif d.get("producedBy"):
        facts.add_row("made by", str(d["producedBy"]))
    for i in (d.get("lineage") or {}).get("inputs") or []:
        facts.add_row("input", f"{i['path']}  {described(i['fingerprint'])}")
    if "parents" in d:
        facts.add_row("parents", ", ".join(h[:12] for h in d["parents"]) or "none (computed from inputs only)")
    parts: list[RenderableType] = [facts]
    for title, rows in (("computations", d.get("computations")), ("consumers", d.get("consumers"))):
        if not rows:
            continue
        table = TextTable(title=title, title_justify="left", box=None, pad_edge=False, header_style="bold")
        table.add_column("action", overflow="fold")
        table.add_column("workflow", overflow="fold")
        table.add_column("state", no_wrap=True)
        if title == "consumers":
            table.add_column("relation", no_wrap=True)
        table.add_column("when", no_wrap=True)
        for a in rows:
            wf = a.get("workflow") or {}
            cells = [f"{a['id']} {a.get('name', '')}", wf.get("name") or wf.get("id", "-"), styled(a["state"])]
            if title == "consumers":
                cells.append(a.get("relation", ""))
            table.add_row(*cells, when(a.get("createdAt")))
        parts += [Text(), table]
    if wf_id := producing_workflow(d):
        parts += [Text(), Text(f"made by workflow {wf_id}: pingo status {wf_id}")]
    return Group(*parts)


def stamp(unix: float | None) -> str:
    return datetime.fromtimestamp(unix).isoformat(sep=" ", timespec="seconds") if unix else "-"


class LiveView:
    """Redraws in place on a terminal; elsewhere prints the head line whenever something
    changed, and the whole view once at the end."""

    def __init__(self, out: Console | None = None) -> None:
        self.console = out if out is not None else console()
        self.live: Live | None = None
        self.last: str | None = None

    def show(self, wf: dict[str, Any], started: float) -> None:
        view = render_progress(wf, started)
        if self.console.is_terminal:
            if self.live is None:
                self.live = Live(view, console=self.console, auto_refresh=False, vertical_overflow="ellipsis")
                self.live.start()
            self.live.update(view, refresh=True)
            return
        key = progress_key(wf)
        if key != self.last:
            show(self.console, progress_head(wf, started))
            self.last = key

    def final(self, wf: dict[str, Any], started: float) -> None:
        view = render_progress(wf, started)
        if self.live is not None:
            self.live.update(view, refresh=True)
            self.live.stop()
            self.live = None
        else:
            show(self.console, view)


def progress_key(wf: dict[str, Any]) -> str:
    """What the head line shows, less the clock: off a terminal a line is printed when it changes."""
    actions = wf["actions"]
    done = sum(a["state"] in DONE for a in actions)
    return f"{wf['state']}|{done}|{sorted(outcomes(actions).items())}"


async def watch(client: Client, wf_id: str, interval: float = 0.3, out: Console | None = None) -> dict[str, Any]:
    """Show a workflow's progress until it and every one of its actions have ended; its last state."""
    view = LiveView(out)
    started = time.time()
    try:
        while True:
            wf = await client.workflow(wf_id)
            if wf["state"] in TERMINAL and all(a["state"] in DONE for a in wf["actions"]):
                view.final(wf, started)
                return wf
            view.show(wf, started)
            await asyncio.sleep(interval)
    finally:
        if view.live is not None:  # interrupted: leave the cursor below the last drawing
            view.live.stop()
